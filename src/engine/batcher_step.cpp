// One step of the worker: every generating slot's next token (plus its speculative proposals) and chunks
// of waiting prompts, oldest request first, evaluated in one forward; then each slot takes its rows.
// Chunk sizes come from running estimates of the step costs (prefill_budget), so prompts are admitted
// without freezing the streams that are decoding.
#include "engine/batcher_worker.h"

#include <algorithm>

#include "core/log.h"
#include "engine/generate.h"

namespace minfer::engine {

namespace {

using batching::Clock;
constexpr int64_t kLongPromptSteps = 32;  // see prefill_budget

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

// Prefill tokens a step may add next to n_decode streams. Alone, a full batch. Beside streams, a chunk
// costing about 0.9 of a decode-only step (at least 8 tokens, so a prompt always progresses): a short
// prompt waits a few steps and the streams' steps about double meanwhile. A long prompt (more than
// kLongPromptSteps such chunks) would hold the streams at that pace for most of their generation, so it
// gets 0.35 of a decode step (at least 2 tokens): its own TTFT grows, the streams keep their pace.
Batcher::Impl::PrefillBudget Batcher::Impl::prefill_budget(int32_t n_decode) const {
  const int32_t cap = n_batch - n_decode;
  if (n_decode == 0) return {cap, cap};
  if (ema_decode_ms <= 0.0 || ema_prefill_token_ms <= 0.0) return {std::min(cap, 16), std::min(cap, 16)};
  const auto tokens = [&](double share, int32_t floor) {
    return std::clamp(static_cast<int32_t>(share * ema_decode_ms / ema_prefill_token_ms),
                      std::min(cap, floor), cap);
  };
  return {tokens(0.9, 8), tokens(0.35, 2)};
}

bool Batcher::Impl::step() {
  auto& kv = engine.kv();
  std::vector<bool> busy(slots.size(), false);
  for (size_t i = 0; i < slots.size(); ++i) busy[i] = slots[i].job != nullptr;

  // Decoders first: one cell each. When the pool is exhausted, the longest stream ends with "length".
  std::vector<size_t> decoders;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].job && slots[i].generating && slots[i].next_token >= 0) decoders.push_back(i);
  }
  while (!decoders.empty() && !ensure_cells(static_cast<int64_t>(decoders.size()), busy)) {
    auto longest = std::max_element(decoders.begin(), decoders.end(), [&](size_t a, size_t b) {
      return slots[a].tokens.size() < slots[b].tokens.size();
    });
    Slot& s = slots[*longest];
    finish_choice(s, "length", release_held_text(*s.detok, *s.stops));
    decoders.erase(longest);
  }
  // Speculation: proposals after each decoder's next token, when the pool has a cell for each.
  int64_t n_decode_tokens = static_cast<int64_t>(decoders.size());
  const std::vector<int32_t> caps = speculation_caps(decoders, busy, &n_decode_tokens);
  // Prefill chunks, oldest request first.
  std::vector<size_t> prefills;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].job && !slots[i].generating && slots[i].choice == 0) prefills.push_back(i);
  }
  std::sort(prefills.begin(), prefills.end(),
            [&](size_t a, size_t b) { return slots[a].job->handle->id() < slots[b].job->handle->id(); });
  const PrefillBudget shares = prefill_budget(static_cast<int32_t>(decoders.size()));
  int32_t budget = shares.step;
  int32_t n_prefill = 0;
  std::vector<batching::PromptChunk> chunks;
  for (size_t i : prefills) {
    if (budget <= 0) break;
    Slot& s = slots[i];
    const std::vector<int32_t>& prompt = s.job->req.prompt;
    const int64_t planned = n_decode_tokens + n_prefill;
    ensure_cells(planned + budget, busy);
    const int64_t room = kv.free_cells() - planned;
    const auto left = static_cast<int64_t>(prompt.size() - s.prefill_next);
    // Long by what it had to admit, so its last chunks do not speed up again.
    const auto uncached = static_cast<int64_t>(prompt.size()) - s.job->usage.cached_tokens;
    const int32_t allowed =
        uncached > kLongPromptSteps * int64_t{shares.step} ? std::min(budget, shares.long_prompt) : budget;
    const auto chunk = static_cast<size_t>(std::min<int64_t>({allowed, room, left}));
    if (chunk == 0) continue;
    chunks.push_back({i, s.prefill_next, chunk});
    budget -= static_cast<int32_t>(chunk);
    n_prefill += static_cast<int32_t>(chunk);
  }
  if (drafter) drafter->propose(slots, decoders, caps, chunks);

  Batch batch;
  struct Row {
    size_t slot;
    size_t n_prompt;  // prefill: tokens added; 0 for a decoder
    bool logits;      // a decoder has 1 + its proposals' rows
  };
  std::vector<Row> rows;
  for (size_t i : decoders) {
    Slot& s = slots[i];
    const auto pos = static_cast<int32_t>(s.tokens.size());
    batch.add(s.next_token, pos, s.seq, true);
    const std::vector<int32_t>& proposed = s.spec.draft.tokens;
    for (size_t j = 0; j < proposed.size(); ++j)
      batch.add(proposed[j], pos + 1 + static_cast<int32_t>(j), s.seq, true);
    rows.push_back({i, 0, true});
  }
  for (const batching::PromptChunk& c : chunks) {
    const std::vector<int32_t>& prompt = slots[c.slot].job->req.prompt;
    for (size_t at = c.begin; at < c.begin + c.count; ++at)
      batch.add(prompt[at], static_cast<int32_t>(at), slots[c.slot].seq, at + 1 == prompt.size());
    rows.push_back({c.slot, c.count, c.begin + c.count == prompt.size()});
  }
  if (batch.size() == 0) {
    // Nothing can run: prefills are waiting for cells that no running stream will free.
    if (!prefills.empty() && decoders.empty()) {
      fail_job(slots[prefills.back()].job,
               error(StatusCode::kOutOfRange, "KV cache full: {} of {} cells in use", kv.used_cells(),
                     kv.n_cells()));
    }
    return false;
  }

  const int64_t step_no = steps.fetch_add(1);
  const auto t0 = Clock::now();
  Result<std::vector<float>> logits = Status();
  Status injected = opt.fault_injector ? opt.fault_injector(step_no) : Status();
  if (injected.ok()) {
    logits = engine.decode(batch);
  } else {
    logits = injected;
  }
  const double ms = ms_between(t0, Clock::now());
  ++progress;  // a forward ran (a failed one ends its requests, which is progress too)
  if (!logits.ok()) {
    // Every request in this batch is answered with the error; their slots' caches are dropped.
    std::vector<std::shared_ptr<Job>> jobs;
    for (const Row& r : rows) {
      const auto& job = slots[r.slot].job;
      if (job && std::find(jobs.begin(), jobs.end(), job) == jobs.end()) jobs.push_back(job);
    }
    MINFER_LOG_ERROR("batcher: forward of {} tokens failed: {}", batch.size(), logits.status().message());
    for (const auto& job : jobs) {
      for (int32_t si : job->slots) drop_cache(slots[static_cast<size_t>(si)]);
      fail_job(job, logits.status());
    }
    kv_used.store(kv.used_cells());
    return true;
  }
  // Cost model: decode-only steps give the decode cost; the rest is attributed to prefill tokens.
  if (n_prefill == 0) {
    ema_decode_ms = ema_decode_ms <= 0.0 ? ms : 0.8 * ema_decode_ms + 0.2 * ms;
  } else {
    const double per_token = std::max(0.0, ms - (decoders.empty() ? 0.0 : ema_decode_ms)) / n_prefill;
    ema_prefill_token_ms =
        ema_prefill_token_ms <= 0.0 ? per_token : 0.8 * ema_prefill_token_ms + 0.2 * per_token;
  }

  const auto n_vocab = static_cast<size_t>(engine.n_vocab());
  size_t out_row = 0;
  for (const Row& r : rows) {
    Slot& s = slots[r.slot];
    if (r.n_prompt == 0) {
      const size_t n_rows = 1 + s.spec.draft.tokens.size();
      const std::span<const float> all(logits->data() + out_row * n_vocab, n_rows * n_vocab);
      out_row += n_rows;
      if (!s.job) {  // another choice of its request failed it earlier in this loop
        s.spec.draft = Draft();
        continue;
      }
      if (s.spec.draft.tokens.empty()) {
        if (drafter) drafter->record(s, 0, 0, ms);  // a plain step: the planner's C(1)
        s.tokens.push_back(s.next_token);
        s.next_token = -1;
        sample_choice(s, all);
      } else {
        verify_choice(s, all, ms);
      }
      continue;
    }
    std::span<const float> row;
    if (r.logits) {
      row = std::span<const float>(logits->data() + out_row * n_vocab, n_vocab);
      ++out_row;
    }
    if (!s.job) continue;
    const std::vector<int32_t>& prompt = s.job->req.prompt;
    s.tokens.insert(s.tokens.end(), prompt.begin() + static_cast<std::ptrdiff_t>(s.prefill_next),
                    prompt.begin() + static_cast<std::ptrdiff_t>(s.prefill_next + r.n_prompt));
    s.prefill_next += r.n_prompt;
    if (s.prefill_next < prompt.size()) continue;
    // The prompt is in: every choice shares its rows and samples from the same logits.
    std::shared_ptr<Job> job = s.job;
    for (int32_t si : job->slots) {
      Slot& c = slots[static_cast<size_t>(si)];
      if (&c != &s) {
        kv.seq_cp(s.seq, c.seq, 0, -1);
        c.tokens = s.tokens;
        if (drafter) drafter->shared_prompt(s, c);
      }
      c.generating = true;
    }
    for (int32_t si : job->slots) {
      Slot& c = slots[static_cast<size_t>(si)];
      if (c.job == job) sample_choice(c, row);
    }
  }
  kv_used.store(kv.used_cells());
  if (op_timing) {
    std::lock_guard<std::mutex> lock(stats_mu);
    op_times.clear();
    for (const auto& [name, t] : engine.op_times()) op_times.push_back({name, t.seconds, t.calls});
  }
  return true;
}

}  // namespace minfer::engine
