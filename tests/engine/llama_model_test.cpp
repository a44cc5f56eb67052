// The llama architecture on tiny generated models: RoPE scaling as llama.cpp reads it (rope.scaling.type
// none/linear with rope.scaling.factor, llama3 rope_freqs.weight) against the scalar reference, batch
// invariance with normal-pair RoPE, and the loud refusals (mixture of experts, other scaling types, a
// malformed rope_freqs tensor, an absurd rope.freq_base or RMS epsilon). Parity with llama.cpp itself is
// tests/parity/llama_parity_test.cpp.
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/reference_forward.h"
#include "engine/engine.h"
#include "gguf/writer.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

// tiny-llama rewritten with extra metadata and, when `freqs` is set, rope_freqs.weight replaced by it.
std::string rewrite(const std::string& name, const std::vector<std::pair<std::string, gguf::Value>>& extra,
                    const std::vector<float>* freqs = nullptr) {
  auto file = gguf::File::open(test::write_tiny_model("tiny-llama"));
  EXPECT_TRUE(file.ok());
  gguf::Writer w;
  w.metadata() = file->metadata();
  for (const auto& [k, v] : extra) w.metadata().set(k, v);
  for (const auto& t : file->tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (t.name == "rope_freqs.weight" && freqs != nullptr) {
      std::vector<uint8_t> bytes(freqs->size() * sizeof(float));
      std::memcpy(bytes.data(), freqs->data(), bytes.size());
      EXPECT_TRUE(w.add_tensor(t.name, DType::F32, {static_cast<int64_t>(freqs->size())}, std::move(bytes)).ok());
      continue;
    }
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)).ok());
  }
  const std::string out = test::temp_dir() + "/llama-" + name + ".gguf";
  EXPECT_TRUE(w.write(out).ok());
  return out;
}

Result<std::unique_ptr<Engine>> load(const std::string& path, int32_t n_batch = 512, int32_t threads = 2) {
  EngineOptions o;
  o.n_ctx = 256;
  o.cache_type = DType::F32;
  o.n_batch = n_batch;
  o.n_threads = threads;
  return Engine::load(path, o);
}

std::vector<int32_t> tokens() { return test::prompt_of(11, 4); }

std::vector<float> prefill(Engine& e, const std::vector<int32_t>& toks) {
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], static_cast<int32_t>(i), 0, true);
  auto r = e.decode(b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<float>();
}

double max_diff_to_reference(Engine& e) {
  const auto toks = tokens();
  const std::vector<float> got = prefill(e, toks);
  const auto want = test::reference_forward(e.file(), toks);
  const auto nv = static_cast<size_t>(e.n_vocab());
  double m = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    for (size_t v = 0; v < nv; ++v) m = std::max(m, std::abs(static_cast<double>(got[t * nv + v]) - want[t][v]));
  }
  return m;
}

// Linear scaling divides every angle by rope.scaling.factor (llama.cpp: freq_scale = 1 / factor); with the
// llama3 factors on top. Tolerance as EngineReference (f32 arithmetic through 2 layers, ~1e-5 observed).
TEST(LlamaModel, LinearRopeScalingMatchesTheReference) {
  const std::string path =
      rewrite("linear", {{"llama.rope.scaling.type", gguf::Value::string("linear")},
                         {"llama.rope.scaling.factor", gguf::Value::f32(4.0f)}});
  auto e = load(path);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->hparams().rope_freq_scale, 0.25f);
  EXPECT_EQ((*e)->hparams().rope_freq_factors.size(), 8u);
  EXPECT_LT(max_diff_to_reference(**e), 2e-3);
  // The scaling changes the logits: the test could fail if the factor were ignored.
  auto plain = load(test::write_tiny_model("tiny-llama"));
  ASSERT_TRUE(plain.ok());
  (*e)->kv().clear();
  const auto a = prefill(**e, tokens()), b = prefill(**plain, tokens());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  EXPECT_GT(d, 0.01);
}

TEST(LlamaModel, PrefillChunksAndTokenByTokenAreBitwiseEqual) {
  const std::string path = test::write_tiny_model("tiny-llama");
  auto whole = load(path);
  ASSERT_TRUE(whole.ok());
  const std::vector<float> ref = prefill(**whole, tokens());
  auto chunked = load(path, /*n_batch=*/3);
  ASSERT_TRUE(chunked.ok());
  EXPECT_EQ(prefill(**chunked, tokens()), ref);
  auto single = load(path, 512, /*threads=*/1);
  ASSERT_TRUE(single.ok());
  std::vector<float> stepwise;
  const auto toks = tokens();
  for (size_t i = 0; i < toks.size(); ++i) {
    Batch b;
    b.add(toks[i], static_cast<int32_t>(i), 0, true);
    auto r = (*single)->decode(b);
    ASSERT_TRUE(r.ok()) << r.status().message();
    stepwise.insert(stepwise.end(), r->begin(), r->end());
  }
  EXPECT_EQ(stepwise, ref);
}

// The context shift on llama's normal pairing (2i, 2i + 1): a sequence prefilled at positions 20.. and shifted
// down to 0.. has the keys of a prefill at 0.., so the next token's logits match, to the f32 re-rotation's
// rounding (a rotation by 20 then by -20 instead of none: ~1e-6 relative on each key, ~1e-4 on a logit).
// The control moves the positions without rotating the keys, which the test must tell apart.
TEST(LlamaModel, AContextShiftEqualsAPrefillAtTheShiftedPositions) {
  const std::string path = test::write_tiny_model("tiny-llama");
  const auto toks = tokens();
  enum class Shift { kNone, kRotate, kPositionsOnly };
  auto run = [&](int32_t first_pos, Shift shift) {
    auto e = load(path);
    EXPECT_TRUE(e.ok());
    if (!e.ok()) return std::vector<float>();
    Batch b;
    for (size_t i = 0; i + 1 < toks.size(); ++i)
      b.add(toks[i], first_pos + static_cast<int32_t>(i), 0, i + 2 == toks.size());
    EXPECT_TRUE((*e)->decode(b).ok());
    if (shift == Shift::kRotate) {
      const Status st = (*e)->seq_add(0, 0, -1, -first_pos);
      EXPECT_TRUE(st.ok()) << st.message();
    } else if (shift == Shift::kPositionsOnly) {
      auto cells = (*e)->kv().shift_cells(0, 0, -1, -first_pos);
      EXPECT_TRUE(cells.ok());
      if (cells.ok()) (*e)->kv().add_positions(*cells, -first_pos);
    }
    b.clear();
    b.add(toks.back(), static_cast<int32_t>(toks.size()) - 1, 0, true);
    auto r = (*e)->decode(b);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<float>();
  };
  const std::vector<float> want = run(0, Shift::kNone), got = run(20, Shift::kRotate),
                           unrotated = run(20, Shift::kPositionsOnly);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(unrotated.size(), want.size());
  double d = 0, u = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d = std::max(d, static_cast<double>(std::abs(got[i] - want[i])));
    u = std::max(u, static_cast<double>(std::abs(unrotated[i] - want[i])));
  }
  EXPECT_LT(d, 1e-3);
  EXPECT_GT(u, 1e-2);
}

TEST(LlamaModel, RefusesWhatItDoesNotRun) {
  auto yarn = load(rewrite("yarn", {{"llama.rope.scaling.type", gguf::Value::string("yarn")}}));
  ASSERT_FALSE(yarn.ok());
  EXPECT_EQ(yarn.status().message(),
            "model: rope scaling 'yarn' is not supported (supported: none, linear, llama3 rope_freqs)");
  auto moe = load(rewrite("moe", {{"llama.expert_count", gguf::Value::u32(8)}}));
  ASSERT_FALSE(moe.ok());
  EXPECT_EQ(moe.status().message(),
            "model: llama with 8 experts (Mixtral-style mixture of experts) is not supported");
  const std::vector<float> short_freqs(3, 1.0f);
  auto bad_shape = load(rewrite("freqs-shape", {}, &short_freqs));
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_EQ(bad_shape.status().message(), "model: tensor 'rope_freqs.weight' has shape [3, 1, 1, 1], expected [8, 1, 1, 1]");
  std::vector<float> zero_freqs(8, 1.0f);
  zero_freqs[5] = 0.0f;
  auto zero = load(rewrite("freqs-zero", {}, &zero_freqs));
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "model: rope_freqs.weight holds 0");
}

TEST(LlamaModel, RefusesAnAbsurdRopeBaseOrRmsEpsilonNamingTheKey) {
  const float nan = std::nanf(""), inf = INFINITY;
  int i = 0;
  for (float base : {0.0f, -10000.0f, nan, inf}) {
    auto e = load(rewrite("base-" + std::to_string(i++), {{"llama.rope.freq_base", gguf::Value::f32(base)}}));
    ASSERT_FALSE(e.ok()) << base;
    EXPECT_EQ(e.status().message(),
              fmt::format("model: llama.rope.freq_base = {} is invalid (expected a finite base > 0)", base));
  }
  for (float eps : {0.0f, -1e-5f, nan, inf, 1.0f, 1e10f}) {
    auto e = load(rewrite("eps-" + std::to_string(i++),
                          {{"llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(eps)}}));
    ASSERT_FALSE(e.ok()) << eps;
    EXPECT_EQ(
        e.status().message(),
        fmt::format("model: llama.attention.layer_norm_rms_epsilon = {} is invalid (expected 0 < eps < 1)",
                    eps));
  }
  auto ok = load(rewrite("sane", {{"llama.rope.freq_base", gguf::Value::f32(500000.0f)},
                                  {"llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-6f)}}));
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace
}  // namespace minfer::engine
