// SSE frames (see sse.h).
#include "server/sse.h"

#include <fmt/format.h>

namespace minfer::server {

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

bool json_too_deep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

nlohmann::ordered_json parse_json(std::string_view text) {
  if (json_too_deep(text)) return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string invalid_json_message(std::string_view text) {
  if (json_too_deep(text))
    return fmt::format("the request body is not valid JSON here: it nests deeper than {} levels",
                       kMaxJsonDepth);
  std::string why;
  try {
    const auto parsed = nlohmann::ordered_json::parse(text);
    if (!parsed.is_discarded()) return "the request body is not valid JSON";  // not reached
  } catch (const nlohmann::ordered_json::exception& e) {
    why = e.what();
    if (const size_t at = why.find("] "); why.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      why = why.substr(at + 2);
  }
  if (why.empty()) return "the request body is not valid JSON";
  return fmt::format("the request body is not valid JSON ({})", why);
}

std::string sse_data(const nlohmann::ordered_json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

}  // namespace minfer::server
