// TemplateError: how the lexer, parser and evaluator unwind on a template error. It is internal to
// the engine: Template::parse / render catch it and return a Status, so no exception crosses the API.
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/status.h"

namespace minfer::chat::jinja {

struct TemplateError {
  StatusCode code = StatusCode::kInvalidArgument;
  std::string message;
  int line = 0;  // 0 = not known yet; the evaluator fills it from the node being evaluated
};

template <typename... Args>
[[noreturn]] void fail(int line, fmt::format_string<Args...> format, Args&&... args) {
  throw TemplateError{StatusCode::kInvalidArgument, fmt::format(format, std::forward<Args>(args)...), line};
}
template <typename... Args>
[[noreturn]] void fail_code(StatusCode code, int line, fmt::format_string<Args...> format, Args&&... args) {
  throw TemplateError{code, fmt::format(format, std::forward<Args>(args)...), line};
}

}  // namespace minfer::chat::jinja
