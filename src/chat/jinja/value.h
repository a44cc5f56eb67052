// Value: the dynamic type templates compute with, with Python semantics (truthiness, int vs float,
// str()/repr() formatting, insertion-ordered dicts, character-based strings) and jinja2's Undefined.
// Containers are immutable once built (the sandbox forbids mutation); only Namespace is mutable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace minfer::chat::jinja {

class Value;
class Evaluator;
struct LoopState;
struct TemplateError;

struct List {
  std::vector<Value> items;
  bool tuple = false;      // prints as (a, b) instead of [a, b]
  bool generator = false;  // what jinja2's lazy filters return: always truthy, no len(), no indexing
  int depth = 1;           // nesting depth, bounded so printing and destruction cannot overflow the stack
  // A generator whose computation failed: jinja2 would only raise when it is consumed
  // (Evaluator::iterate rethrows), so `{% if x | map(...) %}` on a non-iterable stays true.
  std::shared_ptr<const TemplateError> deferred_error;
};

struct Dict {
  std::vector<std::pair<Value, Value>> entries;  // insertion order, like Python dicts
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
};

// namespace(): the one mutable object, so templates can carry state out of loops.
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(std::string_view name);
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  int line = 0;
};

// Builtin functions, bound methods, macros and `caller`.
struct Callable {
  std::string name;  // printed as <name>, e.g. "Macro 'f'" or "built-in method split"
  std::function<Value(Evaluator&, CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable, kLoop };

  Value() = default;  // Undefined
  static Value undefined(std::string hint);
  static Value none();
  Value(bool b);                 // NOLINT(google-explicit-constructor)
  Value(int64_t i);              // NOLINT(google-explicit-constructor)
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT(google-explicit-constructor)
  Value(double d);               // NOLINT(google-explicit-constructor)
  Value(std::string s);          // NOLINT(google-explicit-constructor)
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  // Containers deeper than kMaxDepth throw TemplateError (error.h).
  static Value list(std::vector<Value> items, bool tuple = false);
  // The result of map/select/reject/unique/batch/items/reverse (a Python generator in jinja2).
  static Value generator(std::vector<Value> items);
  static Value failed_generator(TemplateError error);
  static Value dict(std::vector<std::pair<Value, Value>> entries);
  static Value make_namespace(std::shared_ptr<Namespace> ns);
  static Value callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn);
  static Value loop(std::shared_ptr<LoopState> state);
  // JSON → Value: objects keep key order; integers stay int, fractions become float.
  static Value from_json(const nlohmann::ordered_json& j);

  static constexpr int kMaxDepth = 256;

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }    // excludes bool (jinja's `integer` test)
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }  // lists, tuples and generators
  bool is_generator() const { return kind_ == Kind::kList && list_->generator; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_loop() const { return kind_ == Kind::kLoop; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }  // int or bool
  double as_double() const;                                                   // any number
  const std::string& str() const { return *str_; }                           // string or undefined hint
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Namespace& as_namespace() const { return *ns_; }
  const Callable& as_callable() const { return *fn_; }
  const std::shared_ptr<LoopState>& as_loop() const { return loop_; }
  const std::string& undefined_hint() const {
    static const std::string kNoHint;
    return str_ ? *str_ : kNoHint;
  }
  int depth() const;

  bool truthy() const;
  std::string type_name() const;  // Python's type name, for error messages

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Namespace> ns_;
  std::shared_ptr<const Callable> fn_;
  std::shared_ptr<LoopState> loop_;
};

// Bounds every str()/repr()/json.dumps() built on this thread while alive: producing more than
// `max_bytes` throws TemplateError(kOutOfRange) instead of exhausting memory (a list of 100k
// references to one 16 MiB string prints to terabytes). The evaluator holds one per render.
class ScopedOutputBound {
 public:
  explicit ScopedOutputBound(size_t max_bytes);
  ~ScopedOutputBound();
  ScopedOutputBound(const ScopedOutputBound&) = delete;
  ScopedOutputBound& operator=(const ScopedOutputBound&) = delete;

 private:
  size_t saved_;
};

// Python str(v) (Undefined → ""), repr(v), ==, and ordering (< only between comparable types,
// otherwise TemplateError like Python's TypeError).
std::string to_str(const Value& v);
std::string repr(const Value& v);
void append_str(std::string& out, const Value& v);
bool equals(const Value& a, const Value& b);
bool less_than(const Value& a, const Value& b);
// Python repr(float): shortest round-trip digits, exponent form below 1e-4 and from 1e16.
std::string format_float(double d);

// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys) as transformers' tojson calls it.
// indent < 0 means None; the separators default to (", ", ": ") without indent and (",", ": ") with it.
struct JsonOptions {
  int indent = -1;
  std::string indent_str;  // used when indent was given as a string
  bool indent_is_str = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);

}  // namespace minfer::chat::jinja
