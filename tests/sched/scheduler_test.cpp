// Scheduler: assignment by priority and capability, in-place aliasing and buffer reuse, plan reuse by
// GraphParams, numerics of a small executed graph, and the loud refusal of an unsupported split.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "common/fake_device.h"
#include "graph/builder.h"
#include "sched/scheduler.h"

namespace minfer::sched {
namespace {

using graph::GraphBuilder;
using graph::InputKind;
using graph::NodeId;
using graph::OpKind;

struct Fixture {
  backend::CpuBackend cpu;
  ThreadPool pool{2};
  std::vector<float> table = std::vector<float>(4 * 3);
  std::vector<float> bias = {0.5f, -1.0f, 2.0f, 0.0f};
  Fixture() {
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.25f - 1.0f;
    EXPECT_TRUE(cpu.register_weight({"table", DType::F32, {4, 3, 1, 1}, table.data(), table.size() * 4}).ok());
    EXPECT_TRUE(cpu.register_weight({"bias", DType::F32, {4, 1, 1, 1}, bias.data(), 16}).ok());
  }
  // y = silu(rows(table, tokens) + bias) * (rows + bias)
  static Result<graph::Graph> build(const GraphParams& p) {
    GraphBuilder b;
    const NodeId x = b.get_rows(b.weight("table", DType::F32, {4, 3, 1, 1}), b.input(InputKind::kTokens, p.n_tokens));
    const NodeId a = b.add(x, b.weight("bias", DType::F32, {4, 1, 1, 1}));
    const NodeId s = b.silu(a);
    b.output(b.mul(s, a));
    return b.take();
  }
};

TEST(Scheduler, ExecutesReusesAndRunsInPlace) {
  Fixture f;
  Scheduler sched({&f.cpu}, &f.pool);
  const std::vector<int32_t> tokens = {2, 0};
  const std::vector<int32_t> rows = {0, 1};
  backend::BatchView batch;
  batch.tokens = tokens;
  batch.output_rows = rows;
  auto plan = sched.plan({2, 2}, Fixture::build);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(sched.execute(**plan, batch, {}).ok());
  const float* y = sched.output_data(**plan, 0);
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 4; ++i) {
      const float a = f.table[static_cast<size_t>(tokens[static_cast<size_t>(t)] * 4 + i)] + f.bias[static_cast<size_t>(i)];
      EXPECT_FLOAT_EQ(y[t * 4 + i], a / (1.0f + std::exp(-a)) * a);
    }
  }
  // get_rows, add, silu, mul: the add must survive until mul, so at most two 32-byte tensors are live.
  EXPECT_LE((*plan)->arena_bytes[0], 2 * 64u);
  EXPECT_EQ(sched.n_builds(), 1);
  auto again = sched.plan({2, 2}, Fixture::build);
  EXPECT_EQ(*again, *plan);
  EXPECT_EQ(sched.n_builds(), 1);
  ASSERT_TRUE(sched.plan({1, 1}, Fixture::build).ok());
  EXPECT_EQ(sched.n_builds(), 2);
}

// The graph alternates backends: get_rows (CPU, its table is there only), add (FAKE), silu (CPU, FAKE
// has no silu), mul (FAKE). So the CPU's silu reads a device tensor (staged into host memory before its
// split), FAKE reads host tensors itself, and the output lives on the device (downloaded after the last
// split). The results must equal the CPU-only run bit for bit (same arithmetic).
TEST(Scheduler, CopiesAcrossBackendsAtSplitBoundaries) {
  Fixture f;
  test::FakeDevice dev;
  ASSERT_TRUE(dev.register_weight({"bias", DType::F32, {4, 1, 1, 1}, f.bias.data(), 16}).ok());
  Scheduler sched({&f.cpu, &dev}, &f.pool);
  EXPECT_EQ(sched.backend_names(), (std::vector<std::string>{"FAKE", "CPU"}));
  Scheduler cpu_only({&f.cpu}, &f.pool);
  const std::vector<int32_t> tokens = {2, 0, 1};
  const std::vector<int32_t> rows = {0, 1, 2};
  backend::BatchView batch;
  batch.tokens = tokens;
  batch.output_rows = rows;
  auto plan = sched.plan({3, 3}, Fixture::build);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const Plan& p = **plan;
  ASSERT_EQ(p.splits.size(), 4u);
  const std::vector<int32_t> want_backend = {1, 0, 1, 0};  // CPU, FAKE, CPU, FAKE
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(p.splits[i].backend, want_backend[i]) << i;
  // Only silu's split stages a tensor (the add); the mul reads host silu itself; the output comes back.
  EXPECT_TRUE(p.splits[0].inputs.empty());
  EXPECT_TRUE(p.splits[1].inputs.empty());
  ASSERT_EQ(p.splits[2].inputs.size(), 1u);
  EXPECT_EQ(p.graph.node(p.splits[2].inputs[0].node).op, OpKind::kAdd);
  EXPECT_TRUE(p.splits[3].inputs.empty());
  EXPECT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(p.n_crossings(), 2u);
  const Status st = sched.execute(**plan, batch, {});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(dev.executed, 2);
  EXPECT_EQ(dev.downloads, 2);
  auto ref = cpu_only.plan({3, 3}, Fixture::build);
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(cpu_only.execute(**ref, batch, {}).ok());
  const float* y = sched.output_data(**plan, 0);
  const float* want = cpu_only.output_data(**ref, 0);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(y[i], want[i]) << i;
}

// A placement callback keeps nodes off a backend (the engine's layer offload); what no backend may run
// is an error naming the node.
TEST(Scheduler, PlacementLimitsBackendsAndRefusesUnrunnableNodesByName) {
  Fixture f;
  test::FakeDevice dev;
  ASSERT_TRUE(dev.register_weight({"bias", DType::F32, {4, 1, 1, 1}, f.bias.data(), 16}).ok());
  Scheduler sched({&f.cpu, &dev}, &f.pool);
  sched.set_placement([](const graph::Node& n, const backend::Backend& b) {
    return b.host_memory() || n.op == OpKind::kMul;
  });
  auto plan = sched.plan({2, 2}, Fixture::build);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (NodeId id : (*plan)->order) {
    const graph::Node& n = (*plan)->graph.node(id);
    if (n.op == OpKind::kAdd || n.op == OpKind::kGetRows) {
      EXPECT_EQ(n.backend, 1);  // CPU
    }
    if (n.op == OpKind::kMul) {
      EXPECT_EQ(n.backend, 0);
    }
  }
  Scheduler none({&dev}, &f.pool);
  auto built = Fixture::build({2, 2});
  ASSERT_TRUE(built.ok());
  auto refused = none.prepare(std::move(*built), {2, 2});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no backend can run node"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace minfer::sched

namespace minfer::sched {
namespace {

// Records every node it sees; copies get_rows' output, whose buffer the in-place Add then overwrites.
class Recorder : public NodeObserver {
 public:
  void begin_step(const Plan&) override { ++steps; }
  void on_node(const Plan& plan, const NodeEvent& ev) override {
    order.push_back(ev.id);
    EXPECT_LE(ev.t_begin_ns, ev.t_end_ns);
    const graph::Node& n = plan.graph.node(ev.id);
    if (n.op == OpKind::kGetRows) {
      const auto* v = static_cast<const float*>(ev.data);
      rows.assign(v, v + n.n_elements());
    }
  }
  void end_step(const Plan&, bool ok) override { ended += ok ? 1 : 0; }
  int steps = 0, ended = 0;
  std::vector<NodeId> order;
  std::vector<float> rows;
};

TEST(Scheduler, ObserversSeeEveryNodeBeforeItsBufferIsReused) {
  Fixture f;
  Scheduler sched({&f.cpu}, &f.pool);
  const std::vector<int32_t> tokens = {2, 0};
  const std::vector<int32_t> rows = {0, 1};
  backend::BatchView batch;
  batch.tokens = tokens;
  batch.output_rows = rows;
  auto plan = sched.plan({2, 2}, Fixture::build);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(sched.execute(**plan, batch, {}).ok());
  const std::vector<float> plain((sched.output_data(**plan, 0)), sched.output_data(**plan, 0) + 8);

  Recorder rec;
  sched.add_observer(&rec);
  sched.add_observer(&rec);  // once only
  ASSERT_TRUE(sched.execute(**plan, batch, {}).ok());
  sched.remove_observer(&rec);
  ASSERT_TRUE(sched.execute(**plan, batch, {}).ok());  // no longer observed
  EXPECT_EQ(rec.steps, 1);
  EXPECT_EQ(rec.ended, 1);
  EXPECT_EQ(rec.order, (*plan)->order);
  // get_rows' values as it computed them, not the Add written over them in place afterwards.
  ASSERT_EQ(rec.rows.size(), 8u);
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(rec.rows[static_cast<size_t>(t * 4 + i)],
                f.table[static_cast<size_t>(tokens[static_cast<size_t>(t)] * 4 + i)]);
    }
  }
  // Observing changes no output.
  EXPECT_EQ(0, std::memcmp(plain.data(), sched.output_data(**plan, 0), plain.size() * 4));
}

}  // namespace
}  // namespace minfer::sched
