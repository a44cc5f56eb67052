// Python's printf-style `str % args` (used by the `%` operator and the `format` filter).
#pragma once

#include <string>

#include "chat/jinja/value.h"

namespace minfer::chat::jinja {

// `args` is a tuple (positional), a dict (for %(name)s) or any single value. Supports the
// conversions s r a d i u o x X e E f F g G c % with flags - + space # 0, width and precision
// (including *). Throws TemplateError like Python's TypeError/ValueError on mismatches, and with
// kOutOfRange as soon as the result would exceed `max_bytes`.
std::string percent_format(const std::string& format, const Value& args, size_t max_bytes);

}  // namespace minfer::chat::jinja
