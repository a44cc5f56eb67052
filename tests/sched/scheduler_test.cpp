// Scheduler: assignment by priority and capability, in-place aliasing and buffer reuse, plan reuse by
// GraphParams, numerics of a small executed graph, and the loud refusal of an unsupported split.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "graph/builder.h"
#include "sched/scheduler.h"

namespace minfer::sched {
namespace {

using graph::GraphBuilder;
using graph::InputKind;
using graph::NodeId;
using graph::OpKind;

// A device that claims Add only and whose memory the host cannot touch.
class FakeDevice final : public backend::Backend {
 public:
  std::string_view name() const override { return "FAKE"; }
  int priority() const override { return 200; }
  bool supports_op(const graph::Graph&, const graph::Node& n) const override { return n.op == OpKind::kAdd; }
  bool supports_fused(OpKind) const override { return false; }
  Status register_weight(const backend::WeightSource&) override { return {}; }
  const void* weight_handle(const std::string&) const override { return nullptr; }
  Result<std::unique_ptr<backend::Buffer>> alloc_buffer(size_t bytes) override {
    struct Dev final : backend::Buffer {
      explicit Dev(size_t n) : mem(n) {}
      void* base() override { return mem.data(); }
      size_t size() const override { return mem.size(); }
      bool host_visible() const override { return false; }
      std::vector<uint8_t> mem;
    };
    return std::unique_ptr<backend::Buffer>(std::make_unique<Dev>(bytes));
  }
  Status execute(const graph::Graph&, NodeId, std::span<void* const>, const backend::ExecContext&) override {
    return {};
  }
};

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

TEST(Scheduler, AssignsByPriorityAndRefusesMissingCopies) {
  Fixture f;
  FakeDevice dev;
  Scheduler sched({&f.cpu, &dev}, &f.pool);
  EXPECT_EQ(sched.backend_names(), (std::vector<std::string>{"FAKE", "CPU"}));
  auto built = Fixture::build({2, 2});
  ASSERT_TRUE(built.ok());
  auto plan = sched.prepare(std::move(*built), {2, 2});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("on CPU reads node"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("cross-device copies are not implemented"), std::string::npos);
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
