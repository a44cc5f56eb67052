// Parser: tokens → AST (ast.h), following jinja2 3.1's grammar and operator precedence.
// Refuses, naming the construct and its line, what the engine does not implement
// (extends/include/import, recursive loops, unknown filters/tests/methods).
#pragma once

#include <memory>
#include <string>

#include "chat/jinja/ast.h"

namespace minfer::chat::jinja {

// Throws TemplateError on a syntax error or an unsupported construct. Nesting is bounded
// (kMaxParseDepth) so hostile input cannot exhaust the stack.
std::unique_ptr<Program> parse_program(std::string source);

inline constexpr int kMaxParseDepth = 200;

}  // namespace minfer::chat::jinja
