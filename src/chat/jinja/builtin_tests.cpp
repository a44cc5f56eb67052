// jinja2's builtin tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...).
#include <cmath>
#include <string_view>
#include <utility>

#include "chat/jinja/bound_args.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/evaluator.h"
#include "chat/jinja/pystr.h"

namespace minfer::chat::jinja {
namespace {

const Value& one_arg(CallArgs& call, const char* test) {
  if (call.args.size() != 1 || !call.kwargs.empty()) fail(0, "test '{}' takes exactly one argument", test);
  return call.args[0];
}

// Python's `value % divisor` for the numeric tests (floats allowed, result has the divisor's sign).
double py_mod(const Value& v, double divisor, const char* test) {
  if (!v.is_number()) fail(0, "test '{}' needs a number, got {}", test, v.type_name());
  if (divisor == 0) fail(0, "integer division or modulo by zero");
  if (!v.is_float()) {
    const int64_t d = static_cast<int64_t>(divisor);
    if (static_cast<double>(d) == divisor) {
      if (d == -1) return 0;
      int64_t r = v.as_int() % d;
      if (r != 0 && ((r < 0) != (d < 0))) r += d;
      return static_cast<double>(r);
    }
  }
  double r = std::fmod(v.as_double(), divisor);
  if (r != 0 && ((r < 0) != (divisor < 0))) r += divisor;
  return r;
}

bool compare(Evaluator& ev, const Value& v, CallArgs& call, const char* op) {
  const Value& other = one_arg(call, op);
  const std::string_view o(op);
  if (o == "==") return equals(v, other);
  if (o == "!=") return !equals(v, other);
  (void)ev;
  if (v.is_undefined() || other.is_undefined()) fail(0, "comparison with an undefined value");
  if (o == "<") return less_than(v, other);
  if (o == "<=") return less_than(v, other) || equals(v, other);
  if (o == ">") return less_than(other, v);
  return less_than(other, v) || equals(v, other);
}

using Entry = std::pair<std::string_view, TestFn>;

const Entry kTests[] = {
    {"defined", [](Evaluator&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
    {"undefined", [](Evaluator&, const Value& v, CallArgs&) { return v.is_undefined(); }},
    {"none", [](Evaluator&, const Value& v, CallArgs&) { return v.is_none(); }},
    {"boolean", [](Evaluator&, const Value& v, CallArgs&) { return v.is_bool(); }},
    {"true", [](Evaluator&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
    {"false", [](Evaluator&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
    {"integer", [](Evaluator&, const Value& v, CallArgs&) { return v.is_int(); }},
    {"float", [](Evaluator&, const Value& v, CallArgs&) { return v.is_float(); }},
    {"number", [](Evaluator&, const Value& v, CallArgs&) { return v.is_number(); }},
    {"string", [](Evaluator&, const Value& v, CallArgs&) { return v.is_string(); }},
    {"mapping", [](Evaluator&, const Value& v, CallArgs&) { return v.is_dict(); }},
    {"sequence",  // Undefined has __len__ and __getitem__
     [](Evaluator&, const Value& v, CallArgs&) {
       return v.is_string() || (v.is_list() && !v.is_generator()) || v.is_dict() || v.is_undefined();
     }},
    {"iterable",
     [](Evaluator&, const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }},
    // Undefined counts: jinja2's Undefined defines __call__ (which raises).
    {"callable", [](Evaluator&, const Value& v, CallArgs&) { return v.is_callable() || v.is_undefined(); }},
    {"escaped", [](Evaluator&, const Value&, CallArgs&) { return false; }},
    {"lower",
     [](Evaluator&, const Value& v, CallArgs&) {
       const std::string s = to_str(v);
       return s != pystr::upper(s) && s == pystr::lower(s);
     }},
    {"upper",
     [](Evaluator&, const Value& v, CallArgs&) {
       const std::string s = to_str(v);
       return s != pystr::lower(s) && s == pystr::upper(s);
     }},
    {"even", [](Evaluator&, const Value& v, CallArgs&) { return py_mod(v, 2, "even") == 0; }},
    {"odd", [](Evaluator&, const Value& v, CallArgs&) { return py_mod(v, 2, "odd") == 1; }},
    {"divisibleby",
     [](Evaluator&, const Value& v, CallArgs& c) {
       const Value& d = one_arg(c, "divisibleby");
       if (!d.is_number()) fail(0, "test 'divisibleby' needs a number, got {}", d.type_name());
       return py_mod(v, d.as_double(), "divisibleby") == 0;
     }},
    {"sameas",
     [](Evaluator&, const Value& v, CallArgs& c) {
       const Value& o = one_arg(c, "sameas");
       if (v.kind() != o.kind()) return false;
       if (v.is_list()) return &v.as_list() == &o.as_list();
       if (v.is_dict()) return &v.as_dict() == &o.as_dict();
       return equals(v, o);
     }},
    {"in",
     [](Evaluator& ev, const Value& v, CallArgs& c) {
       const Value& seq = one_arg(c, "in");
       if (seq.is_string()) return v.is_string() && seq.str().find(v.str()) != std::string::npos;
       if (seq.is_list()) {
         for (const Value& item : ev.iterate(seq, "in")) {
           if (equals(item, v)) return true;
         }
         return false;
       }
       if (seq.is_dict()) return seq.as_dict().find(v) != nullptr;
       fail(0, "argument of type '{}' is not iterable", seq.type_name());
     }},
    {"filter",
     [](Evaluator&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }},
    {"test", [](Evaluator&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }},
    {"eq", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, "=="); }},
    {"equalto", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, "=="); }},
    {"ne", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, "!="); }},
    {"lt", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, "<"); }},
    {"lessthan", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, "<"); }},
    {"le", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, "<="); }},
    {"gt", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, ">"); }},
    {"greaterthan", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, ">"); }},
    {"ge", [](Evaluator& ev, const Value& v, CallArgs& c) { return compare(ev, v, c, ">="); }},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& [n, fn] : kTests) {
    if (n == name) return fn;
  }
  return nullptr;
}

}  // namespace minfer::chat::jinja
