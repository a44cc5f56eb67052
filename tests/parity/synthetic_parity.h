// The parity check shared by the self-contained family tests (llama_parity_test, qwen3moe_parity_test) and
// the trained models' test (trained_model_test): a model file (generated in-test from refs.json's preset /
// type / seed, or committed) is checked by hash against the one llama.cpp saw, and its log-softmax at the
// recorded positions and its greedy continuation are compared with llama.cpp's outputs recorded by
// tests/parity/llama/make_refs.py's record_model. Each test states its tolerance and why.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "core/fnv1a.h"
#include "engine/engine.h"
#include "tools/synthetic_model.h"

namespace minfer::test {

using nlohmann::json;

inline json read_refs(const char* path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

inline std::string fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  uint64_t h = kFnv1aOffset;
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    h = fnv1a(buf.data(), static_cast<size_t>(in.gcount()), h);
  }
  return fmt::format("{:016x}", h);
}

inline std::vector<double> log_softmax(const float* x, size_t n) {
  double mx = -1e300, sum = 0;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  for (size_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] - mx - std::log(sum);
  return out;
}

// One refs.json model `m` at `path` (the file llama.cpp ran, checked by hash): max |log-softmax difference|
// <= tol, and greedy tokens equal up to the first step whose llama.cpp top-1/top-2 gap is within tol (a
// near-tie, or past it with `follow_near_ties`); at least `min_steps` greedy steps must have been compared
// over all prompts.
inline void check_file_parity(const std::string& path, const json& m, const char* family, double tol_model,
                              int min_steps, bool follow_near_ties = false) {
  ASSERT_EQ(fnv1a64(path), m.at("fnv1a64").get<std::string>())
      << path << " is not the file llama.cpp's outputs were recorded on: rerun tests/parity/" << family
      << "/make_refs.py";
  engine::EngineOptions options;
  options.n_ctx = 256;
  options.n_threads = 1;
  options.cache_type = DType::F16;  // the peer's KV cache type
  auto loaded = engine::Engine::load(path, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  engine::Engine& e = **loaded;
  const auto nv = static_cast<size_t>(e.n_vocab());
  const double tol = std::max(2.0 * m.at("floor_batch_vs_tokenwise").get<double>(), tol_model);

  double worst = 0;
  int compared_steps = 0;
  for (const json& p : m.at("prompts")) {
    const std::string text = p.at("text");
    SCOPED_TRACE(text);
    const std::vector<int32_t> want_ids = p.at("prompt_ids");
    const std::vector<int32_t> ids = e.tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/true);
    ASSERT_EQ(ids, want_ids);
    e.kv().clear();
    const auto first = p.at("first_position").get<size_t>();
    engine::Batch batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), 0, i >= first);
    auto logits = e.decode(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    const json& rows = p.at("logsoftmax");
    ASSERT_EQ(logits->size(), rows.size() * nv);
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::vector<double> got = log_softmax(logits->data() + r * nv, nv);
      ASSERT_EQ(rows[r].size(), nv);
      for (size_t v = 0; v < nv; ++v) {
        const double want = rows[r][v].get<double>();
        if (want < -80) continue;  // the peer's softmax underflows there
        worst = std::max(worst, std::abs(got[v] - want));
      }
    }
    // Greedy: identical up to the first step whose top-1/top-2 gap (in llama.cpp) is within tol. With
    // `follow_near_ties`, a near-tie step is not compared but llama.cpp's token is fed on, so every later
    // clear step is still compared on llama.cpp's own path (trained models have near-ties often: a comma
    // against "and").
    const std::vector<int32_t> greedy = p.at("greedy");
    const std::vector<double> gaps = p.at("gap_top1_top2");
    std::vector<float> cur(logits->end() - static_cast<std::ptrdiff_t>(nv), logits->end());
    auto pos = static_cast<int32_t>(ids.size());
    for (size_t i = 0; i < greedy.size(); ++i) {
      if (gaps[i] <= tol && !follow_near_ties) break;
      if (gaps[i] > tol) {
        const auto best = static_cast<int32_t>(std::max_element(cur.begin(), cur.end()) - cur.begin());
        EXPECT_EQ(best, greedy[i]) << "greedy step " << i << " (llama.cpp's top-1/top-2 gap " << gaps[i] << ")";
        if (best != greedy[i]) break;
        ++compared_steps;
      }
      engine::Batch b;
      b.add(greedy[i], pos++, 0, true);
      auto next = e.decode(b);
      ASSERT_TRUE(next.ok()) << next.status().message();
      cur = *next;
    }
  }
  EXPECT_LE(worst, tol) << "max |log-softmax difference| against llama.cpp";
  EXPECT_GE(compared_steps, min_steps) << "too few greedy steps compared (near-ties everywhere?)";
  ::testing::Test::RecordProperty("max_abs_diff", fmt::format("{:.3g}", worst));
  ::testing::Test::RecordProperty("greedy_steps", compared_steps);
  if (std::getenv("MINFER_PARITY_REPORT") != nullptr) {
    std::printf("%s parity %-40s max diff %.3g tol %.3g greedy steps %d\n", family, path.c_str(), worst, tol,
                compared_steps);
  }
}

// A refs.json model `m` of `family` (the folder under tests/parity/ holding its make_refs.py), generated
// in-test from its preset / type / seed.
inline void check_synthetic_parity(const json& m, const char* family, double tol_f32, double tol_quantized) {
  const std::string preset = m.at("preset"), type = m.at("type");
  SCOPED_TRACE(preset + " " + type);
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset(preset);
  o.seed = m.at("seed").get<uint64_t>();
  if (type != "f32") o.quant_type = type;
  auto writer = tools::make_synthetic_model(o);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  const std::string path = test::temp_dir() + "/parity-" + preset + "-" + type + ".gguf";
  ASSERT_TRUE(writer->write(path).ok());
  // f32: most of the 48 steps (3 prompts x 16) are clear; quantized: steps stop at the first gap under the
  // tolerance (a few steps compared).
  check_file_parity(path, m, family, type == "f32" ? tol_f32 : tol_quantized, type == "f32" ? 24 : 2);
}

}  // namespace minfer::test
