// The cell pool: -c is one pool for every slot. Idle slots keep their tokens for prefix reuse until their
// cells are needed; then the least recently used go first. Admission and the step both ask for cells.
#include "engine/batcher_worker.h"

namespace minfer::engine {

// Frees cells by evicting idle slots' cached tokens, least recently used first, skipping `protect`.
// True when at least `need` cells are free afterwards.
bool Batcher::Impl::ensure_cells(int64_t need, const std::vector<bool>& protect) {
  auto& kv = engine.kv();
  while (kv.free_cells() < need) {
    Slot* victim = nullptr;
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (s.job || protect[i] || s.tokens.empty()) continue;
      if (victim == nullptr || s.last_used < victim->last_used) victim = &s;
    }
    if (victim == nullptr) return false;
    drop_cache(*victim);
  }
  return true;
}

void Batcher::Impl::drop_cache(Slot& slot) {
  engine.kv().seq_rm(slot.seq, 0, -1);
  slot.tokens.clear();
  if (drafter) drafter->dropped(slot);
}

// Published after every loop turn for stats(), which never touches the engine: occupancy (a scan of the
// cells, small next to a forward) and the activation arena's high-water mark.
void Batcher::Impl::publish_occupancy() {
  const kv::KvCache& kv = engine.kv();
  kv_used.store(kv.used_cells());
  const kv::KvCache::Sharing sharing = kv.sharing();
  kv_sequences.store(sharing.sequences);
  kv_shared.store(sharing.shared_cells);
  size_t activations = engine.activations_peak_bytes();
  if (opt.speculate && opt.draft_model != nullptr) activations += opt.draft_model->activations_peak_bytes();
  activations_bytes.store(static_cast<int64_t>(activations));
}

}  // namespace minfer::engine
