// Perplexity and KL divergence (apps/perplexity.h) on hand-made logits and on a tiny generated model:
// the NLL, the +/- estimate, chunking with BOS, the 16-bit base encoding, KLD statistics (a model against
// itself is 0 with 100% top-token agreement), evaluation in sequences, and the base file's checks.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "apps/perplexity.h"
#include "apps/perplexity_base_file.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

namespace minfer::apps {
namespace {

using namespace engine;  // the engine the programs run on (Engine, GenerateOptions, ...)

// The KLD and NLL read from an encoded base row are off by at most half a quantization step of the
// log-probabilities: scale/2 = 16/65535/2 = 1.22e-4 (the encoded range is at most 16 nats), plus f32
// rounding of values up to ~30 (~4e-6). Per token, KLD(self) = sum_i p_i * err_i with sum_i p_i <= 1.
constexpr double kEncodingTol = 1.3e-4;

double exact_nll(const std::vector<float>& logits, int32_t token) {
  double mx = -1e300, sum = 0;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  for (float v : logits) sum += std::exp(v - mx);
  return -(logits[static_cast<size_t>(token)] - mx - std::log(sum));
}

std::vector<float> random_logits(int32_t n, uint64_t seed, float spread = 4.0f) {
  std::vector<float> out;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int32_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    out.push_back(spread * (static_cast<float>(s % 20001) / 10000.0f - 1.0f) * 2.0f);
  }
  return out;
}

TEST(Perplexity, TokenNllIsTheNegativeLogSoftmax) {
  const std::vector<float> uniform(100, 3.5f);
  EXPECT_NEAR(token_nll(uniform.data(), 100, 7), std::log(100.0), 1e-6);
  const std::vector<float> l = random_logits(500, 3);
  for (int32_t t : {0, 17, 499}) EXPECT_NEAR(token_nll(l.data(), 500, t), exact_nll(l, t), 1e-5);
}

TEST(Perplexity, PplAndItsEstimateAreLlamaPerplexitys) {
  NllSums s;
  for (double v : {1.0, 2.0, 3.0, 4.0}) s.add(v);
  EXPECT_DOUBLE_EQ(s.ppl(), std::exp(2.5));
  // var = mean(v^2) - mean^2 = 7.5 - 6.25 = 1.25; +/- = ppl * sqrt(var / (n - 1))
  EXPECT_NEAR(s.ppl_uncertainty(), std::exp(2.5) * std::sqrt(1.25 / 3), 1e-9);
  NllSums one;
  one.add(2.0);
  EXPECT_EQ(one.ppl_uncertainty(), 0.0);
}

TEST(Perplexity, ChunksAreNonOverlappingAndScoreTheSecondHalf) {
  auto plan = plan_chunks(1000, 128, -1);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->n_chunk, 7);  // 1000 / 128
  EXPECT_EQ(plan->first, 64);
  EXPECT_EQ(plan->n_scored, 63);  // positions 64..126 predict tokens 65..127
  EXPECT_EQ(plan_chunks(1000, 128, 3)->n_chunk, 3);
  EXPECT_EQ(plan_chunks(1000, 128, 50)->n_chunk, 7);
  EXPECT_EQ(plan_chunks(256, 128, -1)->n_chunk, 2);
  const auto short_text = plan_chunks(255, 128, -1);
  ASSERT_FALSE(short_text.ok());
  EXPECT_NE(short_text.status().message().find("tokenizes to 255 tokens"), std::string::npos);
  EXPECT_NE(short_text.status().message().find("at least 256 (two chunks)"), std::string::npos);
  EXPECT_FALSE(plan_chunks(100, 3, -1).ok());

  std::vector<int32_t> tokens(300);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  const auto in = chunk_input(tokens, *plan_chunks(300, 100, -1), 1, /*bos=*/999);
  ASSERT_EQ(in.size(), 100u);
  EXPECT_EQ(in[0], 999);  // the chunk's first token is replaced by BOS, not shifted
  EXPECT_EQ(in[1], 101);
  EXPECT_EQ(in[99], 199);
  EXPECT_EQ(chunk_input(tokens, *plan_chunks(300, 100, -1), 2, -1)[0], 200);
}

TEST(Perplexity, TheBaseEncodingKeepsLogProbsWithinHalfAStep) {
  const int32_t n = 4096;
  const std::vector<float> l = random_logits(n, 11, 5.0f);  // a range of ~40: the bottom is clipped
  std::vector<uint8_t> row(base_row_bytes(n));
  const double nll = encode_base_row(l.data(), n, 42, row.data());
  EXPECT_NEAR(nll, exact_nll(l, 42), 1e-4);
  const double top = -exact_nll(l, static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
  int clipped = 0;
  for (int32_t i = 0; i < n; ++i) {
    const double want = -exact_nll(l, i);
    if (want < top - 16) {
      ++clipped;
      EXPECT_NEAR(base_row_log_prob(row.data(), i), top - 16, kEncodingTol);
    } else {
      EXPECT_NEAR(base_row_log_prob(row.data(), i), want, kEncodingTol) << i;
    }
  }
  EXPECT_GT(clipped, 0);
  const std::vector<float> flat(8, 1.0f);  // a zero range: every entry is the one log-prob
  std::vector<uint8_t> row2(base_row_bytes(8));
  encode_base_row(flat.data(), 8, 0, row2.data());
  EXPECT_NEAR(base_row_log_prob(row2.data(), 5), -std::log(8.0), 1e-6);
}

TEST(Perplexity, KldOfTwoKnownDistributions) {
  // base p = softmax(0, 0) = (1/2, 1/2); q = softmax(log 3, 0) = (3/4, 1/4).
  // KL(p || q) = 1/2 ln(2/3) + 1/2 ln(2) = 0.5 ln(4/3)
  const std::vector<float> base = {0.0f, 0.0f}, q = {static_cast<float>(std::log(3.0)), 0.0f};
  std::vector<uint8_t> row(base_row_bytes(2));
  encode_base_row(base.data(), 2, 1, row.data());
  KldSums s;
  s.add(q.data(), 2, row.data(), 1);
  EXPECT_NEAR(s.kld_values[0], 0.5 * std::log(4.0 / 3.0), 1e-6);
  EXPECT_NEAR(s.p_diff_values[0], 0.25 - 0.5, 1e-6);  // p_q(token) - p_base(token)
  EXPECT_EQ(s.n_same_top, 1);                         // both pick token 0 (the first of base's tie)
  EXPECT_NEAR(s.q.nll, std::log(4.0), 1e-6);
  EXPECT_NEAR(s.base.nll, std::log(2.0), 1e-6);
}

TEST(Perplexity, KldOfLogitsAgainstThemselvesIsZero) {
  const int32_t n = 1000;
  KldSums s;
  for (int k = 0; k < 150; ++k) {
    const std::vector<float> l = random_logits(n, 100 + static_cast<uint64_t>(k));
    std::vector<uint8_t> row(base_row_bytes(n));
    encode_base_row(l.data(), n, k % n, row.data());
    s.add(l.data(), n, row.data(), k % n);
  }
  const KldStats st = kld_stats(s);
  EXPECT_EQ(st.count, 150);
  EXPECT_LE(std::abs(st.kld.mean), kEncodingTol);
  EXPECT_LE(std::abs(st.kld_max), kEncodingTol);
  EXPECT_EQ(st.same_top.mean, 1.0);
  EXPECT_NEAR(st.ppl_ratio.mean, 1.0, kEncodingTol);
  EXPECT_NEAR(st.ln_ppl_ratio.mean, 0.0, kEncodingTol);
  EXPECT_LE(st.rms_p_diff.mean, kEncodingTol);
  EXPECT_NEAR(st.ln_ppl_correlation, 1.0, 1e-3);
}

TEST(Perplexity, StatisticsUseLlamaPerplexitysPercentiles) {
  KldSums s;
  // Ten tokens with known KLD values: fill the vectors and sums directly.
  for (int i = 1; i <= 10; ++i) {
    s.kld_values.push_back(static_cast<float>(i));
    s.p_diff_values.push_back(static_cast<float>(i) / 100);
    s.sum_kld += i;
    s.sum_kld2 += i * i;
    ++s.count;
  }
  const KldStats st = kld_stats(s);
  EXPECT_FLOAT_EQ(st.kld_median, 5.5f);
  EXPECT_FLOAT_EQ(st.kld_max, 10.0f);
  EXPECT_FLOAT_EQ(st.kld_min, 1.0f);
  EXPECT_NEAR(st.kld_p99, 1 + 0.99 * 9, 1e-5);  // interpolated at 0.99 * (n - 1)
  EXPECT_NEAR(st.kld_p90, 1 + 0.90 * 9, 1e-5);
  EXPECT_DOUBLE_EQ(st.kld.mean, 5.5);
  EXPECT_EQ(st.kld.unc, 0.0);  // llama-perplexity reports no uncertainty for 10 values or fewer
}

// ---- on a tiny model ----

struct Collect : RowSink {
  int32_t n_vocab = 0;
  std::vector<double> nll;
  std::vector<int32_t> chunk_ends;
  std::vector<std::vector<uint8_t>> base_rows;  // filled when encode is set
  bool encode = false;
  const std::vector<std::vector<uint8_t>>* against = nullptr;
  KldSums kld;
  Status on_row(int32_t c, int32_t j, const float* logits, int32_t target) override {
    nll.push_back(token_nll(logits, n_vocab, target));
    if (encode) {
      base_rows.emplace_back(base_row_bytes(n_vocab));
      encode_base_row(logits, n_vocab, target, base_rows.back().data());
    }
    if (against != nullptr) {
      (void)c;
      (void)j;
      kld.add(logits, n_vocab, (*against)[nll.size() - 1].data(), target);
    }
    return {};
  }
  Status on_chunk_end(int32_t chunk) override {
    chunk_ends.push_back(chunk);
    return {};
  }
};

std::vector<int32_t> tokens_for(int32_t n, int32_t n_vocab) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back((i * 37 + i / 5) % (n_vocab - 3));
  return t;
}

std::unique_ptr<Engine> load_tiny(int32_t n_ctx) {
  EngineOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 1;
  o.n_batch = 64;
  auto e = Engine::load(test::write_tiny_model("tiny-qwen3"), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(PerplexityEngine, ScoresTheSecondHalfOfEachChunkFromAnEmptyCache) {
  auto e = load_tiny(3 * 32);
  ASSERT_TRUE(e);
  const std::vector<int32_t> tokens = tokens_for(100, e->n_vocab());
  const ChunkPlan plan = *plan_chunks(100, 32, -1);  // 3 chunks of 32: 15 scored tokens each
  Collect one;
  one.n_vocab = e->n_vocab();
  EvalOptions opt;
  opt.n_seq = 1;
  opt.n_batch = 20;  // chunks span several decode calls
  ASSERT_TRUE(evaluate_chunks(*e, tokens, plan, opt, one).ok());
  ASSERT_EQ(one.nll.size(), 45u);
  EXPECT_EQ(one.chunk_ends, (std::vector<int32_t>{0, 1, 2}));

  // By hand: chunk 1 evaluated alone; position 16 + j predicts token 32 + 17 + j.
  e->kv().clear();
  Batch b;
  for (int32_t k = 0; k < 32; ++k) b.add(tokens[static_cast<size_t>(32 + k)], k, 0, true);
  auto logits = e->decode(b);
  ASSERT_TRUE(logits.ok());
  const auto nv = static_cast<size_t>(e->n_vocab());
  for (int32_t j = 0; j < 15; ++j) {
    const double want = token_nll(logits->data() + static_cast<size_t>(16 + j) * nv, e->n_vocab(),
                                  tokens[static_cast<size_t>(32 + 17 + j)]);
    EXPECT_NEAR(one.nll[static_cast<size_t>(15 + j)], want, 1e-5) << j;
  }

  // Three chunks as three sequences of one batch: the same numbers (logits do not depend on batching).
  Collect three;
  three.n_vocab = e->n_vocab();
  opt.n_seq = 3;
  opt.n_batch = 64;
  ASSERT_TRUE(evaluate_chunks(*e, tokens, plan, opt, three).ok());
  ASSERT_EQ(three.nll.size(), one.nll.size());
  for (size_t i = 0; i < one.nll.size(); ++i) EXPECT_NEAR(three.nll[i], one.nll[i], 1e-5) << i;
  EXPECT_EQ(three.chunk_ends, one.chunk_ends);
}

TEST(PerplexityEngine, KldOfAModelAgainstItselfIsZeroWithFullTopTokenAgreement) {
  auto e = load_tiny(64);
  ASSERT_TRUE(e);
  const std::vector<int32_t> tokens = tokens_for(64 * 8, e->n_vocab());
  const ChunkPlan plan = *plan_chunks(static_cast<int64_t>(tokens.size()), 64, -1);  // 8 x 31 = 248 tokens
  Collect base;
  base.n_vocab = e->n_vocab();
  base.encode = true;
  ASSERT_TRUE(evaluate_chunks(*e, tokens, plan, EvalOptions{}, base).ok());
  Collect q;
  q.n_vocab = e->n_vocab();
  q.against = &base.base_rows;
  ASSERT_TRUE(evaluate_chunks(*e, tokens, plan, EvalOptions{}, q).ok());
  const KldStats st = kld_stats(q.kld);
  EXPECT_EQ(st.count, 248);
  EXPECT_LE(std::abs(st.kld.mean), kEncodingTol);
  EXPECT_LE(st.kld_max, kEncodingTol);
  EXPECT_EQ(st.same_top.mean, 1.0);
  // PPL(base) is read from the 16-bit rows, which clip log-probs more than 16 below the top one (as
  // llama-perplexity's do): random weights put many targets there, so it is lower than PPL(Q), never higher.
  EXPECT_LE(st.ppl_base.mean, st.ppl.mean * (1 + kEncodingTol));
  NllSums direct;
  for (double v : base.nll) direct.add(v);
  EXPECT_NEAR(st.ppl.mean, direct.ppl(), direct.ppl() * 1e-5);
}

// ---- the base file ----

KldBaseInfo small_info() {
  KldBaseInfo info;
  info.n_ctx = 8;
  info.n_vocab = 5;
  info.n_chunk = 2;
  info.n_scored = 3;  // 8 - 1 - 4
  info.vocab_hash = 0x1234;
  info.text_hash = 0xabcd;
  info.n_text_tokens = 17;
  for (int i = 0; i < 16; ++i) info.tokens.push_back(i % 5);
  return info;
}

std::vector<uint8_t> chunk_rows(int seed) {
  std::vector<uint8_t> rows;
  for (int r = 0; r < 3; ++r) {
    const std::vector<float> l = random_logits(5, static_cast<uint64_t>(seed * 10 + r));
    std::vector<uint8_t> row(base_row_bytes(5));
    encode_base_row(l.data(), 5, 0, row.data());
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

std::string write_base(const std::string& path) {
  auto w = KldBaseWriter::create(path, small_info());
  EXPECT_TRUE(w.ok()) << w.status().message();
  EXPECT_TRUE(w->write_chunk(chunk_rows(1)).ok());
  EXPECT_TRUE(w->write_chunk(chunk_rows(2)).ok());
  EXPECT_TRUE(w->finish().ok());
  return path;
}

std::string open_error(const std::string& path) {
  auto r = KldBaseReader::open(path);
  return r.ok() ? std::string("opened") : r.status().message();
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST(KldBaseFile, RoundTripsAndChecksWhatItWasComputedWith) {
  const std::string path = write_base(test::temp_dir() + "/base.kld");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto r = KldBaseReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->info().n_ctx, 8);
  EXPECT_EQ(r->info().tokens, small_info().tokens);
  EXPECT_EQ(r->info().n_text_tokens, 17);
  EXPECT_TRUE(r->check({.n_vocab = 5, .vocab_hash = 0x1234, .n_ctx = 8, .text_hash = 0xabcd}).ok());
  EXPECT_TRUE(r->check({.n_vocab = 5, .vocab_hash = 0x1234, .n_ctx = {}, .text_hash = {}}).ok());
  auto c1 = r->read_chunk();
  ASSERT_TRUE(c1.ok());
  EXPECT_EQ(std::vector<uint8_t>(c1->begin(), c1->end()), chunk_rows(1));
  auto c2 = r->read_chunk();
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(std::vector<uint8_t>(c2->begin(), c2->end()), chunk_rows(2));
  EXPECT_FALSE(r->read_chunk().ok());

  const std::string vocab =
      r->check({.n_vocab = 5, .vocab_hash = 0x9999, .n_ctx = {}, .text_hash = {}}).message();
  EXPECT_NE(vocab.find("was computed with another vocabulary"), std::string::npos) << vocab;
  const std::string vocab_n =
      r->check({.n_vocab = 6, .vocab_hash = 0x1234, .n_ctx = {}, .text_hash = {}}).message();
  EXPECT_NE(vocab_n.find("another vocabulary (5 tokens"), std::string::npos) << vocab_n;
  const std::string ctx =
      r->check({.n_vocab = 5, .vocab_hash = 0x1234, .n_ctx = 16, .text_hash = {}}).message();
  EXPECT_NE(ctx.find("was computed with n_ctx 8, not 16"), std::string::npos) << ctx;
  const std::string text =
      r->check({.n_vocab = 5, .vocab_hash = 0x1234, .n_ctx = 8, .text_hash = 1}).message();
  EXPECT_NE(text.find("was computed on another text"), std::string::npos) << text;
}

TEST(KldBaseFile, RefusesCorruptedTruncatedAndForeignFiles) {
  const std::string dir = test::temp_dir();
  const std::string good = write_base(dir + "/good.kld");
  const auto size = static_cast<std::streamoff>(std::filesystem::file_size(good));

  // A flipped byte in the rows of chunk 2: the header opens, chunk 1 reads, chunk 2 is refused.
  const std::string rows = dir + "/rows.kld";
  std::filesystem::copy_file(good, rows);
  flip_byte(rows, size - 8 - 5);
  auto r = KldBaseReader::open(rows);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->read_chunk().ok());
  auto bad = r->read_chunk();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("chunk 2 is corrupted"), std::string::npos) << bad.status().message();

  // A flipped byte in the header's tokens or sizes.
  const std::string head = dir + "/head.kld";
  std::filesystem::copy_file(good, head);
  flip_byte(head, 4 + 4 + 16 + 24 + 5);  // inside the tokens
  EXPECT_NE(open_error(head).find("header checksum mismatch"), std::string::npos) << open_error(head);
  const std::string sizes = dir + "/sizes.kld";
  std::filesystem::copy_file(good, sizes);
  flip_byte(sizes, 8);  // n_ctx
  EXPECT_NE(open_error(sizes).find("corrupted"), std::string::npos) << open_error(sizes);

  std::filesystem::copy_file(good, dir + "/short.kld");
  std::filesystem::resize_file(dir + "/short.kld", static_cast<uintmax_t>(size - 3));
  EXPECT_NE(open_error(dir + "/short.kld").find("truncated"), std::string::npos)
      << open_error(dir + "/short.kld");
  std::filesystem::copy_file(good, dir + "/long.kld");
  std::filesystem::resize_file(dir + "/long.kld", static_cast<uintmax_t>(size + 1));
  EXPECT_NE(open_error(dir + "/long.kld").find("trailing bytes"), std::string::npos);

  const std::string version = dir + "/version.kld";
  std::filesystem::copy_file(good, version);
  flip_byte(version, 4);
  EXPECT_NE(open_error(version).find("format version"), std::string::npos) << open_error(version);
  { std::ofstream(dir + "/text.kld") << "_logits_ llama.cpp's own format is not this one"; }
  EXPECT_NE(open_error(dir + "/text.kld").find("not a minfer KL-divergence base file"), std::string::npos);
  EXPECT_NE(open_error(dir + "/missing.kld").find("cannot open"), std::string::npos);
}

TEST(KldBaseFile, AnUnfinishedWriteLeavesNoFile) {
  const std::string path = test::temp_dir() + "/partial.kld";
  {
    auto w = KldBaseWriter::create(path, small_info());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->write_chunk(chunk_rows(1)).ok());
    EXPECT_FALSE(w->write_chunk(std::vector<uint8_t>(3)).ok());  // a chunk of the wrong size
    EXPECT_FALSE(w->finish().ok());                              // 1 of 2 chunks
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace minfer::apps
