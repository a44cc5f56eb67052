#include "engine/batcher.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <numeric>
#include <thread>

#include "core/log.h"
#include "engine/batch_drafter.h"
#include "engine/batcher_slots.h"
#include "engine/generate.h"
#include "kv/kv_state.h"
#include "sampling/sampler.h"
#include "tokenizer/stream_decoder.h"

namespace minfer::engine {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int32_t kMaxTopLogprobs = 20;
constexpr double kRateWindowSeconds = 16.0;
constexpr int64_t kLongPromptSteps = 32;  // see prefill_budget

// Prefill tokens per step beside decoding streams: for the step, and for a long prompt's chunk.
struct PrefillBudget {
  int32_t step;
  int32_t long_prompt;
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Log-probability of `token` and the `n_top` most likely tokens under softmax(logits).
void fill_logprobs(std::span<const float> logits, int32_t token, int32_t n_top, BatchEvent* ev) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  const float lse = max + static_cast<float>(std::log(sum));
  ev->logprob = logits[static_cast<size_t>(token)] - lse;
  if (n_top <= 0) return;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto k = std::min<size_t>(static_cast<size_t>(n_top), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
                             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
                    });
  for (size_t i = 0; i < k; ++i) ev->top.push_back({ids[i], logits[static_cast<size_t>(ids[i])] - lse});
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// RequestHandle

std::optional<BatchEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  BatchEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestHandle::push(BatchEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (event.kind == BatchEvent::Kind::kFinished) finished_ = true;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------------------
// Worker state

using batching::Job;
using batching::Slot;

struct Batcher::Impl {
  Engine& engine;
  BatcherOptions opt;
  int32_t n_batch = 512;
  std::shared_ptr<const sampling::VocabView> vocab;
  std::vector<Slot> slots;

  // Shared with submitters, guarded by mu.
  mutable std::mutex mu;
  std::condition_variable cv;       // wakes the worker
  std::condition_variable idle_cv;  // wakes drain()
  std::deque<std::shared_ptr<Job>> queue;
  int32_t claimed_slots = 0;  // slots held by admitted jobs plus those the queued jobs need
  int32_t jobs_active = 0;    // admitted, not finished
  bool stop = false;
  bool draining = false;
  bool abort_all = false;  // drain deadline passed: fail everything left
  int64_t aborted = 0;
  std::string save_request;
  std::promise<Status>* save_done = nullptr;
  int64_t next_id = 1;

  // Counters read by stats() without the worker's cooperation.
  std::atomic<int32_t> slots_busy{0}, queue_len{0}, running{0};
  std::atomic<int64_t> total{0}, completed{0}, rejected{0}, cancelled{0}, failed{0};
  std::atomic<int64_t> prompt_tokens{0}, cached_tokens{0}, completion_tokens{0}, steps{0};
  std::atomic<int64_t> kv_used{0}, drain_abandoned{0};
  mutable std::mutex stats_mu;  // rate window and op times
  std::deque<std::pair<Clock::time_point, int32_t>> rate_window;
  std::vector<BatcherStats::OpTime> op_times;
  bool op_timing = false;

  // Step cost estimates for sizing prefill chunks next to decoding streams.
  double ema_decode_ms = 0.0;
  double ema_prefill_token_ms = 0.0;

  std::unique_ptr<batching::BatchDrafter> drafter;  // speculation; null when off
  std::atomic<int64_t> spec_rounds{0}, spec_drafted{0}, spec_accepted{0};

  std::thread worker;

  Impl(Engine& e, const BatcherOptions& o) : engine(e), opt(o) {}

  void run();
  void admit_locked();
  bool step();
  void reap_cancelled();
  void abort_everything(const Status& why);
  PrefillBudget prefill_budget(int32_t n_decode) const;
  bool ensure_cells(int64_t need, const std::vector<bool>& protect);
  void sample_choice(Slot& slot, std::span<const float> row);
  void verify_choice(Slot& slot, std::span<const float> rows, double step_ms);
  bool take_token(Slot& slot, Result<int32_t> token, std::span<const float> row);
  void drop_cache(Slot& slot);
  void finish_choice(Slot& slot, const std::string& reason, std::string text, std::string detail = "");
  void release(Slot& slot);
  void complete_job(Job& job);
  void fail_job(std::shared_ptr<Job> job,
                const Status& status);  // by value: it resets the slots that hold it
  Status save_now(const std::string& path);
  void record_rate(int32_t n);
  kv::KvFileIdentity identity() const {
    return {engine.fingerprint(), engine.n_ctx(), engine.options().cache_type};
  }
};

// ---------------------------------------------------------------------------------------------------------
// Admission

void Batcher::Impl::admit_locked() {
  auto& kv = engine.kv();
  while (!queue.empty()) {
    std::shared_ptr<Job> job = queue.front();
    if (job->handle->cancelled()) {
      queue.pop_front();
      claimed_slots -= job->req.n_choices;
      cancelled.fetch_add(1);
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
    ++jobs_active;
    slots_busy.fetch_add(static_cast<int32_t>(n));
    running.fetch_add(1);
  }
  queue_len.store(static_cast<int32_t>(queue.size()));
  kv_used.store(kv.used_cells());
}

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

// ---------------------------------------------------------------------------------------------------------
// The step

// Prefill tokens a step may add next to n_decode streams. Alone, a full batch. Beside streams, a chunk
// costing about 0.9 of a decode-only step (at least 8 tokens, so a prompt always progresses): a short
// prompt waits a few steps and the streams' steps about double meanwhile. A long prompt (more than
// kLongPromptSteps such chunks) would hold the streams at that pace for most of their generation, so it
// gets 0.35 of a decode step (at least 2 tokens): its own TTFT grows, the streams keep their pace.
PrefillBudget Batcher::Impl::prefill_budget(int32_t n_decode) const {
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
  // Speculation: each decoder may add up to `cap` proposals after its next token, within its token
  // limit and the context, when the pool has a cell for each.
  std::vector<int32_t> caps(decoders.size(), 0);
  int64_t n_decode_tokens = static_cast<int64_t>(decoders.size());
  if (drafter) {
    int64_t extra = 0;
    for (size_t d = 0; d < decoders.size(); ++d) {
      const Slot& s = slots[decoders[d]];
      int32_t cap = std::min(kMaxDraftDepth, engine.n_ctx() - static_cast<int32_t>(s.tokens.size()) - 1);
      if (s.job->req.n_predict >= 0) cap = std::min(cap, s.job->req.n_predict - s.n_generated - 1);
      caps[d] = std::max(0, cap);
      extra += caps[d];
    }
    if (extra > 0 && ensure_cells(n_decode_tokens + extra, busy)) {
      n_decode_tokens += extra;
    } else {
      std::fill(caps.begin(), caps.end(), 0);
    }
  }
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

void Batcher::Impl::sample_choice(Slot& slot, std::span<const float> row) {
  std::vector<float> buf(row.begin(), row.end());
  take_token(slot, slot.job->samplers[static_cast<size_t>(slot.choice)].sample(buf), row);
}

// The slot's next token plus its proposals were evaluated (rows: 1 + k logits rows). Proposals are taken
// while the sampler accepts them (Sampler::verify); the first refusal gives the corrected token, and when
// all are accepted the last row gives one more. Rows past the accepted tokens leave the cache.
void Batcher::Impl::verify_choice(Slot& slot, std::span<const float> rows, double step_ms) {
  const auto n_vocab = static_cast<size_t>(engine.n_vocab());
  const Draft draft = std::move(slot.spec.draft);
  slot.spec.draft = Draft();
  const auto k = static_cast<int32_t>(draft.tokens.size());
  const std::shared_ptr<Job> job = slot.job;  // counted before a token can complete it
  ++job->spec.rounds;
  job->spec.drafted += k;
  spec_rounds.fetch_add(1);
  spec_drafted.fetch_add(k);
  sampling::Sampler& sampler = job->samplers[static_cast<size_t>(slot.choice)];
  slot.tokens.push_back(slot.next_token);
  slot.next_token = -1;
  int32_t n_accepted = 0;
  for (int32_t i = 0; i <= k; ++i) {
    const std::span<const float> row = rows.subspan(static_cast<size_t>(i) * n_vocab, n_vocab);
    std::vector<float> buf(row.begin(), row.end());
    bool accepted = false;
    Result<int32_t> token = i < k ? sampler.verify(buf, draft.tokens[static_cast<size_t>(i)],
                                                   draft.q[static_cast<size_t>(i)], &accepted)
                                  : sampler.sample(buf);
    if (accepted) {
      ++n_accepted;
      ++job->spec.accepted;
      spec_accepted.fetch_add(1);
    }
    if (!take_token(slot, std::move(token), row) || !accepted) break;
    // An accepted proposal's row is already in the cache.
    slot.tokens.push_back(slot.next_token);
    slot.next_token = -1;
  }
  if (!slot.job) return;  // finished: release() trimmed the cache
  engine.kv().seq_rm(slot.seq, static_cast<int32_t>(slot.tokens.size()), -1);
  drafter->record(slot, k, n_accepted, step_ms);
}

// Delivers a sampled token (or the sampler's refusal); false when the choice finished with it.
bool Batcher::Impl::take_token(Slot& slot, Result<int32_t> token, std::span<const float> row) {
  Job& job = *slot.job;
  sampling::Sampler& sampler = job.samplers[static_cast<size_t>(slot.choice)];
  if (!token.ok()) {
    if (sampler.has_grammar()) {
      finish_choice(slot, "grammar", release_held_text(*slot.detok, *slot.stops), token.status().message());
      return false;
    }
    fail_job(slot.job, token.status());
    return false;
  }
  sampler.accept(*token);
  if (vocab->is_eog(*token)) {
    finish_choice(slot, "stop", release_held_text(*slot.detok, *slot.stops));
    return false;
  }
  ++slot.n_generated;
  ++job.usage.completion_tokens;
  record_rate(1);
  BatchEvent ev;
  ev.kind = BatchEvent::Kind::kToken;
  ev.choice = slot.choice;
  ev.token = *token;
  if (job.req.n_top_logprobs >= 0) fill_logprobs(row, *token, job.req.n_top_logprobs, &ev);
  bool stopped = false;
  ev.text = slot.stops->push(slot.detok->push(*token), &stopped);
  const int32_t n_ctx = engine.n_ctx();
  const bool at_limit = job.req.n_predict >= 0 && slot.n_generated >= job.req.n_predict;
  const bool ctx_full = static_cast<int32_t>(slot.tokens.size()) >= n_ctx;  // no position left for it
  if (!stopped && (at_limit || ctx_full)) ev.text += release_held_text(*slot.detok, *slot.stops, &stopped);
  job.handle->push(std::move(ev));
  if (stopped) {
    finish_choice(slot, "stop", "");
    return false;
  }
  if (at_limit || ctx_full) {
    finish_choice(slot, "length", "");
    return false;
  }
  slot.next_token = *token;
  return true;
}

void Batcher::Impl::finish_choice(Slot& slot, const std::string& reason, std::string text,
                                  std::string detail) {
  std::shared_ptr<Job> job = slot.job;
  BatchEvent ev;
  ev.kind = BatchEvent::Kind::kDone;
  ev.choice = slot.choice;
  ev.finish_reason = reason;
  ev.text = std::move(text);
  ev.detail = std::move(detail);
  job->handle->push(std::move(ev));
  release(slot);
  if (--job->choices_open == 0) complete_job(*job);
}

void Batcher::Impl::release(Slot& slot) {
  if (!slot.job) return;
  // Only the slot's tokens stay cached (a verify step may have left rows of refused proposals).
  engine.kv().seq_rm(slot.seq, static_cast<int32_t>(slot.tokens.size()), -1);
  slot.job.reset();
  slot.generating = false;
  slot.next_token = -1;
  slot.detok.reset();
  slot.stops.reset();
  slot.last_used = Clock::now();
  slots_busy.fetch_sub(1);
  std::lock_guard<std::mutex> lock(mu);
  --claimed_slots;
}

void Batcher::Impl::complete_job(Job& job) {
  if (!opt.slots_file.empty()) {
    if (Status st = save_now(opt.slots_file); !st.ok())
      MINFER_LOG_WARN("batcher: slots file not saved: {}", st.message());
  }
  if (job.spec.rounds > 0) MINFER_LOG_INFO("batcher: request {}: {}", job.handle->id(), job.spec.summary());
  // Counters first, so a requester that has seen kFinished also sees them in stats().
  completed.fetch_add(1);
  prompt_tokens.fetch_add(job.usage.prompt_tokens);
  cached_tokens.fetch_add(job.usage.cached_tokens);
  completion_tokens.fetch_add(job.usage.completion_tokens);
  running.fetch_sub(1);
  {
    std::lock_guard<std::mutex> lock(mu);
    --jobs_active;
  }
  BatchEvent ev;
  ev.kind = BatchEvent::Kind::kFinished;
  ev.usage = job.usage;
  job.handle->push(std::move(ev));
  idle_cv.notify_all();
}

void Batcher::Impl::fail_job(std::shared_ptr<Job> job, const Status& status) {
  if (!job) return;
  bool admitted = false;
  for (int32_t si : job->slots) {
    Slot& s = slots[static_cast<size_t>(si)];
    if (s.job == job) {
      release(s);
      admitted = true;
    }
  }
  if (admitted) {
    running.fetch_sub(1);
    std::lock_guard<std::mutex> lock(mu);
    --jobs_active;
  }
  job->choices_open = 0;
  failed.fetch_add(1);
  BatchEvent err;
  err.kind = BatchEvent::Kind::kError;
  err.error = status;
  job->handle->push(std::move(err));
  BatchEvent fin;
  fin.kind = BatchEvent::Kind::kFinished;
  fin.usage = job->usage;
  job->handle->push(std::move(fin));
  idle_cv.notify_all();
}

void Batcher::Impl::reap_cancelled() {
  for (Slot& s : slots) {
    if (!s.job || !s.job->handle->cancelled()) continue;
    std::shared_ptr<Job> job = s.job;
    for (int32_t si : job->slots) release(slots[static_cast<size_t>(si)]);
    cancelled.fetch_add(1);
    running.fetch_sub(1);
    {
      std::lock_guard<std::mutex> lock(mu);
      --jobs_active;
    }
    job->handle->push({.kind = BatchEvent::Kind::kFinished});
    idle_cv.notify_all();
  }
}

void Batcher::Impl::abort_everything(const Status& why) {
  int64_t n = 0;
  for (Slot& s : slots) {
    if (!s.job) continue;
    fail_job(s.job, why);
    ++n;
  }
  std::deque<std::shared_ptr<Job>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu);
    waiting.swap(queue);
    for (const auto& job : waiting) claimed_slots -= job->req.n_choices;
  }
  for (const auto& job : waiting) {
    BatchEvent err;
    err.kind = BatchEvent::Kind::kError;
    err.error = why;
    job->handle->push(std::move(err));
    job->handle->push({.kind = BatchEvent::Kind::kFinished});
    failed.fetch_add(1);
    ++n;
  }
  queue_len.store(0);
  std::lock_guard<std::mutex> lock(mu);
  aborted += n;
}

void Batcher::Impl::record_rate(int32_t n) {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(stats_mu);
  if (!rate_window.empty() && now - rate_window.back().first < std::chrono::milliseconds(100)) {
    rate_window.back().second += n;
  } else {
    rate_window.emplace_back(now, n);
  }
  while (!rate_window.empty() &&
         std::chrono::duration<double>(now - rate_window.front().first).count() > kRateWindowSeconds) {
    rate_window.pop_front();
  }
}

Status Batcher::Impl::save_now(const std::string& path) {
  std::vector<kv::SavedSequence> seqs;
  for (const Slot& s : slots) {
    if (!s.tokens.empty()) seqs.push_back({s.seq, s.tokens});
  }
  return kv::save_kv_file(path, identity(), engine.kv(), seqs);
}

void Batcher::Impl::run() {
  for (;;) {
    std::string save_path;
    std::promise<Status>* save_promise = nullptr;
    bool abort = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] {
        return stop || abort_all || !save_request.empty() || !queue.empty() || jobs_active > 0;
      });
      if (stop) break;
      abort = abort_all;
      abort_all = false;
      save_path.swap(save_request);
      save_promise = save_done;
      save_done = nullptr;
      if (!abort) admit_locked();
    }
    if (abort) {
      abort_everything(unavailable("the server is shutting down (drain deadline passed)"));
      idle_cv.notify_all();
      continue;
    }
    if (save_promise != nullptr) save_promise->set_value(save_now(save_path));
    reap_cancelled();
    bool progressed = false;
    for (const Slot& s : slots) progressed |= s.job != nullptr;
    if (progressed && !step()) {
      // Nothing could run this step (waiting for cells): yield instead of spinning.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5));
    }
    if (!progressed) {
      // Admission is waiting for cells held by nobody active: re-check shortly.
      std::unique_lock<std::mutex> lock(mu);
      if (!queue.empty() && jobs_active == 0) cv.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
  abort_everything(unavailable("the server is shutting down"));
  idle_cv.notify_all();
}

// ---------------------------------------------------------------------------------------------------------
// Public API

Batcher::Batcher(std::unique_ptr<Impl> impl) : options_(impl->opt), impl_(std::move(impl)) {}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

Result<std::unique_ptr<Batcher>> Batcher::create(Engine& engine, const BatcherOptions& options) {
  if (options.n_slots < 1 || options.n_slots > kv::kMaxSequences) {
    return invalid_argument("--n-slots {} is outside [1, {}]", options.n_slots, kv::kMaxSequences);
  }
  if (options.queue_depth < 0) return invalid_argument("--queue-depth {} is negative", options.queue_depth);
  if (options.n_batch < 0) return invalid_argument("batch size {} is negative", options.n_batch);
  auto impl = std::make_unique<Impl>(engine, options);
  impl->n_batch = options.n_batch > 0 ? options.n_batch : engine.options().n_batch;
  impl->vocab = engine.sampling_vocab();
  if (options.speculate) {
    MINFER_ASSIGN_OR_RETURN(impl->drafter,
                            batching::BatchDrafter::create(engine, options.draft_model, options.spec));
  }
  const char* timing = std::getenv("MINFER_OP_TIMING");
  impl->op_timing = timing != nullptr && std::string(timing) == "1";
  engine.kv().clear();
  impl->slots.resize(static_cast<size_t>(options.n_slots));
  for (size_t i = 0; i < impl->slots.size(); ++i) impl->slots[i].seq = static_cast<kv::SeqId>(i);
  if (!options.slots_file.empty()) {
    auto loaded = kv::load_kv_file(options.slots_file, impl->identity(), engine.kv());
    if (loaded.ok()) {
      size_t n_rows = 0;
      for (const kv::SavedSequence& s : *loaded) {
        if (s.seq >= options.n_slots) {
          engine.kv().seq_rm(s.seq, 0, -1);
          continue;
        }
        impl->slots[static_cast<size_t>(s.seq)].tokens = s.tokens;
        n_rows += s.tokens.size();
      }
      MINFER_LOG_INFO("batcher: restored {} slots ({} KV rows) from {}", loaded->size(), n_rows,
                      options.slots_file);
    } else if (loaded.status().code() == StatusCode::kNotFound) {
      MINFER_LOG_INFO("batcher: no slots file at {} yet; starting empty", options.slots_file);
    } else {
      MINFER_LOG_WARN("batcher: {}; starting with empty slots", loaded.status().message());
    }
  }
  impl->kv_used.store(engine.kv().used_cells());
  Impl* raw = impl.get();
  impl->worker = std::thread([raw] { raw->run(); });
  return std::unique_ptr<Batcher>(new Batcher(std::move(impl)));
}

Result<std::shared_ptr<RequestHandle>> Batcher::submit(BatchRequest request) {
  Impl& im = *impl_;
  const int32_t n_ctx = im.engine.n_ctx();
  auto reject = [&](Status st) -> Status {
    im.rejected.fetch_add(1);
    return st;
  };
  if (request.prompt.empty()) return invalid_argument("the prompt is empty");
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= im.engine.n_vocab()) {
      return invalid_argument("prompt token id {} is outside the vocabulary [0, {})", id,
                              im.engine.n_vocab());
    }
  }
  if (static_cast<int32_t>(request.prompt.size()) >= n_ctx) {
    return error(StatusCode::kOutOfRange, "the prompt has {} tokens but the context holds {}",
                 request.prompt.size(), n_ctx);
  }
  if (request.n_choices < 1 || request.n_choices > im.opt.n_slots) {
    return invalid_argument("n = {} is outside [1, {}] (the server's slots)", request.n_choices,
                            im.opt.n_slots);
  }
  if (request.n_top_logprobs > kMaxTopLogprobs) {
    return invalid_argument("top_logprobs = {} is above {}", request.n_top_logprobs, kMaxTopLogprobs);
  }
  if (request.n_predict == 0 || request.n_predict < -1) {
    return invalid_argument("max_tokens = {} must be at least 1", request.n_predict);
  }
  auto job = std::make_shared<Job>();
  uint64_t seed = request.sampling.seed;
  for (int32_t c = 0; c < request.n_choices; ++c) {
    sampling::SamplerConfig cfg = request.sampling;
    if (c > 0) cfg.seed = seed + static_cast<uint64_t>(c);
    MINFER_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(cfg, im.vocab));
    if (c == 0) seed = sampler.seed();
    for (int32_t id : request.prompt) sampler.accept_history(id);
    job->samplers.push_back(std::move(sampler));
  }
  job->handle = std::make_shared<RequestHandle>();
  job->req = std::move(request);
  if (im.drafter) MINFER_RETURN_IF_ERROR(im.drafter->prepare(*job));
  {
    std::lock_guard<std::mutex> lock(im.mu);
    if (im.draining || im.stop) return reject(unavailable("the server is draining"));
    // claimed_slots counts running jobs' slots and what queued jobs will need; beyond n_slots they wait.
    const int32_t free_slots = im.opt.n_slots - im.claimed_slots;
    if (job->req.n_choices > free_slots) {
      if (im.opt.queue_depth == 0) return reject(unavailable("no idle slot"));
      const int32_t waiting = std::max(0, im.claimed_slots - im.opt.n_slots);
      if (waiting + job->req.n_choices > im.opt.queue_depth) return reject(unavailable("queue full"));
    }
    job->handle->id_ = im.next_id++;
    im.claimed_slots += job->req.n_choices;
    im.queue.push_back(job);
    im.queue_len.store(static_cast<int32_t>(im.queue.size()));
    im.total.fetch_add(1);
  }
  im.cv.notify_all();
  return job->handle;
}

int64_t Batcher::drain(std::chrono::milliseconds deadline) {
  Impl& im = *impl_;
  std::unique_lock<std::mutex> lock(im.mu);
  im.draining = true;
  const bool clean =
      im.idle_cv.wait_for(lock, deadline, [&] { return im.queue.empty() && im.jobs_active == 0; });
  if (clean) return 0;
  const int64_t before = im.aborted;
  im.abort_all = true;
  im.cv.notify_all();
  im.idle_cv.wait(lock, [&] { return !im.abort_all; });
  // The worker has taken the flag; wait until it has answered everyone.
  im.idle_cv.wait_for(lock, std::chrono::seconds(30),
                      [&] { return im.queue.empty() && im.jobs_active == 0; });
  const int64_t abandoned = im.aborted - before;
  im.drain_abandoned.store(abandoned);
  return abandoned;
}

BatcherStats Batcher::stats() const {
  const Impl& im = *impl_;
  BatcherStats s;
  s.n_slots = im.opt.n_slots;
  s.slots_busy = im.slots_busy.load();
  s.queue_depth = im.queue_len.load();
  s.requests_running = im.running.load();
  s.requests_total = im.total.load();
  s.requests_completed = im.completed.load();
  s.requests_rejected = im.rejected.load();
  s.requests_cancelled = im.cancelled.load();
  s.requests_failed = im.failed.load();
  s.prompt_tokens = im.prompt_tokens.load();
  s.cached_prompt_tokens = im.cached_tokens.load();
  s.completion_tokens = im.completion_tokens.load();
  s.steps = im.steps.load();
  s.spec_rounds = im.spec_rounds.load();
  s.spec_drafted = im.spec_drafted.load();
  s.spec_accepted = im.spec_accepted.load();
  s.kv_cells_used = im.kv_used.load();
  s.kv_cells_total = im.engine.kv().n_cells();
  s.drain_abandoned = im.drain_abandoned.load();
  {
    std::lock_guard<std::mutex> lock(im.stats_mu);
    const auto now = Clock::now();
    int64_t n = 0;
    for (const auto& [t, k] : im.rate_window) {
      if (std::chrono::duration<double>(now - t).count() <= kRateWindowSeconds) n += k;
    }
    s.completion_tokens_per_second = static_cast<double>(n) / kRateWindowSeconds;
    s.op_times = im.op_times;
  }
  {
    std::lock_guard<std::mutex> lock(im.mu);
    s.draining = im.draining;
  }
  return s;
}

Status Batcher::save_slots(const std::string& path) {
  Impl& im = *impl_;
  std::promise<Status> done;
  auto result = done.get_future();
  {
    std::lock_guard<std::mutex> lock(im.mu);
    if (im.save_done != nullptr) return unavailable("a slots save is already in progress");
    im.save_request = path;
    im.save_done = &done;
  }
  im.cv.notify_all();
  return result.get();
}

}  // namespace minfer::engine
