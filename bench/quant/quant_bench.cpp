// Kernel micro-benchmarks: GEMV (decode of 1, 2, 4, 8 streams, GB/s of weights streamed) and GEMM (prefill,
// GFLOP/s) per weight type at 1 and 2 threads, activation quantization, plus a memory-bandwidth probe and an
// int8 peak probe so each figure can be read as a fraction of the machine's limit. MINFER_CPU_ISA selects the
// kernel level. Shapes are Qwen2.5-0.5B's FFN (n_embd 896, n_ff 4864) rounded to K-quant blocks.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/fp16.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "quant/kernels/kernels.h"
#include "quant/matmul.h"
#include "quant/quant.h"

namespace minfer::bench {
int64_t int8_peak_avx512_vnni(int64_t iters);
int64_t int8_peak_avx2(int64_t iters);
uint64_t stream_sum_avx512(const uint8_t* p, size_t n);
}  // namespace minfer::bench

namespace {

using minfer::DType;
using minfer::ThreadPool;
namespace quant = minfer::quant;

constexpr int64_t kN = 4864;  // outputs (ffn_up rows)
constexpr int64_t kK = 1024;  // inputs (n_embd-like, a multiple of 256)

struct Fixture {
  std::vector<uint8_t> weights;
  quant::Weight w;
  std::vector<float> x;
  // GEMV cycles through copies totalling >= 96 MiB so weights stream from DRAM (a 0.5B model's layers
  // do not fit the 32 MiB L3), as in decode.
  std::vector<std::vector<uint8_t>> copies;
  std::vector<quant::Weight> copy_weights;
};

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  minfer::Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = static_cast<float>(rng.normal());
  return v;
}

const Fixture& fixture(DType t) {
  static std::unique_ptr<Fixture> cache[40];
  auto& f = cache[static_cast<uint32_t>(t)];
  if (!f) {
    f = std::make_unique<Fixture>();
    const std::vector<float> wf = random_floats(kN * kK, 1);
    f->weights.resize(*minfer::row_bytes(t, kK) * kN);
    quant::quantize_rows(t, wf.data(), f->weights.data(), kN, kK, 2);
    f->w = quant::prepare_weight(t, f->weights.data(), kN, kK, true);
    f->x = random_floats(512 * kK, 2);
    const size_t n_copies = std::max<size_t>(2, (96u << 20) / f->weights.size() + 1);
    for (size_t i = 0; i < n_copies; ++i) {
      f->copies.push_back(f->weights);
      f->copy_weights.push_back(quant::prepare_weight(t, f->copies.back().data(), kN, kK, true));
    }
  }
  return *f;
}

ThreadPool& pool(int n) {
  static ThreadPool p1(1), p2(2);
  return n == 1 ? p1 : p2;
}

void BM_Gemv(benchmark::State& state, DType t) {
  const Fixture& f = fixture(t);
  ThreadPool& p = pool(static_cast<int>(state.range(0)));
  const int64_t m = state.range(1);  // tokens: 1 for one stream's decode, a few for batched decode / verify
  quant::MatmulScratch scratch;
  std::vector<float> y(static_cast<size_t>(m * kN));
  size_t i = 0;
  for (auto _ : state) {
    quant::matmul(f.copy_weights[i], f.x.data(), m, y.data(), p, scratch);
    i = (i + 1) % f.copy_weights.size();
    benchmark::DoNotOptimize(y.data());
  }
  // Bytes actually streamed: the repacked copy when there is one (it can be larger than the file's).
  const size_t bytes = f.w.repack != nullptr ? f.w.repack->packed_bytes(kN, kK) : f.weights.size();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.counters["file_GBps"] = benchmark::Counter(static_cast<double>(f.weights.size()) * state.iterations(),
                                                   benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_Gemm(benchmark::State& state, DType t) {
  const Fixture& f = fixture(t);
  ThreadPool& p = pool(static_cast<int>(state.range(0)));
  const int64_t m = state.range(1);
  quant::MatmulScratch scratch;
  std::vector<float> y(static_cast<size_t>(m * kN));
  for (auto _ : state) {
    quant::matmul(f.w, f.x.data(), m, y.data(), p, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * kN * kK) * state.iterations(),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// One Qwen2.5-0.5B layer's matmuls during a 512-token prefill (q, k, v, o, gate, up, down; n_embd 896,
// n_ff 4864), in the model's proportions: what `minfer bench` pp512 spends ~85% of its time on.
void BM_PrefillLayer(benchmark::State& state, DType t) {
  struct Shape {
    int64_t n, k;
  };
  static const Shape kShapes[] = {{896, 896},  {128, 896},  {128, 896}, {896, 896},
                                  {4864, 896}, {4864, 896}, {896, 4864}};
  constexpr int64_t m = 512;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<quant::Weight> weights;
  double flops = 0;
  for (const Shape& s : kShapes) {
    bytes.push_back(std::vector<uint8_t>(*minfer::row_bytes(t, s.k) * static_cast<size_t>(s.n)));
    quant::quantize_rows(t, random_floats(s.n * s.k, 11).data(), bytes.back().data(), s.n, s.k, 2);
    weights.push_back(quant::prepare_weight(t, bytes.back().data(), s.n, s.k, true));
    flops += 2.0 * static_cast<double>(m * s.n * s.k);
  }
  const std::vector<float> x = random_floats(m * 4864, 12);
  std::vector<float> y(static_cast<size_t>(m * 4864));
  ThreadPool& p = pool(static_cast<int>(state.range(0)));
  quant::MatmulScratch scratch;
  for (auto _ : state) {
    for (const quant::Weight& w : weights) quant::matmul(w, x.data(), m, y.data(), p, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GOPS"] = benchmark::Counter(flops * state.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}

// One prefill attention task as the CPU backend hands it out: 24 tokens x a GQA group of 2 (48 query rows)
// over a 512-cell window, head_dim 128 (Qwen3-0.6B), f16 cache; cells/s of scores (rows x window).
void BM_AttentionPrefill(benchmark::State& state) {
  constexpr int32_t kD = 128, kRows = 48, kCells = 512;
  const minfer::kernels::AttentionFn fn = minfer::kernels::cpu_kernels().of(DType::F16).attention;
  const std::vector<float> kv = random_floats(2 * kCells * kD, 21);
  std::vector<uint16_t> k(kCells * kD), v(kCells * kD);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = minfer::fp32_to_fp16(kv[i]);
    v[i] = minfer::fp32_to_fp16(kv[k.size() + i]);
  }
  const std::vector<float> q = random_floats(kRows * kD, 22);
  std::vector<float> out(kRows * kD);
  std::vector<const float*> qrows;
  std::vector<float*> orows;
  std::vector<int32_t> lens, cells(kCells);
  for (int32_t r = 0; r < kRows; ++r) {
    qrows.push_back(q.data() + r * kD);
    orows.push_back(out.data() + r * kD);
    lens.push_back(kCells - kRows / 2 + r / 2);  // causal: the block's tokens end the window
  }
  for (int32_t c = 0; c < kCells; ++c) cells[static_cast<size_t>(c)] = c;
  minfer::kernels::AttnRows a;
  a.head_dim = kD;
  a.n_rows = kRows;
  a.q = qrows.data();
  a.out = orows.data();
  a.lens = lens.data();
  a.cells = cells.data();
  a.k = reinterpret_cast<const uint8_t*>(k.data());
  a.v = reinterpret_cast<const uint8_t*>(v.data());
  a.row_bytes = kD * sizeof(uint16_t);
  a.scale = 0.088f;
  for (auto _ : state) {
    fn(a);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRows * kCells);
}

void BM_QuantizeActivations(benchmark::State& state, DType t) {
  const Fixture& f = fixture(t);
  const minfer::kernels::TypeKernels& tk = minfer::kernels::cpu_kernels().of(t);
  std::vector<uint8_t> out(*minfer::row_bytes(tk.vec_dot_type, kK) * 512);
  for (auto _ : state) {
    for (int i = 0; i < 512; ++i) tk.from_float(f.x.data() + i * kK, out.data() + i * (out.size() / 512), kK);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 512 * kK * 4);
}

// Memory-bandwidth probe: sums a 1 GiB buffer (read-only streaming, like GEMV) with n threads, with
// 512-bit loads where the CPU has AVX-512 (a scalar loop under-reports Zen 4's bandwidth). 1 GiB: the
// Intel Xeon VM of 2026-12-03 reports a 480 MiB L3, which held the earlier 128 MiB buffer.
void BM_MemoryBandwidth(benchmark::State& state) {
  static std::vector<uint64_t> buf(128ull << 20, 1);  // 1 GiB
  ThreadPool& p = pool(static_cast<int>(state.range(0)));
  const bool wide = minfer::kernels::isa_available(minfer::kernels::Isa::kAvx512);
  for (auto _ : state) {
    uint64_t sums[2] = {0, 0};
    p.run([&](int ith, int nth) {
      const size_t n = buf.size() / static_cast<size_t>(nth);
      const uint64_t* b = buf.data() + n * static_cast<size_t>(ith);
      if (wide) {
        sums[ith] =
            minfer::bench::stream_sum_avx512(reinterpret_cast<const uint8_t*>(b), n * sizeof(uint64_t));
        return;
      }
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = 0; i < n; i += 4) {
        s0 += b[i];
        s1 += b[i + 1];
        s2 += b[i + 2];
        s3 += b[i + 3];
      }
      sums[ith] = s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(sums);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.size() * 8));
}

// int8 peak: multiply-adds per second in registers (2 ops per int8 product), one thread.
void BM_Int8Peak(benchmark::State& state) {
  const bool vnni = state.range(0) == 1;
  if (vnni && !minfer::kernels::isa_available(minfer::kernels::Isa::kAvx512)) {
    state.SkipWithError("no AVX-512 VNNI");
    return;
  }
  if (!minfer::kernels::isa_available(minfer::kernels::Isa::kAvx2)) {
    state.SkipWithError("no AVX2");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(vnni ? minfer::bench::int8_peak_avx512_vnni(kIters)
                                  : minfer::bench::int8_peak_avx2(kIters));
  }
  const double ops_per_iter = vnni ? 12.0 * 64 * 2 : 8.0 * 32 * 2;
  state.counters["GOPS"] = benchmark::Counter(ops_per_iter * kIters * state.iterations(),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void register_all() {
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (DType t : types) {
    const std::string name(minfer::dtype_name(t));
    benchmark::RegisterBenchmark(("gemv/" + name).c_str(), BM_Gemv, t)
        ->ArgsProduct({{1, 2}, {1, 2, 4, 8}})
        ->UseRealTime();
    benchmark::RegisterBenchmark(("gemm/" + name).c_str(), BM_Gemm, t)
        ->Args({1, 128})
        ->Args({2, 128})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("quantize_act/" + name).c_str(), BM_QuantizeActivations, t);
    if (t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q5_0 || t == DType::F16) {
      benchmark::RegisterBenchmark(("prefill_layer/" + name).c_str(), BM_PrefillLayer, t)
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RegisterBenchmark("attention/prefill_f16_d128", BM_AttentionPrefill);
  benchmark::RegisterBenchmark("probe/memory_bandwidth", BM_MemoryBandwidth)->Arg(1)->Arg(2)->UseRealTime();
  benchmark::RegisterBenchmark("probe/int8_peak_avx2", BM_Int8Peak)->Arg(0);
  benchmark::RegisterBenchmark("probe/int8_peak_avx512_vnni", BM_Int8Peak)->Arg(1);
}

const bool kRegistered = (register_all(), true);

}  // namespace
