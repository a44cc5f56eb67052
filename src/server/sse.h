// Server-sent events framing for the streaming routes: `data: <json>\n\n` per event and the final
// `data: [DONE]\n\n`. Payloads are compact JSON (one line), so a frame never needs continuation lines.
// Also the server's JSON in and out: the dump every body uses and the one depth-bounded parse.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace minfer::server {

// "data: {...}\n\n". Invalid UTF-8 in strings is replaced (U+FFFD), never emitted raw.
std::string sse_data(const nlohmann::ordered_json& payload);
inline std::string sse_done() {
  return "data: [DONE]\n\n";
}

// Compact JSON dump used by every response body (same UTF-8 replacement rule as sse_data).
std::string dump_json(const nlohmann::ordered_json& j);

// Arrays and objects nested deeper than this are refused: nlohmann's copy, dump and destruction recurse
// once per level, and a request of a few hundred kilobytes of '[' overflowed the stack.
constexpr int kMaxJsonDepth = 256;
// True when `text` opens more than `max_depth` arrays/objects at once (strings are skipped). Linear.
bool json_too_deep(std::string_view text, int max_depth = kMaxJsonDepth);
// The server's only JSON parser: non-throwing, and a discarded value for invalid JSON or JSON nested
// deeper than kMaxJsonDepth.
nlohmann::ordered_json parse_json(std::string_view text);
// Why parse_json refused `text`, for a 400: "the request body is not valid JSON (parse error at line 1,
// column 7: ...)" with nlohmann's position and reason, or the nesting bound.
std::string invalid_json_message(std::string_view text);

}  // namespace minfer::server
