// `minfer viz MODEL [--port 8090] [--host 127.0.0.1]`: serves the visualizer page (compute graph, live
// greedy inference over server-sent events, per-node statistics, top-5 logits) and runs the model, in
// one process, until SIGINT/SIGTERM. Binds loopback unless --host says otherwise.
#include <csignal>
#include <thread>

#include <pthread.h>

#include <fmt/format.h>

#include "cli/cli_app.h"
#include "cli/commands.h"
#include "cli/inspect_env.h"
#include "hub/download.h"
#include "server/http.h"
#include "viz/viz_app.h"

namespace minfer::cli {

int viz_command(const Args& argv) {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8090;
  int32_t n_ctx = 2048, threads = 0;
  std::string cache_type;
  viz::VizOptions vopts;
  CLI::App app{"web page: the compute graph, live inference, tensor statistics and top-5 logits",
               "minfer viz"};
  ModelArg model_arg;
  add_model_arg(app, &model_arg);
  app.add_option("--host", host, "address to bind (loopback by default: the page runs prompts)")
      ->capture_default_str();
  app.add_option("--port", port, "port to bind (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("-c,--ctx-size,--n-ctx", n_ctx, "context (KV cells)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("-t,--threads", threads, "threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--cache-type", cache_type,
                 "KV cache type: f32, f16 (default) or q8_0 (env MINFER_CACHE_TYPE)");
  app.add_option("--max-predict", vopts.max_predict, "largest number of tokens a run may ask for")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  DeviceArgs device;
  add_device_options(app, &device);
  if (int code = parse_args(app, argv); code >= 0) return code;
  auto offload = offload_options(app, device);
  if (!offload.ok()) return fail(offload.status());
  auto kv_type = kv_cache_type(cache_type);
  if (!kv_type.ok()) return fail(kv_type.status());
  auto taken = take_model(model_arg);
  if (!taken.ok()) return fail(taken.status());
  model = *taken;
  auto path = resolve_model_arg(model);
  if (!path.ok()) return fail(path.status());

  sigset_t signals;  // taken by sigwait below; blocked before any thread starts
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  engine::EngineOptions eopts;
  eopts.n_ctx = n_ctx;
  eopts.n_threads = threads;
  eopts.cache_type = *kv_type;
  eopts.offload = *offload;
  auto loaded = engine::Engine::load(*path, eopts);
  if (!loaded.ok()) return fail(loaded.status());
  engine::Engine& engine = **loaded;
  warn_ctx_above_train(app.count("--ctx-size") > 0, n_ctx, engine);
  auto inspect_env = InspectEnv::attach(engine);  // MINFER_DUMP_DIR / MINFER_TRACE work here too
  if (!inspect_env.ok()) return fail(inspect_env.status());
  auto viz = viz::VizApp::create(engine, vopts);
  if (!viz.ok()) return fail(viz.status());

  server::HttpOptions hopts;
  hopts.host = host;
  hopts.port = port;
  hopts.max_body = 1u << 20;
  hopts.n_threads = 32;  // each open page holds one connection for its event stream
  viz::VizApp* va = viz->get();
  auto http = server::HttpServer::bind(
      [va](const server::HttpRequest& r, const std::function<bool()>& alive) { return va->handle(r, alive); },
      hopts);
  if (!http.ok()) return fail(http.status());
  std::thread http_thread([&] { (*http)->run(); });
  fmt::print("minfer viz: http://{}:{}/ model={} layers={} threads={}\n", host, (*http)->port(),
             engine.hparams().arch, engine.hparams().n_layer, engine.n_threads());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print(stderr, "minfer viz: {} received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*viz)->shutdown();  // closes the event streams so the connection threads can finish
  (*http)->stop();
  http_thread.join();
  viz->reset();
  if (Status st = (*inspect_env)->finish(); !st.ok()) return fail(st);
  return 0;
}

}  // namespace minfer::cli
