#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace minfer {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("MINFER_LOG");
  if (env == nullptr) return LogLevel::kWarn;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  if (std::strcmp(env, "none") == 0) return LogLevel::kNone;
  return LogLevel::kWarn;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }

void log_write(LogLevel level, const char* func, const std::string& message) {
  static const char* kNames[] = {"debug", "info", "warn", "error", "none"};
  std::string line = fmt::format("minfer: {}: {}: {}\n", kNames[static_cast<int>(level)], func, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace minfer
