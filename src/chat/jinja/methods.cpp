// Python methods templates call on values: str (split, strip, startswith, ...), dict (items, keys,
// values, get) and list (count, index). Mutating methods exist but raise, like jinja2's immutable sandbox.
#include <algorithm>
#include <cctype>
#include <array>
#include <string_view>

#include "chat/jinja/bound_args.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/evaluator.h"
#include "chat/jinja/pystr.h"

namespace minfer::chat::jinja {
namespace {

constexpr std::array<std::string_view, 23> kStrMethods = {
    "capitalize", "count",  "endswith", "find",    "join",    "lower",      "lstrip",     "replace",
    "rfind",      "rsplit", "rstrip",   "split",   "splitlines", "startswith", "strip",   "title",
    "upper",      "isdigit", "isalpha", "isalnum", "isspace", "islower",    "isupper"};
constexpr std::array<std::string_view, 4> kDictMethods = {"items", "keys", "values", "get"};
constexpr std::array<std::string_view, 7> kDictMutators = {"pop", "popitem", "setdefault", "update", "clear", "copy", "fromkeys"};
constexpr std::array<std::string_view, 2> kListMethods = {"count", "index"};
constexpr std::array<std::string_view, 9> kListMutators = {"append", "extend", "insert", "pop", "remove",
                                                           "reverse", "sort", "clear", "copy"};
constexpr std::array<std::string_view, 2> kLoopMethods = {"cycle", "changed"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// str.startswith / endswith accept a string or a tuple of strings.
bool affix_match(const Value& arg, const std::string& s, bool prefix, const char* fn) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) fail(0, "{} arg must be str or a tuple of str, not {}", fn, a.type_name());
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.is_list()) {
    for (const Value& a : arg.as_list().items) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(arg);
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.emplace_back(std::move(p));
  return Value::list(std::move(items));
}

template <typename Pred>
bool all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

Value call_str_method(Evaluator& ev, const std::string& s, std::string_view name, CallArgs& call) {
  const std::string fn = fmt::format("str.{}", name);
  if (name == "split" || name == "rsplit") {
    BoundArgs a(call, fn, {"sep", "maxsplit"});
    const std::optional<std::string> sep = a.opt_string(0);
    if (sep && sep->empty()) fail(0, "{}(): empty separator", fn);
    const int64_t maxsplit = a.int_or(1, -1);
    return string_list(name == "split" ? pystr::split(s, sep, maxsplit) : pystr::rsplit(s, sep, maxsplit));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a(call, fn, {"chars"});
    return Value(pystr::strip(s, a.opt_string(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    BoundArgs a(call, fn, {"affix"});
    if (!a.given(0)) fail(0, "{}() takes at least 1 argument", fn);
    return Value(affix_match(a[0], s, name == "startswith", fn.c_str()));
  }
  if (name == "replace") {
    BoundArgs a(call, fn, {"old", "new", "count"});
    ev.check_size(pystr::replaced_size(s, a.string(0), a.string(1), a.int_or(2, -1)));
    std::string out = pystr::replace(s, a.string(0), a.string(1), a.int_or(2, -1));
    ev.check_size(out.size());
    ev.charge_bytes(out.size());
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    BoundArgs a(call, fn, {"sub"});
    const std::string sub = a.string(0);
    if (name == "find") return Value(pystr::find(s, sub));
    if (name == "rfind") return Value(pystr::rfind(s, sub));
    return Value(pystr::count(s, sub));
  }
  if (name == "join") {
    BoundArgs a(call, fn, {"iterable"});
    std::string out;
    size_t i = 0;
    for (const Value& item : ev.iterate(a[0], fn)) {
      if (!item.is_string()) fail(0, "sequence item {}: expected str instance, {} found", i, item.type_name());
      if (i++ > 0) out += s;
      out += item.str();
      ev.check_size(out.size());
    }
    ev.charge_bytes(out.size());
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    BoundArgs a(call, fn, {"keepends"});
    return string_list(pystr::splitlines(s, a.bool_or(0, false)));
  }
  BoundArgs a(call, fn, {});
  if (name == "lower") return Value(pystr::lower(s));
  if (name == "upper") return Value(pystr::upper(s));
  if (name == "title") return Value(pystr::title(s));
  if (name == "capitalize") return Value(pystr::capitalize(s));
  if (name == "isdigit") return Value(all_chars(s, [](unsigned char c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value(all_chars(s, [](unsigned char c) { return std::isalpha(c) != 0; }));
  if (name == "isalnum") return Value(all_chars(s, [](unsigned char c) { return std::isalnum(c) != 0; }));
  if (name == "isspace") return Value(!s.empty() && pystr::strip(s, std::nullopt, true, true).empty());
  if (name == "islower") return Value(s != pystr::upper(s) && s == pystr::lower(s));
  if (name == "isupper") return Value(s != pystr::lower(s) && s == pystr::upper(s));
  fail(0, "unsupported method str.{}", name);
}

Value call_dict_method(const Value& self, std::string_view name, CallArgs& call) {
  const Dict& d = self.as_dict();
  if (name == "get") {
    BoundArgs a(call, "dict.get", {"key", "default"});
    if (const Value* v = d.find(a[0])) return *v;
    return a.given(1) ? a[1] : Value::none();
  }
  BoundArgs a(call, fmt::format("dict.{}", name), {});
  std::vector<Value> out;
  out.reserve(d.entries.size());
  for (const auto& [k, v] : d.entries) {
    if (name == "items") {
      out.push_back(Value::list({k, v}, true));
    } else {
      out.push_back(name == "keys" ? k : v);
    }
  }
  return Value::list(std::move(out));
}

Value call_list_method(const Value& self, std::string_view name, CallArgs& call) {
  BoundArgs a(call, fmt::format("list.{}", name), {"value"});
  const auto& items = self.as_list().items;
  int64_t n = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], a[0])) continue;
    if (name == "index") return Value(static_cast<int64_t>(i));
    ++n;
  }
  if (name == "index") fail(0, "{} is not in list", repr(a[0]));
  return Value(n);
}

// The sandbox hands out an Undefined for unsafe attributes: empty when printed, an error when called.
Value unsafe_method(const std::string& type, std::string_view name) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe: templates may not modify values", name, type));
}

}  // namespace

bool is_known_method(std::string_view name) {
  return contains(kStrMethods, name) || contains(kDictMethods, name) || contains(kDictMutators, name) ||
         contains(kListMethods, name) || contains(kListMutators, name) || contains(kLoopMethods, name);
}

Value get_method(const Value& self, std::string_view name) {
  const std::string n(name);
  if (self.is_string() && contains(kStrMethods, name)) {
    return Value::callable(fmt::format("built-in method {}", n), [self, n](Evaluator& ev, CallArgs& args) {
      return call_str_method(ev, self.str(), n, args);
    });
  }
  if (self.is_dict()) {
    if (contains(kDictMethods, name)) {
      return Value::callable(fmt::format("built-in method {}", n), [self, n](Evaluator&, CallArgs& args) { return call_dict_method(self, n, args); });
    }
    if (contains(kDictMutators, name)) return unsafe_method("dict", name);
  }
  if (self.is_list() && !self.is_generator()) {
    if (contains(kListMethods, name)) {
      return Value::callable(fmt::format("built-in method {}", n), [self, n](Evaluator&, CallArgs& args) { return call_list_method(self, n, args); });
    }
    if (contains(kListMutators, name)) return unsafe_method(self.type_name(), name);
  }
  return Value();
}

}  // namespace minfer::chat::jinja
