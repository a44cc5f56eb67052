// Engine tests on tiny generated models: logits against the independent scalar reference forward,
// bitwise invariance of a token's logits under batching (sequences sharing a batch, prefill in one batch,
// in chunks, or token by token), graph reuse across decode steps, and loud load errors.
#include <cmath>

#include <gtest/gtest.h>

#include "common/reference_forward.h"
#include "core/rng.h"
#include "engine/engine.h"
#include "gguf/writer.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

std::vector<int32_t> random_tokens(int n, int32_t n_vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i)
    out.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(n_vocab - 3))));
  return out;
}

std::unique_ptr<Engine> load(const std::string& path, DType cache = DType::F32, int32_t n_batch = 512,
                             int32_t threads = 2) {
  EngineOptions o;
  o.n_ctx = 256;
  o.cache_type = cache;
  o.n_batch = n_batch;
  o.n_threads = threads;
  auto e = Engine::load(path, o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

// Logits of every position of `tokens` in sequence `seq`, evaluated as one batch.
std::vector<float> prefill_all(Engine& e, const std::vector<int32_t>& tokens, kv::SeqId seq = 0) {
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int32_t>(i), seq, true);
  auto r = e.decode(b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<float>();
}

class EngineReference : public ::testing::TestWithParam<const char*> {};

// The f32 graph path against the double-accumulating scalar reference. Tolerance: f32 weights and
// activations, f32 dot products of length <= 128 with logits of magnitude ~10: accumulated rounding is
// ~1e-6 relative per op over a 2-layer model, so 2e-3 absolute leaves a wide margin above it while any
// real error (a wrong rope pair, a missing bias, a softmax over the wrong window) moves logits by > 0.1.
TEST_P(EngineReference, LogitsMatchTheScalarReference) {
  const std::string path = test::write_tiny_model(GetParam());
  auto engine = load(path);
  ASSERT_TRUE(engine);
  const auto tokens = random_tokens(9, engine->n_vocab(), 3);
  const std::vector<float> got = prefill_all(*engine, tokens);
  const auto want = test::reference_forward(engine->file(), tokens);
  ASSERT_EQ(got.size(), tokens.size() * static_cast<size_t>(engine->n_vocab()));
  double max_diff = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int32_t v = 0; v < engine->n_vocab(); ++v) {
      max_diff =
          std::max(max_diff, std::abs(static_cast<double>(got[t * engine->n_vocab() + v]) - want[t][v]));
    }
  }
  EXPECT_LT(max_diff, 2e-3) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Archs, EngineReference,
                         ::testing::Values("tiny-qwen2", "tiny-qwen3", "tiny-llama", "tiny-llama-tied"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

class EngineInvariance : public ::testing::TestWithParam<DType> {};

TEST_P(EngineInvariance, PrefillChunksAndTokenByTokenAreBitwiseEqual) {
  const std::string path = test::write_tiny_model("tiny-qwen3");
  const auto tokens = random_tokens(13, 280, 5);
  auto whole = load(path, GetParam());
  const std::vector<float> ref = prefill_all(*whole, tokens);

  auto chunked = load(path, GetParam(), /*n_batch=*/4);
  EXPECT_EQ(prefill_all(*chunked, tokens), ref);

  auto single = load(path, GetParam(), /*n_batch=*/512, /*threads=*/1);
  std::vector<float> stepwise;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Batch b;
    b.add(tokens[i], static_cast<int32_t>(i), 0, true);
    auto r = single->decode(b);
    ASSERT_TRUE(r.ok()) << r.status().message();
    stepwise.insert(stepwise.end(), r->begin(), r->end());
  }
  EXPECT_EQ(stepwise, ref);
}

TEST_P(EngineInvariance, SequencesSharingABatchMatchEachAlone) {
  // tiny-qwen2's 16-wide heads do not fit q8_0 blocks (refused at load, tested below).
  const std::string path = test::write_tiny_model(GetParam() == DType::Q8_0 ? "tiny-qwen3" : "tiny-qwen2");
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(5, 280, 11), random_tokens(8, 280, 12),
                                                  random_tokens(3, 280, 13)};
  std::vector<std::vector<float>> alone;
  for (const auto& s : seqs) {
    auto e = load(path, GetParam());
    alone.push_back(prefill_all(*e, s));
  }
  auto e = load(path, GetParam());
  Batch b;  // interleave the three sequences token by token
  for (size_t i = 0; i < 8; ++i) {
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (i < seqs[s].size()) b.add(seqs[s][i], static_cast<int32_t>(i), static_cast<kv::SeqId>(s), true);
    }
  }
  auto r = e->decode(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto nv = static_cast<size_t>(e->n_vocab());
  std::vector<size_t> next(seqs.size(), 0);
  for (size_t row = 0; row < b.size(); ++row) {
    const auto s = static_cast<size_t>(b.seqs[row]);
    const size_t i = next[s]++;
    const std::vector<float> got(r->begin() + static_cast<std::ptrdiff_t>(row * nv),
                                 r->begin() + static_cast<std::ptrdiff_t>((row + 1) * nv));
    const std::vector<float> want(alone[s].begin() + static_cast<std::ptrdiff_t>(i * nv),
                                  alone[s].begin() + static_cast<std::ptrdiff_t>((i + 1) * nv));
    EXPECT_EQ(got, want) << "sequence " << s << " position " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(CacheTypes, EngineInvariance, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& param_info) { return std::string(dtype_name(param_info.param)); });

TEST(Engine, DecodeStepsReuseTheGraph) {
  auto e = load(test::write_tiny_model("tiny-qwen2"), DType::F16);
  prefill_all(*e, random_tokens(6, 280, 1));
  Batch b;
  b.add(5, 6, 0, true);
  ASSERT_TRUE(e->decode(b).ok());
  const int64_t builds = e->n_graph_builds();
  for (int32_t pos = 7; pos < 20; ++pos) {
    b.clear();
    b.add(pos % 200, pos, 0, true);
    ASSERT_TRUE(e->decode(b).ok());
  }
  EXPECT_EQ(e->n_graph_builds(), builds);
}

TEST(Engine, FullContextIsAnErrorThatChangesNothing) {
  auto e = load(test::write_tiny_model("tiny-qwen2"), DType::F16);
  Batch b;
  for (int32_t i = 0; i < 300; ++i) b.add(i % 200, i, 0, i == 299);
  auto r = e->decode(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("KV cache full"), std::string::npos) << r.status().message();
  EXPECT_EQ(e->kv().used_cells(), 0);
  EXPECT_EQ(e->kv().seq_pos_max(0), -1);
  b.clear();
  b.add(300, 0, 0, true);  // an id outside the vocabulary
  auto bad = e->decode(b);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside the vocabulary"), std::string::npos);
  EXPECT_EQ(e->kv().used_cells(), 0);
}

TEST(Engine, RefusesACacheTypeTheHeadsDoNotFit) {
  EngineOptions o;
  o.cache_type = DType::Q8_0;
  auto e = Engine::load(test::write_tiny_model("tiny-qwen2"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "KV cache type q8_0 needs a head dimension that is a multiple of 32 (this model's is 16)");
}

TEST(Engine, RefusesUnsupportedArchitecturesAndMissingTensors) {
  const std::string path = test::write_tiny_model("tiny-qwen2");
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok());
  auto rewrite = [&](const std::string& arch, const std::string& drop) {
    gguf::Writer w;
    w.metadata() = file->metadata();
    w.metadata().set("general.architecture", gguf::Value::string(arch));
    for (const auto& [k, v] : file->metadata().entries()) {
      if (k.rfind("qwen2.", 0) == 0) w.metadata().set(arch + k.substr(5), v);
    }
    for (const auto& t : file->tensors()) {
      if (t.name == drop) continue;
      std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)).ok());
    }
    const std::string out = test::temp_dir() + "/" + arch + "-" + drop + ".gguf";
    EXPECT_TRUE(w.write(out).ok());
    return out;
  };
  auto gpt2 = Engine::load(rewrite("gpt2", ""), {});
  ASSERT_FALSE(gpt2.ok());
  EXPECT_EQ(gpt2.status().message(), "Unsupported architecture: 'gpt2'");
  auto missing = Engine::load(rewrite("qwen2", "blk.1.ffn_up.weight"), {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "model: missing tensor 'blk.1.ffn_up.weight'");
}

}  // namespace
}  // namespace minfer::engine
