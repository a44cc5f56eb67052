// Evaluator: walks the AST with a chain of scopes and writes the rendering, applying jinja2's
// runtime semantics (scoping of for/macro/with, loop context, Undefined) and the render bounds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/template.h"
#include "chat/jinja/value.h"

namespace minfer::chat::jinja {

// State behind the `loop` variable of one for loop.
struct LoopState {
  std::vector<Value> items;  // after the loop's `if` filter
  size_t index = 0;          // index0 of the current iteration
  bool has_changed = false;  // loop.changed() memory
  Value last_changed;
};

// Variables of one scope (template, loop iteration, macro call, with block); lookups walk the parents.
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
  void clear() { vars_.clear(); }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Evaluator {
 public:
  Evaluator(const RenderOptions& options, const Value& context);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders the program; throws TemplateError.
  std::string render(const Program& program);

  Value eval(const Expr& e);
  // Calls a callable value (macro, builtin, bound method); Undefined callees raise.
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(std::string_view name, const Value& operand, CallArgs& args);
  bool apply_test(std::string_view name, const Value& operand, CallArgs& args);

  // Bounds: each charge counts produced bytes / loop iterations against RenderOptions.
  void charge_bytes(size_t n);
  void charge_iterations(uint64_t n);
  void check_size(size_t n) const;   // one string may not exceed max_output_bytes
  void check_items(size_t n) const;  // one list may not exceed max_output_bytes / 64 items
  const RenderOptions& options() const { return options_; }
  // Namespaces are tracked so reference cycles through them are broken when the render ends.
  Value new_namespace();

  // Python-style iteration of a value (list items, dict keys, string characters); raises for
  // non-iterables. `what` names the construct for the error.
  std::vector<Value> iterate(const Value& v, std::string_view what) const;

  // Attribute and item access with jinja2's fallbacks (getattr → getitem and back).
  Value get_attr(const Value& obj, std::string_view name);
  Value get_item(const Value& obj, const Value& key);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void exec_macro_def(const Stmt& s);
  void exec_call_block(const Stmt& s, std::string& out);
  void assign(const Expr& target, const Value& value);
  Value eval_inner(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_slice(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter_chain(const Expr* chain, const Value& input);
  void eval_call_args(const Expr& e, size_t first_arg, CallArgs* args);
  Value loop_attr(const std::shared_ptr<LoopState>& loop, std::string_view name);
  Value make_macro(const Stmt& s, std::shared_ptr<Scope> closure, std::string name, bool is_caller);
  void append_output(std::string& out, const Value& v);

  class ScopeGuard;
  class NestGuard;

  const RenderOptions& options_;
  ScopedOutputBound output_bound_;  // bounds every str()/json built during this render
  std::shared_ptr<Scope> scope_;
  std::vector<std::weak_ptr<Namespace>> namespaces_;
  std::vector<std::weak_ptr<Scope>> macro_scopes_;
  uint64_t bytes_ = 0;
  uint64_t iterations_ = 0;
  int nesting_ = 0;
  int macro_depth_ = 0;
};

}  // namespace minfer::chat::jinja
