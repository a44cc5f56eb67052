#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace minfer {
namespace {

constexpr const char* kNames[] = {"debug", "info", "warn", "error", "none"};

// An unset or unknown MINFER_LOG is warn (the `minfer` binary refuses an unknown one at startup).
LogLevel level_from_env() {
  const char* env = std::getenv("MINFER_LOG");
  return env == nullptr ? LogLevel::kWarn : log_level_from_name(env).value_or(LogLevel::kWarn);
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

std::optional<LogLevel> log_level_from_name(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kNames)); ++i) {
    if (name == kNames[i]) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }

void log_write(LogLevel level, const char* func, const std::string& message) {
  std::string line = fmt::format("minfer: {}: {}: {}\n", kNames[static_cast<int>(level)], func, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace minfer
