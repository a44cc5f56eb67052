// An independent JSON Schema validator for the subset the converter supports, written for the tests from
// the JSON Schema spec (no code shared with json_schema/to_grammar.cpp): checks generated documents.
#pragma once

#include <cmath>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace minfer::sampling::schema_check {

using json = nlohmann::ordered_json;

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

inline const json* resolve(const json& root, const std::string& ref) {
  const json* t = &root;
  size_t pos = 1;
  while (pos < ref.size()) {
    size_t end = ref.find('/', pos + 1);
    if (end == std::string::npos) end = ref.size();
    const std::string tok = ref.substr(pos + 1, end - pos - 1);
    if (!t->is_object() || !t->contains(tok)) return nullptr;
    t = &(*t)[tok];
    pos = end;
  }
  return t;
}

inline bool valid_format(const std::string& fmt_name, const std::string& s) {
  static const std::regex date(R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)");
  static const std::regex time(R"(^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)");
  static const std::regex uuid(
      R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)");
  if (fmt_name == "date") return std::regex_match(s, date);
  if (fmt_name == "time") return std::regex_match(s, time);
  if (fmt_name == "uuid") return std::regex_match(s, uuid);
  if (fmt_name == "date-time") {
    const size_t t = s.find('T');
    return t != std::string::npos && valid_format("date", s.substr(0, t)) &&
           valid_format("time", s.substr(t + 1));
  }
  return false;
}

inline bool type_matches(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

inline bool validate(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const json* t = resolve(root, s["$ref"].get<std::string>());
    return t != nullptr && validate(v, *t, root);
  }
  if (s.contains("type")) {
    bool any = false;
    if (s["type"].is_array()) {
      for (const auto& t : s["type"]) any = any || type_matches(v, t.get<std::string>());
    } else {
      any = type_matches(v, s["type"].get<std::string>());
    }
    if (!any) return false;
  }
  if (s.contains("enum")) {
    bool any = false;
    for (const auto& e : s["enum"]) any = any || e == v;
    if (!any) return false;
  }
  if (s.contains("const") && s["const"] != v) return false;
  if (s.contains("anyOf")) {
    bool any = false;
    for (const auto& sub : s["anyOf"]) any = any || validate(v, sub, root);
    if (!any) return false;
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const auto& sub : s["oneOf"]) n += validate(v, sub, root) ? 1 : 0;
    if (n != 1) return false;
  }
  if (s.contains("allOf")) {
    for (const auto& sub : s["allOf"]) {
      if (!validate(v, sub, root)) return false;
    }
  }
  if (v.is_object()) {
    if (s.contains("required")) {
      for (const auto& r : s["required"]) {
        if (!v.contains(r.get<std::string>())) return false;
      }
    }
    for (const auto& [k, val] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(k)) {
        if (!validate(val, s["properties"][k], root)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!validate(val, s["additionalProperties"], root)) return false;
      }
    }
  }
  if (v.is_array()) {
    size_t first_rest = 0;
    if (s.contains("prefixItems")) {
      for (size_t i = 0; i < s["prefixItems"].size() && i < v.size(); ++i) {
        if (!validate(v[i], s["prefixItems"][i], root)) return false;
      }
      first_rest = s["prefixItems"].size();
    }
    if (s.contains("items")) {
      for (size_t i = first_rest; i < v.size(); ++i) {
        if (!validate(v[i], s["items"], root)) return false;
      }
    }
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
      return false;
    if (s.contains("format") && !valid_format(s["format"].get<std::string>(), str)) return false;
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
  }
  return true;
}

}  // namespace minfer::sampling::schema_check
