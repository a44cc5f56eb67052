// Public face of the Jinja engine: parse a template once, render it many times with a context.
// Semantics follow jinja2 3.1 as transformers configures it (trim_blocks, lstrip_blocks, loopcontrols,
// no autoescape, immutable sandbox); no file, environment or network access exists in the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chat/jinja/value.h"
#include "core/status.h"

namespace minfer::chat::jinja {

struct Program;  // the parsed AST (ast.h)

// Bounds for untrusted templates; hitting one fails the render with kOutOfRange.
struct RenderOptions {
  size_t max_output_bytes = size_t{16} << 20;  // also bounds every intermediate string / list
  uint64_t max_loop_iterations = 1'000'000;    // all loops of one render together
  int max_macro_depth = 64;                    // nested macro / caller calls
  int max_nesting = 400;                       // evaluator recursion (expressions + statements)
  // strftime_now's clock (Unix seconds, formatted as UTC); unset = the current local time.
  std::optional<int64_t> now_unix;
};

class Template {
 public:
  // Parses `source` (newlines normalized, one trailing newline dropped as jinja2 does) and checks
  // that every tag, filter, test and called method is one the engine implements. Errors read
  // "template line N: ..." and name the construct.
  static Result<Template> parse(std::string source);

  // Renders with `context` (a Dict; its keys become top-level variables). Thread-safe.
  Result<std::string> render(const Value& context, const RenderOptions& options = {}) const;

  const std::string& source() const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace minfer::chat::jinja
