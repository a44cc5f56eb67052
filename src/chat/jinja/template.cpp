// Template::parse / render: the boundary where internal TemplateErrors become Status values.
#include "chat/jinja/template.h"

#include <exception>
#include <new>

#include "chat/jinja/ast.h"
#include "chat/jinja/error.h"
#include "chat/jinja/evaluator.h"
#include "chat/jinja/parser.h"

namespace minfer::chat::jinja {
namespace {

Status to_status(const TemplateError& e) {
  if (e.line > 0) return Status(e.code, fmt::format("template line {}: {}", e.line, e.message));
  return Status(e.code, fmt::format("template: {}", e.message));
}

}  // namespace

Result<Template> Template::parse(std::string source) {
  try {
    std::shared_ptr<const Program> program = parse_program(std::move(source));
    return Template(std::move(program));
  } catch (const TemplateError& e) {
    return to_status(e);
  } catch (const std::bad_alloc&) {
    return error(StatusCode::kOutOfRange, "template: out of memory while parsing");
  } catch (const std::exception& e) {  // a library throw we did not foresee must not cross the API
    return error(StatusCode::kInternal, "template: internal error while parsing: {}", e.what());
  }
}

Result<std::string> Template::render(const Value& context, const RenderOptions& options) const {
  try {
    Evaluator evaluator(options, context);
    return evaluator.render(*program_);
  } catch (const TemplateError& e) {
    return to_status(e);
  } catch (const std::bad_alloc&) {
    return error(StatusCode::kOutOfRange, "template: out of memory while rendering");
  } catch (const std::exception& e) {
    return error(StatusCode::kInternal, "template: internal error while rendering: {}", e.what());
  }
}

const std::string& Template::source() const { return program_->source; }

}  // namespace minfer::chat::jinja
