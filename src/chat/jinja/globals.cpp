// Template globals: range, dict, namespace, raise_exception (transformers) and strftime_now.
// Nothing here reaches files, the environment or the network.
#include <ctime>

#include "chat/jinja/bound_args.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/evaluator.h"

namespace minfer::chat::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox MAX_RANGE

Value range_fn(Evaluator&, CallArgs& call) {
  if (!call.kwargs.empty()) fail(0, "range() takes no keyword arguments");
  std::vector<int64_t> a;
  for (const Value& v : call.args) {
    if (!v.is_int() && !v.is_bool()) fail(0, "range(): '{}' object cannot be interpreted as an integer", v.type_name());
    a.push_back(v.as_int());
  }
  if (a.empty() || a.size() > 3) fail(0, "range expected 1 to 3 arguments, got {}", a.size());
  const int64_t start = a.size() == 1 ? 0 : a[0];
  const int64_t stop = a.size() == 1 ? a[0] : a[1];
  const int64_t step = a.size() == 3 ? a[2] : 1;
  if (step == 0) fail(0, "range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      fail_code(StatusCode::kOutOfRange, 0, "range too big: a range may have at most {} items", kMaxRange);
    }
    items.emplace_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return Value::list(std::move(items));
}

// dict(mapping?, **kwargs) and namespace(mapping?, **kwargs) take the same arguments.
std::vector<std::pair<Value, Value>> mapping_args(CallArgs& call, const char* fn) {
  std::vector<std::pair<Value, Value>> entries;
  auto put = [&](const Value& k, const Value& v) {
    for (auto& [ek, ev] : entries) {
      if (equals(ek, k)) {
        ev = v;
        return;
      }
    }
    entries.emplace_back(k, v);
  };
  if (call.args.size() > 1) fail(0, "{}() expected at most 1 positional argument", fn);
  if (call.args.size() == 1) {
    if (!call.args[0].is_dict()) fail(0, "{}(): positional argument must be a mapping", fn);
    for (const auto& [k, v] : call.args[0].as_dict().entries) put(k, v);
  }
  for (const auto& [k, v] : call.kwargs) put(Value(k), v);
  return entries;
}

Value dict_fn(Evaluator&, CallArgs& call) { return Value::dict(mapping_args(call, "dict")); }

Value namespace_fn(Evaluator& ev, CallArgs& call) {
  Value ns = ev.new_namespace();
  for (auto& [k, v] : mapping_args(call, "namespace")) {
    if (!k.is_string()) fail(0, "namespace(): keywords must be strings");
    ns.as_namespace().attrs.emplace_back(k.str(), v);
  }
  return ns;
}

Value raise_exception_fn(Evaluator&, CallArgs& call) {
  BoundArgs a(call, "raise_exception", {"message"});
  fail(0, "raise_exception: {}", to_str(a[0]));
}

Value strftime_now_fn(Evaluator& ev, CallArgs& call) {
  BoundArgs a(call, "strftime_now", {"format"});
  const std::string format = a.string(0);
  if (format.size() > 256) fail(0, "strftime_now(): format longer than 256 bytes");
  std::tm tm{};
  if (ev.options().now_unix) {
    const std::time_t t = static_cast<std::time_t>(*ev.options().now_unix);
    gmtime_r(&t, &tm);
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (format.empty()) return Value(std::string());
  char buf[4096];
  const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

Value find_global(std::string_view name) {
  static const Value kRange = Value::callable("class 'range'", range_fn);
  static const Value kDict = Value::callable("class 'dict'", dict_fn);
  static const Value kNamespace = Value::callable("class 'jinja2.utils.Namespace'", namespace_fn);
  static const Value kRaise = Value::callable("function raise_exception", raise_exception_fn);
  static const Value kStrftime = Value::callable("function strftime_now", strftime_now_fn);
  if (name == "range") return kRange;
  if (name == "dict") return kDict;
  if (name == "namespace") return kNamespace;
  if (name == "raise_exception") return kRaise;
  if (name == "strftime_now") return kStrftime;
  return Value();
}

}  // namespace minfer::chat::jinja
