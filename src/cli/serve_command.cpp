// `minfer serve MODEL [options]`: the OpenAI-compatible HTTP server. Binds first (so /health answers 503
// while the model loads), loads the model, checks that its chat template renders, starts the batcher,
// prints one startup line, and on SIGINT/SIGTERM drains (MINFER_DRAIN_MS) and exits 0.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <pthread.h>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "cli/cli_app.h"
#include "cli/inspect_env.h"
#include "cli/sampling_options.h"
#include "cli/spec_options.h"
#include "engine/batcher.h"
#include "engine/embedding.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "server/embeddings.h"
#include "server/http.h"
#include "server/server.h"

namespace minfer::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int32_t n_slots = 4;
  int32_t n_ctx = 4096;
  int32_t queue_depth = 64;
  std::string api_key;
  std::string alias;
  std::string slots_file;
  std::string max_body = "8M";
  int32_t threads = 0;
  int32_t batch = 512;
  std::string cache_type;
  std::string chat_template_file;
  std::string reasoning_format = "auto";
  int32_t responses_store = 100;
  bool embeddings = false;
  std::string pooling;  // "" = the GGUF's <arch>.pooling_type
  SpecArgs spec;
};

int64_t drain_ms_from_env() {
  const char* env = std::getenv("MINFER_DRAIN_MS");
  if (env == nullptr || *env == '\0') return 30000;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 0) {
    fmt::print(stderr,
               "minfer serve: MINFER_DRAIN_MS='{}' is not a whole number of milliseconds; using 30000\n",
               env);
    return 30000;
  }
  return v;
}

Result<chat::ChatTemplate> load_template(const ServeArgs& args, engine::Engine& engine) {
  std::string source;
  if (!args.chat_template_file.empty()) {
    std::ifstream in(args.chat_template_file, std::ios::binary);
    if (!in) return chat_template_file_missing(args.chat_template_file);
    std::stringstream ss;
    ss << in.rdbuf();
    source = ss.str();
  } else if (engine.file().metadata().contains("tokenizer.chat_template")) {
    MINFER_ASSIGN_OR_RETURN(source, engine.file().metadata().get_string("tokenizer.chat_template"));
  }
  chat::ChatTemplate tmpl = chat::ChatTemplate::chatml();
  if (source.empty()) {
    fmt::print(stderr, "minfer serve: the model has no chat template; using generic ChatML\n");
  } else {
    auto parsed = chat::ChatTemplate::parse(source);
    if (!parsed.ok()) return parsed.status().with_context("chat template: ");
    tmpl = std::move(*parsed);
  }
  // Refuse to start on a template that cannot render an ordinary conversation.
  chat::ChatInputs probe;
  probe.messages = {{{"role", "system"}, {"content", "You are helpful."}},
                    {{"role", "user"}, {"content", "Hi"}},
                    {{"role", "assistant"}, {"content", "Hello."}},
                    {{"role", "user"}, {"content", "Bye"}}};
  probe.add_generation_prompt = true;
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  probe.extra["bos_token"] = tok.bos() >= 0 ? std::string(tok.token_bytes(tok.bos())) : std::string();
  probe.extra["eos_token"] = tok.eos() >= 0 ? std::string(tok.token_bytes(tok.eos())) : std::string();
  auto rendered = tmpl.render(probe);
  if (!rendered.ok()) return rendered.status().with_context("chat template cannot render a conversation: ");
  return tmpl;
}

}  // namespace

int serve_command(const Args& argv) {
  CLI::App app("Serve a model over an OpenAI-compatible HTTP API with continuous batching.", "minfer serve");
  ServeArgs args;
  sampling::SamplerConfig sampling;
  ModelArg model;
  DeviceArgs device;
  std::string flash_attn = "auto";
  add_model_arg(app, &model);
  app.add_option("--host", args.host, "address to bind")->capture_default_str();
  app.add_option("--port", args.port, "port to bind (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--n-slots,--parallel", args.n_slots, "sequences decoded together (also -np)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("-c,--ctx-size,--n-ctx", args.n_ctx, "total context (KV cells) shared by the slots")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--queue-depth", args.queue_depth,
                 "requests that may wait for a slot (0: refuse when none is idle)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--api-key", args.api_key,
                 "require Authorization: Bearer KEY on /v1 and /metrics (env MINFER_API_KEY)");
  app.add_option("-a,--alias", args.alias, "model id reported by /v1/models (default: the file name)");
  app.add_option("--slots-file", args.slots_file,
                 "save slot contexts here after each request; restore at start");
  app.add_option("--max-body", args.max_body, "largest request body (e.g. 8M, 512k)")->capture_default_str();
  app.add_option("-t,--threads", args.threads, "threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", args.batch, "tokens per forward step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--cache-type", args.cache_type,
                 "KV cache type: f32, f16 (default) or q8_0 (env MINFER_CACHE_TYPE)");
  app.add_option("--chat-template,--chat-template-file", args.chat_template_file,
                 "Jinja chat template file overriding the model's");
  app.add_flag("--jinja")
      ->description("accepted: chat templates are always rendered by minfer's own Jinja engine")
      ->group("llama.cpp compatibility");
  app.add_option("--reasoning-format", args.reasoning_format,
                 "auto: a leading <think> block goes to reasoning_content; none: keep it in content")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none", "deepseek"}));
  app.add_option("--responses-store", args.responses_store,
                 "/v1/responses kept in memory for previous_response_id and GET (store: true; oldest evicted; "
                 "0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--embeddings,--embedding", args.embeddings,
               "serve POST /v1/embeddings too (an embedding model, one whose GGUF declares <arch>.pooling_type, "
               "serves it without this flag); embeddings run on a second engine of the same file with its own "
               "KV cache of -c cells");
  app.add_option("--pooling", args.pooling,
                 "embedding pooling: none, mean, cls or last (default: the model's <arch>.pooling_type)")
      ->check(CLI::IsMember({"none", "mean", "cls", "last"}));
  add_sampling_options(app, sampling);
  add_spec_options(app, &args.spec);
  add_device_options(app, &device);
  add_flash_attn_option(app, &flash_attn);
  if (int code = parse_args(app, argv); code >= 0) return code;
  auto offload = offload_options(app, device);
  if (!offload.ok()) return fail(offload.status());
  auto model_arg = take_model(model);
  if (!model_arg.ok()) return fail(model_arg.status());
  // A path, a split part, a cached short name, or an hf:/ollama: URI (downloaded before the port opens).
  auto model_path = resolve_model_arg(*model_arg);
  if (!model_path.ok()) return fail(model_path.status());
  args.model = *model_path;
  if (!args.spec.draft_model.empty()) {
    auto draft_path = resolve_model_arg(args.spec.draft_model);
    if (!draft_path.ok()) return fail(draft_path.status().with_context("--spec-draft: "));
    args.spec.draft_model = *draft_path;
  }
  if (!args.spec.draft_model.empty() && args.spec.lookup_n > 0)
    return fail(invalid_argument("--spec-draft and --spec-lookup are exclusive"));
  if (args.spec.enabled() && sampling.mirostat != 0) {
    return fail(unsupported(
        "speculative decoding cannot be combined with mirostat (its state moves with every draw)"));
  }

  if (args.api_key.empty()) {
    if (const char* env = std::getenv("MINFER_API_KEY")) args.api_key = env;
  }
  auto max_body = server::parse_byte_size(args.max_body);
  if (!max_body.ok()) return fail(max_body.status().with_context("--max-body: "));
  auto kv_type = kv_cache_type(args.cache_type);
  if (!kv_type.ok()) return fail(kv_type.status());
  const int64_t drain_ms = drain_ms_from_env();

  // Signals are taken by sigwait below, never by an asynchronous handler; block them before any thread
  // starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::ServerOptions sopts;
  sopts.model_id = !args.alias.empty() ? args.alias : std::filesystem::path(args.model).stem().string();
  sopts.api_key = args.api_key;
  sopts.reasoning = args.reasoning_format != "none";
  sopts.sampling = sampling;
  sopts.responses_store = args.responses_store;
  server::Server server(sopts);

  server::HttpOptions hopts;
  hopts.host = args.host;
  hopts.port = args.port;
  hopts.max_body = *max_body;
  hopts.n_threads = std::min(512, args.n_slots + args.queue_depth + 8);
  auto http = server::HttpServer::bind(server, hopts);
  if (!http.ok()) return fail(http.status());
  std::thread http_thread([&] { (*http)->run(); });
  auto shutdown_http = [&] {
    (*http)->stop();
    http_thread.join();
  };

  engine::EngineOptions eopts;
  eopts.n_ctx = args.n_ctx;
  eopts.n_threads = args.threads;
  eopts.n_batch = args.batch;
  eopts.cache_type = *kv_type;
  eopts.offload = *offload;
  auto loaded = engine::Engine::load(args.model, eopts);
  if (!loaded.ok()) {
    shutdown_http();
    return fail(loaded.status());
  }
  engine::Engine& engine = **loaded;
  if (Status st = sampling.validate(engine.n_vocab()); !st.ok()) {
    shutdown_http();
    return fail(st);
  }
  auto tmpl = load_template(args, engine);
  if (!tmpl.ok()) {
    shutdown_http();
    return fail(tmpl.status());
  }
  auto inspect_env = InspectEnv::attach(engine);  // MINFER_DUMP_DIR / MINFER_TRACE, before the worker starts
  if (!inspect_env.ok()) {
    shutdown_http();
    return fail(inspect_env.status());
  }
  // The draft model's cache holds one sequence per slot, mirroring the target's.
  std::unique_ptr<engine::Engine> draft;
  if (!args.spec.draft_model.empty()) {
    auto d = engine::Engine::load(args.spec.draft_model, eopts);
    if (!d.ok()) {
      shutdown_http();
      return fail(d.status().with_context("--spec-draft: "));
    }
    draft = std::move(*d);
  }
  // Embeddings: asked for, or an embedding model (its GGUF declares a pooling type).
  std::unique_ptr<server::Embedder> embedder;
  {
    auto declared = engine::pooling_from_gguf(engine.file());
    if (!declared.ok()) {
      shutdown_http();
      return fail(declared.status());
    }
    std::optional<engine::Pooling> pooling;
    if (!args.pooling.empty()) pooling = *engine::parse_pooling(args.pooling);  // CLI11 checked the name
    if (args.embeddings || declared->has_value()) {
      auto e = server::Embedder::create(args.model, eopts, pooling);
      if (!e.ok()) {
        shutdown_http();
        return fail(e.status().with_context("--embeddings: "));
      }
      embedder = std::move(*e);
      server.set_embedder(embedder.get());
    } else if (pooling) {
      shutdown_http();
      return fail(invalid_argument("--pooling needs --embeddings (this model is loaded for generation)"));
    }
  }
  engine::BatcherOptions bopts;
  bopts.n_slots = args.n_slots;
  bopts.queue_depth = args.queue_depth;
  bopts.n_batch = args.batch;
  bopts.slots_file = args.slots_file;
  bopts.speculate = args.spec.enabled();
  bopts.draft_model = draft.get();
  bopts.spec = args.spec.options();
  auto batcher = engine::Batcher::create(engine, bopts);
  if (!batcher.ok()) {
    shutdown_http();
    return fail(batcher.status());
  }
  server.set_model(&engine, batcher->get(), std::move(*tmpl));
  fmt::print(
      "minfer serve: listening on http://{}:{} model={} slots={} ctx={} threads={} batching=on "
      "queue={}{}{}{}{}\n",
      args.host, (*http)->port(), sopts.model_id, args.n_slots, engine.n_ctx(), engine.n_threads(),
      args.queue_depth, args.api_key.empty() ? "" : " auth=on",
      embedder ? fmt::format(" embeddings=pooling:{}", engine::pooling_name(embedder->pooling())) : "",
      args.slots_file.empty() ? "" : " slots-file=" + args.slots_file,
      !args.spec.draft_model.empty()
          ? fmt::format(" speculative=draft:{} depth={}{}", args.spec.draft_model, args.spec.draft_n,
                        args.spec.adaptive ? " adaptive" : "")
          : (args.spec.lookup_n > 0 ? fmt::format(" speculative=lookup depth={}", args.spec.lookup_n) : ""));
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print(stderr, "minfer serve: {} received, draining (up to {} ms)\n",
             sig == SIGINT ? "SIGINT" : "SIGTERM", drain_ms);
  server.begin_drain();
  (*http)->stop();
  const int64_t abandoned = (*batcher)->drain(std::chrono::milliseconds(drain_ms));
  http_thread.join();
  fmt::print(stderr, "minfer serve: drained; {} request(s) abandoned\n", abandoned);
  batcher->reset();
  if (Status st = (*inspect_env)->finish(); !st.ok()) return fail(st);
  return 0;
}

}  // namespace minfer::cli
