// Single-sequence text generation on an Engine: prefill the prompt (in micro-batches), then decode one
// token per step, sampling through one Sampler pipeline, streaming text through the stream decoder, and
// stopping at end-of-generation tokens, stop strings (never emitted) or the token limit.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "sampling/config.h"
#include "tokenizer/stream_decoder.h"

namespace minfer::engine {

struct GenerateOptions {
  int32_t n_predict = 512;  // -1: until end-of-generation or the context is full
  std::vector<std::string> stop;
  sampling::SamplerConfig sampling;
  kv::SeqId seq = 0;
  // Positions [0, n_cached) of `seq` already hold prompt_ids[0, n_cached) (a conversation's cached prefix):
  // only the rest of the prompt is prefilled. Must be below prompt_ids.size() so the last prompt token is
  // evaluated and yields the first logits.
  int32_t n_cached = 0;
  // Polled before each decode step; returning true ends the reply with stop reason "cancelled" (Ctrl-C).
  std::function<bool()> should_stop;
  // Copy the logits the first generated token was sampled from into GenerateResult::first_logits.
  bool keep_first_logits = false;
};

struct Timings {
  int32_t n_prompt = 0;  // prompt tokens prefilled by this call
  int32_t n_cached = 0;  // prompt tokens that were already in the KV cache (GenerateOptions::n_cached)
  int32_t n_generated = 0;
  double prompt_ms = 0.0;    // prefill wall time
  double generate_ms = 0.0;  // decode wall time (first sampled token to the last)
  double prompt_tps() const { return prompt_ms > 0 ? 1000.0 * n_prompt / prompt_ms : 0.0; }
  double generate_tps() const { return generate_ms > 0 ? 1000.0 * n_generated / generate_ms : 0.0; }
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::string text;
  std::string stop_reason;  // "eog", "stop", "length", "context", "grammar", "cancelled"
  std::string stop_detail;  // why, for "grammar" (the sampler's message)
  Timings timings;
  std::vector<float> first_logits;  // [n_vocab], only with GenerateOptions::keep_first_logits
};

// The length of the longest common prefix of two token lists (what a cache holding `a` can keep of `b`).
size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

// The checks every generation loop starts with: a non-empty prompt that fits the context, and sequence
// options.seq holding exactly the options.n_cached first prompt tokens (at least one left to evaluate).
Status check_generation_start(Engine& engine, const std::vector<int32_t>& prompt_ids,
                              const GenerateOptions& options);

// Generates after `prompt_ids` into sequence options.seq, which must hold exactly the cached prefix
// (positions 0..n_cached-1; empty by default). `on_text` receives complete UTF-8 text as it becomes final
// (stop-string prefixes are held back until resolved). On return the sequence holds the prompt and every
// generated token except possibly the last one sampled (a token is evaluated only when another follows).
Result<GenerateResult> generate(Engine& engine, const std::vector<int32_t>& prompt_ids,
                                const GenerateOptions& options,
                                const std::function<void(std::string_view)>& on_text = {});

// Holds back text that might be the start of a stop string; emits the rest.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends text; returns what is now safe to emit. Sets *stopped when a stop string completed (the stop
  // string and anything after it are dropped).
  std::string push(std::string_view text, bool* stopped);
  // What was held back, released at the end of generation.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
};

// At the end of a reply: what the stream decoder and the stop matcher still hold, as final text (a stop
// string completed by it is dropped, with what follows, and sets *stopped when given).
std::string release_held_text(tokenizer::StreamDecoder& detok, StopMatcher& stops, bool* stopped = nullptr);

}  // namespace minfer::engine
