// Delivery: a sampled token (or the sampler's refusal) becomes the choice's events: its text through the
// stream decoder and the stop strings (never emitted), its logprobs when asked, and the end of the choice
// at end of generation, a stop string, max_tokens or a full context.
#include "engine/batcher_worker.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/generate.h"

namespace minfer::engine {

namespace {

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

void Batcher::Impl::sample_choice(Slot& slot, std::span<const float> row) {
  std::vector<float> buf(row.begin(), row.end());
  take_token(slot, slot.job->samplers[static_cast<size_t>(slot.choice)].sample(buf), row);
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
  if (!job.first_token) job.first_token = Clock::now();
  record_rate(1);
  BatchEvent ev;
  ev.kind = BatchEvent::Kind::kToken;
  ev.choice = slot.choice;
  ev.token = *token;
  ev.usage = job.usage;
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

void Batcher::Impl::record_rate(int32_t n) {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(stats_mu);
  if (!rate_window.empty() && now - rate_window.back().first < std::chrono::milliseconds(100)) {
    rate_window.back().second += n;
  } else {
    rate_window.emplace_back(now, n);
  }
  while (!rate_window.empty() && std::chrono::duration<double>(now - rate_window.front().first).count() >
                                     batching::kRateWindowSeconds) {
    rate_window.pop_front();
  }
}

}  // namespace minfer::engine
