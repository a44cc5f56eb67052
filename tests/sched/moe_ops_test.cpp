// The mixture-of-experts ops on the CPU backend, run through the scheduler: a router, softmax top-k with
// renormalised weights, the expert matmul and the weighted sum, against a scalar forward of the same FFN;
// the route's order and tie rule on hand-made logits; refusal of an expert id out of range.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "core/rng.h"
#include "graph/builder.h"
#include "sched/scheduler.h"

namespace minfer::sched {
namespace {

using graph::GraphBuilder;
using graph::InputKind;
using graph::NodeId;

constexpr int64_t kE = 32, kF = 16, kX = 6, kUsed = 3, kRows = 10;

std::vector<float> normal(int64_t n, uint64_t seed, float std) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = std * static_cast<float>(rng.normal());
  return v;
}

struct Moe {
  backend::CpuBackend cpu;
  ThreadPool pool{2};
  std::vector<float> table = normal(kE * kRows, 1, 1.0f);   // {E, rows}: token activations
  std::vector<float> router = normal(kE * kX, 2, 0.5f);     // {E, X}
  std::vector<float> gate = normal(kE * kF * kX, 3, 0.2f);  // {E, F, X}
  std::vector<float> up = normal(kE * kF * kX, 4, 0.2f);
  std::vector<float> down = normal(kF * kE * kX, 5, 0.2f);  // {F, E, X}
  // The backend gets copies: a weight it repacks has its source pages released (meant for the file mapping),
  // and the reference below reads the originals.
  std::vector<std::vector<float>> registered;
  Moe() {
    auto reg = [&](const char* name, const std::vector<float>& v, graph::Shape ne) {
      registered.push_back(v);
      EXPECT_TRUE(cpu.register_weight({name, DType::F32, ne, registered.back().data(), v.size() * 4}).ok());
    };
    registered.reserve(5);
    reg("table", table, {kE, kRows, 1, 1});
    reg("router", router, {kE, kX, 1, 1});
    reg("gate", gate, {kE, kF, kX, 1});
    reg("up", up, {kE, kF, kX, 1});
    reg("down", down, {kF, kE, kX, 1});
  }
  static Result<graph::Graph> build(const GraphParams& p) {
    GraphBuilder b;
    const int64_t nt = p.n_tokens;
    const NodeId x = b.get_rows(b.weight("table", DType::F32, {kE, kRows, 1, 1}), b.input(InputKind::kTokens, nt));
    const NodeId logits = b.matmul(b.weight("router", DType::F32, {kE, kX, 1, 1}), x);
    const NodeId ids = b.moe_route(logits, kUsed);
    const NodeId w = b.moe_weights(logits, ids, /*norm_w=*/true);
    const NodeId x3 = b.reshape(x, {kE, 1, nt, 1});
    const NodeId g = b.matmul_id(b.weight("gate", DType::F32, {kE, kF, kX, 1}), x3, ids);
    const NodeId u = b.matmul_id(b.weight("up", DType::F32, {kE, kF, kX, 1}), x3, ids);
    const NodeId d = b.matmul_id(b.weight("down", DType::F32, {kF, kE, kX, 1}), b.mul(b.silu(g), u), ids);
    b.output(b.moe_sum(d, w));
    return b.take();
  }
  // The same FFN for one activation row, in double: softmax, the kUsed largest, renormalised, SwiGLU experts.
  std::vector<double> reference(const float* xr) const {
    std::vector<double> logit(kX), p(kX);
    double mx = -1e300, sum = 0;
    for (int64_t e = 0; e < kX; ++e) {
      for (int64_t i = 0; i < kE; ++i) logit[e] += static_cast<double>(router[e * kE + i]) * xr[i];
      mx = std::max(mx, logit[e]);
    }
    for (int64_t e = 0; e < kX; ++e) sum += p[e] = std::exp(logit[e] - mx);
    std::vector<int64_t> order(kX);
    for (int64_t e = 0; e < kX; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return p[a] > p[c]; });
    double wsum = 0;
    for (int64_t s = 0; s < kUsed; ++s) wsum += p[order[s]] / sum;
    std::vector<double> y(kE, 0.0);
    for (int64_t s = 0; s < kUsed; ++s) {
      const int64_t e = order[s];
      const double weight = p[e] / sum / wsum;
      std::vector<double> h(kF);
      for (int64_t f = 0; f < kF; ++f) {
        double gv = 0, uv = 0;
        for (int64_t i = 0; i < kE; ++i) {
          gv += static_cast<double>(gate[(e * kF + f) * kE + i]) * xr[i];
          uv += static_cast<double>(up[(e * kF + f) * kE + i]) * xr[i];
        }
        h[f] = gv / (1.0 + std::exp(-gv)) * uv;
      }
      for (int64_t o = 0; o < kE; ++o) {
        double dv = 0;
        for (int64_t f = 0; f < kF; ++f) dv += static_cast<double>(down[(e * kE + o) * kF + f]) * h[f];
        y[o] += weight * dv;
      }
    }
    return y;
  }
};

TEST(MoeOps, FfnMatchesAScalarForwardAndDoesNotDependOnTheBatch) {
  Moe m;
  Scheduler sched({&m.cpu}, &m.pool);
  const std::vector<int32_t> tokens = {3, 0, 9, 3, 5, 7, 1};
  const auto nt = static_cast<int32_t>(tokens.size());
  std::vector<int32_t> rows(tokens.size());
  for (int32_t i = 0; i < nt; ++i) rows[static_cast<size_t>(i)] = i;
  backend::BatchView batch;
  batch.tokens = tokens;
  batch.output_rows = rows;
  auto plan = sched.plan({nt, nt}, Moe::build);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(sched.execute(**plan, batch, {}).ok());
  const std::vector<float> all(sched.output_data(**plan, 0), sched.output_data(**plan, 0) + nt * kE);
  for (int32_t t = 0; t < nt; ++t) {
    const std::vector<double> want = m.reference(m.table.data() + tokens[static_cast<size_t>(t)] * kE);
    for (int64_t o = 0; o < kE; ++o) {
      // f32 dots of 32 and 16 terms and an f32 softmax: a few ulps of values of magnitude ~1.
      EXPECT_NEAR(all[static_cast<size_t>(t * kE + o)], want[static_cast<size_t>(o)], 1e-5) << t << " " << o;
    }
  }
  // One token at a time: bitwise the rows of the whole batch.
  auto one = sched.plan({1, 1}, Moe::build);
  ASSERT_TRUE(one.ok());
  const std::vector<int32_t> row0 = {0};
  for (int32_t t = 0; t < nt; ++t) {
    const std::vector<int32_t> tok = {tokens[static_cast<size_t>(t)]};
    backend::BatchView b1;
    b1.tokens = tok;
    b1.output_rows = row0;
    ASSERT_TRUE(sched.execute(**one, b1, {}).ok());
    const float* y = sched.output_data(**one, 0);
    EXPECT_EQ(0, std::memcmp(y, all.data() + t * kE, kE * sizeof(float))) << "token " << t;
  }
}

// moe_route ranks by probability, largest first, the lower id first on a tie; moe_weights renormalises.
TEST(MoeOps, RouteOrderTiesAndRenormalisedWeights) {
  backend::CpuBackend cpu;
  ThreadPool pool(1);
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};  // one token, 5 experts
  std::vector<int32_t> ids(3);
  backend::cpu::moe_route(logits.data(), 5, 1, 3, ids.data(), pool);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 4}));
  std::vector<float> w(3);
  backend::cpu::moe_weights(logits.data(), 5, ids.data(), 1, 3, /*norm_w=*/true, w.data(), pool);
  const double e1 = std::exp(1.0);  // exp(2 - 1) relative to expert 4
  EXPECT_NEAR(w[0], e1 / (2 * e1 + 1), 1e-6);
  EXPECT_NEAR(w[1], e1 / (2 * e1 + 1), 1e-6);
  EXPECT_NEAR(w[2], 1 / (2 * e1 + 1), 1e-6);
  backend::cpu::moe_weights(logits.data(), 5, ids.data(), 1, 3, /*norm_w=*/false, w.data(), pool);
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l) - 2.0);
  EXPECT_NEAR(w[2], std::exp(-1.0) / z, 1e-6);
}

}  // namespace
}  // namespace minfer::sched
