// Engine::Output::kEmbeddings and engine::embed(): the rows are the final-norm hidden states (checked
// against the logits through the output matrix), pooling takes the right rows, batching changes nothing,
// the generation path is untouched, and the bounds are refused by name.
#include "engine/embedding.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "engine/tiny_model.h"

namespace minfer::engine {
namespace {

using minfer::test::prompt_of;
using minfer::test::write_tiny_model;

std::unique_ptr<Engine> load(const std::string& path, int32_t n_ctx = 256, int32_t n_batch = 512) {
  EngineOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 1;
  o.n_batch = n_batch;
  auto e = Engine::load(path, o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

// Rows of `ids` as one sequence from an empty cache, every row flagged; the cache is emptied after.
std::vector<float> rows_of(Engine& e, const std::vector<int32_t>& ids, Engine::Output out) {
  Batch b;
  for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, true);
  auto r = e.decode(b, out);
  EXPECT_TRUE(r.ok()) << r.status().message();
  e.kv().clear();
  return r.ok() ? *r : std::vector<float>();
}

std::vector<float> normalized(std::vector<float> v) {
  l2_normalize(&v);
  return v;
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

TEST(Embedding, RowsAreTheFinalNormStatesUnderTheOutputMatrix) {
  const std::string path = write_tiny_model("tiny-qwen3");  // untied: output.weight, F32
  auto e = load(path);
  ASSERT_NE(e, nullptr);
  const auto ids = prompt_of(9, 1);
  const std::vector<float> h = rows_of(*e, ids, Engine::Output::kEmbeddings);
  const std::vector<float> logits = rows_of(*e, ids, Engine::Output::kLogits);
  const auto E = static_cast<size_t>(e->hparams().n_embd), V = static_cast<size_t>(e->n_vocab());
  ASSERT_EQ(h.size(), ids.size() * E);
  ASSERT_EQ(logits.size(), ids.size() * V);
  const gguf::TensorInfo* w = e->file().find_tensor("output.weight");
  ASSERT_NE(w, nullptr);
  const auto* out_w = reinterpret_cast<const float*>(w->data);  // [V][E], F32
  for (size_t t = 0; t < ids.size(); ++t) {
    for (size_t v = 0; v < V; v += 17) {
      double dot = 0.0;
      for (size_t j = 0; j < E; ++j) dot += static_cast<double>(out_w[v * E + j]) * h[t * E + j];
      ASSERT_NEAR(dot, logits[t * V + v], 1e-3 * (1.0 + std::fabs(dot))) << "token " << t << " vocab " << v;
    }
  }
}

TEST(Embedding, PoolingTakesTheDeclaredRows) {
  const std::string path = write_tiny_model("tiny-qwen3-embedding");
  auto e = load(path);
  ASSERT_NE(e, nullptr);
  auto declared = pooling_from_gguf(e->file());
  ASSERT_TRUE(declared.ok());
  ASSERT_TRUE(declared->has_value());
  EXPECT_EQ(**declared, Pooling::kLast);
  const auto ids = prompt_of(12, 2);
  const auto E = static_cast<size_t>(e->hparams().n_embd);
  const std::vector<float> h = rows_of(*e, ids, Engine::Output::kEmbeddings);
  const size_t n = ids.size();

  auto last = embed(*e, {ids}, Pooling::kLast);
  ASSERT_TRUE(last.ok()) << last.status().message();
  expect_near((*last)[0], normalized({h.end() - static_cast<std::ptrdiff_t>(E), h.end()}), 1e-6f);
  auto cls = embed(*e, {ids}, Pooling::kCls);
  ASSERT_TRUE(cls.ok());
  expect_near((*cls)[0], normalized({h.begin(), h.begin() + static_cast<std::ptrdiff_t>(E)}), 1e-6f);
  auto mean = embed(*e, {ids}, Pooling::kMean);
  ASSERT_TRUE(mean.ok());
  std::vector<float> avg(E, 0.0f);
  for (size_t t = 0; t < n; ++t)
    for (size_t j = 0; j < E; ++j) avg[j] += h[t * E + j] / static_cast<float>(n);
  expect_near((*mean)[0], normalized(avg), 1e-5f);
  double norm = 0.0;
  for (float x : (*mean)[0]) norm += static_cast<double>(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  EXPECT_FALSE(embed(*e, {ids}, Pooling::kNone).ok());
  EXPECT_EQ(e->kv().used_cells(), 0);
}

TEST(Embedding, BatchingAndGroupingChangeNothing) {
  const std::string path = write_tiny_model("tiny-qwen3-embedding");
  // A context of 64 cells and micro-batches of 16: 7 inputs of up to 40 tokens need several decodes,
  // each split into micro-batches.
  auto small = load(path, 64, 16);
  auto big = load(path, 1024);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(big, nullptr);
  std::vector<std::vector<int32_t>> inputs;
  for (int32_t i = 0; i < 7; ++i) inputs.push_back(prompt_of(5 + 5 * i, i));
  for (Pooling p : {Pooling::kLast, Pooling::kMean, Pooling::kCls}) {
    auto together = embed(*big, inputs, p);
    auto grouped = embed(*small, inputs, p);
    ASSERT_TRUE(together.ok()) << together.status().message();
    ASSERT_TRUE(grouped.ok()) << grouped.status().message();
    ASSERT_EQ(together->size(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto alone = embed(*big, {inputs[i]}, p);
      ASSERT_TRUE(alone.ok());
      expect_near((*together)[i], (*alone)[0], 2e-5f);
      expect_near((*grouped)[i], (*alone)[0], 2e-5f);
    }
  }
}

TEST(Embedding, GenerationLogitsUnchangedByEmbeddingPlans) {
  const std::string path = write_tiny_model("tiny-qwen3-embedding");
  auto e = load(path);
  ASSERT_NE(e, nullptr);
  const auto ids = prompt_of(10, 3);
  const std::vector<float> before = rows_of(*e, ids, Engine::Output::kLogits);
  ASSERT_TRUE(embed(*e, {ids, prompt_of(4, 5)}, Pooling::kMean).ok());
  const std::vector<float> after = rows_of(*e, ids, Engine::Output::kLogits);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
}

TEST(Embedding, BoundsAreRefusedByName) {
  const std::string path = write_tiny_model("tiny-qwen3-embedding");
  auto e = load(path, 32);
  ASSERT_NE(e, nullptr);
  auto too_long = embed(*e, {prompt_of(4, 0), prompt_of(33, 1)}, Pooling::kLast);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_long.status().message().find("input 1 has 33 tokens, more than the context of 32"), std::string::npos)
      << too_long.status().message();
  auto empty = embed(*e, {{}}, Pooling::kLast);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("input 0 is empty"), std::string::npos);
  EXPECT_FALSE(parse_pooling("rank").ok());
  EXPECT_EQ(*parse_pooling("cls"), Pooling::kCls);
  // A generation model declares no pooling.
  auto plain = load(write_tiny_model("tiny-qwen3"));
  ASSERT_NE(plain, nullptr);
  auto none = pooling_from_gguf(plain->file());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace minfer::engine
