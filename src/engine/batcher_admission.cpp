// Admission: the oldest queued request takes idle slots when enough are idle and the pool can hold its
// prompt. Its first slot is the idle one whose cached tokens share the longest prefix with the prompt;
// a longer prefix held by any slot is shared (KvCache::seq_cp, no copy), so only the rest is prefilled.
#include "engine/batcher_worker.h"

#include <algorithm>

#include "engine/generate.h"

namespace minfer::engine {

void Batcher::Impl::admit_locked() {
  auto& kv = engine.kv();
  while (!queue.empty()) {
    std::shared_ptr<Job> job = queue.front();
    if (job->handle->cancelled()) {
      queue.pop_front();
      claimed_slots -= job->req.n_choices;
      cancelled.fetch_add(1);
      log_request(*job, "cancelled in the queue");
      continue;
    }
    const auto n = static_cast<size_t>(job->req.n_choices);
    std::vector<size_t> idle;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i].job) idle.push_back(i);
    }
    if (idle.size() < n) break;
    const std::vector<int32_t>& prompt = job->req.prompt;
    const size_t cap =
        prompt.size() - 1;  // the last prompt token is always evaluated (its logits are needed)

    // The idle slot whose own cache matches best (least recently used on ties, and when nothing matches).
    size_t primary = idle[0];
    size_t own = 0;
    for (size_t i : idle) {
      const size_t k = opt.prefix_reuse ? std::min(cap, common_prefix(slots[i].tokens, prompt)) : 0;
      if (k > own || (k == own && slots[i].last_used < slots[primary].last_used)) {
        primary = i;
        own = k;
      }
    }
    // A longer prefix held by any other slot is shared from it.
    size_t source = primary, shared = own;
    if (opt.prefix_reuse) {
      for (size_t i = 0; i < slots.size(); ++i) {
        const size_t k = std::min(cap, common_prefix(slots[i].tokens, prompt));
        if (k > shared) {
          source = i;
          shared = k;
        }
      }
    }
    std::vector<size_t> chosen = {primary};
    for (size_t i : idle) {
      if (chosen.size() == n) break;
      if (i != primary) chosen.push_back(i);
    }
    // Cells: the prompt's remaining tokens plus one generated token per choice, beyond what prefills hold.
    int64_t reserved = 0;
    for (const Slot& s : slots) {
      if (s.job && !s.generating && s.choice == 0)
        reserved += static_cast<int64_t>(s.job->req.prompt.size() - s.prefill_next);
    }
    std::vector<bool> protect(slots.size(), false);
    for (size_t i : chosen) protect[i] = true;
    protect[source] = true;
    const int64_t need = static_cast<int64_t>(prompt.size() - shared) + static_cast<int64_t>(n) + reserved;
    if (!ensure_cells(need, protect) && jobs_active > 0) break;  // wait for running requests to free cells

    Slot& p = slots[primary];
    if (source != primary) {
      kv.seq_rm(p.seq, 0, -1);
      kv.seq_cp(slots[source].seq, p.seq, 0, static_cast<int32_t>(shared));
    } else {
      kv.seq_rm(p.seq, static_cast<int32_t>(shared), -1);
    }
    p.tokens.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(shared));
    for (size_t c = 0; c < chosen.size(); ++c) {
      Slot& s = slots[chosen[c]];
      if (c > 0) {
        kv.seq_rm(s.seq, 0, -1);
        s.tokens.clear();
      }
      s.job = job;
      s.choice = static_cast<int32_t>(c);
      s.generating = false;
      s.prefill_next = shared;
      s.next_token = -1;
      s.n_generated = 0;
      s.detok.emplace(engine.tokenizer());
      s.stops.emplace(job->req.stop);
      s.last_used = Clock::now();
      job->slots.push_back(static_cast<int32_t>(chosen[c]));
    }
    if (drafter) {
      const std::vector<size_t> others(chosen.begin() + 1, chosen.end());
      drafter->admitted(slots, primary, source, shared, others);
    }
    job->choices_open = static_cast<int32_t>(n);
    job->usage.prompt_tokens = static_cast<int32_t>(prompt.size());
    job->usage.cached_tokens = static_cast<int32_t>(shared);
    queue.pop_front();
    ++progress;
    ++jobs_active;
    slots_busy.fetch_add(static_cast<int32_t>(n));
    running.fetch_add(1);
  }
  queue_len.store(static_cast<int32_t>(queue.size()));
  kv_used.store(kv.used_cells());
}

}  // namespace minfer::engine
