// Logging to stderr: MINFER_LOG_INFO("loaded %zu tensors", n) prints "minfer: <func>: loaded ...".
// The level is set once at start-up (set_log_level) or by MINFER_LOG=debug|info|warn|error|none.
#pragma once

#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace minfer {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kNone = 4 };

// The level a MINFER_LOG value names ("debug", "info", "warn", "error", "none"); nullopt for any other.
std::optional<LogLevel> log_level_from_name(std::string_view name);

void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, const char* func, const std::string& message);

}  // namespace minfer

#define MINFER_LOG_AT(level, ...)                                                 \
  do {                                                                            \
    if (static_cast<int>(level) >= static_cast<int>(::minfer::log_level()))       \
      ::minfer::log_write(level, __func__, ::fmt::format(__VA_ARGS__));           \
  } while (0)
#define MINFER_LOG_DEBUG(...) MINFER_LOG_AT(::minfer::LogLevel::kDebug, __VA_ARGS__)
#define MINFER_LOG_INFO(...) MINFER_LOG_AT(::minfer::LogLevel::kInfo, __VA_ARGS__)
#define MINFER_LOG_WARN(...) MINFER_LOG_AT(::minfer::LogLevel::kWarn, __VA_ARGS__)
#define MINFER_LOG_ERROR(...) MINFER_LOG_AT(::minfer::LogLevel::kError, __VA_ARGS__)
