// Perplexity and KL divergence over logits rows, with llama-perplexity's arithmetic (which parts are float
// and which double, the 16-bit base encoding, the uncertainty formulas), so the numbers agree with it to
// rounding on the same logits.
#include "apps/perplexity.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/fnv1a.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace minfer::apps {
namespace {

static_assert(std::endian::native == std::endian::little, "the base rows are little endian in memory");

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// llama-perplexity's mean_and_uncertainty: the mean of a value from its sum and sum of squares, and the
// standard error of that mean (0 for 10 values or fewer, or a non-positive variance).
MeanUnc mean_and_uncertainty(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const auto n = static_cast<double>(count);
  const double f = sum / n;
  double df = sum2 / n - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / (n - 1)) : 0.0;
  return {f, df};
}

// The covariance of the means of two per-token values (llama-perplexity's `covariance`).
double covariance(double suma, double sumb, double sumab, int64_t count) {
  if (count < 10) return 0.0;
  const auto n = static_cast<double>(count);
  return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

// llama-perplexity's interpolated percentile of sorted values (the fraction in float, as it computes it).
float percentile(const std::vector<float>& sorted, float fraction) {
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  float p = fraction * static_cast<float>(sorted.size() - 1);
  const auto ip = static_cast<size_t>(p);
  p -= static_cast<float>(ip);
  return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

float median(const std::vector<float>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

// sqrt of a variance that rounding may have pushed just below zero (a model compared with itself).
double safe_sqrt(double v) {
  return v > 0 ? std::sqrt(v) : 0.0;
}

MeanUnc ln_ratio(const KldSums& s) {
  const MeanUnc a = mean_and_uncertainty(s.q.nll, s.q.nll2, s.count);
  const MeanUnc b = mean_and_uncertainty(s.base.nll, s.base.nll2, s.count);
  const double cov = covariance(s.q.nll, s.base.nll, s.sum_nll_nll_base, s.count);
  return {a.mean - b.mean, safe_sqrt(a.unc * a.unc + b.unc * b.unc - 2.0 * cov)};
}

MeanUnc rms(const KldSums& s) {
  const MeanUnc mse = mean_and_uncertainty(s.sum_p_diff2, s.sum_p_diff4, s.count);
  const double v = std::sqrt(mse.mean);
  return {v, v > 0 ? 0.5 / v * mse.unc : 0.0};
}

MeanUnc same_top(const KldSums& s) {
  const double p = s.count > 0 ? static_cast<double>(s.n_same_top) / static_cast<double>(s.count) : 0.0;
  return {p, s.count > 1 ? safe_sqrt(p * (1 - p) / static_cast<double>(s.count - 1)) : 0.0};
}

MeanUnc exp_of(const MeanUnc& log_value) {
  const double v = std::exp(log_value.mean);
  return {v, v * log_value.unc};  // d exp(x) = exp(x) dx
}

}  // namespace

double token_nll(const float* logits, int32_t n_vocab, int32_t token) {
  float max_logit = logits[0];
  for (int32_t i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  return -(static_cast<double>(logits[token] - max_logit) - std::log(sum_exp));
}

double NllSums::ppl() const {
  return std::exp(mean());
}

double NllSums::ppl_uncertainty() const {
  if (count < 2) return 0.0;
  const double m = mean();
  const double var = nll2 / static_cast<double>(count) - m * m;
  return var > 0 ? std::sqrt(var / static_cast<double>(count - 1)) * ppl() : 0.0;
}

Result<ChunkPlan> plan_chunks(int64_t n_tokens, int32_t n_ctx, int32_t max_chunks) {
  if (n_ctx < 4) return invalid_argument("n_ctx {} is too small for perplexity (at least 4)", n_ctx);
  if (n_tokens < 2 * static_cast<int64_t>(n_ctx)) {
    return invalid_argument(
        "the text tokenizes to {} tokens; perplexity with n_ctx {} needs at least {} (two chunks): give a "
        "longer text or a smaller -c",
        n_tokens, n_ctx, 2 * static_cast<int64_t>(n_ctx));
  }
  ChunkPlan plan;
  plan.n_ctx = n_ctx;
  plan.first = n_ctx / 2;
  plan.n_scored = n_ctx - 1 - plan.first;
  plan.n_tokens = n_tokens;
  const int64_t n_max = n_tokens / n_ctx;
  plan.n_chunk = static_cast<int32_t>(max_chunks > 0 ? std::min<int64_t>(max_chunks, n_max) : n_max);
  return plan;
}

std::vector<int32_t> chunk_input(std::span<const int32_t> tokens, const ChunkPlan& plan, int32_t chunk,
                                 int32_t bos) {
  const auto start = static_cast<size_t>(chunk) * static_cast<size_t>(plan.n_ctx);
  std::vector<int32_t> input(
      tokens.begin() + static_cast<std::ptrdiff_t>(start),
      tokens.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(plan.n_ctx)));
  if (bos >= 0) input[0] = bos;
  return input;
}

double encode_base_row(const float* logits, int32_t n_vocab, int32_t token, uint8_t* row) {
  float max_logit = logits[0], min_logit = logits[0];
  for (int32_t i = 1; i < n_vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const auto log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  std::memcpy(row, &scale, 4);
  std::memcpy(row + 4, &min_log_prob, 4);
  uint8_t* q = row + 8;
  if (scale != 0.f) {
    const float inv_scale = 1 / scale;
    for (int32_t i = 0; i < n_vocab; ++i) {
      // Round to nearest even, as llama.cpp's nearest_int; the value is within [0, 65535].
      const uint16_t v =
          logits[i] > min_logit ? static_cast<uint16_t>(std::lrintf(inv_scale * (logits[i] - min_logit))) : 0;
      std::memcpy(q + 2 * static_cast<size_t>(i), &v, 2);
    }
  } else {
    std::memset(q, 0, 2 * static_cast<size_t>(n_vocab));
  }
  return max_logit + log_sum_exp - logits[token];
}

float base_row_log_prob(const uint8_t* row, int32_t i) {
  return load_f32(row) * load_u16(row + 8 + 2 * static_cast<size_t>(i)) + load_f32(row + 4);
}

void KldSums::add(const float* logits, int32_t n_vocab, const uint8_t* base_row, int32_t token) {
  float max_logit = logits[0];
  int32_t imax = 0;
  for (int32_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      imax = i;
    }
  }
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const auto log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float scale = load_f32(base_row), min_log_prob = load_f32(base_row + 4);
  const uint8_t* qs = base_row + 8;

  const float nll = max_logit + log_sum_exp - logits[token];
  q.nll += nll;
  q.nll2 += nll * nll;
  q.count++;
  const float nll_base = -(scale * load_u16(qs + 2 * static_cast<size_t>(token)) + min_log_prob);
  base.nll += nll_base;
  base.nll2 += nll_base * nll_base;
  base.count++;
  sum_nll_nll_base += nll * nll_base;

  // KL(base || Q) = sum_i p_base(i) (log p_base(i) - log q(i)) over the base tokens above e^-16.
  const float log_norm = max_logit + log_sum_exp;
  double kld = 0;
  int32_t imax_base = -1;
  float p_log_base_max = 0;
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float p_log_base = scale * load_u16(qs + 2 * static_cast<size_t>(i)) + min_log_prob;
    if (i == 0 || p_log_base > p_log_base_max) {
      p_log_base_max = p_log_base;
      imax_base = i;
    }
    if (p_log_base > -16.f) kld += std::exp(p_log_base) * (p_log_base - logits[i] + log_norm);
  }
  sum_kld += kld;
  sum_kld2 += kld * kld;
  ++count;
  if (imax == imax_base) ++n_same_top;

  const float p_diff = std::exp(-nll) - std::exp(-nll_base);
  sum_p_diff += p_diff;
  const double p_diff2 = p_diff * p_diff;
  sum_p_diff2 += p_diff2;
  sum_p_diff4 += p_diff2 * p_diff2;
  max_p_diff = std::max(max_p_diff, std::fabs(p_diff));
  kld_values.push_back(static_cast<float>(kld));
  p_diff_values.push_back(p_diff);
}

KldRunning kld_running(const KldSums& s) {
  KldRunning r;
  r.ppl = exp_of(mean_and_uncertainty(s.q.nll, s.q.nll2, s.count));
  r.ln_ppl_ratio = ln_ratio(s);
  r.kld = mean_and_uncertainty(s.sum_kld, s.sum_kld2, s.count);
  r.rms_p_diff = rms(s);
  r.same_top = same_top(s);
  return r;
}

KldStats kld_stats(const KldSums& s) {
  KldStats st;
  st.count = s.count;
  if (s.count < 1) return st;
  const MeanUnc log_ppl = mean_and_uncertainty(s.q.nll, s.q.nll2, s.count);
  const MeanUnc log_ppl_base = mean_and_uncertainty(s.base.nll, s.base.nll2, s.count);
  st.ppl = exp_of(log_ppl);
  st.ppl_base = exp_of(log_ppl_base);
  const double cov = covariance(s.q.nll, s.base.nll, s.sum_nll_nll_base, s.count);
  const double denom = log_ppl.unc * log_ppl_base.unc;
  st.ln_ppl_correlation = denom > 0 ? cov / denom : 0.0;
  st.ln_ppl_ratio = ln_ratio(s);
  st.ppl_ratio = exp_of(st.ln_ppl_ratio);
  const double ppl_cov = st.ppl.mean * st.ppl_base.mean * cov;
  st.ppl_diff = {st.ppl.mean - st.ppl_base.mean,
                 safe_sqrt(st.ppl.unc * st.ppl.unc + st.ppl_base.unc * st.ppl_base.unc - 2.0 * ppl_cov)};

  st.kld = mean_and_uncertainty(s.sum_kld, s.sum_kld2, s.count);
  std::vector<float> k = s.kld_values;
  std::sort(k.begin(), k.end());
  st.kld_max = k.back();
  st.kld_p999 = percentile(k, 0.999f);
  st.kld_p99 = percentile(k, 0.990f);
  st.kld_p95 = percentile(k, 0.950f);
  st.kld_p90 = percentile(k, 0.900f);
  st.kld_median = median(k);
  st.kld_p10 = percentile(k, 0.100f);
  st.kld_p05 = percentile(k, 0.050f);
  st.kld_p01 = percentile(k, 0.010f);
  st.kld_p001 = percentile(k, 0.001f);
  st.kld_min = k.front();

  st.p_diff = mean_and_uncertainty(s.sum_p_diff, s.sum_p_diff2, s.count);
  std::vector<float> d = s.p_diff_values;
  std::sort(d.begin(), d.end());
  st.p_diff_max = d.back();
  st.p_diff_p999 = percentile(d, 0.999f);
  st.p_diff_p99 = percentile(d, 0.990f);
  st.p_diff_p95 = percentile(d, 0.950f);
  st.p_diff_p90 = percentile(d, 0.900f);
  st.p_diff_p75 = percentile(d, 0.750f);
  st.p_diff_median = median(d);
  st.p_diff_p25 = percentile(d, 0.250f);
  st.p_diff_p10 = percentile(d, 0.100f);
  st.p_diff_p05 = percentile(d, 0.050f);
  st.p_diff_p01 = percentile(d, 0.010f);
  st.p_diff_p001 = percentile(d, 0.001f);
  st.p_diff_min = d.front();
  st.rms_p_diff = rms(s);
  st.same_top = same_top(s);
  return st;
}

uint64_t vocab_hash(const tokenizer::Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  uint64_t h = fnv1a(&n, sizeof(n), kFnv1aOffset);
  for (int32_t id = 0; id < n; ++id) {
    const std::string_view text = tok.token_text(id);
    h = fnv1a(text.data(), text.size(), h);
    const auto type = static_cast<int32_t>(tok.token_type(id));
    h = fnv1a(&type, sizeof(type), h);  // also separates one token's text from the next
  }
  return h;
}

uint64_t tokens_hash(std::span<const int32_t> tokens) {
  return fnv1a(tokens.data(), tokens.size() * sizeof(int32_t), kFnv1aOffset);
}

Status evaluate_chunks(engine::Engine& engine, std::span<const int32_t> tokens, const ChunkPlan& plan,
                       const EvalOptions& options, RowSink& sink) {
  if (static_cast<int64_t>(tokens.size()) < static_cast<int64_t>(plan.n_chunk) * plan.n_ctx) {
    return invalid_argument("perplexity: {} tokens cannot fill {} chunks of {}", tokens.size(), plan.n_chunk,
                            plan.n_ctx);
  }
  const int32_t n_vocab = engine.n_vocab();
  const int32_t n_seq = std::max(1, options.n_seq);
  const auto step = static_cast<size_t>(std::max(1, options.n_batch));
  for (int32_t g = 0; g < plan.n_chunk; g += n_seq) {
    const int32_t n_group = std::min(n_seq, plan.n_chunk - g);
    engine.kv().clear();
    // All chunks of the group as sequences 0..n_group-1, in order; logits for positions first..n_ctx-2.
    engine::Batch group;
    for (int32_t s = 0; s < n_group; ++s) {
      const std::vector<int32_t> input = chunk_input(tokens, plan, g + s, options.bos);
      for (int32_t k = 0; k < plan.n_ctx; ++k)
        group.add(input[static_cast<size_t>(k)], k, s, k >= plan.first && k <= plan.n_ctx - 2);
    }
    int64_t row = 0;  // scored rows come back in batch order: chunk g's, then chunk g+1's, ...
    for (size_t begin = 0; begin < group.size(); begin += step) {
      const size_t end = std::min(group.size(), begin + step);
      engine::Batch slice;
      for (size_t i = begin; i < end; ++i) {
        slice.add(group.tokens[i], group.positions[i], group.seqs[i], group.logits[i] != 0);
      }
      MINFER_ASSIGN_OR_RETURN(std::vector<float> logits, engine.decode(slice));
      const size_t n_rows = logits.size() / static_cast<size_t>(n_vocab);
      for (size_t r = 0; r < n_rows; ++r, ++row) {
        const auto chunk = static_cast<int32_t>(g + row / plan.n_scored);
        const auto j = static_cast<int32_t>(row % plan.n_scored);
        const size_t target = static_cast<size_t>(chunk) * static_cast<size_t>(plan.n_ctx) +
                              static_cast<size_t>(plan.first + j + 1);
        MINFER_RETURN_IF_ERROR(
            sink.on_row(chunk, j, logits.data() + r * static_cast<size_t>(n_vocab), tokens[target]));
        if (j == plan.n_scored - 1) MINFER_RETURN_IF_ERROR(sink.on_chunk_end(chunk));
      }
    }
  }
  engine.kv().clear();
  return {};
}

}  // namespace minfer::apps
