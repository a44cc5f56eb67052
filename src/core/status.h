// Status and Result<T>: how every fallible operation fed by files, network or users reports failure.
// No exceptions cross minfer APIs; a failed Status carries a code and a message with context.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace minfer {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,  // bad input: a malformed file, flag value or request field
  kNotFound,         // a missing file, key or tensor
  kUnsupported,      // well-formed but refused: an architecture, type or construct minfer does not handle
  kIo,               // the operating system refused (open, mmap, write, rename)
  kOutOfRange,       // a bound was hit: context full, recursion depth, output size
  kInternal,         // a broken invariant detected at run time
  kUnavailable,      // refused for now, retry later: a full queue, a draining server
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context to the message ("gguf: foo.gguf: " + message), keeping the code.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status error(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status unsupported(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kUnsupported, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status not_found(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status unavailable(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kUnavailable, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status io_error(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kIo, fmt::format(format, std::forward<Args>(args)...));
}

// Result<T> holds either a value or a failed Status (std::expected is C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : data_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(data_).ok()) data_ = Status(StatusCode::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace minfer

#define MINFER_CONCAT_INNER(a, b) a##b
#define MINFER_CONCAT(a, b) MINFER_CONCAT_INNER(a, b)

// Returns the failed Status of `expr` (a Status) from the enclosing function.
#define MINFER_RETURN_IF_ERROR(expr)               \
  do {                                             \
    ::minfer::Status minfer_status_ = (expr);      \
    if (!minfer_status_.ok()) return minfer_status_; \
  } while (0)

// MINFER_ASSIGN_OR_RETURN(auto x, f()): unwraps a Result or returns its Status.
#define MINFER_ASSIGN_OR_RETURN(lhs, expr) MINFER_ASSIGN_OR_RETURN_IMPL(MINFER_CONCAT(minfer_result_, __LINE__), lhs, expr)
#define MINFER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
