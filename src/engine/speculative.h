// Speculative decoding for one sequence: a drafter proposes tokens, the target evaluates the last accepted
// token plus the proposals in one batch and keeps the longest prefix its sampler agrees with (greedy: the
// argmax; sampling: the acceptance rule in Sampler::verify), so the output equals, token for token when
// greedy and in distribution when sampling, a run without speculation. Rejected rows leave both caches.
//
//   auto drafter = ModelDrafter::create(std::move(draft_engine), target);
//   SpecStats stats;
//   auto result = generate_speculative(target, **drafter, prompt_ids, options, {.draft_n = 4}, &stats);
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/depth_planner.h"
#include "engine/generate.h"
#include "sampling/sampler.h"

namespace minfer::engine {

struct SpecOptions {
  int32_t draft_n = 4;    // tokens proposed per round; with `adaptive`, the cap (at most kMaxDraftDepth)
  bool adaptive = false;  // choose each round's depth from measured acceptance and step costs
};

struct SpecStats {
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  // Per draft position i (0-based): rounds that reached it (drafted more than i tokens and accepted the i
  // before it) and rounds that accepted it, so accepted_at[i] / reached_at[i] is the acceptance of the
  // (i+1)-th drafted token given the ones before it were taken.
  std::array<int64_t, kMaxDraftDepth> reached_at{};
  std::array<int64_t, kMaxDraftDepth> accepted_at{};

  // One round: `k` tokens drafted, the first `n_accepted` of them accepted.
  void record(int32_t k, int32_t n_accepted);
  void add(const SpecStats& other);
  double acceptance_rate() const {
    return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  }
  // Drafted tokens accepted per round (each round also emits one token of the target's own).
  double mean_accepted() const {
    return rounds > 0 ? static_cast<double>(accepted) / static_cast<double>(rounds) : 0.0;
  }
  std::string summary() const;
  // "1: 93% (120), 2: 85% (112), ..." for every position some round reached.
  std::string by_position() const;
};

// Proposals: tokens and, for each, the distribution it was drawn from (empty: a deterministic proposal).
struct Draft {
  std::vector<int32_t> tokens;
  std::vector<std::vector<sampling::TokenData>> q;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // A new sequence starts with `prompt`, generated with `sampling` (generate_speculative calls it first).
  virtual Status begin(std::span<const int32_t> prompt, const sampling::SamplerConfig& sampling) {
    (void)prompt;
    (void)sampling;
    return {};
  }
  // Up to `n` tokens likely to follow `history` (every token of the sequence so far, the last included).
  virtual Result<Draft> propose(std::span<const int32_t> history, int32_t n) = 0;
};

// Prompt lookup: finds the longest earlier occurrence (max_ngram down to min_ngram tokens) of the history's
// tail and proposes what followed it. No model; helps when the output repeats the input (edits, code).
class LookupDrafter : public Drafter {
 public:
  explicit LookupDrafter(int32_t max_ngram = 4, int32_t min_ngram = 1)
      : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  Result<Draft> propose(std::span<const int32_t> history, int32_t n) override;

 private:
  int32_t max_ngram_, min_ngram_;
};

// A smaller model with the same vocabulary. Its KV cache (sequence 0) follows the history: each round it
// evaluates only the tokens it has not seen (the target's last correction), then drafts n tokens with n
// single-token forwards. Its sampler is the request's pipeline (grammar included, so proposals stay in
// the language; any proposal distribution keeps the output exact) with another seed; it follows the
// sequence, its proposals taken back each round (Sampler::mark / rewind).
class ModelDrafter : public Drafter {
 public:
  // Refuses a vocabulary that differs from the target's (size, or the first differing token, named).
  static Result<std::unique_ptr<ModelDrafter>> create(std::unique_ptr<Engine> draft, const Engine& target);
  Status begin(std::span<const int32_t> prompt, const sampling::SamplerConfig& sampling) override;
  Result<Draft> propose(std::span<const int32_t> history, int32_t n) override;
  Engine& engine() { return *engine_; }
  const std::vector<int32_t>& cached() const { return cached_; }

 private:
  explicit ModelDrafter(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
  std::unique_ptr<Engine> engine_;
  std::optional<sampling::Sampler> sampler_;  // set by begin()
  uint64_t n_sequences_ = 0;
  size_t synced_ = 0;            // tokens of the sequence the sampler has taken
  std::vector<int32_t> cached_;  // tokens whose rows are in the draft cache, positions 0..n-1
};

// The first difference between two vocabularies, or OK.
Status check_same_vocabulary(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft);

// generate() with speculation. Same options, results and stop rules; `stats` may be null.
Result<GenerateResult> generate_speculative(Engine& target, Drafter& drafter,
                                            const std::vector<int32_t>& prompt_ids,
                                            const GenerateOptions& options, const SpecOptions& spec,
                                            SpecStats* stats,
                                            const std::function<void(std::string_view)>& on_text = {});

}  // namespace minfer::engine
