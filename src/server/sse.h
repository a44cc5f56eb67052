// Server-sent events framing for the streaming routes: `data: <json>\n\n` per event and the final
// `data: [DONE]\n\n`. Payloads are compact JSON (one line), so a frame never needs continuation lines.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace minfer::server {

// "data: {...}\n\n". Invalid UTF-8 in strings is replaced (U+FFFD), never emitted raw.
std::string sse_data(const nlohmann::ordered_json& payload);
inline std::string sse_done() {
  return "data: [DONE]\n\n";
}

// Compact JSON dump used by every response body (same UTF-8 replacement rule as sse_data).
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace minfer::server
