// ApiError JSON and the Status -> HTTP error mapping.
#include "server/api_error.h"

#include <fmt/format.h>

namespace minfer::server {

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json e = {{"code", status}, {"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  return {{"error", std::move(e)}};
}

const char* json_kind(const nlohmann::ordered_json& v) {
  using T = nlohmann::ordered_json::value_t;
  switch (v.type()) {
    case T::null:
      return "null";
    case T::boolean:
      return "a boolean";
    case T::string:
      return "a string";
    case T::array:
      return "an array";
    case T::object:
      return "an object";
    case T::number_integer:
    case T::number_unsigned:
      return "an integer";
    default:
      return "a number";
  }
}

ApiError wrong_type(const std::string& field, const char* want, const nlohmann::ordered_json& got) {
  return bad_request(fmt::format("'{}' must be {}, got {}", field, want, json_kind(got)), field);
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
