#include "core/env.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace minfer {

Result<bool> env_bool(const char* name, bool fallback) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || raw[0] == '\0') return fallback;
  std::string v = raw;
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return invalid_argument("{}='{}' is not a boolean: use 1, true, yes, on or 0, false, no, off", name, raw);
}

Status check_bool_env() {
  for (const char* name : kBoolEnvVars) {
    auto v = env_bool(name);
    if (!v.ok()) return v.status();
  }
  return {};
}

bool env_flag(const char* name, bool fallback) {
  auto v = env_bool(name, fallback);
  if (v.ok()) return *v;
  std::fprintf(stderr, "minfer: %s\n", v.status().message().c_str());
  std::exit(2);
}

}  // namespace minfer
