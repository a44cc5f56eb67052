// SSE frames (see sse.h).
#include "server/sse.h"

namespace minfer::server {

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_data(const nlohmann::ordered_json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

}  // namespace minfer::server
