// The batcher's side of speculative decoding; batch_drafter proposes. Before the forward: how many proposals
// each decoding slot may get. After it: the slot's rows are verified with its own sampler, exactly as
// generate_speculative does for one sequence, and the rows of refused proposals leave the cache.
#include "engine/batcher_worker.h"

#include <algorithm>

namespace minfer::engine {

// Proposals each decoder may add after its next token: up to the deepest draft, within its token limit
// and the context. All or none: when the pool cannot hold every proposal, nobody speculates this step.
std::vector<int32_t> Batcher::Impl::speculation_caps(std::span<const size_t> decoders,
                                                     const std::vector<bool>& busy,
                                                     int64_t* n_decode_tokens) {
  std::vector<int32_t> caps(decoders.size(), 0);
  if (!drafter) return caps;
  int64_t extra = 0;
  for (size_t d = 0; d < decoders.size(); ++d) {
    const Slot& s = slots[decoders[d]];
    int32_t cap = std::min(kMaxDraftDepth, engine.n_ctx() - static_cast<int32_t>(s.tokens.size()) - 1);
    if (s.job->req.n_predict >= 0) cap = std::min(cap, s.job->req.n_predict - s.n_generated - 1);
    caps[d] = std::max(0, cap);
    extra += caps[d];
  }
  if (extra > 0 && ensure_cells(*n_decode_tokens + extra, busy)) {
    *n_decode_tokens += extra;
  } else {
    std::fill(caps.begin(), caps.end(), 0);
  }
  return caps;
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

}  // namespace minfer::engine
