// Sampler: one per run. Owns the pipeline state (RNG, penalty / DRY history, mirostat mu, grammar
// position), so concurrent runs never share mutable state. The compiled grammar and token trie are shared.
//
// Pipeline (one config, one order): logit bias -> penalties -> DRY -> grammar mask -> greedy (temp 0)
// -> top-k -> typical -> top-p -> min-p -> XTC -> temperature -> draw, or mirostat v1 / v2 after the mask.
//
//   auto vocab = std::make_shared<VocabView>(...);
//   MINFER_ASSIGN_OR_RETURN(Sampler s, Sampler::create(cfg, vocab));
//   for (;;) {
//     MINFER_ASSIGN_OR_RETURN(int32_t tok, s.sample(logits));   // error when the grammar allows nothing
//     s.accept(tok);
//     if (vocab->is_eog(tok)) break;
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "sampling/config.h"
#include "sampling/samplers/candidates.h"
#include "sampling/vocab_view.h"

namespace minfer::sampling {

namespace grammar {
class Grammar;
}

class Sampler {
 public:
  // Validates `cfg` against the vocabulary and compiles its grammar / schema (errors name the construct).
  // Cost: a grammar needs the token trie, built once per VocabView (~tens of ms for 152k tokens) and shared.
  static Result<Sampler> create(const SamplerConfig& cfg, std::shared_ptr<const VocabView> vocab);

  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;
  ~Sampler();

  // Picks the next token from raw logits (size n_vocab; the buffer is modified). Fails, naming the
  // reason, when the grammar allows no token, or when the logits are all -inf / NaN.
  Result<int32_t> sample(std::span<float> logits);

  // The distribution the next draw would come from: every stage applied, probabilities normalised, zero
  // entries dropped; a point mass at the argmax when greedy. Refuses mirostat (its state moves with the
  // draw). Consumes XTC's random numbers as sample() does. The buffer is modified.
  Result<std::vector<TokenData>> distribution(std::span<float> logits);
  // Draws from `dist` (as returned by distribution()) with this run's RNG.
  int32_t draw(std::span<const TokenData> dist);
  // Speculative verification of a drafted token (Leviathan et al. 2023): with p = distribution(logits),
  // accepts `draft` with probability min(1, p(draft) / q(draft)), otherwise draws from the normalised
  // max(0, p - q). `q` is the distribution the draft was drawn from; empty means a point mass at `draft`
  // (prompt lookup, greedy drafts). Greedy: accepts iff `draft` is the argmax, else returns the argmax.
  // Returns the token to emit and sets *accepted. Does not accept() it.
  Result<int32_t> verify(std::span<float> logits, int32_t draft, std::span<const TokenData> q,
                         bool* accepted);

  // Advances penalty / DRY history and the grammar with a generated token. A token the grammar rejects
  // leaves the grammar dead, and the next sample() reports it.
  void accept(int32_t token);
  // Adds a prompt token to the penalty / DRY history only (llama.cpp feeds the prompt this way).
  void accept_history(int32_t token);

  // Speculative drafting: mark() remembers the position (penalty and DRY history, grammar state); rewind()
  // takes back every token accepted since, and is a no-op without a mark.
  void mark();
  void rewind();
  // True when end-of-generation is allowed now: no grammar, or the grammar is in an accepting state.
  bool grammar_accepting() const;
  bool has_grammar() const;
  const SamplerConfig& config() const;
  // The seed actually used (differs from config().seed when that was kRandomSeed).
  uint64_t seed() const;

 private:
  struct State;
  explicit Sampler(std::unique_ptr<State> state);
  Status prepare(std::span<float> logits);
  std::unique_ptr<State> state_;
};

}  // namespace minfer::sampling
