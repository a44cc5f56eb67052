// `minfer bench <model> [-p 512] [-n 128] [-d 0] [-r 3] [-t N] [-b N] [-o md|csv|json]`: llama-bench
// semantics and field names, so scripts written for llama-bench read minfer's output.
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/cli_app.h"
#include "cli/spec_options.h"
#include "apps/bench.h"
#include "hub/download.h"
#include "kv/kv_cache.h"
#include "quant/kernels/kernels.h"

namespace minfer::cli {
namespace {

Result<std::vector<int32_t>> parse_list(const std::string& text, const char* flag) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return invalid_argument("{}: '{}' is not a non-negative integer list", flag, text);
    }
  }
  return out;
}

std::string model_type(const engine::Engine& e, uint64_t params) {
  const auto& hp = e.hparams();
  std::string ftype =
      "?";  // the type of the FFN weights names the file's quantization, as llama-bench's does
  for (const auto& w : e.model().weights()) {
    if (w.name.find("ffn_up") != std::string::npos) {
      ftype = std::string(dtype_name(w.type));
      break;
    }
  }
  return fmt::format("{} {:.2f}B {}", hp.arch, static_cast<double>(params) / 1e9, ftype);
}

}  // namespace

int bench_command(const Args& argv) {
  CLI::App app("Measure prompt processing (pp) and generation (tg) speed, llama-bench style.",
               "minfer bench");
  std::string model, p_list = "512", n_list = "128", d_list = "0", output = "md", cache;
  int reps = 3, threads = 0, batch = 512, n_ctx = 0;
  ModelArg model_arg;
  DeviceArgs device;
  std::string flash_attn = "auto";
  add_model_arg(app, &model_arg);
  app.add_option("-p,--n-prompt", p_list, "prompt sizes, comma separated (0: none)")->capture_default_str();
  app.add_option("-n,--n-gen", n_list, "generation lengths, comma separated (0: none)")
      ->capture_default_str();
  app.add_option("-d,--depth", d_list, "tokens already in the cache, comma separated")->capture_default_str();
  app.add_option("-r,--repetitions", reps, "timed repetitions per test")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("-t,--threads", threads, "threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", batch, "micro-batch size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("-c,--ctx-size,--n-ctx", n_ctx, "context size (0: enough for the largest test)")
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--cache-type", cache, "KV cache type: f32, f16 (default) or q8_0 (env MINFER_CACHE_TYPE)");
  SpecArgs spec;
  add_spec_options(app, &spec);
  std::string spec_prompt;
  app.add_option("--spec-prompt", spec_prompt,
                 "speculation rows: start from this text (tokenized as is, no chat template) instead of a fixed "
                 "self-repeating token sequence; for trained models, whose drafts agree on real text");
  app.add_option("-o,--output", output, "md, csv or json")
      ->check(CLI::IsMember({"md", "csv", "json"}))
      ->capture_default_str();
  add_device_options(app, &device);
  add_flash_attn_option(app, &flash_attn);
  if (int code = parse_args(app, argv); code >= 0) return code;
  if (Status st = check_spec_args(app, spec); !st.ok()) return fail(st);
  auto offload = offload_options(app, device);
  if (!offload.ok()) return fail(offload.status());
  auto taken = take_model(model_arg);
  if (!taken.ok()) return fail(taken.status());
  model = *taken;

  auto pp = parse_list(p_list, "-p");
  auto tg = parse_list(n_list, "-n");
  auto depths = parse_list(d_list, "-d");
  if (!pp.ok()) return fail(pp.status());
  if (!tg.ok()) return fail(tg.status());
  if (!depths.ok()) return fail(depths.status());
  std::vector<apps::BenchTest> tests;
  int32_t need = 1;
  for (int32_t d : *depths) {
    for (int32_t p : *pp) {
      if (p > 0) tests.push_back({p, 0, d});
      need = std::max(need, d + p);
    }
    for (int32_t n : *tg) {
      if (n > 0) tests.push_back({0, n, d});
      need = std::max(need, d + n);
    }
  }
  if (tests.empty()) return fail(invalid_argument("no tests: every -p and -n is 0"));
  if (spec.enabled()) {
    // run_spec_bench's own prompt is 72 tokens; a --spec-prompt longer than that needs -c.
    for (int32_t n : *tg) need = std::max(need, 72 + n + engine::kMaxDraftDepth + 1);
  }
  auto kv_type = kv_cache_type(cache);
  if (!kv_type.ok()) return fail(kv_type.status());
  cache = dtype_name(*kv_type);  // reported in the table as llama-bench's type_k / type_v

  engine::EngineOptions options;
  options.n_ctx = n_ctx > 0 ? n_ctx : need;
  options.n_threads = threads;
  options.n_batch = batch;
  options.cache_type = *kv_type;
  options.offload = *offload;
  auto model_path = resolve_model_arg(model);  // path, split part, cached name, hf: or ollama: URI
  if (!model_path.ok()) return fail(model_path.status());
  model = *model_path;
  auto loaded = engine::Engine::load(model, options);
  if (!loaded.ok()) return fail(loaded.status());
  engine::Engine& e = **loaded;
  warn_ctx_above_train(n_ctx > 0, n_ctx, e);

  uint64_t size = 0, params = 0;
  for (const auto& w : e.model().weights()) {
    size += w.n_bytes;
    params += static_cast<uint64_t>(w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3]);
  }
  const std::string isa(kernels::isa_name(kernels::detected_isa()));
  const std::string type = model_type(e, params);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (output == "md") {
    fmt::print("| model | size | params | backend | isa | threads | cache | test | t/s |\n");
    fmt::print("| --- | ---: | ---: | --- | --- | ---: | --- | ---: | ---: |\n");
  } else if (output == "csv") {
    fmt::print(
        "model_type,model_size,model_n_params,backend,isa,n_threads,type_k,n_prompt,n_gen,n_depth,avg_ts,"
        "stddev_ts\n");
  }
  // llama-bench's backend column: the device backend when blocks run there (e.g. "Vulkan,CPU").
  std::string backend_col = "CPU";
  if (e.n_gpu_layers() > 0) backend_col = fmt::format("{}", fmt::join(e.backend_names(), ","));
  for (const apps::BenchTest& test : tests) {
    auto r = apps::run_bench(e, test, reps);
    if (!r.ok()) return fail(r.status());
    if (output == "md") {
      fmt::print("| {} | {:.2f} MiB | {:.2f} M | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} |\n", type,
                 static_cast<double>(size) / (1024.0 * 1024.0), static_cast<double>(params) / 1e6, backend_col, isa,
                 e.n_threads(), cache, test.name(), r->avg_ts(), r->stddev_ts());
    } else if (output == "csv") {
      fmt::print("\"{}\",{},{},{},{},{},{},{},{},{},{:.4f},{:.4f}\n", type, size, params, backend_col, isa, e.n_threads(),
                 cache, test.n_prompt, test.n_gen, test.depth, r->avg_ts(), r->stddev_ts());
    } else {
      std::vector<uint64_t> samples_ns;
      double avg_ns = 0;
      for (double s : r->seconds) {
        samples_ns.push_back(static_cast<uint64_t>(s * 1e9));
        avg_ns += s * 1e9 / static_cast<double>(r->seconds.size());
      }
      rows.push_back({{"model_filename", model},
                      {"model_type", type},
                      {"model_size", size},
                      {"model_n_params", params},
                      {"backends", backend_col},
                      {"isa", isa},
                      {"n_batch", batch},
                      {"n_threads", e.n_threads()},
                      {"type_k", cache},
                      {"type_v", cache},
                      {"n_prompt", test.n_prompt},
                      {"n_gen", test.n_gen},
                      {"n_depth", test.depth},
                      {"avg_ns", static_cast<uint64_t>(avg_ns)},
                      {"avg_ts", r->avg_ts()},
                      {"stddev_ts", r->stddev_ts()},
                      {"samples_ns", samples_ns},
                      {"samples_ts", r->samples_ts()}});
    }
  }
  if (spec.enabled()) {
    // Speculation: greedy generation with and without it, per -n length (same output, checked).
    auto drafter = make_drafter(spec, e, sampling::SamplerConfig{});
    if (!drafter.ok()) return fail(drafter.status());
    const std::string mode = !spec.draft_model.empty()
                                 ? fmt::format("draft d{}{}", spec.draft_n, spec.adaptive ? " adaptive" : "")
                                 : fmt::format("lookup d{}", spec.lookup_n);
    const std::vector<int32_t> prompt_ids = e.tokenizer().encode(spec_prompt, /*add_special=*/false, /*parse_special=*/true);
    for (int32_t n : *tg) {
      if (n <= 0) continue;
      auto r = apps::run_spec_bench(e, **drafter, n, spec.options(), reps, prompt_ids);
      if (!r.ok()) return fail(r.status());
      const double speedup = r->speculative.avg_ts() / r->plain.avg_ts();
      if (output == "md") {
        fmt::print("| {} | greedy tg{} | {:.2f} ± {:.2f} |\n", type, n, r->plain.avg_ts(),
                   r->plain.stddev_ts());
        fmt::print(
            "| {} | greedy tg{} spec {} | {:.2f} ± {:.2f} | {:.2f}x, {:.1f}% accepted, {:.2f} per round; by "
            "position {} |\n",
            type, n, mode, r->speculative.avg_ts(), r->speculative.stddev_ts(), speedup,
            100.0 * r->stats.acceptance_rate(), r->stats.mean_accepted(), r->stats.by_position());
      } else if (output == "csv") {
        fmt::print("\"{}\",spec,\"{}\",{},{:.4f},{:.4f},{:.4f},{:.4f}\n", type, mode, n, r->plain.avg_ts(),
                   r->speculative.avg_ts(), r->stats.acceptance_rate(), r->stats.mean_accepted());
      } else {
        rows.push_back({{"model_filename", model},
                        {"model_type", type},
                        {"isa", isa},
                        {"n_threads", e.n_threads()},
                        {"n_gen", n},
                        {"speculative", mode},
                        {"plain_avg_ts", r->plain.avg_ts()},
                        {"spec_avg_ts", r->speculative.avg_ts()},
                        {"speedup", speedup},
                        {"acceptance_rate", r->stats.acceptance_rate()},
                        {"mean_accepted", r->stats.mean_accepted()},
                        {"reached_at", r->stats.reached_at},
                        {"accepted_at", r->stats.accepted_at}});
      }
    }
  }
  if (output == "json") fmt::print("{}\n", rows.dump(2));
  return 0;
}

}  // namespace minfer::cli
