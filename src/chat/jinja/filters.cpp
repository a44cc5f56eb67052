// jinja2's builtin filters as transformers' environment has them, with tojson replaced by
// transformers' json.dumps(ensure_ascii=False) version. Sequence filters return lists.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "chat/jinja/bound_args.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/evaluator.h"
#include "chat/jinja/percent_format.h"
#include "chat/jinja/pystr.h"
#include "core/utf8.h"

namespace minfer::chat::jinja {
namespace {

// jinja2's make_attrgetter: "a.b.0" walks items/attributes, digits as integer indices.
Value get_path(Evaluator& ev, const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = digits && part.size() < 18 ? ev.get_item(v, Value(static_cast<int64_t>(std::stoll(part)))) : ev.get_item(v, Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(pystr::lower(v.str()));
  return v;
}

std::string soft_str(const Value& v) { return to_str(v); }

Value f_abs(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "abs", {});
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) fail(0, "integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  fail(0, "bad operand type for abs(): '{}'", v.type_name());
}

Value f_attr(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "attr", {"name"});
  const std::string name = a.string(0);
  if (v.is_dict()) {
    Value m = get_method(v, name);
    return m.is_undefined() ? Value::undefined(fmt::format("'dict object' has no attribute '{}'", name)) : m;
  }
  return ev.get_attr(v, name);
}

Value f_batch(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "batch", {"linecount", "fill_with"});
  const int64_t n = a.int_or(0, 0);
  if (n <= 0) fail(0, "batch(): linecount must be positive");
  std::vector<Value> out;
  std::vector<Value> cur;
  for (const Value& item : ev.iterate(v, "batch")) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (a.given(1)) {
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(a[1]);
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::generator(std::move(out));
}

Value f_capitalize(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "capitalize", {});
  return Value(pystr::capitalize(soft_str(v)));
}

Value f_center(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "center", {"width"});
  const std::string s = soft_str(v);
  const int64_t width = a.int_or(0, 80);
  const int64_t marg = width - static_cast<int64_t>(pystr::length(s));
  if (marg <= 0) return Value(s);
  ev.check_size(static_cast<size_t>(width));
  const int64_t left = marg / 2 + (marg & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(marg - left), ' '));
}

Value f_length(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "length", {});
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value(int64_t{0});
    case Value::Kind::kString: return Value(static_cast<int64_t>(pystr::length(v.str())));
    case Value::Kind::kList:
      if (v.is_generator()) fail(0, "object of type 'generator' has no len()");
      return Value(static_cast<int64_t>(v.as_list().items.size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(v.as_dict().entries.size()));
    case Value::Kind::kLoop: return Value(static_cast<int64_t>(v.as_loop()->items.size()));
    default: fail(0, "object of type '{}' has no len()", v.type_name());
  }
}

Value f_default(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "default", {"default_value", "boolean"});
  const bool boolean = a.bool_or(1, false);
  if (v.is_undefined() || (boolean && !v.truthy())) return a.given(0) ? a[0] : Value(std::string());
  return v;
}

Value f_dictsort(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail(0, "dictsort(): expected a mapping, got {}", v.type_name());
  const bool cs = a.bool_or(0, false);
  const std::string by = a.opt_string(1).value_or("key");
  if (by != "key" && by != "value") fail(0, "dictsort(): you can only sort by either 'key' or 'value'");
  const bool rev = a.bool_or(2, false);
  std::vector<std::pair<Value, Value>> entries = v.as_dict().entries;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    const Value kx = sort_key(by == "key" ? x.first : x.second, cs);
    const Value ky = sort_key(by == "key" ? y.first : y.second, cs);
    return rev ? less_than(ky, kx) : less_than(kx, ky);
  });
  std::vector<Value> out;
  for (auto& [k, val] : entries) out.push_back(Value::list({k, val}, true));
  return Value::list(std::move(out));
}

Value f_escape(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "escape", {});
  std::string out;
  for (char ch : soft_str(v)) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(ch);
    }
  }
  return Value(std::move(out));
}

Value f_first(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "first", {});
  std::vector<Value> items = ev.iterate(v, "first");
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "last", {});
  if (v.is_generator()) fail(0, "last(): 'generator' object is not reversible");
  std::vector<Value> items = ev.iterate(v, "last");
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// Python float(str): surrounding whitespace allowed, the whole rest must be a number.
std::optional<double> parse_float(const std::string& text) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty() || s.find('x') != std::string::npos || s.find('X') != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

// Python int(str, 10).
std::optional<int64_t> parse_int(const std::string& text) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i == s.size()) return std::nullopt;
  int64_t v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && prev_digit && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
      prev_digit = false;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[i] - '0', &v)) fail(0, "integer overflow");
    prev_digit = true;
  }
  return neg ? -v : v;
}

Value f_float(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "float", {"default"});
  const Value fallback = a.given(0) ? a[0] : Value(0.0);
  if (v.is_undefined()) fail(0, "{}", v.undefined_hint());  // Undefined.__float__ raises
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value(*d);
  }
  return fallback;
}

// jinja2's do_format: soft_str(value) % (kwargs or args), args always as a tuple.
Value f_format(Evaluator& ev, const Value& v, CallArgs& c) {
  if (!c.args.empty() && !c.kwargs.empty()) fail(0, "format(): can't handle positional and keyword arguments at the same time");
  Value args = Value::list(c.args, true);
  if (!c.kwargs.empty()) {
    std::vector<std::pair<Value, Value>> entries;
    for (const auto& [k, val] : c.kwargs) entries.emplace_back(Value(k), val);
    args = Value::dict(std::move(entries));
  }
  std::string out = percent_format(soft_str(v), args, ev.options().max_output_bytes);
  ev.check_size(out.size());
  ev.charge_bytes(out.size());
  return Value(std::move(out));
}

Value f_int(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "int", {"default", "base"});
  const Value fallback = a.given(0) ? a[0] : Value(int64_t{0});
  if (a.int_or(1, 10) != 10) fail_code(StatusCode::kUnsupported, 0, "int(): only base 10 is supported");
  if (v.is_undefined()) fail(0, "{}", v.undefined_hint());  // Undefined.__int__ raises
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  auto from_double = [](double d) -> Value {
    if (!std::isfinite(d)) fail(0, "cannot convert float {} to integer", format_float(d));
    if (std::fabs(d) >= 9.2e18) fail(0, "integer overflow");
    return Value(static_cast<int64_t>(d));
  };
  if (v.is_float()) return from_double(v.as_double());
  if (v.is_string()) {
    if (auto i = parse_int(v.str())) return Value(*i);
    if (auto d = parse_float(v.str())) return from_double(*d);
  }
  return fallback;
}

Value f_items(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "items", {});
  if (v.is_undefined()) return Value::generator({});
  if (!v.is_dict()) fail(0, "items(): can only get item pairs from a mapping, got {}", v.type_name());
  std::vector<Value> out;
  for (const auto& [k, val] : v.as_dict().entries) out.push_back(Value::list({k, val}, true));
  return Value::generator(std::move(out));
}

Value f_join(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "join", {"d", "attribute"});
  const std::string sep = a.given(0) ? to_str(a[0]) : std::string();
  const std::optional<std::string> attr = a.given(1) ? std::optional<std::string>(to_str(a[1])) : std::nullopt;
  std::string out;
  bool first = true;
  for (const Value& item : ev.iterate(v, "join")) {
    if (!first) out += sep;
    first = false;
    append_str(out, attr ? get_path(ev, item, *attr) : item);
    ev.check_size(out.size());
  }
  ev.charge_bytes(out.size());
  return Value(std::move(out));
}

Value f_list(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "list", {});
  return Value::list(ev.iterate(v, "list"));
}

Value f_lower(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "lower", {});
  return Value(pystr::lower(soft_str(v)));
}

Value f_upper(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "upper", {});
  return Value(pystr::upper(soft_str(v)));
}

// Splits off the first positional argument (a filter or test name) from the rest.
std::pair<std::string, CallArgs> name_and_rest(CallArgs& c, const char* fn) {
  if (c.args.empty() || !c.args[0].is_string()) fail(0, "{}(): expected a filter or test name", fn);
  CallArgs rest;
  rest.args.assign(c.args.begin() + 1, c.args.end());
  rest.kwargs = c.kwargs;
  rest.line = c.line;
  return {c.args[0].str(), std::move(rest)};
}

Value f_map(Evaluator& ev, const Value& v, CallArgs& c) {
  if (!v.truthy()) return Value::generator({});  // jinja2 checks `if value:` before anything else
  std::vector<Value> out;
  const std::vector<Value> items = ev.iterate(v, "map");
  if (c.args.empty()) {
    BoundArgs a(c, "map", {"attribute", "default"});
    if (!a.given(0)) fail(0, "map(): needs a filter name or attribute=");
    const std::string attr = to_str(a[0]);
    for (const Value& item : items) {
      Value x = get_path(ev, item, attr);
      if (x.is_undefined() && a.given(1)) x = a[1];
      out.push_back(std::move(x));
    }
    return Value::generator(std::move(out));
  }
  auto [name, rest] = name_and_rest(c, "map");
  for (const Value& item : items) {
    CallArgs args = rest;
    out.push_back(ev.apply_filter(name, item, args));
  }
  return Value::generator(std::move(out));
}

Value select_impl(Evaluator& ev, const Value& v, CallArgs& c, bool by_attr, bool keep, const char* fn) {
  if (!v.truthy()) return Value::generator({});  // jinja2 checks `if value:` before anything else
  const std::vector<Value> items = ev.iterate(v, fn);
  std::string attr;
  CallArgs rest;
  rest.kwargs = c.kwargs;
  size_t next = 0;
  if (by_attr) {
    if (c.args.empty()) fail(0, "{}(): missing attribute name", fn);
    attr = to_str(c.args[0]);
    next = 1;
  }
  std::string test;
  if (next < c.args.size()) {
    if (!c.args[next].is_string()) fail(0, "{}(): test name must be a string", fn);
    test = c.args[next].str();
    rest.args.assign(c.args.begin() + static_cast<std::ptrdiff_t>(next) + 1, c.args.end());
  }
  std::vector<Value> out;
  for (const Value& item : items) {
    const Value x = by_attr ? get_path(ev, item, attr) : item;
    bool r = false;
    if (test.empty()) {
      r = x.truthy();
    } else {
      CallArgs args = rest;
      r = ev.apply_test(test, x, args);
    }
    if (r == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value f_select(Evaluator& ev, const Value& v, CallArgs& c) { return select_impl(ev, v, c, false, true, "select"); }
Value f_reject(Evaluator& ev, const Value& v, CallArgs& c) { return select_impl(ev, v, c, false, false, "reject"); }
Value f_selectattr(Evaluator& ev, const Value& v, CallArgs& c) { return select_impl(ev, v, c, true, true, "selectattr"); }
Value f_rejectattr(Evaluator& ev, const Value& v, CallArgs& c) { return select_impl(ev, v, c, true, false, "rejectattr"); }

Value min_max(Evaluator& ev, const Value& v, CallArgs& c, bool want_max) {
  BoundArgs a(c, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool cs = a.bool_or(0, false);
  const std::optional<std::string> attr = a.given(1) ? std::optional<std::string>(to_str(a[1])) : std::nullopt;
  const std::vector<Value> items = ev.iterate(v, want_max ? "max" : "min");
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  auto key = [&](size_t i) { return sort_key(attr ? get_path(ev, items[i], *attr) : items[i], cs); };
  for (size_t i = 1; i < items.size(); ++i) {
    if (want_max ? less_than(key(best), key(i)) : less_than(key(i), key(best))) best = i;
  }
  return items[best];
}

Value f_max(Evaluator& ev, const Value& v, CallArgs& c) { return min_max(ev, v, c, true); }
Value f_min(Evaluator& ev, const Value& v, CallArgs& c) { return min_max(ev, v, c, false); }

Value f_replace(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "replace", {"old", "new", "count"});
  const std::string s = soft_str(v);
  const std::string old = to_str(a[0]);
  const std::string repl = to_str(a[1]);
  ev.check_size(pystr::replaced_size(s, old, repl, a.int_or(2, -1)));
  std::string out = pystr::replace(s, old, repl, a.int_or(2, -1));
  ev.check_size(out.size());
  ev.charge_bytes(out.size());
  return Value(std::move(out));
}

Value f_reverse(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "reverse", {});
  if (v.is_string()) {
    const std::vector<size_t> off = pystr::offsets(v.str());
    std::string out;
    for (size_t i = off.size() - 1; i > 0; --i) out.append(v.str(), off[i - 1], off[i] - off[i - 1]);
    return Value(std::move(out));
  }
  std::vector<Value> items = ev.iterate(v, "reverse");
  std::reverse(items.begin(), items.end());
  return Value::generator(std::move(items));  // a reversed() iterator in jinja2
}

Value f_round(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "round", {"precision", "method"});
  const int64_t precision = a.int_or(0, 0);
  const std::string method = a.opt_string(1).value_or("common");
  if (method != "common" && method != "ceil" && method != "floor") {
    fail(0, "round(): method must be 'common', 'ceil' or 'floor'");
  }
  if (!v.is_number()) fail(0, "round(): expected a number, got {}", v.type_name());
  if (precision < -30 || precision > 30) fail(0, "round(): precision out of range");
  const double x = v.as_double();
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value(std::ceil(x * scale) / scale);
  if (method == "floor") return Value(std::floor(x * scale) / scale);
  if (!v.is_float()) return precision >= 0 ? Value(v.as_int()) : Value(static_cast<int64_t>(std::nearbyint(x * scale) / scale));
  if (!std::isfinite(x)) return Value(x);
  if (precision >= 0) {
    // printf rounds the exact binary value half-to-even, like Python's correctly rounded round().
    const std::string s = fmt::format("{:.{}f}", x, precision);
    return Value(std::strtod(s.c_str(), nullptr));
  }
  return Value(std::nearbyint(x * scale) / scale);
}

Value f_safe(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "safe", {});
  return Value(soft_str(v));
}

Value f_sort(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool rev = a.bool_or(0, false);
  const bool cs = a.bool_or(1, false);
  const std::optional<std::string> attr = a.given(2) ? std::optional<std::string>(to_str(a[2])) : std::nullopt;
  std::vector<Value> items = ev.iterate(v, "sort");
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) keyed.emplace_back(sort_key(attr ? get_path(ev, item, *attr) : item, cs), std::move(item));
  // jinja2 compares one-element key lists: equal keys (even two Undefined) never reach '<'.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    if (equals(x.first, y.first)) return false;
    return rev ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value f_string(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "string", {});
  return Value(soft_str(v));
}

Value f_sum(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "sum", {"attribute", "start"});
  const std::optional<std::string> attr = a.given(0) ? std::optional<std::string>(to_str(a[0])) : std::nullopt;
  Value total = a.given(1) ? a[1] : Value(int64_t{0});
  for (const Value& item : ev.iterate(v, "sum")) {
    const Value x = attr ? get_path(ev, item, *attr) : item;
    if (!total.is_number() || !x.is_number()) {
      fail(0, "unsupported operand type(s) for +: '{}' and '{}'", total.type_name(), x.type_name());
    }
    if (total.is_float() || x.is_float()) {
      total = Value(total.as_double() + x.as_double());
    } else {
      int64_t r = 0;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) fail(0, "integer overflow");
      total = Value(r);
    }
  }
  return total;
}

Value f_title(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "title", {});
  // jinja2's do_title: capitalize each piece split at runs of whitespace, '-', '(', '{', '[', '<'.
  const std::string s = soft_str(v);
  std::string out;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) out += pystr::capitalize(word);
    word.clear();
  };
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const int32_t cp = utf8_decode(s, pos, &len);
    const bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
                     (cp >= 0 && pystr::is_space(static_cast<uint32_t>(cp)));
    if (sep) {
      flush();
      out.append(s, pos, len);
    } else {
      word.append(s, pos, len);
    }
    pos += len;
  }
  flush();
  return Value(std::move(out));
}

void escape_non_ascii(std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (size_t pos = 0; pos < json.size();) {
    size_t len = 1;
    int32_t cp = utf8_decode(json, pos, &len);
    if (cp < 0x80) {
      out.push_back(json[pos]);
    } else if (cp < 0x10000) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      const int32_t v = cp - 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
    }
    pos += len;
  }
  json = std::move(out);
}

Value f_tojson(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  if (a.given(1) && !a[1].is_none()) {
    if (a[1].is_string()) {
      o.indent_is_str = true;
      o.indent_str = a[1].str();
    } else {
      o.indent = static_cast<int>(std::clamp<int64_t>(a.int_or(1, 0), -1, 64));
      if (o.indent < 0) {
        o.indent_is_str = true;  // Python: a negative indent behaves like 0 (newlines, no spaces)
        o.indent_str.clear();
      }
    }
    o.item_sep = ",";
  }
  if (a.given(2) && !a[2].is_none()) {
    if (!a[2].is_list() || a[2].as_list().items.size() != 2 || !a[2].as_list().items[0].is_string() ||
        !a[2].as_list().items[1].is_string()) {
      fail(0, "tojson(): separators must be a pair of strings");
    }
    o.item_sep = a[2].as_list().items[0].str();
    o.key_sep = a[2].as_list().items[1].str();
  }
  o.sort_keys = a.bool_or(3, false);
  std::string out = to_json(v, o);
  if (a.bool_or(0, false)) escape_non_ascii(out);
  ev.check_size(out.size());
  ev.charge_bytes(out.size());
  return Value(std::move(out));
}

Value f_trim(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "trim", {"chars"});
  return Value(pystr::strip(soft_str(v), a.opt_string(0), true, true));
}

Value f_unique(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "unique", {"case_sensitive", "attribute"});
  const bool cs = a.bool_or(0, false);
  const std::optional<std::string> attr = a.given(1) ? std::optional<std::string>(to_str(a[1])) : std::nullopt;
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : ev.iterate(v, "unique")) {
    const Value key = sort_key(attr ? get_path(ev, item, *attr) : item, cs);
    bool dup = false;
    for (const Value& s : seen) dup = dup || equals(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value f_wordcount(Evaluator&, const Value& v, CallArgs& c) {
  BoundArgs a(c, "wordcount", {});
  // \w+ runs; outside ASCII every non-space, non-punctuation-range code point counts as a word char.
  const std::string s = soft_str(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const int32_t cp = utf8_decode(s, pos, &len);
    const bool word = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_' ||
                      (cp >= 0xaa && !pystr::is_space(static_cast<uint32_t>(cp)) && !(cp >= 0x2000 && cp <= 0x206f) &&
                       !(cp >= 0x3000 && cp <= 0x303f));
    if (word && !in_word) ++n;
    in_word = word;
    pos += len;
  }
  return Value(n);
}

Value f_indent(Evaluator& ev, const Value& v, CallArgs& c) {
  BoundArgs a(c, "indent", {"width", "first", "blank"});
  std::string indention;
  if (a.given(0) && a[0].is_string()) {
    indention = a[0].str();
  } else {
    const int64_t w = a.int_or(0, 4);
    indention.assign(static_cast<size_t>(std::clamp<int64_t>(w, 0, 4096)), ' ');
  }
  const bool first = a.bool_or(1, false);
  const bool blank = a.bool_or(2, false);
  if (!v.is_string()) fail(0, "indent(): expected a string, got {}", v.type_name());
  const std::vector<std::string> lines = pystr::splitlines(v.str() + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    ev.check_size(out.size());
  }
  if (first) out = indention + out;
  ev.charge_bytes(out.size());
  return Value(std::move(out));
}

// jinja2's generator filters run only when consumed: a failure becomes a generator that raises
// then (bounds still abort at once).
template <FilterFn kFilter>
Value lazy(Evaluator& ev, const Value& v, CallArgs& c) {
  try {
    return kFilter(ev, v, c);
  } catch (TemplateError& e) {
    if (e.code == StatusCode::kOutOfRange) throw;
    return Value::failed_generator(std::move(e));
  }
}

using Entry = std::pair<std::string_view, FilterFn>;

const Entry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},         {"batch", lazy<f_batch>},       {"capitalize", f_capitalize},
    {"center", f_center},     {"count", f_length},      {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},     {"forceescape", f_escape},
    {"first", f_first},       {"float", f_float},       {"format", f_format},       {"indent", f_indent},     {"int", f_int},
    {"items", lazy<f_items>},       {"join", f_join},         {"last", f_last},         {"length", f_length},
    {"list", f_list},         {"lower", f_lower},       {"map", lazy<f_map>},           {"max", f_max},
    {"min", f_min},           {"reject", lazy<f_reject>},     {"rejectattr", lazy<f_rejectattr>}, {"replace", f_replace},
    {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},         {"select", lazy<f_select>},
    {"selectattr", lazy<f_selectattr>}, {"sort", f_sort},     {"string", f_string},     {"sum", f_sum},
    {"title", f_title},       {"tojson", f_tojson},     {"trim", f_trim},         {"unique", lazy<f_unique>},
    {"upper", f_upper},       {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& [n, fn] : kFilters) {
    if (n == name) return fn;
  }
  return nullptr;
}

}  // namespace minfer::chat::jinja
