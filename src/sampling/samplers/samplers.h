// The individual sampler stages, each matching llama.cpp's llama-sampling.cpp semantics. Stateless stages
// are free functions; stages with per-run state (penalties, DRY, mirostat) are small classes.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/rng.h"
#include "sampling/config.h"
#include "sampling/samplers/candidates.h"
#include "sampling/vocab_view.h"

namespace minfer::sampling {

// Adds each bias to the raw logit of its token (repeated ids add up). Tokens must be in range (validated).
void apply_logit_bias(std::span<float> logits, const std::vector<LogitBias>& bias);

// k <= 0: no-op. Keeps the k highest logits (sorted).
void top_k(Candidates& c, int32_t k);
// p >= 1: no-op. Keeps the smallest sorted prefix whose probability mass reaches p (and >= min_keep).
void top_p(Candidates& c, float p, size_t min_keep);
// p <= 0: no-op. Keeps tokens with prob >= p * max prob (and >= min_keep).
void min_p(Candidates& c, float p, size_t min_keep);
// p >= 1: no-op. Locally typical sampling: keeps tokens whose surprise is closest to the entropy.
void typical(Candidates& c, float p, size_t min_keep);
// With probability `probability` (one uniform from rng, drawn only when XTC is active), removes every
// token at least as likely as `threshold` except the least likely of them.
void xtc(Candidates& c, float probability, float threshold, size_t min_keep, Rng& rng);
// temp <= 0: keeps only the max-logit token; else logits /= temp.
void temperature(Candidates& c, float temp);

// Repeat / frequency / presence penalties over the last `last_n` accepted tokens.
class Penalties {
 public:
  Penalties(int32_t last_n, float repeat, float frequency, float presence);
  bool active() const;
  void accept(int32_t token);
  void apply(Candidates& c) const;

 private:
  int32_t last_n_;
  float repeat_, frequency_, presence_;
  std::deque<int32_t> history_;
  std::unordered_map<int32_t, int32_t> counts_;
};

// DRY ("don't repeat yourself"): penalises the token that would extend a repeated sequence of length
// >= allowed_length by multiplier * base^(len - allowed_length); sequence breakers limit the lookback.
class Dry {
 public:
  Dry(const SamplerConfig& cfg, const VocabView& vocab);
  bool active() const;
  void accept(int32_t token);
  void apply(Candidates& c);

 private:
  int32_t rat(int i) const { return history_[history_.size() - 1 - static_cast<size_t>(i)]; }
  float multiplier_, base_;
  int32_t allowed_length_, last_n_;
  size_t capacity_;
  std::deque<int32_t> history_;
  std::unordered_multimap<int32_t, std::vector<int32_t>> breakers_;  // head token -> tail tokens
  std::vector<int> repeat_count_;
  std::unordered_map<int32_t, int> max_token_repeat_;
};

// Mirostat v1 (version 1) and v2 (version 2): picks the token itself and adapts mu toward `tau` surprise.
class Mirostat {
 public:
  Mirostat(int version, float tau, float eta, int32_t m, int32_t n_vocab);
  // Returns the index into c.data of the chosen token.
  size_t sample(Candidates& c, Rng& rng);
  float mu() const { return mu_; }

 private:
  int version_;
  float tau_, eta_;
  int32_t m_, n_vocab_;
  float mu_;
};

}  // namespace minfer::sampling
