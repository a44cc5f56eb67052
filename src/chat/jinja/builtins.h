// Registries of the builtin filters, tests, Python methods and globals (filters.cpp,
// builtin_tests.cpp, methods.cpp, globals.cpp). The parser asks them to refuse unknown names at load.
#pragma once

#include <string_view>

#include "chat/jinja/value.h"

namespace minfer::chat::jinja {

class Evaluator;

using FilterFn = Value (*)(Evaluator& ev, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Evaluator& ev, const Value& operand, CallArgs& args);

// nullptr when unknown.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// Whether any supported type has a method of this name (a static check at parse time).
bool is_known_method(std::string_view name);
// The bound method `self.name` as a callable; an Undefined with a hint for a mutating method (the
// sandbox refuses it); a hint-less Undefined when `self` has no such method. Attribute access prefers
// methods over dict keys, subscripts prefer keys, as jinja2's getattr/getitem do.
Value get_method(const Value& self, std::string_view name);

// The template globals: range, dict, namespace, raise_exception, strftime_now.
Value find_global(std::string_view name);

}  // namespace minfer::chat::jinja
