// Perplexity and KL divergence as llama.cpp's llama-perplexity defines them: the text is tokenized once
// (BOS first when the vocabulary asks for it) and cut into non-overlapping chunks of n_ctx tokens; each
// chunk is evaluated from an empty cache with its first token replaced by BOS (when the vocabulary adds
// one), and only its second half is scored: the logits of positions first = n_ctx/2 .. n_ctx-2 predict
// tokens first+1 .. n_ctx-1 (n_ctx - 1 - n_ctx/2 tokens per chunk). PPL = exp(mean NLL).
//
// The pure part (NLL, sums, the 16-bit base log-probabilities, KLD statistics) works on logits rows and is
// tested without a model; evaluate_chunks() drives an engine::Engine and hands each scored row to a sink.
//
//   MINFER_ASSIGN_OR_RETURN(ChunkPlan plan, plan_chunks(tokens.size(), 512, /*max_chunks=*/-1));
//   NllSums sums;
//   struct Sink : RowSink { ... on_row: sums.add(token_nll(logits, n_vocab, target)); };
//   MINFER_RETURN_IF_ERROR(evaluate_chunks(engine, tokens, plan, {.n_seq = 4}, sink));
//   fmt::print("PPL = {:.4f} +/- {:.5f}\n", sums.ppl(), sums.ppl_uncertainty());
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::tokenizer {
class Tokenizer;
}
namespace minfer::engine {
class Engine;
}

namespace minfer::apps {

// ---- one position ----

// -log p(token) under softmax(logits[0..n_vocab)), computed as llama-perplexity does (max-shifted, the
// exponentials summed in double). `token` must be in [0, n_vocab).
double token_nll(const float* logits, int32_t n_vocab, int32_t token);

// Running sums of per-token NLL. ppl() = exp(mean); ppl_uncertainty() is llama-perplexity's "+/-":
// ppl * sqrt(var(NLL) / (count - 1)), 0 when it cannot be computed (fewer than 2 tokens, zero variance).
struct NllSums {
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  void add(double v) {
    nll += v;
    nll2 += v * v;
    ++count;
  }
  double mean() const { return count > 0 ? nll / static_cast<double>(count) : 0.0; }
  double ppl() const;
  double ppl_uncertainty() const;
};

// ---- chunks ----

struct ChunkPlan {
  int32_t n_ctx = 0;     // tokens per chunk
  int32_t first = 0;     // n_ctx / 2: the first position whose logits are scored
  int32_t n_scored = 0;  // n_ctx - 1 - first scored tokens per chunk
  int32_t n_chunk = 0;   // chunks evaluated
  int64_t n_tokens = 0;  // tokens of the whole text
};

// The chunks of a text of n_tokens tokens: all of them (n_tokens / n_ctx) or at most max_chunks when > 0.
// Fails, saying how many tokens are needed, when n_tokens < 2 * n_ctx (llama-perplexity's minimum), and
// when n_ctx < 4 (no position would be scored).
Result<ChunkPlan> plan_chunks(int64_t n_tokens, int32_t n_ctx, int32_t max_chunks);

// The input of chunk `chunk`: tokens [chunk * n_ctx, (chunk + 1) * n_ctx) with the first replaced by `bos`
// when bos >= 0 (pass -1 when the vocabulary does not add BOS).
std::vector<int32_t> chunk_input(std::span<const int32_t> tokens, const ChunkPlan& plan, int32_t chunk,
                                 int32_t bos);

// ---- the base model's distributions, 16 bits per token (llama-perplexity's encoding) ----
//
// One row per scored position: f32 scale | f32 min_log_prob | u16 q[n_vocab], little endian. Log-probs
// more than 16 below the top one are clipped to it; the others are min_log_prob + scale * q, with
// scale = (range)/65535, so each is within scale/2 <= 1.3e-4 of the exact value. KLD computed from these
// rows equals llama-perplexity's, which reads the same encoding.
inline size_t base_row_bytes(int32_t n_vocab) {
  return 8 + 2 * static_cast<size_t>(n_vocab);
}
// Encodes the log-softmax of `logits` into `row` (base_row_bytes(n_vocab) bytes); returns -log p(token).
double encode_base_row(const float* logits, int32_t n_vocab, int32_t token, uint8_t* row);
// Decodes entry i of an encoded row.
float base_row_log_prob(const uint8_t* row, int32_t i);

// ---- KL divergence of a model Q against the base model's encoded rows ----

// Sums over scored tokens, as llama-perplexity accumulates them, and the per-token values the
// percentiles need (4 bytes each per token).
struct KldSums {
  NllSums q;     // NLL of the evaluated model (PPL(Q))
  NllSums base;  // NLL of the base model, from its encoded rows (PPL(base))
  double sum_nll_nll_base = 0;
  double sum_kld = 0, sum_kld2 = 0;
  double sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
  float max_p_diff = 0;
  int64_t n_same_top = 0;
  int64_t count = 0;
  std::vector<float> kld_values;     // one per token, in order
  std::vector<float> p_diff_values;  // p(token) - p_base(token), one per token

  // One scored position: the evaluated model's logits, the base row of the same position, the target.
  void add(const float* logits, int32_t n_vocab, const uint8_t* base_row, int32_t token);
};

struct MeanUnc {
  double mean = 0, unc = 0;
};

// What llama-perplexity prints after a KL-divergence run (its names in the comments).
struct KldStats {
  int64_t count = 0;
  MeanUnc ppl, ppl_base;          // Mean PPL(Q), Mean PPL(base)
  double ln_ppl_correlation = 0;  // Cor(ln(PPL(Q)), ln(PPL(base)))
  MeanUnc ln_ppl_ratio;           // Mean ln(PPL(Q)/PPL(base))
  MeanUnc ppl_ratio;              // Mean PPL(Q)/PPL(base)
  MeanUnc ppl_diff;               // Mean PPL(Q)-PPL(base)
  MeanUnc kld;                    // Mean KLD
  float kld_max = 0, kld_p999 = 0, kld_p99 = 0, kld_p95 = 0, kld_p90 = 0, kld_median = 0, kld_p10 = 0,
        kld_p05 = 0, kld_p01 = 0, kld_p001 = 0, kld_min = 0;
  MeanUnc p_diff;  // Mean Δp (fraction, not %)
  float p_diff_max = 0, p_diff_p999 = 0, p_diff_p99 = 0, p_diff_p95 = 0, p_diff_p90 = 0, p_diff_p75 = 0,
        p_diff_median = 0, p_diff_p25 = 0, p_diff_p10 = 0, p_diff_p05 = 0, p_diff_p01 = 0, p_diff_p001 = 0,
        p_diff_min = 0;
  MeanUnc rms_p_diff;  // RMS Δp
  MeanUnc same_top;    // Same top p: the fraction of positions where both models' top token agree
};
// The statistics of `sums` (count must be > 0).
KldStats kld_stats(const KldSums& sums);
// The running values llama-perplexity prints per chunk: PPL(Q), ln ratio, KLD, RMS Δp, same top.
struct KldRunning {
  MeanUnc ppl, ln_ppl_ratio, kld, rms_p_diff, same_top;
};
KldRunning kld_running(const KldSums& sums);

// ---- identities the base file records ----

// FNV-1a 64 of the vocabulary (size, then every token's GGUF string and type): two models share it only
// when their token ids mean the same strings.
uint64_t vocab_hash(const tokenizer::Tokenizer& tok);
// FNV-1a 64 of a token sequence (the tokenized text).
uint64_t tokens_hash(std::span<const int32_t> tokens);

// ---- evaluation ----

// Receives the scored rows of each chunk in order: positions first .. n_ctx-2 (j = 0 .. n_scored-1) with the
// token each predicts, then on_chunk_end. Returning an error stops the evaluation with it.
class RowSink {
 public:
  virtual ~RowSink() = default;
  virtual Status on_row(int32_t chunk, int32_t j, const float* logits, int32_t target) = 0;
  virtual Status on_chunk_end(int32_t chunk) = 0;
};

struct EvalOptions {
  int32_t n_seq = 1;  // chunks evaluated together as separate sequences (llama-perplexity: n_batch / n_ctx)
  int32_t bos = -1;   // the BOS that replaces each chunk's first token; -1: the vocabulary adds none
  int32_t n_batch = 512;  // tokens per decode() call (and so the rows held at once)
};

// Evaluates plan.n_chunk chunks of `tokens` from an empty KV cache each (the cache is cleared first; it
// must hold options.n_seq * plan.n_ctx cells), options.n_seq at a time as sequences 0..n_seq-1, and hands
// every scored row to `sink`. Fails on a decode error or a sink error. Cost: plan.n_chunk * n_ctx tokens
// of forward passes; memory: n_batch rows of logits.
Status evaluate_chunks(engine::Engine& engine, std::span<const int32_t> tokens, const ChunkPlan& plan,
                       const EvalOptions& options, RowSink& sink);

}  // namespace minfer::apps
