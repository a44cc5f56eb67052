#include "cli/cli_app.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "core/env.h"
#include "core/log.h"
#include "engine/engine.h"
#include "hub/cache.h"
#include "hub/download.h"
#include "kv/kv_cache.h"
#include "quant/kernels/kernels.h"

namespace minfer::cli {

Result<Args> llama_spellings(const Args& args, const std::vector<RefusedFlag>& refused) {
  // Spellings with the same meaning as a minfer flag, which CLI11 cannot declare (one dash, several
  // letters).
  static const std::pair<const char*, const char*> kSame[] = {
      {"-sys", "--system"},       {"-cnv", "--cnv"},          {"-st", "--single-turn"},
      {"-mli", "--multiline-input"}, {"-ngl", "--gpu-layers"}, {"-md", "--spec-draft"},
      {"-np", "--parallel"}};
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {  // everything after is positional
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    const std::string name = a.substr(0, a.find('='));
    for (const RefusedFlag& r : refused) {
      if (std::find(r.names.begin(), r.names.end(), name) != r.names.end())
        return invalid_argument("{}: {}", name, r.why);
    }
    if ((a == "-hf" || a == "-hfr" || a == "--hf-repo") && i + 1 < args.size()) {  // llama.cpp: REPO[:QUANT]
      out.push_back("--model=hf:" + args[++i]);
      continue;
    }
    if (a == "-fa" || a == "--flash-attn") {  // an optional value: on, off, auto (llama-bench: 1, 0); bare = on
      std::string v = "on";
      if (i + 1 < args.size()) {
        const std::string& next = args[i + 1];
        if (next == "on" || next == "off" || next == "auto") v = args[++i];
        if (next == "1" || next == "0") v = args[++i] == "1" ? "on" : "off";
      }
      out.push_back("--flash-attn=" + v);
      continue;
    }
    std::string spelled = a;
    for (const auto& [from, to] : kSame) {
      if (name == from) spelled = to + a.substr(name.size());
    }
    out.push_back(spelled);
  }
  return out;
}

int parse_args(CLI::App& app, const Args& args, const std::vector<RefusedFlag>& refused) {
  auto spelled = llama_spellings(args, refused);
  if (!spelled.ok()) {
    fmt::print(stderr, "minfer: {}\n", spelled.status().message());
    return 2;
  }
  std::vector<std::string> reversed(spelled->rbegin(), spelled->rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return -1;
}

int fail(const Status& status) {
  fmt::print(stderr, "minfer: {}\n", status.message());
  return 1;
}

Result<DType> kv_cache_type(const std::string& flag) {
  std::string name = flag;
  bool from_env = false;
  if (name.empty()) {
    const char* env = std::getenv("MINFER_CACHE_TYPE");
    from_env = env != nullptr && *env != '\0';
    name = from_env ? env : "f16";
  }
  auto type = dtype_from_name(name);
  if (!type) {
    return invalid_argument("{}'{}' is not a KV cache type (use f32, f16 or q8_0)",
                            from_env ? "MINFER_CACHE_TYPE=" : "--cache-type ", name);
  }
  MINFER_RETURN_IF_ERROR(
      kv::check_cache_type(*type).with_context(from_env ? "MINFER_CACHE_TYPE: " : "--cache-type: "));
  return *type;
}

Result<int64_t> drain_ms_from_env() {
  const char* env = std::getenv("MINFER_DRAIN_MS");
  if (env == nullptr || *env == '\0') return int64_t{30000};
  const std::string_view drain = env;
  int64_t ms = 0;
  auto [p, ec] = std::from_chars(drain.data(), drain.data() + drain.size(), ms);
  if (ec != std::errc() || p != drain.data() + drain.size() || ms < 0)
    return invalid_argument("MINFER_DRAIN_MS='{}' is not a whole number of milliseconds >= 0", drain);
  return ms;
}

Status check_environment() {
  MINFER_RETURN_IF_ERROR(check_bool_env());
  auto get = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  };
  if (const std::string isa = get("MINFER_CPU_ISA"); !isa.empty())
    MINFER_RETURN_IF_ERROR(kernels::forced_isa(isa).status());
  if (const std::string log = get("MINFER_LOG"); !log.empty()) {
    if (!log_level_from_name(log))
      return invalid_argument("MINFER_LOG='{}' is not a log level: use debug, info, warn, error or none",
                              log);
  }
  MINFER_RETURN_IF_ERROR(drain_ms_from_env().status());
  if (!get("MINFER_CACHE_TYPE").empty()) MINFER_RETURN_IF_ERROR(kv_cache_type("").status());
  for (const char* endpoint : {"HF_ENDPOINT", "MINFER_OLLAMA_REGISTRY"}) {
    const std::string url = get(endpoint);
    if (!url.empty() && url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
      return invalid_argument("{}='{}' is not an http:// or https:// URL", endpoint, url);
  }
  if (const std::string cache = get("MINFER_CACHE"); !cache.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(cache, ec) && !std::filesystem::is_directory(cache, ec))
      return invalid_argument("MINFER_CACHE='{}' is not a directory (the model cache is a folder)", cache);
  }
  return {};
}

void add_model_arg(CLI::App& app, ModelArg* model, const std::string& what) {
  app.add_option("model", model->positional, fmt::format("{}: {}", what, kModelForms));
  app.add_option("-m,--model", model->flag,
                 fmt::format("{} (instead of the positional MODEL; llama.cpp's -hf OWNER/REPO[:QUANT] is "
                             "-m hf:OWNER/REPO[:QUANT])",
                             what));
}

Result<std::string> take_model(const ModelArg& model, std::vector<std::string*> rest) {
  if (model.flag.empty()) {
    if (model.positional.empty())
      return invalid_argument("no model given: name one as MODEL or with -m MODEL; a model is {}", kModelForms);
    return model.positional;
  }
  std::string carry = model.positional;
  for (std::string* r : rest) std::swap(carry, *r);
  if (!carry.empty()) {
    return invalid_argument("unexpected argument '{}': the model was given with -m '{}'", carry, model.flag);
  }
  return model.flag;
}

Result<std::string> resolve_model_arg(const std::string& arg) {
  auto path = hub::resolve_model(arg);
  if (!path.ok() && path.status().code() == StatusCode::kNotFound && !hub::is_model_uri(arg)) {
    return not_found("model '{}': no such file and no cached model of that name; a model is {}", arg,
                     kModelForms);
  }
  return path;
}

bool looks_like_model(const std::string& arg) {
  std::error_code ec;
  if (std::filesystem::exists(arg, ec) || hub::is_model_uri(arg)) return true;
  if (arg.find('/') != std::string::npos) return true;
  if (arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".gguf") == 0) return true;
  return hub::find_cached(hub::cache_dir(), arg).has_value();
}

void add_device_options(CLI::App& app, DeviceArgs* args) {
  app.add_option("--backend", args->backends,
                 "backends to run on: cpu, vulkan, or a list (cpu,vulkan); the CPU is always there "
                 "(env MINFER_BACKENDS; default: a GPU when one is present, else the CPU)")
      ->group("Devices");
  app.add_option("--gpu", args->gpu, "Vulkan device index to use (`minfer devices`); names a CPU-type device too")
      ->check(CLI::Range(0, 1 << 16))
      ->group("Devices");
  app.add_option("--gpu-layers,--n-gpu-layers", args->gpu_layers,
                 "transformer blocks to run on the device: N, auto (fits MINFER_GPU_MEM or 3/4 of the free "
                 "device memory) or all; default auto on a device (also -ngl; env MINFER_GPU_LAYERS)")
      ->group("Devices");
}

Result<engine::OffloadOptions> offload_options(const CLI::App& app, const DeviceArgs& args) {
  engine::OffloadOptions o;
  auto from = [&](const char* flag, const std::string& value, const char* env, std::string* out) {
    if (app.count(flag) > 0) {
      *out = value;
      return std::string(flag);
    }
    const char* e = std::getenv(env);
    if (e != nullptr && *e != '\0') {
      *out = e;
      return std::string(env);
    }
    return std::string();
  };
  std::string text;
  if (std::string src = from("--backend", args.backends, "MINFER_BACKENDS", &text); !src.empty()) {
    auto list = engine::parse_backend_list(text);
    if (!list.ok()) return list.status().with_context(src + ": ");
    o.backends = std::move(*list);
    o.explicit_request = true;
  }
  if (std::string src = from("--gpu-layers", args.gpu_layers, "MINFER_GPU_LAYERS", &text); !src.empty()) {
    auto n = engine::parse_gpu_layers(text);
    if (!n.ok()) return n.status().with_context(src + ": ");
    o.gpu_layers = *n;
    o.explicit_request = true;
  }
  if (app.count("--gpu") > 0) {
    o.device = args.gpu;
    o.explicit_request = true;
  }
  if (const char* mem = std::getenv("MINFER_GPU_MEM"); mem != nullptr && *mem != '\0') {
    auto bytes = engine::parse_memory_size(mem);
    if (!bytes.ok()) return bytes.status().with_context("MINFER_GPU_MEM: ");
    o.gpu_mem_bytes = *bytes;
  }
  return o;
}

void warn_ctx_above_train(bool ctx_given, int32_t n_ctx, const engine::Engine& engine) {
  const int32_t n_train = engine.hparams().n_ctx_train;
  if (!ctx_given || n_ctx <= n_train) return;
  fmt::print(stderr, "minfer: -c {} is above the model's trained context length ({}): the context is {}\n",
             n_ctx, n_train, engine.n_ctx());
}

void add_flash_attn_option(CLI::App& app, std::string* value) {
  app.add_option("--flash-attn", *value,
                 "on|auto (also -fa): accepted; the CPU attention is always the fused, tiled kernel "
                 "(no score matrix is built), so it changes nothing; off is refused")
      ->check([](const std::string& v) -> std::string {
        if (v == "on" || v == "auto") return "";
        if (v == "off")
          return "-fa/--flash-attn off: this build has no unfused attention kernel to switch to (the CPU "
                 "attention is always the fused, tiled one)";
        return "expected on, off or auto, got '" + v + "'";
      })
      ->group("llama.cpp compatibility");
}

Status chat_template_file_missing(const std::string& value) {
  return not_found(
      "--chat-template '{}': cannot read that file; here --chat-template (and --chat-template-file) is a "
      "Jinja template file; llama.cpp's built-in template names and inline templates are not supported",
      value);
}

}  // namespace minfer::cli
