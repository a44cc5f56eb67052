// Boolean environment variables, read one way everywhere: 1/true/yes/on or 0/false/no/off (any case);
// unset or empty means the default. Any other value is refused naming the variable, never read as off.
//
//   MINFER_ASSIGN_OR_RETURN(bool timing, env_bool("MINFER_OP_TIMING"));
//   if (Status s = check_bool_env(); !s.ok()) ...   // at startup: every variable in kBoolEnvVars
#pragma once

#include "core/status.h"

namespace minfer {

// The boolean variables minfer reads (check_bool_env validates them all).
inline constexpr const char* kBoolEnvVars[] = {
    "MINFER_OP_TIMING",      "MINFER_NO_CONTEXT_SHIFT", "MINFER_NO_AVX512", "MINFER_NO_AVX2",
    "MINFER_VULKAN_INT_DOT", "MINFER_VULKAN_VALIDATE",  "MINFER_COLOR"};

// The value of `name`, or `fallback` when it is unset or empty; kInvalidArgument naming the variable and
// its value otherwise.
Result<bool> env_bool(const char* name, bool fallback = false);

// The first variable of kBoolEnvVars whose value is not a boolean, as an error; OK when all are.
Status check_bool_env();

// env_bool for code that cannot return a Status (constructors, one-time setup). A value that is not a
// boolean prints the refusal and exits with code 2: main() calls check_bool_env() first, so this only
// triggers for a program that skipped that check.
bool env_flag(const char* name, bool fallback = false);

}  // namespace minfer
