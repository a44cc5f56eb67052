// The Vulkan backend behind the unchanged scheduler: a small decoder-shaped graph (get_rows, rms_norm,
// matmuls of four weight types, rope, fused swiglu, adds) is assigned to Vulkan, allocated in a device
// arena (in-place aliasing included), executed split by split with bound host inputs, and read back.
// The engine's layer offload runs on this seam (tests/backend_vulkan/vulkan_offload_test.cpp). A second
// graph adds kv_store and attention over KV cells in Vulkan buffers (the pointer scheme of vulkan_backend.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend_vulkan/vulkan_harness.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "graph/builder.h"
#include "quant/quant.h"
#include "sched/scheduler.h"

namespace minfer::backend::test {
namespace {

using graph::GraphBuilder;
using graph::GraphParams;
using graph::InputKind;
using graph::NodeId;

constexpr int64_t kEmbd = 64, kFf = 96, kVocab = 10;
constexpr int32_t kHeadDim = 32;

struct Weights {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<WeightSource> list;
  void add(const std::string& name, DType type, int64_t k, int64_t n, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> f(static_cast<size_t>(k * n));
    for (float& x : f) x = static_cast<float>(rng.normal()) * 0.3f;
    std::vector<uint8_t> b(*row_bytes(type, k) * static_cast<size_t>(n));
    if (type == DType::F32) {
      std::memcpy(b.data(), f.data(), b.size());
    } else if (type == DType::F16) {
      for (size_t i = 0; i < f.size(); ++i) reinterpret_cast<uint16_t*>(b.data())[i] = fp32_to_fp16(f[i]);
    } else {
      quant::quantize_rows(type, f.data(), b.data(), n, k);
    }
    bytes.push_back(std::move(b));
    list.push_back({name, type, {k, n, 1, 1}, nullptr, bytes.back().size()});
  }
  // Pointers are taken at the end: `bytes` no longer moves.
  std::vector<WeightSource> sources() {
    for (size_t i = 0; i < list.size(); ++i) list[i].data = bytes[i].data();
    return list;
  }
};

Weights make_weights() {
  Weights w;
  w.add("embd", DType::Q8_0, kEmbd, kVocab, 1);
  w.add("norm", DType::F32, kEmbd, 1, 2);
  w.add("wq", DType::Q4_0, kEmbd, kEmbd, 3);
  w.add("wg", DType::F16, kEmbd, kFf, 4);
  w.add("wu", DType::F32, kEmbd, kFf, 5);
  w.add("wd", DType::Q8_0, kFf, kEmbd, 6);
  w.add("bias", DType::F32, kEmbd, 1, 7);
  w.add("wk", DType::F16, kEmbd, kHeadDim, 8);
  w.add("wv", DType::Q8_0, kEmbd, kHeadDim, 9);
  w.add("wo", DType::F16, kEmbd, kEmbd, 10);
  return w;
}

// An attention block: 2 query heads of 32 over one KV head (GQA 2), K and Q roped, output projection and
// residual.
Result<graph::Graph> build_attention(const GraphParams& p) {
  GraphBuilder b;
  const NodeId pos = b.input(InputKind::kPositions, p.n_tokens);
  const NodeId x = b.get_rows(b.weight("embd", DType::Q8_0, {kEmbd, kVocab, 1, 1}),
                              b.input(InputKind::kTokens, p.n_tokens));
  const NodeId xn = b.rms_norm(x, b.weight("norm", DType::F32, {kEmbd, 1, 1, 1}), 1e-6f);
  const NodeId q = b.rope(b.reshape(b.matmul(b.weight("wq", DType::Q4_0, {kEmbd, kEmbd, 1, 1}), xn),
                                    {kHeadDim, 2, p.n_tokens, 1}),
                          pos, kHeadDim, 10000.0f);
  const NodeId k = b.rope(b.reshape(b.matmul(b.weight("wk", DType::F16, {kEmbd, kHeadDim, 1, 1}), xn),
                                    {kHeadDim, 1, p.n_tokens, 1}),
                          pos, kHeadDim, 10000.0f);
  const NodeId v = b.matmul(b.weight("wv", DType::Q8_0, {kEmbd, kHeadDim, 1, 1}), xn);
  const NodeId store = b.kv_store(0, k, v);
  const NodeId a = b.attention(0, q, store, 2, 1, kHeadDim);
  b.output(b.add(b.matmul(b.weight("wo", DType::F16, {kEmbd, kEmbd, 1, 1}), a), x));
  return b.take();
}

Result<graph::Graph> build(const GraphParams& p) {
  GraphBuilder b;
  const NodeId x = b.get_rows(b.weight("embd", DType::Q8_0, {kEmbd, kVocab, 1, 1}),
                              b.input(InputKind::kTokens, p.n_tokens));
  const NodeId xn = b.rms_norm(x, b.weight("norm", DType::F32, {kEmbd, 1, 1, 1}), 1e-6f);
  const NodeId q = b.matmul(b.weight("wq", DType::Q4_0, {kEmbd, kEmbd, 1, 1}), xn);
  const NodeId qr =
      b.rope(b.reshape(q, {16, 4, p.n_tokens, 1}), b.input(InputKind::kPositions, p.n_tokens), 16, 10000.0f);
  const NodeId g = b.matmul(b.weight("wg", DType::F16, {kEmbd, kFf, 1, 1}), xn);
  const NodeId u = b.matmul(b.weight("wu", DType::F32, {kEmbd, kFf, 1, 1}), xn);
  const NodeId h = b.mul(b.silu(g), u);
  const NodeId y = b.add(b.matmul(b.weight("wd", DType::Q8_0, {kFf, kEmbd, 1, 1}), h),
                         b.reshape(qr, {kEmbd, p.n_tokens, 1, 1}));
  b.output(b.add(y, b.weight("bias", DType::F32, {kEmbd, 1, 1, 1})));
  return b.take();
}

struct Batch {
  std::vector<int32_t> tokens, positions, rows;
  std::vector<int32_t> store_cells, offsets, cells;  // KV: cells written, CSR windows
  backend::BatchView view() const {
    backend::BatchView v;
    v.tokens = tokens;
    v.positions = positions;
    v.output_rows = rows;
    v.store_cells = store_cells;
    v.window_offsets = offsets;
    v.window_cells = cells;
    return v;
  }
};

Batch make_batch(std::vector<int32_t> tokens, int32_t pos0) {
  Batch b;
  b.tokens = std::move(tokens);
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    b.positions.push_back(pos0 + static_cast<int32_t>(i));
    b.rows.push_back(static_cast<int32_t>(i));
  }
  return b;
}

bool backends_have_device(const sched::Plan& plan) {
  return plan.graph.node(plan.graph.outputs[0]).backend == 0 && plan.arenas[0] && !plan.arenas[0]->host_visible();
}

// Runs `batch` through a scheduler over `backends`; the scheduler hands the output back in host memory
// (downloaded after the last split when it lives on the device).
std::vector<float> run(std::vector<Backend*> backends, const Batch& batch) {
  ThreadPool pool(2);
  sched::Scheduler sched(std::move(backends), &pool);
  const auto n = static_cast<int32_t>(batch.tokens.size());
  auto plan = sched.plan({n, n}, build);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  if (!plan.ok()) return {};
  Status st = sched.execute(**plan, batch.view(), {});
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ((*plan)->outputs.size(), backends_have_device(**plan) ? 1u : 0u);
  const float* y = sched.output_data(**plan, 0);
  return std::vector<float>(y, y + static_cast<size_t>(n) * kEmbd);
}

TEST(VulkanScheduler, RunsADecoderShapedGraph) {
  MINFER_VK_OR_SKIP(vk);
  Weights w = make_weights();
  std::vector<WeightSource> sources = w.sources();
  CpuBackend cpu;
  // The CPU gets its own copies of the weights (it may release pages it repacked; see vulkan_harness.cpp).
  Weights wc = make_weights();
  for (const WeightSource& s : wc.sources()) ASSERT_TRUE(cpu.register_weight(s).ok());
  for (const WeightSource& s : sources) ASSERT_TRUE(vk->register_weight(s).ok()) << s.name;

  // Every node but the host inputs is assigned to Vulkan; the swiglu fusion applies there too.
  {
    ThreadPool pool(1);
    sched::Scheduler sched({vk.get(), &cpu}, &pool);
    auto plan = sched.plan({7, 7}, build);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const std::vector<std::string> names = sched.backend_names();
    for (NodeId id : (*plan)->order) {
      const graph::Node& n = (*plan)->graph.node(id);
      const std::string& on = names[static_cast<size_t>(n.backend)];
      EXPECT_EQ(on, n.op == graph::OpKind::kInput ? "CPU" : "Vulkan")
          << graph::op_name(n.op) << " " << n.name;
    }
    EXPECT_EQ((*plan)->fuse_stats.swiglu, 1);
  }

  const Batch batch = make_batch({3, 0, 9, 9, 1, 5, 2}, 40);
  const std::vector<float> on_cpu = run({&cpu}, batch);
  const std::vector<float> on_vk = run({vk.get(), &cpu}, batch);
  ASSERT_EQ(on_cpu.size(), on_vk.size());
  // The CPU quantizes activations to Q8_0 before the Q4_0 / Q8_0 matmuls and rounds them to f16 before
  // the F16 one (ggml's scheme); Vulkan keeps them f32. Through two matmul layers that is about 1% of
  // the output's scale: bound 3% of the largest |y|.
  float ymax = 0;
  for (float v : on_cpu) ymax = std::max(ymax, std::fabs(v));
  ASSERT_GT(ymax, 0.0f);
  for (size_t i = 0; i < on_cpu.size(); ++i) ASSERT_NEAR(on_vk[i], on_cpu[i], 0.03f * ymax) << i;

  // A token's row does not depend on its batch: the last token alone, at its position, gives the same
  // bits as in the batch of 7 (every Vulkan op is per token, in a fixed reduction order).
  const Batch one = make_batch({2}, 46);
  const std::vector<float> alone = run({vk.get(), &cpu}, one);
  for (int64_t i = 0; i < kEmbd; ++i) {
    ASSERT_EQ(alone[static_cast<size_t>(i)], on_vk[static_cast<size_t>(6 * kEmbd + i)]) << i;
  }
}

// Sequences sharing the KV cells: token i of `seqs` joins sequence seqs[i] at its next position, in the
// next free cell of `next_cell`; `history` holds each sequence's cells so far (updated).
Batch kv_batch(const std::vector<int32_t>& tokens, const std::vector<int>& seqs,
               std::vector<std::vector<int32_t>>& history, int32_t& next_cell) {
  Batch b;
  b.tokens = tokens;
  b.offsets.push_back(0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto& h = history[static_cast<size_t>(seqs[i])];
    b.positions.push_back(static_cast<int32_t>(h.size()));
    b.rows.push_back(static_cast<int32_t>(i));
    b.store_cells.push_back(next_cell);
    h.push_back(next_cell++);
    b.cells.insert(b.cells.end(), h.begin(), h.end());
    b.offsets.push_back(static_cast<int32_t>(b.cells.size()));
  }
  return b;
}

// One layer's f16 KV cells on `owner`: Vulkan buffers or host vectors, zeroed.
struct Cells {
  static constexpr int64_t kCells = 16;
  std::unique_ptr<Buffer> kbuf, vbuf;
  std::vector<uint8_t> khost, vhost;
  backend::KvLayerView view;
  explicit Cells(VulkanBackend* vk) {
    const size_t bytes = *row_bytes(DType::F16, kHeadDim) * kCells;
    view = {nullptr, nullptr, DType::F16, kHeadDim, kCells, *row_bytes(DType::F16, kHeadDim)};
    const std::vector<uint8_t> zeros(bytes, 0);
    if (vk != nullptr) {
      auto kb = vk->alloc_buffer(bytes);
      auto vb = vk->alloc_buffer(bytes);
      EXPECT_TRUE(kb.ok() && vb.ok());
      kbuf = std::move(*kb);
      vbuf = std::move(*vb);
      view.k = kbuf->base();
      view.v = vbuf->base();
      EXPECT_TRUE(vk->upload(view.k, zeros.data(), bytes).ok());
      EXPECT_TRUE(vk->upload(view.v, zeros.data(), bytes).ok());
    } else {
      khost = zeros;
      vhost = zeros;
      view.k = khost.data();
      view.v = vhost.data();
    }
  }
};

// Runs the batches in turn over `cells`; returns the last batch's output.
std::vector<float> run_kv(std::vector<Backend*> backends, const std::vector<Batch>& batches,
                          Cells& cells) {
  ThreadPool pool(2);
  sched::Scheduler sched(std::move(backends), &pool);
  std::vector<float> out;
  for (const Batch& batch : batches) {
    const auto n = static_cast<int32_t>(batch.tokens.size());
    auto plan = sched.plan({n, n}, build_attention);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    if (!plan.ok()) return {};
    Status st = sched.execute(**plan, batch.view(), std::span<const KvLayerView>(&cells.view, 1));
    EXPECT_TRUE(st.ok()) << st.message();
    const float* y = sched.output_data(**plan, 0);  // host memory: downloaded after the last split
    out.assign(y, y + static_cast<size_t>(n) * kEmbd);
  }
  return out;
}

TEST(VulkanScheduler, RunsAnAttentionBlockOverDeviceKvCells) {
  MINFER_VK_OR_SKIP(vk);
  Weights w = make_weights();
  std::vector<WeightSource> sources = w.sources();
  CpuBackend cpu;
  Weights wc = make_weights();
  for (const WeightSource& s : wc.sources()) ASSERT_TRUE(cpu.register_weight(s).ok());
  for (const WeightSource& s : sources) ASSERT_TRUE(vk->register_weight(s).ok()) << s.name;
  {  // kv_store and attention go to Vulkan with the rest
    ThreadPool pool(1);
    sched::Scheduler sched({vk.get(), &cpu}, &pool);
    auto plan = sched.plan({7, 7}, build_attention);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const std::vector<std::string> names = sched.backend_names();
    for (NodeId id : (*plan)->order) {
      const graph::Node& n = (*plan)->graph.node(id);
      EXPECT_EQ(names[static_cast<size_t>(n.backend)], n.op == graph::OpKind::kInput ? "CPU" : "Vulkan")
          << graph::op_name(n.op) << " " << n.name;
    }
  }
  // Two sequences prefilled together (7 tokens), then one decode token of sequence 0.
  std::vector<std::vector<int32_t>> hist(2);
  int32_t next = 0;
  const Batch prefill = kv_batch({3, 0, 9, 9, 1, 5, 2}, {0, 1, 0, 0, 1, 1, 0}, hist, next);
  const Batch decode = kv_batch({4}, {0}, hist, next);
  Cells cpu_cells(nullptr), vk_cells(vk.get());
  const std::vector<float> on_cpu = run_kv({&cpu}, {prefill, decode}, cpu_cells);
  const std::vector<float> on_vk = run_kv({vk.get(), &cpu}, {prefill, decode}, vk_cells);
  ASSERT_EQ(on_cpu.size(), on_vk.size());
  // As RunsADecoderShapedGraph: the CPU's activation quantization before its matmuls dominates.
  float ymax = 0;
  for (float v : on_cpu) ymax = std::max(ymax, std::fabs(v));
  ASSERT_GT(ymax, 0.0f);
  for (size_t i = 0; i < on_cpu.size(); ++i) ASSERT_NEAR(on_vk[i], on_cpu[i], 0.03f * ymax) << i;

  // The decode token's bits do not depend on its batch: the same token as the 8th of one batch (its
  // sequence's earlier tokens stored by the same kv_store) gives what the 7 + 1 steps gave.
  std::vector<std::vector<int32_t>> hist8(2);
  int32_t next8 = 0;
  const Batch all = kv_batch({3, 0, 9, 9, 1, 5, 2, 4}, {0, 1, 0, 0, 1, 1, 0, 0}, hist8, next8);
  Cells vk_cells8(vk.get());
  const std::vector<float> in_one = run_kv({vk.get(), &cpu}, {all}, vk_cells8);
  ASSERT_EQ(in_one.size(), static_cast<size_t>(8 * kEmbd));
  for (int64_t i = 0; i < kEmbd; ++i) {
    ASSERT_EQ(in_one[static_cast<size_t>(7 * kEmbd + i)], on_vk[static_cast<size_t>(i)]) << i;
  }
}

}  // namespace
}  // namespace minfer::backend::test
