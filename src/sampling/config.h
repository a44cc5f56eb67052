// SamplerConfig: every sampling knob (llama.cpp names and defaults) plus the grammar / JSON Schema source,
// and validate(), which refuses nonsense naming the value; it never clamps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace minfer::sampling {

struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;
};

// Defaults: temp / top-k / top-p / penalty window / DRY and mirostat constants as llama.cpp's
// common_params_sampling; every other knob defaults to "off" (min-p is 0, not llama.cpp's 0.05).
struct SamplerConfig {
  static constexpr uint64_t kRandomSeed = 0xFFFFFFFFu;  // llama.cpp's LLAMA_DEFAULT_SEED: seed from the clock

  uint64_t seed = kRandomSeed;

  float temp = 0.8f;       // 0 = greedy (argmax after penalties and grammar)
  int32_t top_k = 40;      // 0 = off
  float top_p = 0.95f;     // 1 = off
  float min_p = 0.0f;      // 0 = off
  float typical_p = 1.0f;  // 1 = off
  int32_t min_keep = 0;    // every truncating sampler keeps at least this many candidates

  float repeat_penalty = 1.0f;  // 1 = off
  int32_t repeat_last_n = 64;   // window of the penalties; 0 = off, -1 = whole history
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;

  float dry_multiplier = 0.0f;  // 0 = off
  float dry_base = 1.75f;
  int32_t dry_allowed_length = 2;
  int32_t dry_penalty_last_n = -1;  // -1 = whole history, 0 = off
  std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};

  float xtc_probability = 0.0f;  // 0 = off
  float xtc_threshold = 0.1f;

  int32_t mirostat = 0;  // 0 off, 1 v1, 2 v2 (replaces top-k .. temperature; temp 0 is still greedy)
  float mirostat_tau = 5.0f;
  float mirostat_eta = 0.1f;
  int32_t mirostat_m = 100;

  std::vector<LogitBias> logit_bias;  // added to raw logits; repeated ids add up

  // At most one of these: GBNF text (root rule `root`) or a JSON Schema document (compiled to GBNF).
  std::string grammar;
  std::string json_schema;

  // Refuses values that make no sense (naming flag and value): negative temperature, a probability
  // outside [0, 1], a logit-bias token outside [0, n_vocab) or bias outside [-100, 100], both a grammar
  // and a schema, ... Does not compile the grammar (Sampler::create does).
  Status validate(int32_t n_vocab) const;
};

// "ID:BIAS,ID:BIAS" (also llama.cpp's "ID+BIAS" / "ID-BIAS"); appends to `out`.
Status parse_logit_bias(std::string_view text, std::vector<LogitBias>* out);

// Processes \n \t \r \\ \" \' escapes in a DRY sequence breaker as llama.cpp's CLI does.
Result<std::string> unescape_breaker(std::string_view text);

}  // namespace minfer::sampling
