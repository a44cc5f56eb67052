// Python's printf-style `str % args` (used by the `%` operator and the `format` filter).
#pragma once

#include <string>

#include "chat/jinja/value.h"

namespace minfer::chat::jinja {

// `args` is a tuple (positional), a dict (for %(name)s) or any single value. Supports the
// conversions s r a d i u o x X e E f F g G c % with flags - + space # 0, width and precision
// (including *). Throws TemplateError like Python's TypeError/ValueError on mismatches.
std::string percent_format(const std::string& format, const Value& args);

}  // namespace minfer::chat::jinja
