// --slots-file: every slot's tokens and KV rows, written after each completed request (the moment a
// slot's context is stable) and restored at start, so a restarted server keeps its cached prefixes. A file
// from another model, context size, cache type or --n-slots is refused with an error line naming the
// difference, and the server starts empty: slot i of the file must be slot i of this run.
#include "engine/batcher_worker.h"

#include "core/log.h"

namespace minfer::engine {

Status Batcher::Impl::save_now(const std::string& path) {
  std::vector<kv::SavedSequence> seqs;
  for (const Slot& s : slots) {
    if (!s.tokens.empty()) seqs.push_back({s.seq, s.tokens});
  }
  return kv::save_kv_file(path, identity(), engine.kv(), seqs);
}

void Batcher::Impl::restore_slots() {
  auto loaded = kv::load_kv_file(opt.slots_file, identity(), engine.kv());
  if (loaded.ok()) {
    size_t n_rows = 0;
    for (const kv::SavedSequence& s : *loaded) {
      if (s.seq >= opt.n_slots) {
        engine.kv().seq_rm(s.seq, 0, -1);
        continue;
      }
      slots[static_cast<size_t>(s.seq)].tokens = s.tokens;
      n_rows += s.tokens.size();
    }
    MINFER_LOG_INFO("batcher: restored {} slots ({} KV rows) from {}", loaded->size(), n_rows,
                    opt.slots_file);
  } else if (loaded.status().code() == StatusCode::kNotFound) {
    MINFER_LOG_INFO("batcher: no slots file at {} yet; starting empty", opt.slots_file);
  } else {
    // Loud: the operator asked for these slots and is not getting them.
    MINFER_LOG_ERROR("batcher: slots file refused: {}; starting with empty slots", loaded.status().message());
  }
}

}  // namespace minfer::engine
