// Interim until kv/kv_state.cpp lands on main: --session reports that it is unavailable. Replaced by
// session_file.cpp (JSON + FILE.kv) at the merge.
#include "engine/session.h"

namespace minfer::engine {

Status ChatSession::save(const std::string&) const { return unsupported("--session: KV files are not available in this build yet"); }

Result<ResumeInfo> ChatSession::resume(const std::string&) {
  return unsupported("--session: KV files are not available in this build yet");
}

}  // namespace minfer::engine
