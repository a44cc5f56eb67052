// `minfer serve MODEL... [options]`: the OpenAI-compatible HTTP server. Binds first (so /health answers 503
// while the model loads), loads the model, checks that its chat template renders, starts the batcher,
// prints one startup line, and on SIGINT/SIGTERM drains (MINFER_DRAIN_MS) and exits 0. With several models
// (repeated -m / positionals, --models-dir) none is loaded at start: the server's ModelRouter loads each on
// the first request that names it (server/model_router.h), with the same per-model loading as one model.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <pthread.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chat/chat_template.h"
#include "cli/cli_app.h"
#include "cli/inspect_env.h"
#include "cli/sampling_options.h"
#include "cli/spec_options.h"
#include "engine/batcher.h"
#include "engine/embedding.h"
#include "engine/engine.h"
#include "gguf/split.h"
#include "kv/kv_cache.h"
#include "server/embeddings.h"
#include "server/http.h"
#include "server/model_router.h"
#include "server/server.h"

namespace minfer::cli {
namespace {

struct ServeArgs {
  std::string model;  // the path being loaded (one model per loader call)
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
  // Several models (server/model_router.h).
  std::vector<std::string> model_flags, model_positionals;
  std::string models_dir;
  int32_t max_loaded = 0;
  std::string memory_budget;  // "" = no bound
  std::string keep_alive;     // "" = forever
};

// A GGUF's model id: its file name without .gguf and, for a split set, without -0000K-of-0000N.
std::string model_id_for(const std::string& path) {
  if (auto split = gguf::parse_split_path(path))
    return std::filesystem::path(split->stem).filename().string();
  return std::filesystem::path(path).stem().string();
}

// Every *.gguf in `dir` (not recursive), sorted; a split set counts once, by its first part. A folder
// with no GGUF is an error naming it.
Result<std::vector<std::string>> gguf_files_in(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return not_found("--models-dir '{}' is not a folder", dir);
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".gguf") continue;
    const std::string path = entry.path().string();
    if (auto split = gguf::parse_split_path(path); split && split->index != 1) continue;
    out.push_back(path);
  }
  if (ec) return io_error("--models-dir '{}': {}", dir, ec.message());
  if (out.empty()) return not_found("--models-dir '{}' holds no .gguf file", dir);
  std::sort(out.begin(), out.end());
  return out;
}

Result<chat::ChatTemplate> load_template(const ServeArgs& args, engine::Engine& engine) {
  std::string source;
  if (!args.chat_template_file.empty()) {
    std::ifstream in(args.chat_template_file, std::ios::binary);
    if (!in) return chat_template_file_missing(args.chat_template_file);
    std::stringstream ss;
    ss << in.rdbuf();
    source = ss.str();
    if (source.empty())
      return invalid_argument("--chat-template '{}': the file is empty", args.chat_template_file);
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
  probe.extra["bos_token"] = tok.bos_text();
  probe.extra["eos_token"] = tok.eos_text();
  auto rendered = tmpl.render(probe);
  if (!rendered.ok()) return rendered.status().with_context("chat template cannot render a conversation: ");
  return tmpl;
}

}  // namespace

int serve_command(const Args& argv) {
  CLI::App app("Serve a model over an OpenAI-compatible HTTP API with continuous batching.", "minfer serve");
  ServeArgs args;
  sampling::SamplerConfig sampling;
  DeviceArgs device;
  std::string flash_attn = "auto";
  // The model argument of every command, repeatable here: each MODEL or -m names one more model.
  app.add_option("model", args.model_positionals, fmt::format("the models to serve, each {}", kModelForms));
  app.add_option("-m,--model", args.model_flags, "one more model to serve (repeatable; instead of MODEL)");
  app.add_option("--models-dir", args.models_dir,
                 "serve every *.gguf in this folder (a split set once), each named by its file name");
  app.add_option("--max-loaded", args.max_loaded,
                 "models resident at once; the least recently used idle one is unloaded first (0: no bound)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 16));
  app.add_option(
      "--memory-budget", args.memory_budget,
      "bytes the resident models may take (e.g. 8G, 512M), least recently used idle one unloaded "
      "first; a model counts as its file size until loaded once, then as weights + KV + activations");
  app.add_option("--keep-alive", args.keep_alive,
                 "unload a model idle this long, as Ollama does: 5m, 30s, 1h30m, 0 (at once), -1 (never; "
                 "default)");
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
  app.add_option(
      "--api-key", args.api_key,
      "require Authorization: Bearer KEY on every route but /health; the Anthropic routes also take "
      "the x-api-key: KEY header (env MINFER_API_KEY)");
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
  if (Status st = check_spec_args(app, args.spec); !st.ok()) return fail(st);
  auto offload = offload_options(app, device);
  if (!offload.ok()) return fail(offload.status());
  // Each a path, a split part, a cached short name, or an hf:/ollama: URI (downloaded before the port opens).
  std::vector<std::string> model_args = args.model_flags;
  model_args.insert(model_args.end(), args.model_positionals.begin(), args.model_positionals.end());
  if (!args.models_dir.empty()) {
    auto files = gguf_files_in(args.models_dir);
    if (!files.ok()) return fail(files.status());
    model_args.insert(model_args.end(), files->begin(), files->end());
  }
  if (model_args.empty())
    return fail(invalid_argument(
        "no model given: name one as MODEL, with -m MODEL or --models-dir DIR; a model is {}", kModelForms));
  std::vector<server::ModelSpec> specs;
  for (const std::string& arg : model_args) {
    auto path = resolve_model_arg(arg);
    if (!path.ok()) return fail(path.status());
    server::ModelSpec spec;
    spec.path = *path;
    // One model keeps the name it always had (the file's stem, or --alias).
    spec.id = model_args.size() == 1
                  ? (!args.alias.empty() ? args.alias : std::filesystem::path(*path).stem().string())
                  : model_id_for(*path);
    if (arg != *path && arg != spec.id) spec.aliases.push_back(arg);  // a cached name or URI selects it too
    for (const server::ModelSpec& other : specs) {
      if (other.path == spec.path) return fail(invalid_argument("model '{}' is given twice", spec.path));
      if (other.id == spec.id)
        return fail(invalid_argument("two models are named '{}' ({} and {}); serve one of them", spec.id,
                                     other.path, spec.path));
    }
    specs.push_back(std::move(spec));
  }
  const bool several = specs.size() > 1;
  args.model = specs.front().path;
  if (several) {
    if (!args.alias.empty())
      return fail(invalid_argument("--alias names one model; with several, each is named by its file name"));
    if (!args.slots_file.empty())
      return fail(invalid_argument(
          "--slots-file saves one model's slots; it cannot be combined with several models"));
    if (!args.spec.draft_model.empty())
      return fail(
          invalid_argument("--spec-draft drafts for one model; it cannot be combined with several models"));
  }
  server::RouterOptions ropts;
  ropts.max_loaded = args.max_loaded;
  if (!args.memory_budget.empty()) {
    auto budget = server::parse_byte_size(args.memory_budget);
    if (!budget.ok()) return fail(budget.status().with_context("--memory-budget: "));
    ropts.memory_budget = static_cast<int64_t>(*budget);
  }
  if (!args.keep_alive.empty()) {
    auto keep = server::parse_keep_alive(args.keep_alive);
    if (!keep.ok()) return fail(keep.status().with_context("--keep-alive: "));
    ropts.keep_alive = *keep;
  }
  // Requests that wait for a model to load are bounded like those that wait for a slot.
  ropts.max_waiting = std::max(args.queue_depth, args.n_slots);
  const bool inspecting = std::getenv("MINFER_DUMP_DIR") != nullptr || std::getenv("MINFER_TRACE") != nullptr;
  if (inspecting && (several || ropts.keep_alive.count() >= 0))
    return fail(
        invalid_argument("MINFER_DUMP_DIR / MINFER_TRACE watch one engine for the whole run: serve one model "
                         "without --keep-alive"));
  if (!args.spec.draft_model.empty()) {
    auto draft_path = resolve_model_arg(args.spec.draft_model);
    if (!draft_path.ok()) return fail(draft_path.status().with_context("--spec-draft: "));
    args.spec.draft_model = *draft_path;
  }
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
  auto drain_ms = drain_ms_from_env();
  if (!drain_ms.ok()) return fail(drain_ms.status());

  // Signals are taken by sigwait below, never by an asynchronous handler; block them before any thread
  // starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::ServerOptions sopts;
  sopts.model_id = specs.front().id;
  sopts.api_key = args.api_key;
  sopts.reasoning = args.reasoning_format != "none";
  sopts.sampling = sampling;
  sopts.responses_store = args.responses_store;
  server::Server server(sopts);

  server::HttpOptions hopts;
  hopts.host = args.host;
  hopts.port = args.port;
  hopts.max_body = *max_body;
  // Each model's slots and queue, plus the requests waiting for loads (one model: as it always was).
  hopts.n_threads = static_cast<int>(
      std::min<int64_t>(512, static_cast<int64_t>(specs.size()) * (args.n_slots + args.queue_depth) +
                                 (several ? ropts.max_waiting : 0) + 8));
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
  std::optional<engine::Pooling> pooling_flag;
  if (!args.pooling.empty()) pooling_flag = *engine::parse_pooling(args.pooling);  // CLI11 checked the name
  // MINFER_DUMP_DIR / MINFER_TRACE (one model, loaded once): kept to report the trace's write at exit.
  std::shared_ptr<InspectEnv> inspect_env;
  // Everything one model needs, loaded the same way for one model at start and for each of several on
  // demand (the router calls it on a request's thread).
  server::ModelLoader loader =
      [args, eopts, sampling, pooling_flag, inspecting, ctx_given = app.count("--ctx-size") > 0,
       &inspect_env](const server::ModelSpec& spec) -> Result<std::unique_ptr<server::LoadedModel>> {
    auto m = std::make_unique<server::LoadedModel>();
    MINFER_ASSIGN_OR_RETURN(m->owned_engine, engine::Engine::load(spec.path, eopts));
    engine::Engine& engine = *m->owned_engine;
    warn_ctx_above_train(ctx_given, args.n_ctx, engine);
    MINFER_RETURN_IF_ERROR(sampling.validate(engine.n_vocab()));
    MINFER_ASSIGN_OR_RETURN(m->chat_template, load_template(args, engine));
    if (inspecting) {  // before the worker starts
      MINFER_ASSIGN_OR_RETURN(std::unique_ptr<InspectEnv> env, InspectEnv::attach(engine));
      inspect_env = std::move(env);
      m->attachments = inspect_env;
    }
    // The draft model's cache holds one sequence per slot, mirroring the target's.
    if (!args.spec.draft_model.empty()) {
      auto d = engine::Engine::load(args.spec.draft_model, eopts);
      if (!d.ok()) return d.status().with_context("--spec-draft: ");
      m->owned_draft = std::move(*d);
    }
    // Embeddings: asked for, or an embedding model (its GGUF declares a pooling type).
    MINFER_ASSIGN_OR_RETURN(std::optional<engine::Pooling> declared,
                            engine::pooling_from_gguf(engine.file()));
    if (args.embeddings || declared.has_value()) {
      auto e = server::Embedder::create(spec.path, eopts, pooling_flag);
      if (!e.ok()) return e.status().with_context("--embeddings: ");
      m->owned_embedder = std::move(*e);
    } else if (pooling_flag) {
      return invalid_argument("--pooling needs --embeddings (this model is loaded for generation)");
    }
    engine::BatcherOptions bopts;
    bopts.n_slots = args.n_slots;
    bopts.queue_depth = args.queue_depth;
    bopts.n_batch = args.batch;
    bopts.slots_file = args.slots_file;
    bopts.speculate = args.spec.enabled();
    bopts.draft_model = m->owned_draft.get();
    bopts.spec = args.spec.options();
    MINFER_ASSIGN_OR_RETURN(m->owned_batcher, engine::Batcher::create(engine, bopts));
    m->engine = m->owned_engine.get();
    m->batcher = m->owned_batcher.get();
    m->embedder = m->owned_embedder.get();
    return m;
  };
  std::vector<std::string> ids;
  for (const server::ModelSpec& spec : specs) ids.push_back(spec.id);
  auto router = std::make_unique<server::ModelRouter>(specs, loader, ropts);
  std::string model_facts, embeddings_fact;  // the startup line's parts about the model(s)
  if (!several) {
    // One model is loaded before the server says it is listening, as it always was; a failure ends the run.
    auto loaded = loader(specs.front());
    if (!loaded.ok()) {
      shutdown_http();
      return fail(loaded.status());
    }
    const server::LoadedModel& m = **loaded;
    model_facts = fmt::format("model={} slots={} ctx={} threads={}", sopts.model_id, args.n_slots,
                              m.engine->n_ctx(), m.engine->n_threads());
    if (m.embedder != nullptr)
      embeddings_fact = fmt::format(" embeddings=pooling:{}", engine::pooling_name(m.embedder->pooling()));
    if (Status st = router->adopt(sopts.model_id, std::move(*loaded)); !st.ok()) {
      shutdown_http();
      return fail(st);
    }
  } else {
    model_facts = fmt::format("models={} (loaded on demand) slots={} ctx={}", fmt::join(ids, ","),
                              args.n_slots, args.n_ctx);
  }
  std::string router_facts;
  if (ropts.max_loaded > 0) router_facts += fmt::format(" max-loaded={}", ropts.max_loaded);
  if (ropts.memory_budget > 0) router_facts += " memory-budget=" + args.memory_budget;
  if (ropts.keep_alive.count() >= 0) router_facts += " keep-alive=" + args.keep_alive;
  server.set_router(std::move(router));
  fmt::print(
      "minfer serve: listening on http://{}:{} {} batching=on "
      "queue={}{}{}{}{}{}\n",
      args.host, (*http)->port(), model_facts, args.queue_depth, args.api_key.empty() ? "" : " auth=on",
      embeddings_fact, args.slots_file.empty() ? "" : " slots-file=" + args.slots_file,
      !args.spec.draft_model.empty()
          ? fmt::format(" speculative=draft:{} depth={}{}", args.spec.draft_model, args.spec.draft_n,
                        args.spec.adaptive ? " adaptive" : "")
          : (args.spec.lookup_n > 0 ? fmt::format(" speculative=lookup depth={}", args.spec.lookup_n) : ""),
      router_facts);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print(stderr, "minfer serve: {} received, draining (up to {} ms)\n",
             sig == SIGINT ? "SIGINT" : "SIGTERM", *drain_ms);
  server.begin_drain();
  (*http)->stop();
  const int64_t abandoned = server.router().drain(std::chrono::milliseconds(*drain_ms));
  http_thread.join();
  fmt::print(stderr, "minfer serve: drained; {} request(s) abandoned\n", abandoned);
  server.take_router().reset();  // every batcher stops, then its engines go
  if (inspect_env) {
    if (Status st = inspect_env->finish(); !st.ok()) return fail(st);
  }
  return 0;
}

}  // namespace minfer::cli
