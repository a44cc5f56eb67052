// Writes a tiny random-weight Qwen model (the project's own synthetic generator) for engine tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "tools/synthetic_model.h"

namespace minfer::test {

inline std::string write_tiny_model(const std::string& preset, DType type = DType::F32, uint64_t seed = 7) {
  tools::SyntheticOptions options;
  options.shape = *tools::synthetic_preset(preset);
  options.weight_type = type;
  options.seed = seed;
  auto writer = tools::make_synthetic_model(options);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  const std::string path = temp_dir() + "/" + preset + "-" + std::string(dtype_name(type)) + ".gguf";
  EXPECT_TRUE(writer->write(path).ok());
  return path;
}

// A deterministic prompt of `n` ordinary token ids; different salts give different prompts.
inline std::vector<int32_t> prompt_of(int32_t n, int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(3 + (i * 7 + salt * 13) % 200);
  return p;
}

}  // namespace minfer::test
