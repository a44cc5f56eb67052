#include "engine/batch_drafter.h"

#include <algorithm>

#include "core/log.h"

namespace minfer::engine::batching {
namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The slot's sequence as the drafter sees it: its evaluated tokens plus the sampled next one.
std::vector<int32_t> history_of(const Slot& s) {
  std::vector<int32_t> h = s.tokens;
  h.push_back(s.next_token);
  return h;
}

}  // namespace

Result<std::unique_ptr<BatchDrafter>> BatchDrafter::create(Engine& target, Engine* draft,
                                                           const SpecOptions& spec) {
  if (spec.draft_n < 1 || spec.draft_n > kMaxDraftDepth) {
    return invalid_argument("--spec-draft-n {} is outside [1, {}]", spec.draft_n, kMaxDraftDepth);
  }
  if (draft != nullptr) {
    MINFER_RETURN_IF_ERROR(check_same_vocabulary(target.tokenizer(), draft->tokenizer()));
    draft->kv().clear();
  }
  return std::unique_ptr<BatchDrafter>(new BatchDrafter(target, draft, spec));
}

Status BatchDrafter::prepare(Job& job) const {
  if (job.req.sampling.mirostat != 0) {
    return unsupported(
        "mirostat cannot be combined with the server's speculative decoding (its state moves with "
        "every draw, so drafted tokens cannot be verified)");
  }
  if (draft_ == nullptr) return {};
  job.draft_samplers.clear();
  for (const sampling::Sampler& target_sampler : job.samplers) {
    sampling::SamplerConfig cfg = target_sampler.config();
    cfg.seed = target_sampler.seed() ^ 0x5eedd4afULL;  // independent of the target's draws
    MINFER_ASSIGN_OR_RETURN(sampling::Sampler s, sampling::Sampler::create(cfg, draft_->sampling_vocab()));
    for (int32_t id : job.req.prompt) s.accept_history(id);
    job.draft_samplers.push_back(std::move(s));
  }
  return {};
}

void BatchDrafter::admitted(std::vector<Slot>& slots, size_t primary, size_t source, size_t shared,
                            std::span<const size_t> others) {
  Slot& p = slots[primary];
  const std::vector<int32_t>& prompt = p.job->req.prompt;
  // The draft samplers have taken the prompt as history (prepare()).
  const auto fresh = [&](std::vector<int32_t> cached) {
    return SlotSpec{
        .cached = std::move(cached), .planner = DepthPlanner(spec_.draft_n), .synced = prompt.size()};
  };
  if (draft_ == nullptr) {
    p.spec = fresh({});
    for (size_t i : others) slots[i].spec = fresh({});
    return;
  }
  // The primary first: the source may be one of the other chosen slots, cleared below.
  auto& kv = draft_->kv();
  if (source != primary) {
    const size_t k = std::min(shared, common_prefix(slots[source].spec.cached, prompt));
    kv.seq_rm(p.seq, 0, -1);
    if (k > 0) kv.seq_cp(slots[source].seq, p.seq, 0, static_cast<int32_t>(k));
    p.spec = fresh(std::vector<int32_t>(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(k)));
  } else {
    const size_t k = std::min(shared, common_prefix(p.spec.cached, prompt));
    kv.seq_rm(p.seq, static_cast<int32_t>(k), -1);
    p.spec.cached.resize(k);
    p.spec = fresh(std::move(p.spec.cached));
  }
  for (size_t i : others) {
    kv.seq_rm(slots[i].seq, 0, -1);
    slots[i].spec = fresh({});
  }
}

void BatchDrafter::dropped(Slot& slot) {
  if (draft_ != nullptr) draft_->kv().seq_rm(slot.seq, 0, -1);
  slot.spec.cached.clear();
}

void BatchDrafter::shared_prompt(const Slot& from, Slot& to) {
  if (draft_ == nullptr) return;
  draft_->kv().seq_rm(to.seq, 0, -1);
  draft_->kv().seq_cp(from.seq, to.seq, 0, -1);
  to.spec.cached = from.spec.cached;
}

void BatchDrafter::propose(std::vector<Slot>& slots, std::span<const size_t> decoders,
                           std::span<const int32_t> caps, std::span<const PromptChunk> chunks) {
  for (size_t i : decoders) {
    slots[i].spec.draft = Draft();
    slots[i].spec.draft_ms = 0.0;
  }
  if (draft_ == nullptr) {
    propose_lookup(slots, decoders, caps);
  } else {
    propose_model(slots, decoders, caps, chunks);
  }
}

void BatchDrafter::propose_lookup(std::vector<Slot>& slots, std::span<const size_t> decoders,
                                  std::span<const int32_t> caps) {
  for (size_t d = 0; d < decoders.size(); ++d) {
    Slot& s = slots[decoders[d]];
    const int32_t depth = std::min(caps[d], spec_.adaptive ? s.spec.planner.choose() : spec_.draft_n);
    if (depth <= 0) continue;
    const auto t0 = Clock::now();
    auto proposed = lookup_.propose(history_of(s), depth);
    if (proposed.ok()) s.spec.draft = std::move(*proposed);
    s.spec.draft_ms = ms_since(t0);
  }
}

void BatchDrafter::propose_model(std::vector<Slot>& slots, std::span<const size_t> decoders,
                                 std::span<const int32_t> caps, std::span<const PromptChunk> chunks) {
  auto& kv = draft_->kv();
  const auto t0 = Clock::now();
  const auto max_feed = static_cast<size_t>(draft_->options().n_batch);
  // Round 0 feeds each slot's missing tokens: the step's prompt chunks, and every drafting slot's history
  // past its draft cache (usually just its next token), whose last row starts the proposals.
  struct Feed {
    size_t slot;
    std::vector<int32_t> tokens;
    int32_t depth;  // > 0: drafts after the feed
  };
  std::vector<Feed> feeds;
  for (const PromptChunk& c : chunks) {
    Slot& s = slots[c.slot];
    if (s.spec.cached.size() != c.begin) continue;  // lagging (restored slots): caught up when it decodes
    const std::vector<int32_t>& prompt = s.job->req.prompt;
    const auto begin = prompt.begin() + static_cast<std::ptrdiff_t>(c.begin);
    feeds.push_back({c.slot, std::vector<int32_t>(begin, begin + static_cast<std::ptrdiff_t>(c.count)), 0});
  }
  for (size_t d = 0; d < decoders.size(); ++d) {
    Slot& s = slots[decoders[d]];
    const int32_t depth = std::min(caps[d], spec_.adaptive ? s.spec.planner.choose() : spec_.draft_n);
    if (depth <= 0) continue;
    const std::vector<int32_t> history = history_of(s);
    // The draft sampler follows the sequence: last round's proposals out, the tokens taken since in.
    sampling::Sampler& sampler = s.job->draft_samplers[static_cast<size_t>(s.choice)];
    sampler.rewind();
    for (size_t i = s.spec.synced; i < history.size(); ++i) sampler.accept(history[i]);
    s.spec.synced = history.size();
    sampler.mark();
    const size_t keep = std::min(common_prefix(s.spec.cached, history), history.size() - 1);
    kv.seq_rm(s.seq, static_cast<int32_t>(keep), -1);  // proposals the target rejected
    s.spec.cached.resize(keep);
    const size_t missing = history.size() - keep;
    const size_t n = std::min(missing, max_feed);
    const auto begin = history.begin() + static_cast<std::ptrdiff_t>(keep);
    feeds.push_back({decoders[d], std::vector<int32_t>(begin, begin + static_cast<std::ptrdiff_t>(n)),
                     n == missing ? depth : 0});
  }
  if (feeds.empty()) return;
  int64_t need = 0;
  for (const Feed& f : feeds) need += static_cast<int64_t>(f.tokens.size()) + std::max(0, f.depth - 1);
  if (!ensure_draft_cells(slots, need)) return;  // no room: this step decodes without proposals

  Batch batch;
  for (const Feed& f : feeds) {
    const Slot& s = slots[f.slot];
    for (size_t j = 0; j < f.tokens.size(); ++j) {
      batch.add(f.tokens[j], static_cast<int32_t>(s.spec.cached.size() + j), s.seq,
                f.depth > 0 && j + 1 == f.tokens.size());
    }
  }
  auto logits = draft_->decode(batch);
  if (!logits.ok()) {
    MINFER_LOG_WARN("batcher: draft forward failed, decoding without proposals: {}",
                    logits.status().message());
    return;
  }
  std::vector<size_t> active;  // feeds that draft, in logits-row order
  for (size_t f = 0; f < feeds.size(); ++f) {
    Slot& s = slots[feeds[f].slot];
    s.spec.cached.insert(s.spec.cached.end(), feeds[f].tokens.begin(), feeds[f].tokens.end());
    if (feeds[f].depth > 0) active.push_back(f);
  }
  const auto n_vocab = static_cast<size_t>(draft_->n_vocab());
  std::vector<float> rows = std::move(*logits);
  for (;;) {
    // Each active slot draws its next proposal from its row; those that go on are evaluated together.
    Batch next;
    std::vector<size_t> going;
    for (size_t a = 0; a < active.size(); ++a) {
      const Feed& f = feeds[active[a]];
      Slot& s = slots[f.slot];
      sampling::Sampler& sampler = s.job->draft_samplers[static_cast<size_t>(s.choice)];
      std::span<float> row(rows.data() + a * n_vocab, n_vocab);
      auto q = sampler.distribution(row);
      if (!q.ok()) continue;
      const int32_t token = sampler.draw(*q);
      sampler.accept(token);
      s.spec.draft.tokens.push_back(token);
      s.spec.draft.q.push_back(q->size() == 1 ? std::vector<sampling::TokenData>() : std::move(*q));
      if (static_cast<int32_t>(s.spec.draft.tokens.size()) >= f.depth || draft_->tokenizer().is_eog(token))
        continue;
      next.add(token, static_cast<int32_t>(s.spec.cached.size()), s.seq, true);
      going.push_back(active[a]);
    }
    if (going.empty()) break;
    auto more = draft_->decode(next);
    if (!more.ok()) break;  // the proposals so far stand
    for (size_t g = 0; g < going.size(); ++g)
      slots[feeds[going[g]].slot].spec.cached.push_back(next.tokens[g]);
    rows = std::move(*more);
    active = std::move(going);
  }
  const double ms = ms_since(t0);
  for (size_t d : decoders) {
    if (!slots[d].spec.draft.tokens.empty())
      slots[d].spec.draft_ms = ms / static_cast<double>(decoders.size());
  }
}

bool BatchDrafter::ensure_draft_cells(std::vector<Slot>& slots, int64_t need) {
  auto& kv = draft_->kv();
  while (kv.free_cells() < need) {
    Slot* victim = nullptr;
    for (Slot& s : slots) {
      if (s.job || s.spec.cached.empty()) continue;
      if (victim == nullptr || s.last_used < victim->last_used) victim = &s;
    }
    if (victim == nullptr) return false;
    dropped(*victim);
  }
  return true;
}

void BatchDrafter::record(Slot& slot, int32_t drafted, int32_t accepted, double step_ms) {
  slot.spec.planner.record(drafted, accepted, slot.spec.draft_ms, step_ms);
}

}  // namespace minfer::engine::batching
