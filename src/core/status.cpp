#include "core/status.h"

namespace minfer {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kIo: return "i/o error";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kUnavailable: return "unavailable";
  }
  return "unknown";
}

}  // namespace minfer
