// ApiError JSON and the Status -> HTTP error mapping.
#include "server/api_error.h"

#include <fmt/format.h>

namespace minfer::server {

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json e = {{"code", status}, {"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  return {{"error", std::move(e)}};
}

std::optional<ApiError> unknown_field(const nlohmann::ordered_json& body,
                                      std::initializer_list<std::span<const std::string_view>> known,
                                      std::string_view route) {
  constexpr size_t kListedAtMost = 8;  // a longer list (the chat routes' ~40 fields) is the README's job
  size_t n_known = 0;
  for (const auto& list : known) n_known += list.size();
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    bool is_known = false;
    for (const auto& list : known) {
      for (std::string_view field : list) is_known = is_known || key == field;
    }
    if (is_known) continue;
    std::string message = fmt::format("unknown field '{}': {} does not take it", key, route);
    if (n_known <= kListedAtMost) {
      std::string names;
      for (const auto& list : known) {
        for (std::string_view field : list) names += fmt::format("{}{}", names.empty() ? "" : ", ", field);
      }
      message += fmt::format(" (it takes {})", names);
    }
    return bad_request(std::move(message), key);
  }
  return std::nullopt;
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
