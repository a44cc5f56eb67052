// `minfer specverify <model> [-p DEPTH] [-r REPS] [--nts 1,2,3,5,9,17] [-t N] [-o md|json]`: the cost C(nt)
// of a speculative verify step at a fixed KV depth and its amortization nt * C(1) / C(nt) — how many
// times cheaper each token is when nt of them share one forward. A depth d pays off when the expected
// accepted tokens per round exceed what the draft and the verify of d + 1 rows cost.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/bench.h"
#include "cli/cli_app.h"

namespace minfer::cli {

int specverify_command(const Args& argv) {
  CLI::App app("Measure the batched verify-step cost C(nt) and its per-token amortization.",
               "minfer specverify");
  std::string model, output = "md";
  std::vector<int32_t> nts = {1, 2, 3, 5, 9, 17};
  int32_t depth = 512, threads = 0;
  int reps = 10;
  ModelArg model_arg;
  add_model_arg(app, &model_arg);
  app.add_option("-p,--depth", depth, "tokens in the cache before each step")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-r,--repetitions", reps, "timed steps per nt")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--nts", nts, "verify batch sizes")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("-t,--threads", threads, "threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("-o,--output", output, "md or json")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  DeviceArgs device;
  add_device_options(app, &device);
  if (int code = parse_args(app, argv); code >= 0) return code;
  auto offload = offload_options(app, device);
  if (!offload.ok()) return fail(offload.status());
  auto taken = take_model(model_arg);
  if (!taken.ok()) return fail(taken.status());
  auto resolved = resolve_model_arg(*taken);
  if (!resolved.ok()) return fail(resolved.status());
  model = *resolved;

  int32_t max_nt = 1;
  for (int32_t nt : nts) max_nt = std::max(max_nt, nt);
  engine::EngineOptions options;
  options.n_ctx = depth + max_nt + 1;
  options.n_threads = threads;
  options.offload = *offload;
  auto engine = engine::Engine::load(model, options);
  if (!engine.ok()) return fail(engine.status());
  auto costs = apps::run_verify_bench(**engine, depth, nts, reps);
  if (!costs.ok()) return fail(costs.status());
  double c1 = 0.0;
  for (const auto& c : *costs) {
    if (c.nt == 1) c1 = c.median_ms();
  }
  if (output == "json") {
    nlohmann::ordered_json j = {{"model", model},
                                {"depth", depth},
                                {"threads", (*engine)->n_threads()},
                                {"repetitions", reps},
                                {"steps", nlohmann::ordered_json::array()}};
    for (const auto& c : *costs) {
      j["steps"].push_back({{"nt", c.nt},
                            {"median_ms", c.median_ms()},
                            {"samples_ms", c.ms},
                            {"amortization", c1 > 0 ? c.nt * c1 / c.median_ms() : 0.0}});
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("| nt | C(nt) ms (median of {}) | nt·C(1)/C(nt) |\n|---:|---:|---:|\n", reps);
  for (const auto& c : *costs) {
    fmt::print("| {} | {:.2f} | {} |\n", c.nt, c.median_ms(),
               c1 > 0 ? fmt::format("{:.2f}", c.nt * c1 / c.median_ms()) : std::string("-"));
  }
  fmt::print("\ndepth {}, {} threads; without nt = 1 in --nts the amortization is not computed\n", depth,
             (*engine)->n_threads());
  return 0;
}

}  // namespace minfer::cli
