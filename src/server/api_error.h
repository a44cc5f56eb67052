// The OpenAI error object every failed route answers with: {"error":{"message","type","param","code"}},
// plus the HTTP status it travels with. Shared by request parsing, the routes and the stream framing.
#pragma once

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace minfer::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field, "" for none (null in JSON)

  // {"error":{"code":status,"message":...,"type":...,"param":...|null}}
  nlohmann::ordered_json to_json() const;
};

inline ApiError bad_request(std::string message, std::string param = {}) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param)};
}

// What a JSON value is, for messages: "null", "a boolean", "a string", "an array", "an object",
// "a number" (floating point) or "an integer".
const char* json_kind(const nlohmann::ordered_json& v);

// 400 for a request field of the wrong JSON type: "'FIELD' must be WANT, got KIND".
ApiError wrong_type(const std::string& field, const char* want, const nlohmann::ordered_json& got);

// Every field of a request is read or refused (as OpenAI answers an unrecognized argument): the first key of
// `body` that none of the `known` lists holds, as a 400 naming it, "unknown field 'KEY': ROUTE does not take
// it", followed by the fields it takes when they are few enough to list.
std::optional<ApiError> unknown_field(const nlohmann::ordered_json& body,
                                      std::initializer_list<std::span<const std::string_view>> known,
                                      std::string_view route);

// Maps a library Status to the HTTP error it means for a client: bad input and bounds are 400,
// kUnavailable is 503 (unavailable_error), anything else 500 (server_error).
ApiError api_error_from_status(const Status& status);

}  // namespace minfer::server
