// JSON Schema -> GBNF. Mirrors llama.cpp's converter (primitive rules, object layout: required properties
// in declaration order, then optional ones), adds real-number bounds and string-safe regex patterns, and
// refuses every keyword it does not implement instead of ignoring it.
#include "sampling/json_schema/to_grammar.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "sampling/grammar/grammar.h"

namespace minfer::sampling::json_schema {
namespace {

using json = nlohmann::ordered_json;

// Schemas nested in schemas, and groups in a pattern, deeper than this are refused: the converter recurses.
constexpr int kMaxNesting = 64;
constexpr int kMaxLength = 10000;  // minLength / maxLength / minItems / maxItems above this are refused

const char* const kSpaceRule = R"(| " " | "\n"{1,2} [ \t]{0,20})";

struct Builtin {
  const char* body;
  std::vector<const char*> deps;
};

const std::map<std::string, Builtin>& primitives() {
  static const std::map<std::string, Builtin> kRules = {
      {"boolean", {R"(("true" | "false") space)", {}}},
      {"decimal-part", {"[0-9]{1,16}", {}}},
      {"integral-part", {"[0] | [1-9] [0-9]{0,15}", {}}},
      {"number",
       {R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space)",
        {"integral-part", "decimal-part"}}},
      {"integer", {R"(("-"? integral-part) space)", {"integral-part"}}},
      {"value",
       {"object | array | string | number | boolean | null",
        {"object", "array", "string", "number", "boolean", "null"}}},
      {"object",
       {R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)",
        {"string", "value"}}},
      {"array", {R"("[" space ( value ("," space value)* )? "]" space)", {"value"}}},
      {"uuid",
       {R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space)",
        {}}},
      {"char", {R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))", {}}},
      {"string", {R"("\"" char* "\"" space)", {"char"}}},
      {"null", {R"("null" space)", {}}},
      {"date", {R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))", {}}},
      {"time",
       {R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
        {}}},
      {"date-time", {R"(date "T" time)", {"date", "time"}}},
      {"date-string", {R"("\"" date "\"" space)", {"date"}}},
      {"time-string", {R"("\"" time "\"" space)", {"time"}}},
      {"date-time-string", {R"("\"" date-time "\"" space)", {"date-time"}}},
  };
  return kRules;
}

bool is_reserved(const std::string& name) {
  return name == "root" || primitives().count(name) != 0;
}

std::string sanitize(const std::string& name) {
  std::string out;
  bool in_bad = false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (ok) {
      out += c;
      in_bad = false;
    } else if (!in_bad) {
      out += '-';
      in_bad = true;
    }
  }
  return out;
}

std::string format_literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\r':
        out += "\\r";
        break;
      case '\n':
        out += "\\n";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// item repeated min..max times (max < 0: unbounded), with an optional separator between items.
std::string build_repetition(const std::string& item, int min_items, int max_items,
                             const std::string& sep = "") {
  if (max_items == 0) return "";
  if (min_items == 0 && max_items == 1) return item + "?";
  if (sep.empty()) {
    if (min_items == 1 && max_items < 0) return item + "+";
    if (min_items == 0 && max_items < 0) return item + "*";
    return fmt::format("{}{{{},{}}}", item, min_items,
                       max_items < 0 ? std::string() : std::to_string(max_items));
  }
  std::string result = item + " " +
                       build_repetition("(" + sep + " " + item + ")", min_items == 0 ? 0 : min_items - 1,
                                        max_items < 0 ? -1 : max_items - 1);
  if (min_items == 0) result = "(" + result + ")?";
  return result;
}

// ---- integer ranges as digit patterns ----

// All numbers of the same digit count in [lo, hi] (decimal strings, lo <= hi), no leading-zero issues
// because lo has none (or is "0").
std::string same_length_range(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "";
  auto digits = [](size_t k) {
    return k == 0 ? std::string() : k == 1 ? std::string(" [0-9]") : fmt::format(" [0-9]{{{}}}", k);
  };
  auto cls = [](char a, char b) { return a == b ? fmt::format("[{}]", a) : fmt::format("[{}-{}]", a, b); };
  if (lo == hi) return format_literal(lo);
  if (lo[0] == hi[0])
    return fmt::format("{} ({})", format_literal(lo.substr(0, 1)),
                       same_length_range(lo.substr(1), hi.substr(1)));
  const std::string lo_rest = lo.substr(1);
  const std::string hi_rest = hi.substr(1);
  if (lo_rest == std::string(n - 1, '0') && hi_rest == std::string(n - 1, '9'))
    return cls(lo[0], hi[0]) + digits(n - 1);
  std::vector<std::string> alts;
  char first_full = lo[0];
  if (lo_rest != std::string(n - 1, '0')) {
    alts.push_back(
        fmt::format("{} ({})", cls(lo[0], lo[0]), same_length_range(lo_rest, std::string(n - 1, '9'))));
    ++first_full;
  }
  char last_full = hi[0];
  const bool hi_partial = hi_rest != std::string(n - 1, '9');
  if (hi_partial) --last_full;
  if (first_full <= last_full) alts.push_back(cls(first_full, last_full) + digits(n - 1));
  if (hi_partial)
    alts.push_back(
        fmt::format("{} ({})", cls(hi[0], hi[0]), same_length_range(std::string(n - 1, '0'), hi_rest)));
  return join(alts, " | ");
}

// Non-negative integers in [lo, hi]; hi < 0 means unbounded (then at most 18 digits, within int64).
std::string nonneg_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  std::string lo_s = std::to_string(lo);
  if (hi < 0) {
    const size_t n = lo_s.size();
    alts.push_back("(" + same_length_range(lo_s, std::string(n, '9')) + ")");
    if (n < 18) alts.push_back(fmt::format("[1-9] [0-9]{{{},17}}", n));
    return join(alts, " | ");
  }
  const std::string hi_s = std::to_string(hi);
  for (size_t len = lo_s.size(); len <= hi_s.size(); ++len) {
    const std::string top = len == hi_s.size() ? hi_s : std::string(len, '9');
    alts.push_back(fmt::format("({})", same_length_range(lo_s, top)));
    lo_s = fmt::format("1{}", std::string(len, '0'));
  }
  return join(alts, " | ");
}

// Integers in [lo, hi] (INT64_MIN / INT64_MAX = unbounded), as a GBNF expression. No "-0".
std::string int_range(int64_t lo, int64_t hi) {
  const bool has_lo = lo != std::numeric_limits<int64_t>::min();
  const bool has_hi = hi != std::numeric_limits<int64_t>::max();
  std::vector<std::string> alts;
  if (!has_lo || lo < 0) {
    const int64_t top_negative = has_hi ? std::min<int64_t>(hi, -1) : -1;
    if (!has_lo || lo <= top_negative)
      alts.push_back("\"-\" (" + nonneg_range(-top_negative, has_lo ? -lo : -1) + ")");
  }
  if (!has_hi || hi >= 0)
    alts.push_back(nonneg_range(has_lo ? std::max<int64_t>(0, lo) : 0, has_hi ? hi : -1));
  return join(alts, " | ");
}

class Converter {
 public:
  Result<std::string> run(const json& schema) {
    root_ = schema;
    rules_["space"] = kSpaceRule;
    MINFER_RETURN_IF_ERROR(visit(schema, "", "#").status());
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  std::string add_rule(const std::string& name, const std::string& body) {
    const std::string esc = sanitize(name);
    auto it = rules_.find(esc);
    if (it == rules_.end() || it->second == body) {
      rules_[esc] = body;
      return esc;
    }
    for (int i = 0;; ++i) {
      const std::string key = esc + std::to_string(i);
      auto jt = rules_.find(key);
      if (jt == rules_.end() || jt->second == body) {
        rules_[key] = body;
        return key;
      }
    }
  }

  std::string add_primitive(const std::string& name, const std::string& prim) {
    const Builtin& b = primitives().at(prim);
    const std::string n = add_rule(name, b.body);
    for (const char* dep : b.deps) {
      if (rules_.count(dep) == 0) add_primitive(dep, dep);
    }
    return n;
  }

  static Status refuse(const std::string& path, const std::string& what) {
    return unsupported("json-schema: {} at {}", what, path);
  }

  static std::string child(const std::string& path, const std::string& key) {
    std::string k;
    for (char c : key) {
      if (c == '~') {
        k += "~0";
      } else if (c == '/') {
        k += "~1";
      } else {
        k += c;
      }
    }
    return path + "/" + k;
  }

  Status check_keywords(const json& schema, const std::string& path) {
    static const std::unordered_set<std::string> kAllowed = {
        "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
        "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$defs", "definitions", "$ref", "format", "pattern",
        // annotations: no effect on validity
        "title", "description", "$schema", "$id", "$comment", "default", "examples", "deprecated", "readOnly",
        "writeOnly"};
    for (const auto& [key, value] : schema.items()) {
      if (kAllowed.count(key) == 0)
        return refuse(child(path, key), fmt::format("keyword '{}' is not supported", key));
    }
    return Status();
  }

  Result<int> get_count(const json& schema, const char* key, const std::string& path) {
    const json& v = schema.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxLength) {
      return refuse(child(path, key),
                    fmt::format("'{}' must be an integer in [0, {}], got {}", key, kMaxLength, v.dump()));
    }
    return static_cast<int>(v.get<int64_t>());
  }

  Result<std::string> resolve_ref(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#')
      return refuse(path, fmt::format("$ref '{}' is not local (only '#...' refs)", ref));
    std::string name = "ref" + sanitize(ref.substr(1));
    if (rules_.count(name) != 0 || resolving_.count(ref) != 0) return name;
    // JSON pointer from the document root.
    const json* target = &root_;
    std::string pointer = ref.substr(1);
    size_t pos = 0;
    while (pos < pointer.size()) {
      if (pointer[pos] != '/') return refuse(path, fmt::format("$ref '{}' is not a JSON pointer", ref));
      size_t end = pointer.find('/', pos + 1);
      if (end == std::string::npos) end = pointer.size();
      std::string tok = pointer.substr(pos + 1, end - pos - 1);
      std::string unesc;
      for (size_t i = 0; i < tok.size(); ++i) {
        if (tok[i] == '~' && i + 1 < tok.size()) {
          unesc += tok[i + 1] == '1' ? '/' : '~';
          ++i;
        } else {
          unesc += tok[i];
        }
      }
      if (target->is_object() && target->contains(unesc)) {
        target = &(*target)[unesc];
      } else if (target->is_array() && !unesc.empty() &&
                 unesc.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(unesc) < target->size()) {
        target = &(*target)[std::stoul(unesc)];
      } else {
        return invalid_argument("json-schema: $ref '{}' at {} does not resolve ('{}' not found)", ref, path,
                                unesc);
      }
      pos = end;
    }
    resolving_.insert(ref);
    auto r = visit(*target, name, "#" + pointer);
    resolving_.erase(ref);
    return r;
  }

  Result<std::string> union_rule(const std::string& name, const json& alts, const std::string& path) {
    if (!alts.is_array() || alts.empty()) return refuse(path, "anyOf / oneOf must be a non-empty array");
    std::vector<std::string> rules;
    for (size_t i = 0; i < alts.size(); ++i) {
      MINFER_ASSIGN_OR_RETURN(std::string r,
                              visit(alts[i], name + (name.empty() ? "alternative-" : "-") + std::to_string(i),
                                    child(path, std::to_string(i))));
      rules.push_back(r);
    }
    return join(rules, " | ");
  }

  Result<std::string> visit(const json& schema, const std::string& name, const std::string& path) {
    // Nesting is bounded so a hostile schema cannot overflow the stack (found by fuzz/json_schema_fuzz.cpp).
    if (visit_depth_ >= kMaxNesting) {
      return refuse(path, fmt::format("schemas nested deeper than {} levels are not supported", kMaxNesting));
    }
    ++visit_depth_;
    auto result = visit_schema(schema, name, path);
    --visit_depth_;
    return result;
  }

  Result<std::string> visit_schema(const json& schema, const std::string& name, const std::string& path) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return add_rule(name.empty() ? "root" : name, add_primitive("value", "value"));
      return refuse(path, "schema 'false' matches nothing");
    }
    if (!schema.is_object())
      return invalid_argument("json-schema: schema at {} must be an object, got {}", path, schema.dump());
    MINFER_RETURN_IF_ERROR(check_keywords(schema, path));
    const std::string rule_name = is_reserved(name) ? name + "-" : name.empty() ? "root" : name;
    const json type = schema.contains("type") ? schema["type"] : json();
    if (!type.is_null() && !type.is_string() && !type.is_array()) {
      return refuse(child(path, "type"), "'type' must be a string or an array of strings");
    }
    const std::string type_s = type.is_string() ? type.get<std::string>() : "";

    if (schema.contains("$ref")) {
      if (!schema["$ref"].is_string()) return refuse(child(path, "$ref"), "$ref must be a string");
      for (const auto& [key, value] : schema.items()) {
        static const std::unordered_set<std::string> kWithRef = {
            "$ref",     "title", "description", "$comment", "default",
            "examples", "$defs", "definitions", "$schema",  "$id"};
        if (kWithRef.count(key) == 0)
          return refuse(child(path, key), fmt::format("'{}' next to $ref is not supported", key));
      }
      MINFER_ASSIGN_OR_RETURN(std::string target,
                              resolve_ref(schema["$ref"].get<std::string>(), child(path, "$ref")));
      return add_rule(rule_name, target);
    }
    if (schema.contains("oneOf") || schema.contains("anyOf")) {
      // oneOf is generated as anyOf: exclusivity is not enforced (documented narrowing).
      const char* key = schema.contains("oneOf") ? "oneOf" : "anyOf";
      if (schema.contains("oneOf") && schema.contains("anyOf")) return refuse(path, "both anyOf and oneOf");
      MINFER_ASSIGN_OR_RETURN(std::string u, union_rule(name, schema[key], child(path, key)));
      return add_rule(rule_name, u);
    }
    if (type.is_array()) {
      if (type.empty()) return refuse(child(path, "type"), "empty type array");
      json alts = json::array();
      for (const auto& t : type) {
        json copy = schema;
        copy["type"] = t;
        alts.push_back(copy);
      }
      std::vector<std::string> rules;
      for (size_t i = 0; i < alts.size(); ++i) {
        MINFER_ASSIGN_OR_RETURN(
            std::string r,
            visit(alts[i], name + (name.empty() ? "alternative-" : "-") + std::to_string(i), path));
        rules.push_back(r);
      }
      return add_rule(rule_name, join(rules, " | "));
    }
    static const std::unordered_set<std::string> kTypes = {"object",  "array",   "string", "number",
                                                           "integer", "boolean", "null"};
    if (!type_s.empty() && kTypes.count(type_s) == 0)
      return refuse(child(path, "type"), fmt::format("unknown type '{}'", type_s));
    if (schema.contains("const"))
      return add_rule(rule_name, format_literal(schema["const"].dump()) + " space");
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array() || schema["enum"].empty())
        return refuse(child(path, "enum"), "enum must be a non-empty array");
      std::vector<std::string> values;
      for (const auto& v : schema["enum"]) values.push_back(format_literal(v.dump()));
      return add_rule(rule_name, "(" + join(values, " | ") + ") space");
    }
    if (schema.contains("allOf")) {
      if (!type_s.empty() && type_s != "object")
        return refuse(child(path, "allOf"), "allOf is supported for objects only");
      return visit_all_of(schema, name, rule_name, path);
    }

    // Infer the type from type-specific keywords when 'type' is absent.
    std::string t = type_s;
    if (t.empty()) {
      if (schema.contains("properties") || schema.contains("additionalProperties") ||
          schema.contains("required")) {
        t = "object";
      } else if (schema.contains("items") || schema.contains("prefixItems") || schema.contains("minItems") ||
                 schema.contains("maxItems")) {
        t = "array";
      } else if (schema.contains("pattern") || schema.contains("format") || schema.contains("minLength") ||
                 schema.contains("maxLength")) {
        t = "string";
      } else if (schema.contains("minimum") || schema.contains("maximum") ||
                 schema.contains("exclusiveMinimum") || schema.contains("exclusiveMaximum")) {
        t = "number";
      }
    }
    if (t.empty()) return add_rule(rule_name, add_primitive("value", "value"));
    if (t == "object") return visit_object(schema, name, rule_name, path);
    if (t == "array") return visit_array(schema, name, rule_name, path);
    if (t == "string") return visit_string(schema, rule_name, path);
    if (t == "integer" || t == "number") return visit_number(schema, t, rule_name, path);
    return add_primitive(rule_name == "root" ? "root" : t, t);  // boolean, null
  }

  Result<std::string> visit_object(const json& schema, const std::string& name, const std::string& rule_name,
                                   const std::string& path) {
    std::vector<std::pair<std::string, json>> props;
    if (schema.contains("properties")) {
      if (!schema["properties"].is_object())
        return refuse(child(path, "properties"), "properties must be an object");
      for (const auto& [k, v] : schema["properties"].items()) props.emplace_back(k, v);
    }
    std::vector<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) return refuse(child(path, "required"), "required must be an array");
      for (const auto& r : schema["required"]) {
        if (!r.is_string()) return refuse(child(path, "required"), "required must list strings");
        required.push_back(r.get<std::string>());
      }
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const auto& p : props) found = found || p.first == r;
      if (!found)
        return refuse(child(path, "required"),
                      fmt::format("required property '{}' has no schema in properties", r));
    }
    const json additional = schema.contains("additionalProperties") ? schema["additionalProperties"] : json();
    if (!additional.is_null() && !additional.is_boolean() && !additional.is_object()) {
      return refuse(child(path, "additionalProperties"),
                    "additionalProperties must be a boolean or a schema");
    }
    if (props.empty() && (additional.is_null() || (additional.is_boolean() && additional.get<bool>()))) {
      return add_rule(rule_name, add_primitive("object", "object"));
    }
    MINFER_ASSIGN_OR_RETURN(std::string body, build_object(props, required, name, additional, path));
    return add_rule(rule_name, body);
  }

  Result<std::string> visit_all_of(const json& schema, const std::string& name, const std::string& rule_name,
                                   const std::string& path) {
    if (!schema["allOf"].is_array() || schema["allOf"].empty())
      return refuse(child(path, "allOf"), "allOf must be a non-empty array");
    std::vector<std::pair<std::string, json>> props;
    std::vector<std::string> required;
    std::function<Status(const json&, const std::string&)> add = [&](const json& comp,
                                                                     const std::string& cpath) -> Status {
      if (!comp.is_object()) return refuse(cpath, "allOf component must be an object schema");
      if (comp.contains("$ref")) {
        if (!comp["$ref"].is_string()) return refuse(cpath, "$ref must be a string");
        const std::string ref = comp["$ref"].get<std::string>();
        if (ref.rfind("#/", 0) != 0) return refuse(cpath, fmt::format("$ref '{}' is not local", ref));
        const json* target = &root_;
        size_t pos = 1;
        while (pos < ref.size()) {
          size_t end = ref.find('/', pos + 1);
          if (end == std::string::npos) end = ref.size();
          const std::string tok = ref.substr(pos + 1, end - pos - 1);
          if (!target->is_object() || !target->contains(tok)) {
            return invalid_argument("json-schema: $ref '{}' at {} does not resolve", ref, cpath);
          }
          target = &(*target)[tok];
          pos = end;
        }
        return add(*target, "#" + ref.substr(1));
      }
      for (const auto& [key, value] : comp.items()) {
        static const std::unordered_set<std::string> kOk = {"type",  "properties",  "required",
                                                            "title", "description", "$comment"};
        if (kOk.count(key) == 0)
          return refuse(child(cpath, key),
                        fmt::format("'{}' inside an allOf component is not supported", key));
      }
      if (comp.contains("type") && comp["type"] != "object")
        return refuse(child(cpath, "type"), "allOf components must be objects");
      if (comp.contains("properties")) {
        for (const auto& [k, v] : comp["properties"].items()) {
          bool dup = false;
          for (const auto& p : props) dup = dup || p.first == k;
          if (dup)
            return refuse(child(child(cpath, "properties"), k), "property defined by two allOf components");
          props.emplace_back(k, v);
        }
      }
      if (comp.contains("required")) {
        for (const auto& r : comp["required"]) {
          if (r.is_string()) required.push_back(r.get<std::string>());
        }
      }
      return Status();
    };
    for (size_t i = 0; i < schema["allOf"].size(); ++i) {
      MINFER_RETURN_IF_ERROR(add(schema["allOf"][i], child(child(path, "allOf"), std::to_string(i))));
    }
    if (schema.contains("properties")) {
      for (const auto& [k, v] : schema["properties"].items()) props.emplace_back(k, v);
    }
    if (schema.contains("required")) {
      for (const auto& r : schema["required"]) {
        if (r.is_string()) required.push_back(r.get<std::string>());
      }
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const auto& p : props) found = found || p.first == r;
      if (!found)
        return refuse(path, fmt::format("required property '{}' has no schema in any allOf component", r));
    }
    MINFER_ASSIGN_OR_RETURN(std::string body, build_object(props, required, name, json(), path));
    return add_rule(rule_name, body);
  }

  // Properties in declaration order: required ones first (all present), then optional ones, each at most
  // once and in order; `additionalProperties` adds a trailing repeated key/value for other keys.
  Result<std::string> build_object(const std::vector<std::pair<std::string, json>>& props,
                                   const std::vector<std::string>& required, const std::string& name,
                                   const json& additional, const std::string& path) {
    std::vector<std::string> req, opt, names;
    std::unordered_map<std::string, std::string> kv;
    const std::string prefix = name + (name.empty() ? "" : "-");
    for (const auto& [pname, pschema] : props) {
      MINFER_ASSIGN_OR_RETURN(std::string prule,
                              visit(pschema, prefix + pname, child(child(path, "properties"), pname)));
      kv[pname] = add_rule(prefix + pname + "-kv",
                           format_literal(json(pname).dump()) + " space \":\" space " + prule);
      bool is_req = false;
      for (const std::string& r : required) is_req = is_req || r == pname;
      (is_req ? req : opt).push_back(pname);
      names.push_back(pname);
    }
    if ((additional.is_boolean() && additional.get<bool>()) || additional.is_object()) {
      const std::string sub = prefix + "additional";
      std::string value_rule;
      if (additional.is_object()) {
        MINFER_ASSIGN_OR_RETURN(value_rule,
                                visit(additional, sub + "-value", child(path, "additionalProperties")));
      } else {
        value_rule = add_primitive("value", "value");
      }
      const std::string key_rule =
          names.empty() ? add_primitive("string", "string") : add_rule(sub + "-k", not_strings(names));
      kv["*"] = add_rule(sub + "-kv", key_rule + " \":\" space " + value_rule);
      opt.push_back("*");
    }
    std::string rule = "\"{\" space ";
    for (size_t i = 0; i < req.size(); ++i) rule += (i ? " \",\" space " : "") + kv[req[i]];
    if (!opt.empty()) {
      rule += " (";
      if (!req.empty()) rule += " \",\" space ( ";
      std::function<std::string(size_t, bool)> rest = [&](size_t from, bool first_optional) {
        const std::string& k = opt[from];
        const std::string comma = "( \",\" space " + kv[k] + " )";
        std::string res =
            first_optional ? comma + (k == "*" ? "*" : "?") : kv[k] + (k == "*" ? " " + comma + "*" : "");
        if (from + 1 < opt.size()) res += " " + add_rule(prefix + k + "-rest", rest(from + 1, true));
        return res;
      };
      for (size_t i = 0; i < opt.size(); ++i) rule += (i ? " | " : "") + rest(i, false);
      if (!req.empty()) rule += " )";
      rule += " )?";
    }
    return rule + " \"}\" space";
  }

  // A JSON string that is none of `strings` (keys not declared in properties).
  std::string not_strings(const std::vector<std::string>& strings) {
    struct Node {
      std::map<char, Node> children;
      bool end = false;
    };
    Node trie;
    for (const std::string& s : strings) {
      Node* n = &trie;
      for (char c : s) n = &n->children[c];
      n->end = true;
    }
    const std::string ch = add_primitive("char", "char");
    auto esc = [](char c) {
      if (c == '"' || c == '\\' || c == ']' || c == '-' || c == '^' || c == '[') return std::string("\\") + c;
      if (static_cast<unsigned char>(c) < 0x20)
        return fmt::format("\\x{:02X}", static_cast<unsigned char>(c));
      return std::string(1, c);
    };
    std::string out = "[\"] ( ";
    std::function<void(const Node&)> visit_node = [&](const Node& node) {
      std::string rejects;
      bool first = true;
      for (const auto& [c, sub] : node.children) {
        rejects += esc(c);
        if (!first) out += " | ";
        first = false;
        out += fmt::format("[{}]", esc(c));
        if (!sub.children.empty()) {
          out += " (";
          visit_node(sub);
          out += ")";
        } else if (sub.end) {
          out += " " + ch + "+";
        }
      }
      if (!node.children.empty()) {
        if (!first) out += " | ";
        out += "[^\"" + rejects + "] " + ch + "*";
      }
    };
    visit_node(trie);
    out += " )";
    if (!trie.end) out += "?";
    return out + " [\"] space";
  }

  Result<std::string> visit_array(const json& schema, const std::string& name, const std::string& rule_name,
                                  const std::string& path) {
    int min_items = 0;
    int max_items = -1;
    if (schema.contains("minItems")) {
      MINFER_ASSIGN_OR_RETURN(min_items, get_count(schema, "minItems", path));
    }
    if (schema.contains("maxItems")) {
      MINFER_ASSIGN_OR_RETURN(max_items, get_count(schema, "maxItems", path));
    }
    if (max_items >= 0 && max_items < min_items)
      return refuse(child(path, "maxItems"), "maxItems < minItems");
    const std::string prefix = name + (name.empty() ? "" : "-");
    const json* tuple = nullptr;
    if (schema.contains("prefixItems")) {
      tuple = &schema["prefixItems"];
      if (schema.contains("items") && !(schema["items"].is_boolean() && !schema["items"].get<bool>())) {
        return refuse(child(path, "items"), "items next to prefixItems (other than false) is not supported");
      }
    } else if (schema.contains("items") && schema["items"].is_array()) {
      tuple = &schema["items"];
    }
    if (tuple != nullptr) {
      if (!tuple->is_array()) return refuse(path, "prefixItems must be an array");
      const int n = static_cast<int>(tuple->size());
      if (n < min_items || (max_items >= 0 && n > max_items)) {
        return refuse(path, fmt::format("a {}-item tuple outside minItems/maxItems", n));
      }
      std::string rule = "\"[\" space ";
      for (int i = 0; i < n; ++i) {
        MINFER_ASSIGN_OR_RETURN(
            std::string r, visit((*tuple)[static_cast<size_t>(i)], prefix + "tuple-" + std::to_string(i),
                                 child(child(path, schema.contains("prefixItems") ? "prefixItems" : "items"),
                                       std::to_string(i))));
        rule += (i ? " \",\" space " : "") + r;
      }
      return add_rule(rule_name, rule + " \"]\" space");
    }
    std::string item_rule;
    if (schema.contains("items")) {
      if (schema["items"].is_boolean() && !schema["items"].get<bool>()) {
        if (min_items > 0) return refuse(child(path, "items"), "items:false with minItems > 0");
        return add_rule(rule_name, "\"[\" space \"]\" space");
      }
      MINFER_ASSIGN_OR_RETURN(item_rule, visit(schema["items"], prefix + "item", child(path, "items")));
    } else {
      if (min_items == 0 && max_items < 0) return add_rule(rule_name, add_primitive("array", "array"));
      item_rule = add_primitive("value", "value");
    }
    return add_rule(
        rule_name,
        "\"[\" space " + build_repetition(item_rule, min_items, max_items, "\",\" space") + " \"]\" space");
  }

  Result<std::string> visit_string(const json& schema, const std::string& rule_name,
                                   const std::string& path) {
    const bool has_len = schema.contains("minLength") || schema.contains("maxLength");
    int n_kinds =
        (schema.contains("pattern") ? 1 : 0) + (schema.contains("format") ? 1 : 0) + (has_len ? 1 : 0);
    if (n_kinds > 1)
      return refuse(path, "combining pattern, format and minLength/maxLength is not supported");
    if (schema.contains("pattern")) {
      if (!schema["pattern"].is_string()) return refuse(child(path, "pattern"), "pattern must be a string");
      MINFER_ASSIGN_OR_RETURN(std::string body, pattern_to_gbnf(schema["pattern"].get<std::string>(),
                                                                rule_name, child(path, "pattern")));
      return add_rule(rule_name, body);
    }
    if (schema.contains("format")) {
      const json& f = schema["format"];
      const std::string fs = f.is_string() ? f.get<std::string>() : "";
      if (fs == "uuid") return add_primitive(rule_name == "root" ? "root" : "uuid", "uuid");
      if (fs == "date" || fs == "time" || fs == "date-time") {
        return add_rule(rule_name, add_primitive(fs + "-string", fs + "-string"));
      }
      return refuse(child(path, "format"),
                    fmt::format("string format {} is not supported (date, time, date-time, uuid)", f.dump()));
    }
    if (has_len) {
      int min_len = 0;
      int max_len = -1;
      if (schema.contains("minLength")) {
        MINFER_ASSIGN_OR_RETURN(min_len, get_count(schema, "minLength", path));
      }
      if (schema.contains("maxLength")) {
        MINFER_ASSIGN_OR_RETURN(max_len, get_count(schema, "maxLength", path));
      }
      if (max_len >= 0 && max_len < min_len) return refuse(child(path, "maxLength"), "maxLength < minLength");
      const std::string ch = add_primitive("char", "char");
      return add_rule(rule_name, "\"\\\"\" " + build_repetition(ch, min_len, max_len) + " \"\\\"\" space");
    }
    return add_primitive(rule_name == "root" ? "root" : "string", "string");
  }

  struct Bound {
    bool present = false;
    double value = 0;
    bool exclusive = false;
  };

  Result<Bound> get_bound(const json& schema, const char* incl, const char* excl, bool lower,
                          const std::string& path) {
    Bound b;
    for (const char* key : {incl, excl}) {
      if (!schema.contains(key)) continue;
      const json& v = schema[key];
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        return refuse(child(path, key), fmt::format("'{}' must be a number", key));
      const double x = v.get<double>();
      const bool ex = key == excl;
      // Keep the tighter of minimum / exclusiveMinimum (resp. maximum) when both are given.
      const bool tighter = !b.present || (lower ? (x > b.value || (x == b.value && ex))
                                                : (x < b.value || (x == b.value && ex)));
      if (tighter) b = Bound{true, x, ex};
    }
    return b;
  }

  Result<std::string> visit_number(const json& schema, const std::string& t, const std::string& rule_name,
                                   const std::string& path) {
    MINFER_ASSIGN_OR_RETURN(Bound lo, get_bound(schema, "minimum", "exclusiveMinimum", true, path));
    MINFER_ASSIGN_OR_RETURN(Bound hi, get_bound(schema, "maximum", "exclusiveMaximum", false, path));
    if (!lo.present && !hi.present) return add_primitive(rule_name == "root" ? "root" : t, t);
    constexpr double kLimit = 9.0e15;  // bounds beyond this lose integer precision in a double
    for (const Bound* b : {&lo, &hi}) {
      if (b->present && std::fabs(b->value) > kLimit)
        return refuse(path, fmt::format("numeric bound {} is too large", b->value));
    }
    if (t == "integer") {
      int64_t min_v = std::numeric_limits<int64_t>::min();
      int64_t max_v = std::numeric_limits<int64_t>::max();
      if (lo.present)
        min_v = static_cast<int64_t>(lo.exclusive ? std::floor(lo.value) + 1 : std::ceil(lo.value));
      if (hi.present)
        max_v = static_cast<int64_t>(hi.exclusive ? std::ceil(hi.value) - 1 : std::floor(hi.value));
      if (min_v > max_v) return refuse(path, "the integer bounds leave no value");
      return add_rule(rule_name, "(" + int_range(min_v, max_v) + ") space");
    }
    MINFER_ASSIGN_OR_RETURN(std::string body, number_range(lo, hi, path));
    return add_rule(rule_name, body);
  }

  // ---- real-number ranges ----
  //
  // A generated number is "-"? n ("." D)? with no exponent. A bound is an exact decimal (the shortest
  // text of the double, as a JSON writer prints it); per sign the magnitude n.D must lie in an interval,
  // decided on n (integer ranges above) and on D compared digit by digit with the bound's fraction.
  static constexpr int kFracDigits = 15;  // fraction digits generated at most (and allowed in a bound)

  struct Dec {
    int64_t ip = 0;    // integer part
    std::string frac;  // fraction digits, no trailing zeros
  };

  static Result<Dec> to_dec(double x, const std::string& path) {
    const std::string s = fmt::format("{}", std::fabs(x));  // shortest round-trip form
    const size_t e = s.find_first_of("eE");
    std::string mant = s.substr(0, e);
    int exp = e == std::string::npos ? 0 : std::stoi(s.substr(e + 1));
    const size_t dot = mant.find('.');
    std::string digits = mant;
    int point = static_cast<int>(mant.size());
    if (dot != std::string::npos) {
      digits = mant.substr(0, dot) + mant.substr(dot + 1);
      point = static_cast<int>(dot);
    }
    point += exp;
    if (point < 0) {
      digits.insert(0, static_cast<size_t>(-point), '0');
      point = 0;
    }
    if (point > static_cast<int>(digits.size()))
      digits.append(static_cast<size_t>(point) - digits.size(), '0');
    Dec d;
    const std::string ip = digits.substr(0, static_cast<size_t>(point));
    d.ip = ip.empty() ? 0 : std::stoll(ip);
    d.frac = digits.substr(static_cast<size_t>(point));
    while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
    if (static_cast<int>(d.frac.size()) > kFracDigits) {
      return refuse(path, fmt::format("numeric bound {} has more than {} fraction digits", s, kFracDigits));
    }
    return d;
  }

  static int cmp_dec(const Dec& a, const Dec& b) {
    if (a.ip != b.ip) return a.ip < b.ip ? -1 : 1;
    const size_t n = std::max(a.frac.size(), b.frac.size());
    for (size_t i = 0; i < n; ++i) {
      const char x = i < a.frac.size() ? a.frac[i] : '0';
      const char y = i < b.frac.size() ? b.frac[i] : '0';
      if (x != y) return x < y ? -1 : 1;
    }
    return 0;
  }

  // Digit strings D (after the "."), 1..k digits unless stated; F is a bound's fraction (non-empty).
  static std::string digit_cls(char a, char b) {
    return a == b ? fmt::format("[{}]", a) : fmt::format("[{}-{}]", a, b);
  }
  static std::string any_digits(int k) { return k <= 0 ? std::string() : fmt::format("[0-9]{{0,{}}}", k); }
  static std::string seq(const std::string& a, const std::string& b) { return b.empty() ? a : a + " " + b; }
  // D > 0 (ends with a non-zero digit), at most k digits.
  static std::string frac_nonzero(int k) { return seq(any_digits(k - 1), "[1-9]"); }
  static std::string frac_ge(const std::string& f, int k) {
    std::vector<std::string> alts;
    if (f[0] < '9') alts.push_back(seq(digit_cls(static_cast<char>(f[0] + 1), '9'), any_digits(k - 1)));
    const std::string rest = f.substr(1);
    alts.push_back(seq(format_literal(f.substr(0, 1)),
                       rest.empty() ? any_digits(k - 1) : "(" + frac_ge(rest, k - 1) + ")"));
    return join(alts, " | ");
  }
  static std::string frac_gt(const std::string& f, int k) {
    std::vector<std::string> alts;
    if (f[0] < '9') alts.push_back(seq(digit_cls(static_cast<char>(f[0] + 1), '9'), any_digits(k - 1)));
    const std::string rest = f.substr(1);
    if (!rest.empty()) {
      alts.push_back(format_literal(f.substr(0, 1)) + " (" + frac_gt(rest, k - 1) + ")");
    } else if (k >= 2) {
      alts.push_back(format_literal(f.substr(0, 1)) + " " + frac_nonzero(k - 1));
    }
    return join(alts, " | ");
  }
  static std::string frac_le(const std::string& f, int k) {
    std::vector<std::string> alts;
    if (f[0] > '0') alts.push_back(seq(digit_cls('0', static_cast<char>(f[0] - 1)), any_digits(k - 1)));
    const std::string rest = f.substr(1);
    alts.push_back(seq(format_literal(f.substr(0, 1)), rest.empty()
                                                           ? (k > 1 ? fmt::format("[0]{{0,{}}}", k - 1) : "")
                                                           : "(" + frac_le(rest, k - 1) + ")?"));
    return join(alts, " | ");
  }
  static std::string frac_lt(const std::string& f, int k) {
    std::vector<std::string> alts;
    if (f[0] > '0') alts.push_back(seq(digit_cls('0', static_cast<char>(f[0] - 1)), any_digits(k - 1)));
    const std::string rest = f.substr(1);
    if (!rest.empty()) alts.push_back(format_literal(f.substr(0, 1)) + " (" + frac_lt(rest, k - 1) + ")?");
    return join(alts, " | ");
  }
  // fa </<= D </<= fb with fa < fb as fractions (fa may be empty = 0; fb non-empty).
  static std::string frac_between(const std::string& fa, bool ao, const std::string& fb, bool bo, int k) {
    const char a1 = fa.empty() ? '0' : fa[0];
    const std::string ra = fa.empty() ? "" : fa.substr(1);
    const char b1 = fb[0];
    const std::string rb = fb.substr(1);
    if (a1 == b1) {
      const bool empty_ok = ra.empty() && !ao;
      const std::string inner = frac_between(ra, ao, rb, bo, k - 1);
      return format_literal(std::string(1, a1)) + " (" + inner + ")" + (empty_ok ? "?" : "");
    }
    std::vector<std::string> alts;
    const std::string a_lit = format_literal(std::string(1, a1));
    if (ra.empty()) {
      if (!ao) {
        alts.push_back(seq(a_lit, any_digits(k - 1)));
      } else if (k >= 2) {
        alts.push_back(a_lit + " " + frac_nonzero(k - 1));
      }
    } else {
      alts.push_back(a_lit + " (" + (ao ? frac_gt(ra, k - 1) : frac_ge(ra, k - 1)) + ")");
    }
    if (a1 + 1 <= b1 - 1)
      alts.push_back(seq(digit_cls(static_cast<char>(a1 + 1), static_cast<char>(b1 - 1)), any_digits(k - 1)));
    const std::string b_lit = format_literal(std::string(1, b1));
    if (rb.empty()) {
      if (!bo) alts.push_back(seq(b_lit, k > 1 ? fmt::format("[0]{{0,{}}}", k - 1) : ""));
    } else {
      alts.push_back(b_lit + " (" + (bo ? frac_lt(rb, k - 1) : frac_le(rb, k - 1)) + ")?");
    }
    return join(alts, " | ");
  }
  // The optional "." part given whether "no fraction" (value 0) is allowed and the digit-string rule.
  static std::string frac_part(bool empty_ok, const std::string& digits_rule) {
    if (digits_rule.empty()) return empty_ok ? "" : "<none>";
    return fmt::format("(\".\" ({})){}", digits_rule, empty_ok ? "?" : "");
  }

  // Magnitudes m with A <(=) m <(=) B (B absent: unbounded), as "n frac" alternatives prefixed by sign.
  static void magnitude_alts(const Dec& a, bool ao, const Dec* b, bool bo, const std::string& sign,
                             std::vector<std::string>* alts) {
    auto add = [&](int64_t n_lo, int64_t n_hi, const std::string& frac) {
      if (frac == "<none>") return;
      alts->push_back(seq(sign + "(" + nonneg_range(n_lo, n_hi) + ")", frac));
    };
    const std::string any = frac_part(true, fmt::format("[0-9]{{1,{}}}", kFracDigits));
    if (b != nullptr) {
      const int c = cmp_dec(a, *b);
      if (c > 0 || (c == 0 && (ao || bo))) return;
      if (c == 0) {  // a single value
        add(a.ip, a.ip,
            a.frac.empty()
                ? frac_part(true, fmt::format("[0]{{1,{}}}", kFracDigits))
                : frac_part(false,
                            seq(format_literal(a.frac),
                                fmt::format("[0]{{0,{}}}", kFracDigits - static_cast<int>(a.frac.size())))));
        return;
      }
      if (a.ip == b->ip) {
        add(a.ip, a.ip, frac_part(a.frac.empty() && !ao, frac_between(a.frac, ao, b->frac, bo, kFracDigits)));
        return;
      }
    }
    // n == a.ip with D above a's fraction.
    if (a.frac.empty()) {
      add(a.ip, a.ip, ao ? frac_part(false, frac_nonzero(kFracDigits)) : any);
    } else {
      add(a.ip, a.ip, frac_part(false, ao ? frac_gt(a.frac, kFracDigits) : frac_ge(a.frac, kFracDigits)));
    }
    // Whole integers strictly between.
    if (b == nullptr) {
      add(a.ip + 1, -1, any);
      return;
    }
    if (a.ip + 1 <= b->ip - 1) add(a.ip + 1, b->ip - 1, any);
    // n == b.ip with D below b's fraction.
    if (b->frac.empty()) {
      if (!bo) add(b->ip, b->ip, frac_part(true, fmt::format("[0]{{1,{}}}", kFracDigits)));
    } else {
      add(b->ip, b->ip, frac_part(true, bo ? frac_lt(b->frac, kFracDigits) : frac_le(b->frac, kFracDigits)));
    }
  }

  Result<std::string> number_range(const Bound& lo, const Bound& hi, const std::string& path) {
    std::vector<std::string> alts;
    Dec l, h;
    if (lo.present) {
      MINFER_ASSIGN_OR_RETURN(l, to_dec(lo.value, path));
    }
    if (hi.present) {
      MINFER_ASSIGN_OR_RETURN(h, to_dec(hi.value, path));
    }
    const Dec zero;
    // Non-negative values: m in [max(lo, 0), hi].
    if (!hi.present || hi.value >= 0) {
      const bool from_lo = lo.present && lo.value >= 0;
      magnitude_alts(from_lo ? l : zero, from_lo && lo.exclusive, hi.present ? &h : nullptr, hi.exclusive, "",
                     &alts);
    }
    // Negative values: m = -v in (max(-hi, 0), -lo]; zero itself is generated without a sign.
    if (!lo.present || lo.value < 0) {
      const bool from_hi = hi.present && hi.value < 0;
      magnitude_alts(from_hi ? h : zero, from_hi ? hi.exclusive : true, lo.present ? &l : nullptr,
                     lo.exclusive, "\"-\" ", &alts);
    }
    if (alts.empty()) return refuse(path, "the number bounds leave no value");
    return "(" + join(alts, " | ") + ") space";
  }

  // ---- regular-expression subset -> GBNF over JSON string contents ----
  //
  // Supported: ^...$ (required), literals and escapes, ., [...] classes (ranges, negation, \d \w \s),
  // \d \w \s \D \W \S, groups (...) and (?:...), |, * + ? {m} {m,} {m,n}. Characters that JSON must escape
  // (" \ and controls) are generated in escaped form for literals and left out of classes and `.`.
  Result<std::string> pattern_to_gbnf(const std::string& pattern, const std::string& name,
                                      const std::string& path) {
    if (pattern.size() < 2 || pattern.front() != '^' || pattern.back() != '$') {
      return refuse(path, fmt::format("pattern '{}' must start with '^' and end with '$'", pattern));
    }
    re_ = pattern.substr(1, pattern.size() - 2);
    re_pos_ = 0;
    re_path_ = path;
    re_name_ = name;
    MINFER_ASSIGN_OR_RETURN(std::string body, re_alternation());
    if (re_pos_ != re_.size()) return re_error("unbalanced ')'");
    return "\"\\\"\" (" + body + ") \"\\\"\" space";
  }

  Status re_error(const std::string& what) {
    return unsupported("json-schema: pattern at {}: {} (at offset {} of '{}')", re_path_, what, re_pos_ + 1,
                       re_);
  }

  Result<std::string> re_alternation() {
    std::vector<std::string> alts;
    MINFER_ASSIGN_OR_RETURN(std::string first, re_sequence());
    alts.push_back(first);
    while (re_pos_ < re_.size() && re_[re_pos_] == '|') {
      ++re_pos_;
      MINFER_ASSIGN_OR_RETURN(std::string next, re_sequence());
      alts.push_back(next);
    }
    return join(alts, " | ");
  }

  Result<std::string> re_sequence() {
    std::vector<std::string> items;
    while (re_pos_ < re_.size() && re_[re_pos_] != '|' && re_[re_pos_] != ')') {
      MINFER_ASSIGN_OR_RETURN(std::string atom, re_atom());
      // Quantifier.
      if (re_pos_ < re_.size()) {
        const char q = re_[re_pos_];
        int min_t = -1;
        int max_t = -1;
        if (q == '*' || q == '+' || q == '?') {
          ++re_pos_;
          min_t = q == '+' ? 1 : 0;
          max_t = q == '?' ? 1 : -1;
        } else if (q == '{') {
          const size_t close = re_.find('}', re_pos_);
          if (close == std::string::npos) return re_error("unbalanced '{'");
          const std::string inner = re_.substr(re_pos_ + 1, close - re_pos_ - 1);
          const size_t comma = inner.find(',');
          auto num = [&](const std::string& s, int* out) {
            if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos)
              return false;
            *out = std::stoi(s);
            return true;
          };
          if (comma == std::string::npos) {
            if (!num(inner, &min_t)) return re_error("bad {m,n}");
            max_t = min_t;
          } else {
            if (!num(inner.substr(0, comma), &min_t)) return re_error("bad {m,n}");
            if (comma + 1 < inner.size() && !num(inner.substr(comma + 1), &max_t))
              return re_error("bad {m,n}");
          }
          if ((max_t >= 0 && max_t < min_t) || min_t > kMaxLength || max_t > kMaxLength)
            return re_error("bad {m,n}");
          re_pos_ = close + 1;
        }
        if (min_t >= 0) {
          if (re_pos_ < re_.size() && (re_[re_pos_] == '?' || re_[re_pos_] == '+')) {
            return re_error("lazy / possessive quantifiers are not supported");
          }
          atom = build_repetition("(" + atom + ")", min_t, max_t);
          if (atom.empty()) atom = "\"\"";
        }
      }
      items.push_back(atom);
    }
    if (items.empty()) return std::string("\"\"");
    return join(items, " ");
  }

  // One JSON-string-content character for code point c (escaped form when JSON needs it).
  static std::string json_char_literal(uint32_t c) {
    if (c == '"') return R"("\\\"")";
    if (c == '\\') return R"("\\\\")";
    if (c < 0x20) {
      switch (c) {
        case '\n':
          return R"("\\n")";
        case '\t':
          return R"("\\t")";
        case '\r':
          return R"("\\r")";
        default:
          return fmt::format("\"\\\\u{:04x}\"", c);
      }
    }
    std::string s;
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xE0 | (c >> 12));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (c >> 18));
      s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
    return "\"" + s + "\"";
  }

  static std::string class_cp(uint32_t c) {
    if (c == ']' || c == '[' || c == '\\' || c == '-' || c == '^' || c == '"')
      return std::string("\\") + static_cast<char>(c);
    if (c < 0x20 || c == 0x7F) return fmt::format("\\x{:02X}", c);
    if (c > 0x7F) return fmt::format("\\U{:08X}", c);
    return std::string(1, static_cast<char>(c));
  }

  // Ranges of a class, then the GBNF class text limited to characters JSON writes unescaped.
  using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
  static std::string class_text(Ranges ranges, bool negated) {
    // Characters a JSON string must escape are never produced by a class.
    static const Ranges kExcluded = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};
    std::string out;
    if (negated) {
      out = "[^";
      for (auto [a, b] : ranges) out += a == b ? class_cp(a) : class_cp(a) + "-" + class_cp(b);
      for (auto [a, b] : kExcluded) out += a == b ? class_cp(a) : class_cp(a) + "-" + class_cp(b);
      return out + "]";
    }
    // Subtract the excluded ranges.
    Ranges kept;
    for (auto [a, b] : ranges) {
      std::vector<std::pair<uint32_t, uint32_t>> pieces = {{a, b}};
      for (auto [ea, eb] : kExcluded) {
        std::vector<std::pair<uint32_t, uint32_t>> next;
        for (auto [pa, pb] : pieces) {
          if (pb < ea || pa > eb) {
            next.emplace_back(pa, pb);
            continue;
          }
          if (pa < ea) next.emplace_back(pa, ea - 1);
          if (pb > eb) next.emplace_back(eb + 1, pb);
        }
        pieces = std::move(next);
      }
      kept.insert(kept.end(), pieces.begin(), pieces.end());
    }
    if (kept.empty()) return "";
    out = "[";
    for (auto [a, b] : kept) out += a == b ? class_cp(a) : class_cp(a) + "-" + class_cp(b);
    return out + "]";
  }

  // Escape class shorthands: \d \w \s (negated when upper case).
  static bool shorthand(char c, Ranges* r, bool* negated) {
    switch (c) {
      case 'd':
      case 'D':
        *r = {{'0', '9'}};
        break;
      case 'w':
      case 'W':
        *r = {{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}};
        break;
      case 's':
      case 'S':
        *r = {{' ', ' '}, {'\t', '\r'}};
        break;
      default:
        return false;
    }
    *negated = c >= 'A' && c <= 'Z';
    return true;
  }

  Result<uint32_t> re_escaped_char(char c) {
    switch (c) {
      case 'n':
        return uint32_t{'\n'};
      case 't':
        return uint32_t{'\t'};
      case 'r':
        return uint32_t{'\r'};
      case 'f':
        return uint32_t{'\f'};
      case 'v':
        return uint32_t{'\v'};
      case '0':
        return uint32_t{0};
      default:
        break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      return re_error(fmt::format("escape '\\{}' is not supported", c));
    }
    return static_cast<uint32_t>(static_cast<unsigned char>(c));
  }

  Result<uint32_t> re_utf8_char() {
    const auto lead = static_cast<unsigned char>(re_[re_pos_]);
    int len = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
    if (len == 0 || re_pos_ + static_cast<size_t>(len) > re_.size()) return re_error("invalid UTF-8");
    uint32_t cp = len == 1 ? lead : lead & (0x7F >> len);
    for (int i = 1; i < len; ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(re_[re_pos_ + static_cast<size_t>(i)]) & 0x3F);
    re_pos_ += static_cast<size_t>(len);
    return cp;
  }

  Result<std::string> re_atom() {
    const char c = re_[re_pos_];
    if (c == '(') {
      if (re_depth_ >= kMaxNesting) return re_error(fmt::format("groups nested deeper than {}", kMaxNesting));
      ++re_pos_;
      if (re_.compare(re_pos_, 2, "?:") == 0) {
        re_pos_ += 2;
      } else if (re_pos_ < re_.size() && re_[re_pos_] == '?') {
        return re_error("lookaround and named groups are not supported");
      }
      ++re_depth_;
      auto nested = re_alternation();
      --re_depth_;
      MINFER_ASSIGN_OR_RETURN(std::string inner, std::move(nested));
      if (re_pos_ >= re_.size() || re_[re_pos_] != ')') return re_error("unbalanced '('");
      ++re_pos_;
      return "(" + inner + ")";
    }
    if (c == '.') {
      ++re_pos_;
      return add_rule("dot", class_text({{'\n', '\n'}, {'\r', '\r'}}, true));
    }
    if (c == '[') return re_class();
    if (c == '*' || c == '+' || c == '?' || c == '{') return re_error("quantifier without an operand");
    if (c == '^' || c == '$') return re_error("anchors are only supported at the ends");
    if (c == '}' || c == ']') return re_error(fmt::format("unescaped '{}'", c));
    if (c == '\\') {
      if (re_pos_ + 1 >= re_.size()) return re_error("trailing backslash");
      const char e = re_[re_pos_ + 1];
      re_pos_ += 2;
      Ranges r;
      bool neg = false;
      if (shorthand(e, &r, &neg)) {
        const std::string cls = class_text(r, neg);
        if (cls.empty()) return re_error("class matches no JSON-safe character");
        return cls;
      }
      MINFER_ASSIGN_OR_RETURN(uint32_t cp, re_escaped_char(e));
      return json_char_literal(cp);
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t cp, re_utf8_char());
    return json_char_literal(cp);
  }

  Result<std::string> re_class() {
    ++re_pos_;  // '['
    bool negated = false;
    if (re_pos_ < re_.size() && re_[re_pos_] == '^') {
      negated = true;
      ++re_pos_;
    }
    Ranges ranges;
    bool first = true;
    while (re_pos_ < re_.size() && (re_[re_pos_] != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (re_[re_pos_] == '\\') {
        if (re_pos_ + 1 >= re_.size()) return re_error("trailing backslash");
        const char e = re_[re_pos_ + 1];
        re_pos_ += 2;
        Ranges r;
        bool neg = false;
        if (shorthand(e, &r, &neg)) {
          if (neg) return re_error("negated shorthand inside a class is not supported");
          ranges.insert(ranges.end(), r.begin(), r.end());
          continue;
        }
        MINFER_ASSIGN_OR_RETURN(lo, re_escaped_char(e));
      } else {
        MINFER_ASSIGN_OR_RETURN(lo, re_utf8_char());
      }
      uint32_t hi = lo;
      if (re_pos_ + 1 < re_.size() && re_[re_pos_] == '-' && re_[re_pos_ + 1] != ']') {
        ++re_pos_;
        if (re_[re_pos_] == '\\') {
          if (re_pos_ + 1 >= re_.size()) return re_error("trailing backslash");
          const char e = re_[re_pos_ + 1];
          re_pos_ += 2;
          MINFER_ASSIGN_OR_RETURN(hi, re_escaped_char(e));
        } else {
          MINFER_ASSIGN_OR_RETURN(hi, re_utf8_char());
        }
        if (hi < lo) return re_error("class range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    if (re_pos_ >= re_.size()) return re_error("unbalanced '['");
    ++re_pos_;  // ']'
    const std::string cls = class_text(ranges, negated);
    if (cls.empty()) return re_error("class matches no JSON-safe character");
    return cls;
  }

  json root_;
  std::map<std::string, std::string> rules_;
  std::set<std::string> resolving_;
  std::string re_;
  size_t re_pos_ = 0;
  int re_depth_ = 0;     // open pattern groups
  int visit_depth_ = 0;  // nested schemas being visited
  std::string re_path_;
  std::string re_name_;
};

}  // namespace

Result<std::string> to_grammar_from_json(const nlohmann::ordered_json& schema) {
  // nlohmann throws on some inputs (e.g. invalid UTF-8 in a key being dumped): no exception leaves here.
  try {
    MINFER_ASSIGN_OR_RETURN(std::string gbnf, Converter().run(schema));
    // A schema whose references loop back to themselves before any JSON is read (`{"$ref": "#"}`, a
    // $defs entry naming another that names it) converts to left-recursive rules: refuse it here, with
    // the loop, instead of handing out a grammar the GBNF parser refuses.
    auto check = grammar::Grammar::parse(gbnf);
    if (!check.ok()) {
      if (check.status().message().find("left recursion") != std::string::npos) {
        return invalid_argument("json-schema: the schema refers to itself without consuming input ({})",
                                check.status().message());
      }
      return invalid_argument("json-schema: internal error, the converted grammar does not parse: {}",
                              check.status().message());
    }
    return gbnf;
  } catch (const std::exception& e) {
    return invalid_argument("json-schema: {}", e.what());
  }
}

Result<std::string> to_grammar(std::string_view schema_json) {
  json schema = json::parse(schema_json.begin(), schema_json.end(), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return invalid_argument("json-schema: the schema is not valid JSON");
  return to_grammar_from_json(schema);
}

}  // namespace minfer::sampling::json_schema
