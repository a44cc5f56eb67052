// Tree-walking evaluator with jinja2 3.1 runtime semantics (see evaluator.h).
#include "chat/jinja/evaluator.h"

#include <cmath>
#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/percent_format.h"
#include "chat/jinja/pystr.h"

namespace minfer::chat::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    for (const auto& [k, v] : s->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

// Pushes a child scope for the guard's lifetime.
class Evaluator::ScopeGuard {
 public:
  explicit ScopeGuard(Evaluator* ev, std::shared_ptr<Scope> parent = nullptr) : ev_(ev), saved_(ev->scope_) {
    ev_->scope_ = std::make_shared<Scope>(parent ? std::move(parent) : saved_);
  }
  ~ScopeGuard() { ev_->scope_ = std::move(saved_); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Evaluator* ev_;
  std::shared_ptr<Scope> saved_;
};

// Bounds evaluator recursion (expressions nest inside macros inside loops ...).
class Evaluator::NestGuard {
 public:
  explicit NestGuard(Evaluator* ev) : ev_(ev) {
    if (ev_->nesting_ >= ev_->options_.max_nesting) {
      fail_code(StatusCode::kOutOfRange, 0, "evaluation nested deeper than {} levels", ev_->options_.max_nesting);
    }
    ++ev_->nesting_;
  }
  ~NestGuard() { --ev_->nesting_; }
  NestGuard(const NestGuard&) = delete;
  NestGuard& operator=(const NestGuard&) = delete;

 private:
  Evaluator* ev_;
};

namespace {

[[noreturn]] void undefined_error(const Value& v) {
  fail(0, "{}", v.undefined_hint().empty() ? std::string("value is undefined") : v.undefined_hint());
}

const Value* find_kwarg(const CallArgs& args, std::string_view name) {
  for (const auto& [k, v] : args.kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

int64_t checked(bool overflow, int64_t v) {
  if (overflow) fail(0, "integer overflow");
  return v;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1) return checked(a == std::numeric_limits<int64_t>::min(), -a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double py_fmod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

Evaluator::Evaluator(const RenderOptions& options, const Value& context)
    : options_(options), output_bound_(options.max_output_bytes) {
  auto globals = std::make_shared<Scope>(nullptr);
  if (context.is_dict()) {
    for (const auto& [k, v] : context.as_dict().entries) {
      if (k.is_string()) globals->set(k.str(), v);
    }
  }
  scope_ = std::make_shared<Scope>(std::move(globals));
}

Evaluator::~Evaluator() {
  // Break reference cycles (a namespace holding itself, a macro stored in its own scope).
  for (auto& weak : namespaces_) {
    if (auto ns = weak.lock()) ns->attrs.clear();
  }
  for (auto& weak : macro_scopes_) {
    if (auto s = weak.lock()) s->clear();
  }
}

std::string Evaluator::render(const Program& program) {
  std::string out;
  exec_body(program.body, out);
  return out;
}

void Evaluator::charge_bytes(size_t n) {
  bytes_ += n;
  // Intermediate strings count too; allow a generous multiple of the output bound in total.
  if (bytes_ > static_cast<uint64_t>(options_.max_output_bytes) * 8) {
    fail_code(StatusCode::kOutOfRange, 0, "template produced more than {} bytes in total", options_.max_output_bytes * 8);
  }
}

void Evaluator::check_size(size_t n) const {
  if (n > options_.max_output_bytes) {
    fail_code(StatusCode::kOutOfRange, 0, "a string or list exceeds the {}-byte output bound", options_.max_output_bytes);
  }
}

void Evaluator::check_items(size_t n) const {
  if (n > options_.max_output_bytes / 64) {
    fail_code(StatusCode::kOutOfRange, 0, "a list exceeds {} items", options_.max_output_bytes / 64);
  }
}

void Evaluator::charge_iterations(uint64_t n) {
  iterations_ += n;
  if (iterations_ > options_.max_loop_iterations) {
    fail_code(StatusCode::kOutOfRange, 0, "loops ran more than {} iterations", options_.max_loop_iterations);
  }
}

Value Evaluator::new_namespace() {
  auto ns = std::make_shared<Namespace>();
  namespaces_.push_back(ns);
  return Value::make_namespace(std::move(ns));
}

void Evaluator::append_output(std::string& out, const Value& v) {
  const size_t before = out.size();
  append_str(out, v);
  check_size(out.size());
  charge_bytes(out.size() - before);
}

std::vector<Value> Evaluator::iterate(const Value& v, std::string_view what) const {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList:
      if (v.as_list().deferred_error) throw *v.as_list().deferred_error;
      return v.as_list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().entries.size());
      for (const auto& [k, val] : v.as_dict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      const std::vector<size_t> off = pystr::offsets(s);
      check_items(off.size() - 1);
      chars.reserve(off.size() - 1);
      for (size_t i = 0; i + 1 < off.size(); ++i) chars.emplace_back(s.substr(off[i], off[i + 1] - off[i]));
      return chars;
    }
    default: fail(0, "{}: '{}' object is not iterable", what, v.type_name());
  }
}

Evaluator::Flow Evaluator::exec_body(const Body& body, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, std::string& out) {
  NestGuard nest(this);
  try {
    switch (s.kind) {
      case StmtKind::kData:
        out += s.text;
        check_size(out.size());
        charge_bytes(s.text.size());
        return Flow::kNormal;
      case StmtKind::kOutput:
        append_output(out, eval(*s.expr));
        return Flow::kNormal;
      case StmtKind::kIf:
        for (size_t i = 0; i < s.conds.size(); ++i) {
          if (eval(*s.conds[i]).truthy()) return exec_body(s.bodies[i], out);
        }
        return exec_body(s.else_body, out);
      case StmtKind::kFor:
        exec_for(s, out);
        return Flow::kNormal;
      case StmtKind::kSet:
        assign(*s.target, eval(*s.expr));
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string captured;
        {
          ScopeGuard guard(this);
          exec_body(s.body, captured);
        }
        assign(*s.target, eval_filter_chain(s.expr.get(), Value(std::move(captured))));
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        exec_macro_def(s);
        return Flow::kNormal;
      case StmtKind::kCallBlock:
        exec_call_block(s, out);
        return Flow::kNormal;
      case StmtKind::kFilterBlock: {
        std::string captured;
        {
          ScopeGuard guard(this);
          exec_body(s.body, captured);
        }
        append_output(out, eval_filter_chain(s.expr.get(), Value(std::move(captured))));
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        // Values are evaluated in the outer scope, then bound in the new one (jinja2's With node).
        std::vector<Value> values;
        for (const auto& [target, value] : s.assignments) values.push_back(eval(*value));
        ScopeGuard guard(this);
        for (size_t i = 0; i < values.size(); ++i) assign(*s.assignments[i].first, values[i]);
        return exec_body(s.body, out);
      }
      case StmtKind::kScope: {
        ScopeGuard guard(this);
        return exec_body(s.body, out);
      }
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
    }
  } catch (TemplateError& e) {
    if (e.line == 0) e.line = s.line;
    throw;
  }
  return Flow::kNormal;
}

void Evaluator::exec_for(const Stmt& s, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr), "for loop");  // an Undefined iterates as empty
  if (s.cond) {
    std::vector<Value> kept;
    for (Value& item : items) {
      charge_iterations(1);
      ScopeGuard guard(this);
      assign(*s.target, item);
      if (eval(*s.cond).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(s.else_body, out);
    return;
  }
  auto state = std::make_shared<LoopState>();
  state->items = std::move(items);
  const Value loop_value = Value::loop(state);
  for (size_t i = 0; i < state->items.size(); ++i) {
    charge_iterations(1);
    state->index = i;
    ScopeGuard guard(this);
    scope_->set("loop", loop_value);
    assign(*s.target, state->items[i]);
    if (exec_body(s.body, out) == Flow::kBreak) break;
  }
}

void Evaluator::assign(const Expr& target, const Value& value) {
  switch (target.kind) {
    case ExprKind::kName:
      scope_->set(target.name, value);
      return;
    case ExprKind::kTuple: {
      std::vector<Value> items = iterate(value, "unpacking");
      if (items.size() != target.children.size()) {
        fail(target.line, "{} values to unpack (expected {}, got {})",
             items.size() > target.children.size() ? "too many" : "not enough", target.children.size(), items.size());
      }
      for (size_t i = 0; i < items.size(); ++i) assign(*target.children[i], items[i]);
      return;
    }
    case ExprKind::kGetAttr: {
      const Value* base = scope_->find(target.children[0]->name);
      if (base == nullptr || !base->is_namespace()) {
        fail(target.line, "cannot assign attribute '{}' on non-namespace object '{}'", target.name,
             target.children[0]->name);
      }
      Namespace& ns = base->as_namespace();
      if (Value* slot = ns.find(target.name)) {
        *slot = value;
      } else {
        ns.attrs.emplace_back(target.name, value);
      }
      return;
    }
    default:
      fail(target.line, "can't assign to this expression");
  }
}

Value Evaluator::make_macro(const Stmt& s, std::shared_ptr<Scope> closure, std::string name, bool is_caller) {
  const Stmt* stmt = &s;
  return Value::callable(fmt::format("Macro '{}'", name), [stmt, closure, name, is_caller](Evaluator& ev, CallArgs& args) -> Value {
    if (ev.macro_depth_ >= ev.options_.max_macro_depth) {
      fail_code(StatusCode::kOutOfRange, 0, "macro calls nested deeper than {} (recursion?)", ev.options_.max_macro_depth);
    }
    const std::vector<MacroParam>& params = stmt->params;
    if (args.args.size() > params.size() && !stmt->uses_varargs) {
      fail(0, "macro '{}' takes not more than {} argument(s)", name, params.size());
    }
    ++ev.macro_depth_;
    struct DepthRestore {
      int* d;
      ~DepthRestore() { --*d; }
    } restore{&ev.macro_depth_};
    ScopeGuard guard(&ev, closure);
    std::vector<std::pair<Value, Value>> extra_kwargs;
    for (const auto& [key, value] : args.kwargs) {
      bool known = key == "caller" && !is_caller;
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].name != key) continue;
        if (i < args.args.size()) fail(0, "macro '{}' got multiple values for argument '{}'", name, key);
        known = true;
      }
      if (known) continue;
      if (!stmt->uses_kwargs) fail(0, "macro '{}' takes no keyword argument '{}'", name, key);
      extra_kwargs.emplace_back(Value(key), value);
    }
    if (stmt->uses_varargs) {
      std::vector<Value> extra;
      for (size_t i = params.size(); i < args.args.size(); ++i) extra.push_back(args.args[i]);
      ev.scope_->set("varargs", Value::list(std::move(extra), true));
    }
    if (stmt->uses_kwargs) ev.scope_->set("kwargs", Value::dict(std::move(extra_kwargs)));
    for (size_t i = 0; i < params.size(); ++i) {
      const MacroParam& p = params[i];
      if (i < args.args.size()) {
        ev.scope_->set(p.name, args.args[i]);
        continue;
      }
      if (const Value* kw = find_kwarg(args, p.name)) {
        ev.scope_->set(p.name, *kw);
      } else if (p.default_value) {
        ev.scope_->set(p.name, ev.eval(*p.default_value));
      } else {
        ev.scope_->set(p.name, Value::undefined(fmt::format("parameter '{}' was not provided", p.name)));
      }
    }
    if (const Value* caller = find_kwarg(args, "caller"); caller != nullptr && !is_caller) {
      ev.scope_->set("caller", *caller);
    }
    std::string out;
    ev.exec_body(stmt->body, out);
    return Value(std::move(out));
  });
}

void Evaluator::exec_macro_def(const Stmt& s) {
  macro_scopes_.push_back(scope_);
  scope_->set(s.text, make_macro(s, scope_, s.text, false));
}

void Evaluator::exec_call_block(const Stmt& s, std::string& out) {
  const Expr& call_expr = *s.expr;
  const Value callee = eval(*call_expr.children[0]);
  CallArgs args;
  eval_call_args(call_expr, 1, &args);
  macro_scopes_.push_back(scope_);
  args.kwargs.emplace_back("caller", make_macro(s, scope_, "caller", true));
  append_output(out, call(callee, args));
}

Value Evaluator::eval(const Expr& e) {
  NestGuard nest(this);
  try {
    return eval_inner(e);
  } catch (TemplateError& err) {
    if (err.line == 0) err.line = e.line;
    throw;
  }
}

Value Evaluator::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.value;
    case ExprKind::kName: {
      if (const Value* v = scope_->find(e.name)) return *v;
      Value g = find_global(e.name);
      if (!g.is_undefined()) return g;
      return Value::undefined(fmt::format("'{}' is undefined", e.name));
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.children.size());
      for (const auto& c : e.children) items.push_back(eval(*c));
      return Value::list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      std::vector<std::pair<Value, Value>> entries;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = eval(*e.children[i]);
        if (k.is_list() && !k.as_list().tuple) fail(0, "unhashable type: 'list'");
        if (k.is_dict()) fail(0, "unhashable type: 'dict'");
        Value v = eval(*e.children[i + 1]);
        bool replaced = false;
        for (auto& [ek, ev] : entries) {
          if (equals(ek, k)) {
            ev = v;
            replaced = true;
          }
        }
        if (!replaced) entries.emplace_back(std::move(k), std::move(v));
      }
      return Value::dict(std::move(entries));
    }
    case ExprKind::kGetAttr:
      return get_attr(eval(*e.children[0]), e.name);
    case ExprKind::kGetItem: {
      const Value obj = eval(*e.children[0]);
      return get_item(obj, eval(*e.children[1]));
    }
    case ExprKind::kSlice:
      return eval_slice(e);
    case ExprKind::kCall:
      return eval_call(e);
    case ExprKind::kFilter: {
      const Value operand = eval(*e.children[0]);
      CallArgs args;
      eval_call_args(e, 1, &args);
      return apply_filter(e.name, operand, args);
    }
    case ExprKind::kTest: {
      const Value operand = eval(*e.children[0]);
      CallArgs args;
      eval_call_args(e, 1, &args);
      return Value(apply_test(e.name, operand, args));
    }
    case ExprKind::kNot:
      return Value(!eval(*e.children[0]).truthy());
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      const Value v = eval(*e.children[0]);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) fail(0, "bad operand type for unary {}: '{}'", e.kind == ExprKind::kNeg ? '-' : '+', v.type_name());
      if (e.kind == ExprKind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_double());
      return Value(checked(v.as_int() == std::numeric_limits<int64_t>::min(), -v.as_int()));
    }
    case ExprKind::kBinary:
      return eval_binary(e);
    case ExprKind::kCompare:
      return eval_compare(e);
    case ExprKind::kCondExpr:
      if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value::undefined("the inline if expression had no else branch");
  }
  return Value();
}

Value Evaluator::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value left = eval(*e.children[0]);
    return left.truthy() ? eval(*e.children[1]) : left;
  }
  if (op == "or") {
    Value left = eval(*e.children[0]);
    return left.truthy() ? left : eval(*e.children[1]);
  }
  const Value a = eval(*e.children[0]);
  const Value b = eval(*e.children[1]);
  if (op == "~") {
    std::string s = to_str(a);
    append_str(s, b);
    check_size(s.size());
    charge_bytes(s.size());
    return Value(std::move(s));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  auto type_error = [&]() -> Value {
    fail(0, "unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
  };
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
      return Value(checked(overflow, r));
    }
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      check_size(a.str().size() + b.str().size());
      charge_bytes(a.str().size() + b.str().size());
      std::string s = a.str();
      s += b.str();
      return Value(std::move(s));
    }
    if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple && !a.is_generator() && !b.is_generator()) {
      check_items(a.as_list().items.size() + b.as_list().items.size());
      std::vector<Value> items = a.as_list().items;
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return Value::list(std::move(items), a.as_list().tuple);
    }
    return type_error();
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
      return Value(checked(overflow, r));
    }
    if (nums) return Value(a.as_double() - b.as_double());
    return type_error();
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
      return Value(checked(overflow, r));
    }
    if (nums) return Value(a.as_double() * b.as_double());
    const Value* seq = nullptr;
    const Value* count = nullptr;
    if ((a.is_string() || (a.is_list() && !a.is_generator())) && (b.is_int() || b.is_bool())) {
      seq = &a;
      count = &b;
    } else if ((b.is_string() || (b.is_list() && !b.is_generator())) && (a.is_int() || a.is_bool())) {
      seq = &b;
      count = &a;
    }
    if (seq == nullptr) return type_error();
    const int64_t n = std::max<int64_t>(0, count->as_int());
    if (seq->is_string()) {
      const size_t unit = seq->str().size();
      if (unit != 0 && static_cast<uint64_t>(n) > options_.max_output_bytes / unit) check_size(options_.max_output_bytes + 1);
      std::string s;
      s.reserve(unit * static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) s += seq->str();
      charge_bytes(s.size());
      return Value(std::move(s));
    }
    const size_t unit = seq->as_list().items.size();
    if (unit != 0 && static_cast<uint64_t>(n) > options_.max_output_bytes / 64 / unit) check_items(options_.max_output_bytes);
    std::vector<Value> items;
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->as_list().items.begin(), seq->as_list().items.end());
    return Value::list(std::move(items), seq->as_list().tuple);
  }
  if (op == "/") {
    if (!nums) return type_error();
    if (b.as_double() == 0) fail(0, "division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) return type_error();
    if (b.as_double() == 0) fail(0, "integer division or modulo by zero");
    if (ints) return Value(floor_div(a.as_int(), b.as_int()));
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) {
      std::string s = percent_format(a.str(), b, options_.max_output_bytes);
      check_size(s.size());
      charge_bytes(s.size());
      return Value(std::move(s));
    }
    if (!nums) return type_error();
    if (b.as_double() == 0) fail(0, "integer division or modulo by zero");
    if (ints) return Value(py_mod(a.as_int(), b.as_int()));
    return Value(py_fmod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!nums) return type_error();
    if (ints && b.as_int() >= 0) {
      int64_t result = 1;
      int64_t base = a.as_int();
      int64_t exp = b.as_int();
      while (exp > 0) {
        if (exp & 1) checked(__builtin_mul_overflow(result, base, &result), 0);
        exp >>= 1;
        if (exp > 0) checked(__builtin_mul_overflow(base, base, &base), 0);
      }
      return Value(result);
    }
    if (a.as_double() == 0 && b.as_double() < 0) fail(0, "0.0 cannot be raised to a negative power");
    const double r = std::pow(a.as_double(), b.as_double());
    if (std::isinf(r) && std::isfinite(a.as_double()) && std::isfinite(b.as_double())) {
      fail(0, "(34, 'Numerical result out of range')");
    }
    if (std::isnan(r) && !std::isnan(a.as_double()) && !std::isnan(b.as_double())) {
      fail_code(StatusCode::kUnsupported, 0, "a negative number raised to a fractional power is complex");
    }
    return Value(r);
  }
  return type_error();
}

Value Evaluator::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.children[i + 1]);
    const std::string& op = e.ops[i];
    bool r = false;
    if (op == "==") {
      r = equals(left, right);
    } else if (op == "!=") {
      r = !equals(left, right);
    } else if (op == "in" || op == "notin") {
      if (right.is_string()) {
        if (left.is_undefined()) undefined_error(left);
        if (!left.is_string()) fail(0, "'in <string>' requires string as left operand, not {}", left.type_name());
        r = right.str().find(left.str()) != std::string::npos;
      } else if (right.is_list()) {
        for (const Value& item : iterate(right, "in")) r = r || equals(item, left);
      } else if (right.is_dict()) {
        if ((left.is_list() && !left.as_list().tuple) || left.is_dict()) fail(0, "unhashable type: '{}'", left.type_name());
        r = right.as_dict().find(left) != nullptr;
      } else if (right.is_undefined()) {
        r = false;
      } else {
        fail(0, "argument of type '{}' is not iterable", right.type_name());
      }
      if (op == "notin") r = !r;
    } else {
      if (left.is_undefined()) undefined_error(left);
      if (right.is_undefined()) undefined_error(right);
      if (op == "<") r = less_than(left, right);
      if (op == ">") r = less_than(right, left);
      if (op == "<=") r = less_than(left, right) || equals(left, right);
      if (op == ">=") r = less_than(right, left) || equals(left, right);
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Evaluator::eval_slice(const Expr& e) {
  const Value obj = eval(*e.children[0]);
  auto bound = [&](const ExprPtr& x) -> std::optional<int64_t> {
    if (!x) return std::nullopt;
    const Value v = eval(*x);
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail(0, "slice indices must be integers or None");
    return v.as_int();
  };
  const std::optional<int64_t> start_v = bound(e.children[1]);
  const std::optional<int64_t> stop_v = bound(e.children[2]);
  const int64_t step = bound(e.children[3]).value_or(1);
  if (step == 0) fail(0, "slice step cannot be zero");
  if (obj.is_undefined()) undefined_error(obj);
  std::vector<size_t> off;
  int64_t len = 0;
  if (obj.is_string()) {
    off = pystr::offsets(obj.str());
    len = static_cast<int64_t>(off.size()) - 1;
  } else if (obj.is_list() && !obj.is_generator()) {
    len = static_cast<int64_t>(obj.as_list().items.size());
  } else {
    return Value::undefined(fmt::format("'{}' object is not subscriptable", obj.type_name()));
  }
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t start = adjust(start_v, step > 0 ? 0 : len - 1);
  const int64_t stop = adjust(stop_v, step > 0 ? len : -1);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx.push_back(i);
  if (obj.is_string()) {
    std::string s;
    for (int64_t i : idx) s.append(obj.str(), off[i], off[i + 1] - off[i]);
    return Value(std::move(s));
  }
  std::vector<Value> items;
  items.reserve(idx.size());
  for (int64_t i : idx) items.push_back(obj.as_list().items[static_cast<size_t>(i)]);
  return Value::list(std::move(items), obj.as_list().tuple);
}

void Evaluator::eval_call_args(const Expr& e, size_t first_arg, CallArgs* args) {
  for (size_t i = first_arg; i < e.children.size(); ++i) args->args.push_back(eval(*e.children[i]));
  for (const auto& [k, v] : e.kwargs) args->kwargs.emplace_back(k, eval(*v));
  args->line = e.line;
}

Value Evaluator::eval_call(const Expr& e) {
  const Value callee = eval(*e.children[0]);
  CallArgs args;
  eval_call_args(e, 1, &args);
  return call(callee, args);
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (!callee.is_callable()) fail(0, "'{}' object is not callable", callee.type_name());
  return callee.as_callable().fn(*this, args);
}

Value Evaluator::eval_filter_chain(const Expr* chain, const Value& input) {
  if (chain == nullptr) return input;
  const Value operand = eval_filter_chain(chain->children[0].get(), input);
  CallArgs args;
  eval_call_args(*chain, 1, &args);
  return apply_filter(chain->name, operand, args);
}

Value Evaluator::apply_filter(std::string_view name, const Value& operand, CallArgs& args) {
  const FilterFn fn = find_filter(name);
  if (fn == nullptr) fail_code(StatusCode::kUnsupported, 0, "unsupported filter '{}'", name);
  return fn(*this, operand, args);
}

bool Evaluator::apply_test(std::string_view name, const Value& operand, CallArgs& args) {
  const TestFn fn = find_test(name);
  if (fn == nullptr) fail_code(StatusCode::kUnsupported, 0, "unsupported test '{}'", name);
  return fn(*this, operand, args);
}

Value Evaluator::loop_attr(const std::shared_ptr<LoopState>& loop, std::string_view name) {
  const int64_t i = static_cast<int64_t>(loop->index);
  const int64_t n = static_cast<int64_t>(loop->items.size());
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(int64_t{1});
  if (name == "depth0") return Value(int64_t{0});
  if (name == "previtem") {
    return i > 0 ? loop->items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? loop->items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
  }
  if (name == "cycle") {
    const size_t index = loop->index;
    return Value::callable("loop.cycle", [index](Evaluator&, CallArgs& args) -> Value {
      if (args.args.empty()) fail(0, "no items for cycling given");
      return args.args[index % args.args.size()];
    });
  }
  if (name == "changed") {
    std::weak_ptr<LoopState> weak = loop;
    return Value::callable("loop.changed", [weak](Evaluator&, CallArgs& args) -> Value {
      auto state = weak.lock();
      if (!state) return Value(false);
      Value current = Value::list(args.args, true);
      if (!state->has_changed || !equals(state->last_changed, current)) {
        state->has_changed = true;
        state->last_changed = std::move(current);
        return Value(true);
      }
      return Value(false);
    });
  }
  return Value::undefined(fmt::format("'LoopContext' object has no attribute '{}'", name));
}

Value Evaluator::get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict: {
      Value m = get_method(obj, name);
      if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
    }
    case Value::Kind::kNamespace:
      if (const Value* v = obj.as_namespace().find(name)) return *v;
      return Value::undefined(fmt::format("'Namespace' object has no attribute '{}'", name));
    case Value::Kind::kLoop:
      return loop_attr(obj.as_loop(), name);
    default: {
      Value m = get_method(obj, name);
      if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
      return Value::undefined(fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name));
    }
  }
}

Value Evaluator::get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict:
      if (const Value* v = obj.as_dict().find(key)) return *v;
      if (key.is_string()) {
        Value m = get_method(obj, key.str());
        if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
      }
      return Value::undefined(fmt::format("'dict object' has no attribute {}", repr(key)));
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (obj.is_generator()) return Value::undefined("'generator' object is not subscriptable");
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
          const int64_t n = static_cast<int64_t>(obj.as_list().items.size());
          if (i < 0) i += n;
          if (i < 0 || i >= n) return Value::undefined(fmt::format("list object has no element {}", key.as_int()));
          return obj.as_list().items[static_cast<size_t>(i)];
        }
        const std::vector<size_t> off = pystr::offsets(obj.str());
        const int64_t n = static_cast<int64_t>(off.size()) - 1;
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined(fmt::format("str object has no element {}", key.as_int()));
        return Value(obj.str().substr(off[static_cast<size_t>(i)], off[static_cast<size_t>(i) + 1] - off[static_cast<size_t>(i)]));
      }
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined(fmt::format("{} indices must be integers", obj.type_name()));
    }
    default:
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined(fmt::format("'{}' object is not subscriptable", obj.type_name()));
  }
}

}  // namespace minfer::chat::jinja
