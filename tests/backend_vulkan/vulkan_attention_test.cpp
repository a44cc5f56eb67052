// kv_store and attention on Vulkan against the CPU backend: the same initial KV cells (uploaded through
// Backend::upload into buffers from alloc_buffer), the same batch (store cells, CSR windows), then the cells
// and the attention output read back. kv_store must be bit-exact; attention differs only in f32 summation
// order (online vs two-pass softmax), bounded below with its cause. A token's output bits must not depend
// on which other tokens share its batch.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend_vulkan/vulkan_harness.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace minfer::backend::test {
namespace {

using graph::Node;
using graph::OpKind;

struct Shape {
  const char* name;
  int32_t n_head, n_head_kv, head_dim;
};
// Qwen2.5-0.5B (GQA 7), Qwen3-0.6B (GQA 2, 128-dim heads), no GQA, and an odd-width cache row.
constexpr Shape kQwen2{"qwen2", 14, 2, 64};
constexpr Shape kQwen3{"qwen3", 16, 8, 128};
constexpr Shape kMha{"mha", 4, 4, 64};
constexpr Shape kOdd{"odd", 3, 1, 96};        // q8_0: 3 blocks a row (102 bytes: rows straddle words)
constexpr Shape kGqa10{"gqa10", 20, 2, 64};  // a group wider than one workgroup's 8 query heads
constexpr Shape kNarrow{"narrow", 2, 1, 31};  // f32/f16 only: odd heads; f16 rows of 62 bytes straddle words

std::vector<Shape> shapes_for(DType type) {
  std::vector<Shape> s{kQwen2, kQwen3, kMha, kOdd, kGqa10};
  if (type != DType::Q8_0) s.push_back(kNarrow);
  return s;
}

// One layer's KV cells, a batch and its data.
struct KvCase {
  DType type = DType::F16;
  Shape shape = kQwen2;
  int32_t n_cells = 0;
  std::vector<int32_t> store_cells;           // [n_tokens]
  std::vector<std::vector<int32_t>> windows;  // [n_tokens] cells in position order
  std::vector<float> k, v, q;                 // the batch's rows
  std::vector<uint8_t> k_cells, v_cells;      // initial cell bytes

  int64_t row_elems() const { return static_cast<int64_t>(shape.n_head_kv) * shape.head_dim; }
  size_t row_bytes() const { return *minfer::row_bytes(type, row_elems()); }
  int64_t n_tokens() const { return static_cast<int64_t>(store_cells.size()); }
};

struct KvResult {
  std::vector<uint8_t> k_cells, v_cells;
  std::vector<float> out;
};

std::vector<float> random_floats(std::mt19937& rng, size_t n, float sd) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> x(n);
  for (float& f : x) f = dist(rng);
  return x;
}

// Fills data and initial cells for a case whose shape, cells and windows are set. Scores reach |s| ~ 6, so
// the softmax is neither flat nor one-hot.
void fill(KvCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t row = static_cast<size_t>(c.row_elems());
  c.k = random_floats(rng, row * static_cast<size_t>(c.n_tokens()), 1.0f);
  c.v = random_floats(rng, row * static_cast<size_t>(c.n_tokens()), 1.0f);
  c.q = random_floats(rng,
                      row / static_cast<size_t>(c.shape.n_head_kv) * static_cast<size_t>(c.shape.n_head) *
                          static_cast<size_t>(c.n_tokens()),
                      2.5f);
  const std::vector<float> k0 = random_floats(rng, row * static_cast<size_t>(c.n_cells), 1.0f);
  const std::vector<float> v0 = random_floats(rng, row * static_cast<size_t>(c.n_cells), 1.0f);
  c.k_cells.assign(c.row_bytes() * static_cast<size_t>(c.n_cells), 0);
  c.v_cells.assign(c.k_cells.size(), 0);
  quant::quantize_rows(c.type, k0.data(), c.k_cells.data(), c.n_cells, c.row_elems());
  quant::quantize_rows(c.type, v0.data(), c.v_cells.data(), c.n_cells, c.row_elems());
}

// The case's graph: kv_store(K, V) then attention(Q).
struct KvGraph {
  OpCase op;
  graph::NodeId store = 0, attn = 0;
};

KvGraph build(const KvCase& c) {
  KvGraph g;
  const int64_t n = c.n_tokens();
  const auto k = g.op.add_activation(c.k, {c.row_elems(), n, 1, 1});
  const auto v = g.op.add_activation(c.v, {c.row_elems(), n, 1, 1});
  Node store;
  store.op = OpKind::kKvStore;
  store.src = {k, v};
  store.params.layer = 0;
  store.ne = {0, 1, 1, 1};
  g.store = g.op.add_op(store);
  const auto q = g.op.add_activation(c.q, {c.shape.head_dim, c.shape.n_head, n, 1});
  Node attn;
  attn.op = OpKind::kAttention;
  attn.type = DType::F32;
  attn.src = {q, g.store};
  attn.params.layer = 0;
  attn.params.n_head = c.shape.n_head;
  attn.params.n_head_kv = c.shape.n_head_kv;
  attn.params.head_dim = c.shape.head_dim;
  attn.params.scale = 1.0f / std::sqrt(static_cast<float>(c.shape.head_dim));
  attn.ne = {static_cast<int64_t>(c.shape.head_dim) * c.shape.n_head, n, 1, 1};
  g.attn = g.op.add_op(attn);
  return g;
}

// The BatchView of a case (tokens and positions are not read by these ops).
struct BatchData {
  std::vector<int32_t> tokens, positions, offsets, cells;
  BatchView view;
  explicit BatchData(const KvCase& c) {
    tokens.assign(static_cast<size_t>(c.n_tokens()), 0);
    positions.assign(tokens.size(), 0);
    offsets.push_back(0);
    for (const auto& w : c.windows) {
      cells.insert(cells.end(), w.begin(), w.end());
      offsets.push_back(static_cast<int32_t>(cells.size()));
    }
    view.tokens = tokens;
    view.positions = positions;
    view.store_cells = c.store_cells;
    view.window_offsets = offsets;
    view.window_cells = cells;
  }
};

KvResult run_cpu_kv(const KvCase& c, bool store = true) {
  KvGraph g = build(c);
  CpuBackend cpu;
  ThreadPool pool(2);
  KvResult r{c.k_cells, c.v_cells, {}};
  KvLayerView kv{r.k_cells.data(), r.v_cells.data(), c.type, c.row_elems(), c.n_cells, c.row_bytes()};
  BatchData b(c);
  ExecContext ctx{&b.view, std::span<const KvLayerView>(&kv, 1), &pool};
  std::vector<std::vector<float>> f32 = g.op.f32;
  std::vector<void*> data(g.op.graph.size(), nullptr);
  for (size_t i = 0; i < data.size(); ++i) {
    if (!f32[i].empty()) data[i] = f32[i].data();
  }
  r.out.assign(static_cast<size_t>(g.op.graph.node(g.attn).n_elements()), -1.0f);
  data[static_cast<size_t>(g.attn)] = r.out.data();
  if (store) {
    Status st = cpu.execute(g.op.graph, g.store, data, ctx);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  Status st = cpu.execute(g.op.graph, g.attn, data, ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return r;
}

KvResult run_vulkan_kv(VulkanBackend& vk, const KvCase& c, bool store = true) {
  KvGraph g = build(c);
  const graph::Graph& graph = g.op.graph;
  EXPECT_TRUE(vk.supports_op(graph, graph.node(g.store)));
  EXPECT_TRUE(vk.supports_op(graph, graph.node(g.attn)));
  KvResult r;
  const size_t region = c.row_bytes() * static_cast<size_t>(c.n_cells);
  auto kbuf = vk.alloc_buffer(region);
  auto vbuf = vk.alloc_buffer(region);
  EXPECT_TRUE(kbuf.ok() && vbuf.ok());
  if (!kbuf.ok() || !vbuf.ok()) return r;
  void* kp = (*kbuf)->base();
  void* vp = (*vbuf)->base();
  EXPECT_TRUE(vk.owns(kp, region));
  EXPECT_TRUE(vk.upload(kp, c.k_cells.data(), region).ok());
  EXPECT_TRUE(vk.upload(vp, c.v_cells.data(), region).ok());
  // Activations and the output in one arena.
  const size_t align = vk.buffer_alignment();
  std::vector<size_t> offset(graph.size(), 0);
  size_t total = 0;
  for (size_t i = 0; i < graph.size(); ++i) {
    if (g.op.f32[i].empty()) continue;
    offset[i] = total;
    total += (g.op.f32[i].size() * 4 + align - 1) / align * align;
  }
  const size_t out_bytes = static_cast<size_t>(graph.node(g.attn).n_elements()) * 4;
  auto arena = vk.alloc_buffer(total + out_bytes);
  EXPECT_TRUE(arena.ok());
  if (!arena.ok()) return r;
  auto* base = static_cast<uint8_t*>((*arena)->base());
  std::vector<void*> data(graph.size(), nullptr);
  for (size_t i = 0; i < graph.size(); ++i) {
    if (g.op.f32[i].empty()) continue;
    data[i] = base + offset[i];
    EXPECT_TRUE(vk.upload(data[i], g.op.f32[i].data(), g.op.f32[i].size() * 4).ok());
  }
  data[static_cast<size_t>(g.attn)] = base + total;
  KvLayerView kv{kp, vp, c.type, c.row_elems(), c.n_cells, c.row_bytes()};
  BatchData b(c);
  ExecContext ctx{&b.view, std::span<const KvLayerView>(&kv, 1), nullptr};
  if (store) {
    Status st = vk.execute(graph, g.store, data, ctx);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  Status st = vk.execute(graph, g.attn, data, ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  st = vk.synchronize();
  EXPECT_TRUE(st.ok()) << st.message();
  r.k_cells.resize(region);
  r.v_cells.resize(region);
  r.out.resize(out_bytes / 4);
  EXPECT_TRUE(vk.download(r.k_cells.data(), kp, region).ok());
  EXPECT_TRUE(vk.download(r.v_cells.data(), vp, region).ok());
  EXPECT_TRUE(vk.download(r.out.data(), base + total, out_bytes).ok());
  return r;
}

// Several sequences in one batch. Cells are handed out round-robin to three sequences (so each window
// skips the other sequences' cells); the first `prior` cells of each sequence are already cached, and the
// batch's tokens are appended to their sequences in `seqs` order (a token attends its sequence's cells up
// to and including its own). Cells from `free_every` on are left free (never in a window).
KvCase multi_sequence(DType type, Shape shape, int32_t n_cells, int32_t prior, std::vector<int> seqs,
                      uint32_t seed) {
  KvCase c;
  c.type = type;
  c.shape = shape;
  c.n_cells = n_cells;
  std::vector<std::vector<int32_t>> seq_cells(3);
  int32_t next = 0;
  for (int32_t i = 0; i < prior; ++i) {
    for (int s = 0; s < 3; ++s) {
      if (next % 11 == 10) ++next;  // a free cell between cached ones
      seq_cells[static_cast<size_t>(s)].push_back(next++);
    }
  }
  for (int s : seqs) {
    if (next % 11 == 10) ++next;
    const int32_t cell = next++;
    seq_cells[static_cast<size_t>(s)].push_back(cell);
    c.store_cells.push_back(cell);
    c.windows.push_back(seq_cells[static_cast<size_t>(s)]);
  }
  EXPECT_LE(next, n_cells);
  fill(c, seed);
  return c;
}

// |vk - cpu| per output element, against the bound of the case (see AttentionMatchesCpu).
struct Diff {
  float max_abs = 0.0f;
  float max_ratio = 0.0f;  // max |vk - cpu| / bound
};

float max_abs_value(const std::vector<uint8_t>& cells, DType type, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  quant::dequantize_row(type, cells.data(), x.data(), n);
  float m = 0.0f;
  for (float f : x) m = std::max(m, std::fabs(f));
  return m;
}

void expect_cells_equal(const KvCase& c, const KvResult& cpu, const KvResult& vk) {
  ASSERT_EQ(cpu.k_cells.size(), vk.k_cells.size());
  for (size_t i = 0; i < cpu.k_cells.size(); ++i) {
    if (cpu.k_cells[i] != vk.k_cells[i] || cpu.v_cells[i] != vk.v_cells[i]) {
      FAIL() << dtype_name(c.type) << " " << c.shape.name << ": cell bytes differ at byte " << i << " (cell "
             << i / c.row_bytes() << ", K " << int(cpu.k_cells[i]) << " vs " << int(vk.k_cells[i]) << ", V "
             << int(cpu.v_cells[i]) << " vs " << int(vk.v_cells[i]) << ")";
    }
  }
}

// The attention bound, per output element. Both backends compute sum_j p_j v_j / sum_j p_j in f32 over a
// window of `len` cells; they differ in summation order (the CPU: max first, 16-lane normaliser, p_j
// normalised before the fma chain; Vulkan: online rescaling per 64-cell tile, sequential normaliser, one
// division at the end) and in p_j by the online rescale (exp(s - m) * exp(m - m') vs exp(s - m'): a few
// ulp). Each side's error is at most (len + 8) ulp of max |v| (a sum of len products of terms of unit total
// weight, plus the exp and division roundings), so |vk - cpu| <= 2 (len + 8) 2^-24 max|v|. q8_0 adds the
// score: the CPU's SIMD q8_0 dot accumulates its blocks in another order than the shader (up to
// head_dim/32 ulp of sum |score terms|, with |s| <= 16 here) and takes std::exp, which moves p_j by
// that relative amount: (head_dim / 32 + 2) * 16 * 2^-24 * max|v| more.
Diff compare_attention(const KvCase& c, const KvResult& cpu, const KvResult& vk) {
  Diff d;
  const float eps = std::ldexp(1.0f, -24);
  const float vmax = max_abs_value(vk.v_cells, c.type, c.row_elems() * c.n_cells);
  const size_t per_token = static_cast<size_t>(c.shape.head_dim) * static_cast<size_t>(c.shape.n_head);
  for (size_t t = 0; t < c.windows.size(); ++t) {
    const float len = static_cast<float>(c.windows[t].size());
    float bound = 2.0f * (len + 8.0f) * eps * vmax;
    if (c.type == DType::Q8_0)
      bound += (static_cast<float>(c.shape.head_dim) / 32.0f + 2.0f) * 16.0f * eps * vmax;
    for (size_t i = t * per_token; i < (t + 1) * per_token; ++i) {
      const float e = std::fabs(vk.out[i] - cpu.out[i]);
      EXPECT_LE(e, bound) << dtype_name(c.type) << " " << c.shape.name << " token " << t << " element "
                          << i - t * per_token << ": " << vk.out[i] << " vs " << cpu.out[i] << " (window "
                          << c.windows[t].size() << ")";
      if (!(e <= bound)) return d;
      d.max_abs = std::max(d.max_abs, e);
      d.max_ratio = std::max(d.max_ratio, e / bound);
    }
  }
  return d;
}

class VulkanKv : public ::testing::TestWithParam<DType> {};

std::string type_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

// kv_store writes the CPU's bytes: every cache type, 1 and 7 tokens, rows that share words with their
// neighbours, and values at the conversions' edges.
TEST_P(VulkanKv, KvStoreIsBitExact) {
  MINFER_VK_OR_SKIP(vk);
  const DType type = GetParam();
  for (Shape shape : shapes_for(type)) {
    for (std::vector<int> seqs : {std::vector<int>{1}, std::vector<int>{0, 0, 1, 2, 2, 2, 1}}) {
      KvCase c = multi_sequence(type, shape, 101, 5, seqs, 7u + static_cast<uint32_t>(seqs.size()));
      if (seqs.size() == 7) {
        const size_t row = static_cast<size_t>(c.row_elems());
        // roundf's halves (q8_0: amax 127 makes d = id = 1, so x * id is exact), then f16's edges: 65519
        // rounds down, 65520 to inf, subnormals, below half the smallest subnormal, a tie, -0, tiny values.
        const float ties[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -126.5f, 3.5f};
        const float edge[] = {65519.0f, 65520.0f, 1e-7f, 2.9e-8f, 1.00048828125f, -0.0f, 1e-30f, 3e-39f};
        for (size_t i = 0; i < 8 && i < row; ++i) c.k[row + i] = ties[i];
        for (size_t i = 0; i < 8 && 32 + i < row; ++i) c.k[row + 32 + i] = edge[i];
        for (size_t i = 0; i < 8 && 16 + i < row; ++i) c.k[4 * row + 16 + i] = edge[i];  // 31-wide rows too
        for (size_t i = 0; i < std::min<size_t>(32, row); ++i) c.v[2 * row + i] = 0.0f;  // an all-zero block
        for (size_t i = 0; i < std::min<size_t>(32, row); ++i)
          c.v[3 * row + i] = 1e-30f * static_cast<float>(i);
      }
      const KvResult cpu = run_cpu_kv(c);
      const KvResult gpu = run_vulkan_kv(*vk, c);
      expect_cells_equal(c, cpu, gpu);
    }
  }
}

// kv_store over 500 tokens whose 32-element blocks are scaled by 10^u, u uniform in [-30, 30]: the q8_0
// divisions (d = amax / 127, 1 / d) and the f16 rounding (overflow to inf, subnormals, flush to zero) are
// checked against the CPU's bytes across the exponent range, 4000 blocks a type. Every window is empty
// (the attention after it must write zeros).
TEST_P(VulkanKv, KvStoreIsBitExactAcrossMagnitudes) {
  MINFER_VK_OR_SKIP(vk);
  KvCase c;
  c.type = GetParam();
  c.shape = kMha;
  c.n_cells = 503;
  for (int32_t i = 0; i < 500; ++i) {
    c.store_cells.push_back((i * 7) % 503);
    c.windows.push_back({});
  }
  fill(c, 21);
  std::mt19937 rng(22);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  for (std::vector<float>* x : {&c.k, &c.v}) {
    for (size_t b = 0; b < x->size() / 32; ++b) {
      const float scale = std::pow(10.0f, u(rng));
      for (size_t j = 0; j < 32; ++j) (*x)[b * 32 + j] *= scale;
    }
  }
  const KvResult cpu = run_cpu_kv(c);
  const KvResult gpu = run_vulkan_kv(*vk, c);
  expect_cells_equal(c, cpu, gpu);
  for (float f : gpu.out) ASSERT_EQ(f, 0.0f);  // every window empty: zeros, as on the CPU
}

// Attention against the CPU: Qwen2 (GQA 7), Qwen3 (GQA 2, head_dim 128), MHA, 96-dim heads and GQA 10; 1 and 7
// tokens of up to three sequences whose windows skip the other sequences' cells and free cells, windows
// longer than one 64-cell tile, and an odd cell count.
TEST_P(VulkanKv, AttentionMatchesCpu) {
  MINFER_VK_OR_SKIP(vk);
  const DType type = GetParam();
  float worst = 0.0f, worst_abs = 0.0f;
  for (Shape shape : shapes_for(type)) {
    for (std::vector<int> seqs : {std::vector<int>{2}, std::vector<int>{0, 0, 1, 2, 2, 2, 1}}) {
      for (int32_t prior : {0, 3, 70}) {
        KvCase c = multi_sequence(type, shape, 271, prior, seqs,
                                  static_cast<uint32_t>(prior * 10 + static_cast<int>(seqs.size())));
        const KvResult cpu = run_cpu_kv(c);
        const KvResult gpu = run_vulkan_kv(*vk, c);
        expect_cells_equal(c, cpu, gpu);
        const Diff d = compare_attention(c, cpu, gpu);
        worst = std::max(worst, d.max_ratio);
        worst_abs = std::max(worst_abs, d.max_abs);
      }
    }
  }
  std::printf("%s attention: max |vk - cpu| %.3g, %.3f of the bound\n", std::string(dtype_name(type)).c_str(),
              worst_abs, worst);
}

// A token's output bits do not depend on the batch: each token of a 7-token, 3-sequence batch computed
// alone (a one-token batch over the same cells and window) gives the same bits.
TEST_P(VulkanKv, TokenOutputDoesNotDependOnTheBatch) {
  MINFER_VK_OR_SKIP(vk);
  const DType type = GetParam();
  for (Shape shape : {kQwen2, kQwen3, kGqa10}) {
    KvCase batch = multi_sequence(type, shape, 157, 30, {0, 0, 1, 2, 2, 2, 1}, 99);
    const KvResult all = run_vulkan_kv(*vk, batch);
    const size_t per_token = static_cast<size_t>(shape.head_dim) * static_cast<size_t>(shape.n_head);
    const size_t row = static_cast<size_t>(batch.row_elems());
    for (size_t t = 0; t < batch.windows.size(); ++t) {
      KvCase one = batch;
      one.k_cells = all.k_cells;  // the cells as the batch left them
      one.v_cells = all.v_cells;
      one.store_cells = {batch.store_cells[t]};
      one.windows = {batch.windows[t]};
      one.k.assign(batch.k.begin() + static_cast<ptrdiff_t>(t * row),
                   batch.k.begin() + static_cast<ptrdiff_t>((t + 1) * row));
      one.v.assign(batch.v.begin() + static_cast<ptrdiff_t>(t * row),
                   batch.v.begin() + static_cast<ptrdiff_t>((t + 1) * row));
      one.q.assign(batch.q.begin() + static_cast<ptrdiff_t>(t * per_token),
                   batch.q.begin() + static_cast<ptrdiff_t>((t + 1) * per_token));
      const KvResult alone = run_vulkan_kv(*vk, one, /*store=*/false);
      ASSERT_EQ(alone.out.size(), per_token);
      EXPECT_EQ(std::memcmp(alone.out.data(), all.out.data() + t * per_token, per_token * 4), 0)
          << dtype_name(type) << " " << shape.name << " token " << t;
    }
  }
}

// Windows the random cases rarely give: an empty one (zeros, as on the CPU), a 200-cell window (four tiles)
// whose largest score is in its last cell (every earlier tile is rescaled), one where the first cell
// dominates so strongly that every later exp underflows to 0, and a one-cell window.
TEST_P(VulkanKv, AttentionEdgeWindows) {
  MINFER_VK_OR_SKIP(vk);
  const DType type = GetParam();
  KvCase c;
  c.type = type;
  c.shape = kQwen3;
  c.n_cells = 211;
  c.store_cells = {210, 209, 208, 207};
  std::vector<int32_t> long_window;
  for (int32_t i = 0; i < 200; ++i) long_window.push_back(i);
  c.windows = {{}, long_window, long_window, {5}};
  fill(c, 5);
  const size_t hd = static_cast<size_t>(c.shape.head_dim);
  const size_t row = static_cast<size_t>(c.row_elems());
  std::vector<float> k0(row * static_cast<size_t>(c.n_cells));
  quant::dequantize_row(type, c.k_cells.data(), k0.data(), static_cast<int64_t>(k0.size()));
  // Token 1's head 0 (KV head 0) points along cell 199's K, token 2's along cell 0's: scores of ~40.
  for (size_t d = 0; d < hd; ++d) {
    c.q[1 * hd * static_cast<size_t>(c.shape.n_head) + d] = 6.0f * k0[199 * row + d];
    c.q[2 * hd * static_cast<size_t>(c.shape.n_head) + d] = 6.0f * k0[0 * row + d];
  }
  const KvResult cpu = run_cpu_kv(c);
  const KvResult gpu = run_vulkan_kv(*vk, c);
  expect_cells_equal(c, cpu, gpu);
  compare_attention(c, cpu, gpu);
  for (size_t i = 0; i < hd * static_cast<size_t>(c.shape.n_head); ++i) ASSERT_EQ(gpu.out[i], 0.0f) << i;
}

INSTANTIATE_TEST_SUITE_P(CacheTypes, VulkanKv, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         type_name);

// Refusals name what is refused: a host KV cache, a cache type without shaders, cells wider than one
// binding, q8_0 heads of 48.
TEST(VulkanKvRefusals, NameWhatIsRefused) {
  MINFER_VK_OR_SKIP(vk);
  KvCase c = multi_sequence(DType::F16, kMha, 20, 1, {0}, 3);
  KvGraph g = build(c);
  std::vector<uint8_t> host(c.k_cells);
  KvLayerView kv{host.data(), host.data(), c.type, c.row_elems(), c.n_cells, c.row_bytes()};
  BatchData b(c);
  ExecContext ctx{&b.view, std::span<const KvLayerView>(&kv, 1), nullptr};
  std::vector<void*> data(g.op.graph.size(), nullptr);
  for (size_t i = 0; i < data.size(); ++i) {
    if (!g.op.f32[i].empty()) data[i] = const_cast<float*>(g.op.f32[i].data());
  }
  Status st = vk->execute(g.op.graph, g.store, data, ctx);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not in a Vulkan buffer"), std::string::npos) << st.message();

  auto buf = vk->alloc_buffer(4096);
  ASSERT_TRUE(buf.ok());
  kv = {(*buf)->base(), (*buf)->base(), DType::Q4_0, 64, 8, *minfer::row_bytes(DType::Q4_0, 64)};
  st = vk->execute(g.op.graph, g.store, data, ctx);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("q4_0"), std::string::npos) << st.message();

  // A layer's cells larger than one storage binding (as on lavapipe past 128 MiB).
  kv = {(*buf)->base(), (*buf)->base(), DType::F16, 64, 32, *minfer::row_bytes(DType::F16, 64)};
  vk->set_max_binding_bytes(1024);
  st = vk->execute(g.op.graph, g.attn, data, ctx);
  vk->set_max_binding_bytes(0);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("exceed one storage binding"), std::string::npos) << st.message();

  // q8_0 heads of 48 dimensions: the cache rows are whole blocks (2 x 48 = 96), the heads are not.
  KvCase q8 = multi_sequence(DType::Q8_0, Shape{"q8-48", 2, 2, 48}, 8, 1, {0}, 4);
  KvGraph g8 = build(q8);
  std::vector<void*> data8(g8.op.graph.size(), nullptr);
  for (size_t i = 0; i < data8.size(); ++i) {
    if (!g8.op.f32[i].empty()) data8[i] = const_cast<float*>(g8.op.f32[i].data());
  }
  kv = {(*buf)->base(), (*buf)->base(), DType::Q8_0, 96, 8, *minfer::row_bytes(DType::Q8_0, 96)};
  BatchData b8(q8);
  ExecContext ctx8{&b8.view, std::span<const KvLayerView>(&kv, 1), nullptr};
  EXPECT_TRUE(vk->supports_op(g8.op.graph, g8.op.graph.node(g8.attn)));
  st = vk->execute(g8.op.graph, g8.attn, data8, ctx8);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("multiples of 32"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace minfer::backend::test
