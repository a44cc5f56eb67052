// Value construction, Python formatting (str/repr/float repr), comparison and json.dumps.
#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "chat/jinja/error.h"
#include "chat/jinja/pystr.h"
#include "core/utf8.h"

namespace minfer::chat::jinja {

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

Value* Namespace::find(std::string_view name) {
  for (auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.str_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), d_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), str_(std::make_shared<const std::string>(std::move(s))) {}

namespace {

std::shared_ptr<const List> make_list(std::vector<Value> items, bool tuple, bool generator) {
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  if (depth + 1 > Value::kMaxDepth) fail(0, "containers nested deeper than {} levels", Value::kMaxDepth);
  return std::make_shared<const List>(List{std::move(items), tuple, generator, depth + 1});
}

}  // namespace

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = make_list(std::move(items), tuple, false);
  return v;
}

Value Value::generator(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = make_list(std::move(items), false, true);
  return v;
}

Value Value::failed_generator(TemplateError error) {
  auto l = std::make_shared<List>();
  l->generator = true;
  l->deferred_error = std::make_shared<const TemplateError>(std::move(error));
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::move(l);
  return v;
}

Value Value::dict(std::vector<std::pair<Value, Value>> entries) {
  int depth = 0;
  for (const auto& [k, val] : entries) depth = std::max({depth, k.depth(), val.depth()});
  if (depth + 1 > kMaxDepth) fail(0, "containers nested deeper than {} levels", kMaxDepth);
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<const Dict>(Dict{std::move(entries), depth + 1});
  return v;
}

Value Value::make_namespace(std::shared_ptr<Namespace> ns) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ns_ = std::move(ns);
  return v;
}

Value Value::callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::loop(std::shared_ptr<LoopState> state) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.loop_ = std::move(state);
  return v;
}

namespace {

thread_local size_t t_max_bytes = SIZE_MAX;

[[noreturn]] void bound_exceeded() {
  fail_code(StatusCode::kOutOfRange, 0, "a string being built exceeds the {}-byte output bound", t_max_bytes);
}

void check_bound(const std::string& out) {
  if (out.size() > t_max_bytes) bound_exceeded();
}

}  // namespace

ScopedOutputBound::ScopedOutputBound(size_t max_bytes) : saved_(t_max_bytes) { t_max_bytes = max_bytes; }
ScopedOutputBound::~ScopedOutputBound() { t_max_bytes = saved_; }

namespace {

Value from_json_depth(const nlohmann::ordered_json& j, int depth) {
  if (depth > Value::kMaxDepth) fail(0, "JSON input nested deeper than {} levels", Value::kMaxDepth);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_depth(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<Value, Value>> entries;
      entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        entries.emplace_back(Value(it.key()), from_json_depth(it.value(), depth + 1));
      }
      return Value::dict(std::move(entries));
    }
    default:
      return Value::none();
  }
}

void check_depth(int depth) {
  if (depth > Value::kMaxDepth) fail(0, "value nested deeper than {} levels", Value::kMaxDepth);
}

void append_repr(std::string& out, const Value& v, int depth);

void append_string_repr(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  if (out.size() + s.size() > t_max_bytes) bound_exceeded();
  out.push_back(quote);
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    int32_t cp = utf8_decode(s, pos, &len);
    if (cp < 0) cp = static_cast<uint8_t>(s[pos]);
    if (cp == quote || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0xa0) || cp == 0xad) {
      out += fmt::format("\\x{:02x}", cp);
    } else if (cp == 0x2028 || cp == 0x2029) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out.append(s, pos, len);
    }
    pos += len;
  }
  out.push_back(quote);
}

void append_str_depth(std::string& out, const Value& v, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += fmt::format("{}", v.as_int());
      return;
    case Value::Kind::kFloat:
      out += format_float(v.as_double());
      return;
    case Value::Kind::kString:
      out += v.str();
      check_bound(out);
      return;
    case Value::Kind::kList: {
      const List& l = v.as_list();
      if (l.generator) {
        out += "<generator object>";
        return;
      }
      out.push_back(l.tuple ? '(' : '[');
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i > 0) out += ", ";
        append_repr(out, l.items[i], depth + 1);
        check_bound(out);
      }
      if (l.tuple && l.items.size() == 1) out.push_back(',');
      out.push_back(l.tuple ? ')' : ']');
      return;
    }
    case Value::Kind::kDict: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, val] : v.as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k, depth + 1);
        out += ": ";
        append_repr(out, val, depth + 1);
        check_bound(out);
      }
      out.push_back('}');
      return;
    }
    case Value::Kind::kNamespace: {
      out += "<Namespace {";
      bool first = true;
      for (const auto& [k, val] : v.as_namespace().attrs) {
        if (!first) out += ", ";
        first = false;
        append_string_repr(out, k);
        out += ": ";
        append_repr(out, val, depth + 1);
      }
      out += "}>";
      return;
    }
    case Value::Kind::kCallable:
      out += fmt::format("<{}>", v.as_callable().name);
      return;
    case Value::Kind::kLoop:
      out += "<LoopContext>";
      return;
  }
}

void append_repr(std::string& out, const Value& v, int depth) {
  if (v.is_string()) {
    append_string_repr(out, v.str());
  } else if (v.is_undefined()) {
    out += "Undefined";
  } else {
    append_str_depth(out, v, depth);
  }
}

bool equals_depth(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.generator || y.generator) return &x == &y;
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals_depth(x.items[i], y.items[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (other == nullptr || !equals_depth(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    case Value::Kind::kLoop:
      return a.as_loop() == b.as_loop();
    default:
      return false;
  }
}

bool less_depth(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple && !a.is_generator() && !b.is_generator()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals_depth(x[i], y[i], depth + 1)) return less_depth(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  fail(0, "'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

void append_json_string(std::string& out, const std::string& s) {
  if (out.size() + s.size() > t_max_bytes) bound_exceeded();
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<uint8_t>(c)));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return format_float(d);
}

void append_json(std::string& out, const Value& v, const JsonOptions& o, int level);

void append_newline_indent(std::string& out, const JsonOptions& o, int level) {
  out.push_back('\n');
  for (int i = 0; i < level; ++i) {
    if (o.indent_is_str) {
      out += o.indent_str;
    } else {
      out.append(static_cast<size_t>(o.indent), ' ');
    }
  }
}

bool has_indent(const JsonOptions& o) { return o.indent_is_str || o.indent >= 0; }

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.str();
    case Value::Kind::kInt: return fmt::format("{}", k.as_int());
    case Value::Kind::kFloat: return json_float(k.as_double());
    case Value::Kind::kBool: return k.as_bool() ? "true" : "false";
    case Value::Kind::kNone: return "null";
    default: fail(0, "keys must be str, int, float, bool or None, not {}", k.type_name());
  }
}

void append_json(std::string& out, const Value& v, const JsonOptions& o, int level) {
  check_depth(level);
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += fmt::format("{}", v.as_int()); return;
    case Value::Kind::kFloat: out += json_float(v.as_double()); return;
    case Value::Kind::kString: append_json_string(out, v.str()); return;
    case Value::Kind::kList: {
      if (v.is_generator()) fail(0, "Object of type generator is not JSON serializable");
      const auto& items = v.as_list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += o.item_sep;
        if (has_indent(o)) append_newline_indent(out, o, level + 1);
        append_json(out, items[i], o, level + 1);
        check_bound(out);
      }
      if (has_indent(o)) append_newline_indent(out, o, level);
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& e : v.as_dict().entries) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return less_than(a->first, b->first); });
      }
      out.push_back('{');
      bool first = true;
      for (const auto* e : entries) {
        if (!first) out += o.item_sep;
        first = false;
        if (has_indent(o)) append_newline_indent(out, o, level + 1);
        append_json_string(out, json_key(e->first));
        out += o.key_sep;
        append_json(out, e->second, o, level + 1);
        check_bound(out);
      }
      if (has_indent(o)) append_newline_indent(out, o, level);
      out.push_back('}');
      return;
    }
    default:
      fail(0, "Object of type {} is not JSON serializable", v.type_name());
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_depth(j, 0); }

double Value::as_double() const {
  switch (kind_) {
    case Kind::kFloat: return d_;
    case Kind::kInt: return static_cast<double>(i_);
    case Kind::kBool: return b_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

int Value::depth() const {
  if (kind_ == Kind::kList) return list_->depth;
  if (kind_ == Kind::kDict) return dict_->depth;
  return 0;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return d_ != 0.0;
    case Kind::kString: return !str_->empty();
    case Kind::kList: return list_->generator || !list_->items.empty();
    case Kind::kDict: return !dict_->entries.empty();
    default: return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return list_->generator ? "generator" : (list_->tuple ? "tuple" : "list");
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
    case Kind::kLoop: return "LoopContext";
  }
  return "object";
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str_depth(out, v, 0);
  return out;
}

void append_str(std::string& out, const Value& v) { append_str_depth(out, v, 0); }

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

bool equals(const Value& a, const Value& b) { return equals_depth(a, b, 0); }
bool less_than(const Value& a, const Value& b) { return less_depth(a, b, 0); }

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  // sci = [-]D[.DDD]e(+|-)XX
  const size_t e_pos = sci.find('e');
  std::string mant = sci.substr(0, e_pos);
  const int exp10 = std::stoi(sci.substr(e_pos + 1));
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = sign;
  if (exp10 < -4 || exp10 >= 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  } else if (exp10 >= 0) {
    const size_t int_digits = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= int_digits) {
      out += digits;
      out.append(int_digits - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, int_digits);
      out.push_back('.');
      out.append(digits, int_digits);
    }
  } else {
    out += "0.";
    out.append(static_cast<size_t>(-exp10 - 1), '0');
    out += digits;
  }
  return out;
}

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  append_json(out, v, options, 0);
  return out;
}

}  // namespace minfer::chat::jinja
