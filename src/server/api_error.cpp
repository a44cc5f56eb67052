// ApiError JSON and the Status -> HTTP error mapping.
#include "server/api_error.h"

namespace minfer::server {

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json e = {{"code", status}, {"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  return {{"error", std::move(e)}};
}

ApiError api_error_from_status(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported:
      return bad_request(status.message());
    case StatusCode::kNotFound:
      return ApiError{404, status.message(), "not_found_error", {}};
    case StatusCode::kUnavailable:
      return ApiError{503, status.message(), "unavailable_error", {}};
    default:
      return ApiError{500, status.message(), "server_error", {}};
  }
}

}  // namespace minfer::server
