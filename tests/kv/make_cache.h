// A small KV cache on the CPU backend for the kv tests: 2 layers, rows of 64 elements.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_cache.h"

namespace minfer::kv::test {

inline std::unique_ptr<KvCache> make_cache(int64_t cells, DType type = DType::F32) {
  static backend::CpuBackend cpu;
  KvConfig c;
  c.n_layer = 2;
  c.n_cells = cells;
  c.row_elems = 64;
  c.type = type;
  auto kv = KvCache::create(c, cpu);
  EXPECT_TRUE(kv.ok()) << kv.status().message();
  return std::move(*kv);
}

}  // namespace minfer::kv::test
