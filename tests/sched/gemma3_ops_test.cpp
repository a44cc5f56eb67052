// gemma3's elementwise CPU ops against scalar references written here: GELU as ggml's CPU computes it (the
// tanh formula at the f16-rounded input, rounded to f16, with the +-10 cut-offs), within f16 rounding of
// the exact function; scale; final logit soft-capping; and the ops run through the scheduler in place.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops/ops.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "graph/builder.h"
#include "sched/scheduler.h"

namespace minfer::sched {
namespace {

constexpr int64_t kD = 40, kRows = 12;

double gelu_exact(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * x * (1.0 + 0.044715 * x * x)));
}

TEST(Gemma3Ops, GeluIsGgmlsF16RuleAndWithinF16RoundingOfTheFormula) {
  ThreadPool pool(2);
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) {  // every finite f16 value
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isfinite(f)) x.push_back(f);
  }
  Rng rng(5);
  for (int i = 0; i < 4096; ++i) x.push_back(static_cast<float>(rng.normal()) * 6.0f);  // f32 inputs too
  x.insert(x.end(), {-10.0f, 10.0f, -10.5f, 11.0f, 9.99f, -9.99f, 0.0f, -0.0f, 1e-8f});
  std::vector<float> y(x.size());
  backend::cpu::gelu(x.data(), static_cast<int64_t>(x.size()), y.data(), pool);
  for (size_t i = 0; i < x.size(); ++i) {
    const float xi = x[i];
    float want;
    if (xi <= -10.0f) {
      want = 0.0f;
    } else if (xi >= 10.0f) {
      want = xi;
    } else {
      const float xr = fp16_to_fp32(fp32_to_fp16(xi));
      want = fp16_to_fp32(fp32_to_fp16(backend::cpu::gelu_tanh(xr)));
    }
    ASSERT_EQ(y[i], want) << "x " << xi;
    ASSERT_EQ(backend::cpu::gelu_ggml(xi), want) << "x " << xi;
    if (std::fabs(xi) < 10.0f) {
      // Input and output each rounded to f16 (2^-11 relative) and GELU's slope is below 1.13: |error| <=
      // 2^-10 |gelu| + 1.2 * 2^-11 |x| + f16's smallest subnormal.
      const double g = gelu_exact(xi);
      EXPECT_LE(std::fabs(y[i] - g), std::ldexp(std::fabs(g), -10) + 1.2 * std::ldexp(std::fabs(xi), -11) + 6e-8)
          << "x " << xi;
    }
  }
}

TEST(Gemma3Ops, ScaleAndSoftcap) {
  ThreadPool pool(2);
  std::vector<float> x = {-100.0f, -3.5f, 0.0f, 0.25f, 7.0f, 1e4f};
  std::vector<float> y(x.size()), z(x.size());
  backend::cpu::scale(x.data(), static_cast<int64_t>(x.size()), 33.941125f, y.data(), pool);
  backend::cpu::softcap(x.data(), static_cast<int64_t>(x.size()), 15.0f, z.data(), pool);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], x[i] * 33.941125f);
    EXPECT_NEAR(z[i], 15.0 * std::tanh(x[i] / 15.0), 2e-5 * 15.0);  // f32 tanh and division: a few ulp
    EXPECT_LE(std::fabs(z[i]), 15.0f);
  }
}

TEST(Gemma3Ops, RunThroughTheSchedulerInPlace) {
  backend::CpuBackend cpu;
  ThreadPool pool(2);
  std::vector<float> table(kD * kRows);
  Rng rng(3);
  for (float& v : table) v = static_cast<float>(rng.normal()) * 4.0f;
  // The backend gets a copy: it may release a registered weight's source pages (meant for the file mapping).
  std::vector<float> registered = table;
  ASSERT_TRUE(
      cpu.register_weight({"table", DType::F32, {kD, kRows, 1, 1}, registered.data(), registered.size() * 4}).ok());
  Scheduler sched({&cpu}, &pool);
  auto build = [](const GraphParams& p) -> Result<graph::Graph> {
    graph::GraphBuilder b;
    const graph::NodeId x =
        b.get_rows(b.weight("table", DType::F32, {kD, kRows, 1, 1}), b.input(graph::InputKind::kTokens, p.n_tokens));
    const graph::NodeId g = b.gelu(b.scale(x, 2.0f));
    b.output(b.softcap(b.mul(g, x), 15.0f));
    return b.take();
  };
  auto plan = sched.plan(GraphParams{3, 3}, build);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::vector<int32_t> tokens = {4, 0, 11}, positions = {0, 1, 2}, rows = {0, 1, 2};
  backend::BatchView view;
  view.tokens = tokens;
  view.positions = positions;
  view.output_rows = rows;
  ASSERT_TRUE(sched.execute(**plan, view, {}).ok());
  const float* out = sched.output_data(**plan, 0);
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t d = 0; d < kD; ++d) {
      const float xi = table[static_cast<size_t>(tokens[t] * kD + d)];
      const float want = std::tanh((backend::cpu::gelu_ggml(xi * 2.0f) * xi) * (1.0f / 15.0f)) * 15.0f;
      EXPECT_EQ(out[t * kD + d], want) << "token " << tokens[t] << " d " << d;
    }
  }
}

}  // namespace
}  // namespace minfer::sched
