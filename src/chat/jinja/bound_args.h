// BoundArgs: binds a call's positional and keyword arguments to a builtin's parameter names, the way
// Python does, with typed accessors that raise TemplateError naming the function.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/error.h"
#include "chat/jinja/value.h"

namespace minfer::chat::jinja {

class BoundArgs {
 public:
  BoundArgs(const CallArgs& args, std::string_view fn, std::initializer_list<std::string_view> names)
      : fn_(fn), values_(names.size()), given_(names.size(), false) {
    if (args.args.size() > names.size()) {
      fail(0, "{}() takes at most {} argument(s) ({} given)", fn, names.size(), args.args.size());
    }
    for (size_t i = 0; i < args.args.size(); ++i) {
      values_[i] = args.args[i];
      given_[i] = true;
    }
    for (const auto& [key, value] : args.kwargs) {
      size_t i = 0;
      for (std::string_view n : names) {
        if (n == key) break;
        ++i;
      }
      if (i == names.size()) fail(0, "{}() got an unexpected keyword argument '{}'", fn, key);
      if (given_[i]) fail(0, "{}() got multiple values for argument '{}'", fn, key);
      values_[i] = value;
      given_[i] = true;
    }
  }

  const Value& operator[](size_t i) const { return values_[i]; }
  bool given(size_t i) const { return given_[i] && !values_[i].is_undefined(); }

  // Unset / None → nullopt; a string → it; anything else raises.
  std::optional<std::string> opt_string(size_t i) const {
    if (!given(i) || values_[i].is_none()) return std::nullopt;
    if (!values_[i].is_string()) fail(0, "{}(): expected a string argument, got {}", fn_, values_[i].type_name());
    return values_[i].str();
  }
  std::string string(size_t i) const {
    std::optional<std::string> s = opt_string(i);
    if (!s) fail(0, "{}(): missing required string argument", fn_);
    return *s;
  }
  int64_t int_or(size_t i, int64_t fallback) const {
    if (!given(i) || values_[i].is_none()) return fallback;
    if (!values_[i].is_int() && !values_[i].is_bool()) {
      fail(0, "{}(): expected an integer argument, got {}", fn_, values_[i].type_name());
    }
    return values_[i].as_int();
  }
  bool bool_or(size_t i, bool fallback) const { return given(i) ? values_[i].truthy() : fallback; }

 private:
  std::string fn_;
  std::vector<Value> values_;
  std::vector<bool> given_;
};

}  // namespace minfer::chat::jinja
