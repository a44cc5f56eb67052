// `minfer <model> [prompt] [options]` (also `minfer run ...`): load a model, apply its chat template,
// generate, stream the text. `-o json` prints ids, text, stop reason and timings instead.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/cli_app.h"
#include "cli/conversation.h"
#include "cli/inspect_env.h"
#include "cli/sampling_options.h"
#include "cli/spec_options.h"
#include "engine/generate.h"
#include "graph/export.h"
#include "hub/download.h"
#include "kv/kv_cache.h"
#include "tools/model_info.h"

namespace minfer::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  bool prompt_given = false;
  std::string system;
  bool no_template = false;
  std::string chat_template_file;
  std::vector<std::string> stop;
  int32_t n_predict = 512;
  int32_t n_ctx = 4096;
  int32_t threads = 0;
  int32_t batch = 512;
  std::string cache_type;
  bool meta = false;
  std::string dump_graph;
  std::string dump_graph_json;
  std::string output = "text";
  bool cnv = false;  // --cnv: multi-turn chat (cli/conversation.h)
  ConversationOptions conversation;
};

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string token_text_or_empty(const tokenizer::Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.n_vocab() ? std::string(tok.token_text(id)) : std::string();
}

// The model's chat template (or --chat-template FILE); generic ChatML, with a notice, when it has none.
Result<chat::ChatTemplate> load_template(const RunArgs& args, engine::Engine& engine) {
  std::string source;
  if (!args.chat_template_file.empty()) {
    MINFER_ASSIGN_OR_RETURN(source, read_text_file(args.chat_template_file));
  } else if (engine.file().metadata().contains("tokenizer.chat_template")) {
    MINFER_ASSIGN_OR_RETURN(source, engine.file().metadata().get_string("tokenizer.chat_template"));
  }
  if (source.empty()) {
    fmt::print(stderr, "minfer: the model has no chat template; using generic ChatML\n");
    return chat::ChatTemplate::chatml();
  }
  auto parsed = chat::ChatTemplate::parse(source);
  if (!parsed.ok()) return parsed.status().with_context("chat template: ");
  return std::move(*parsed);
}

// Variables the template sees besides the messages.
nlohmann::ordered_json template_vars(engine::Engine& engine) {
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["bos_token"] = token_text_or_empty(tok, tok.bos());
  vars["eos_token"] = token_text_or_empty(tok, tok.eos());
  return vars;
}

// The prompt as the model sees it: the chat template applied to [system?, user], or the raw text.
Result<std::string> build_prompt(const RunArgs& args, engine::Engine& engine) {
  if (args.no_template) return args.prompt;
  MINFER_ASSIGN_OR_RETURN(chat::ChatTemplate tmpl, load_template(args, engine));
  chat::ChatInputs inputs;
  if (!args.system.empty()) inputs.messages.push_back({{"role", "system"}, {"content", args.system}});
  inputs.messages.push_back({{"role", "user"}, {"content", args.prompt}});
  inputs.add_generation_prompt = true;
  inputs.extra = template_vars(engine);
  auto rendered = tmpl.render(inputs);
  if (!rendered.ok()) return rendered.status().with_context("chat template: ");
  return *rendered;
}

Status dump_graph(const RunArgs& args, engine::Engine& engine, int32_t n_prompt) {
  graph::GraphParams params{std::min(n_prompt, engine.options().n_batch), 1};
  MINFER_ASSIGN_OR_RETURN(const sched::Plan* plan, engine.plan_for(params));
  const auto names = engine.backend_names();
  if (!args.dump_graph.empty()) {
    std::ofstream out(args.dump_graph);
    out << graph::to_dot(plan->graph, names);
    if (!out) return io_error("cannot write '{}'", args.dump_graph);
    fmt::print("Graph DOT exported to {} ({} nodes)\n", args.dump_graph, plan->graph.size());
  }
  if (!args.dump_graph_json.empty()) {
    std::ofstream out(args.dump_graph_json);
    auto j = graph::to_json(plan->graph, names);
    j["phase"] = params.n_tokens == 1 ? "decode" : "prefill";
    j["n_tokens"] = params.n_tokens;
    out << j.dump(1);
    if (!out) return io_error("cannot write '{}'", args.dump_graph_json);
    fmt::print("Graph JSON exported to {} ({} nodes, {})\n", args.dump_graph_json, plan->graph.size(),
               j["phase"].get<std::string>());
  }
  return {};
}

}  // namespace

int run_command(const Args& argv) {
  CLI::App app("Generate text with a Qwen-family GGUF model.", "minfer");
  RunArgs args;
  sampling::SamplerConfig sampling;
  app.add_option(
         "model", args.model,
         "GGUF file (any part of a split model), cached model name, hf:OWNER/REPO[:FILE], ollama:NAME[:TAG]")
      ->required();
  app.add_option("prompt", args.prompt, "prompt text (read from stdin when omitted)");
  app.add_option("-n,--n-predict", args.n_predict, "tokens to generate (-1: until end of generation)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 30));
  app.add_option("-c,--n-ctx", args.n_ctx, "context size in tokens (clamped to the model's)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("-t,--threads", args.threads, "threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", args.batch, "prompt tokens per forward pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--stop", args.stop, "stop string (repeatable; never printed)");
  app.add_option("--system", args.system, "system prompt");
  app.add_flag("--no-template", args.no_template, "send the prompt as is, without the chat template");
  app.add_option("--chat-template", args.chat_template_file,
                 "Jinja chat template file overriding the model's");
  app.add_option("--cache-type", args.cache_type,
                 "KV cache type: f32, f16 (default) or q8_0 (env MINFER_CACHE_TYPE)");
  app.add_flag("--meta", args.meta, "print the model's metadata before generating");
  app.add_option("--dump-graph", args.dump_graph, "write the prefill graph as Graphviz DOT and exit");
  app.add_option("--dump-graph-json", args.dump_graph_json, "write the prefill graph as JSON and exit");
  app.add_option("-o,--output", args.output, "text (stream) or json")->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--cnv", args.cnv,
               "multi-turn chat: a REPL with /commands (the prompt, if given, is the first turn)")
      ->group("Conversation (--cnv)");
  app.add_flag("--single-turn", args.conversation.single_turn,
               "with --cnv: run one turn, then exit (also -st)")
      ->group("Conversation (--cnv)");
  app.add_flag("--multiline-input", args.conversation.multiline,
               "with --cnv: a turn ends at an empty line (also -mli)")
      ->group("Conversation (--cnv)");
  app.add_option("--color", args.conversation.color,
                 "with --cnv: dim <think> blocks: on, off, auto (stdout is a tty)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->group("Conversation (--cnv)");
  app.add_option(
         "--session", args.conversation.session,
         "with --cnv: save the conversation to FILE (JSON) and FILE.kv after every turn; resume it on start")
      ->group("Conversation (--cnv)");
  add_sampling_options(app, sampling);
  SpecArgs spec;
  add_spec_options(app, &spec);
  // llama.cpp's multi-letter single-dash spellings, which CLI11 cannot declare: -st, -mli.
  Args spelled = argv;
  for (std::string& a : spelled) {
    if (a == "-st") a = "--single-turn";
    if (a == "-mli") a = "--multiline-input";
  }
  if (int code = parse_args(app, spelled); code >= 0) return code;
  args.prompt_given = app.count("prompt") > 0;
  if (!args.cnv &&
      (args.conversation.single_turn || args.conversation.multiline || !args.conversation.session.empty())) {
    return fail(invalid_argument("-st, -mli and --session need --cnv"));
  }
  if (args.cnv && (args.no_template || args.output != "text")) {
    return fail(
        invalid_argument("--cnv needs the chat template and text output (drop --no-template / -o json)"));
  }

  engine::EngineOptions options;
  options.n_ctx = args.n_ctx;
  options.n_threads = args.threads;
  options.n_batch = args.batch;
  auto kv_type = kv_cache_type(args.cache_type);
  if (!kv_type.ok()) return fail(kv_type.status());
  options.cache_type = *kv_type;

  // A path, a cached short name, or an hf:/ollama: URI (downloaded into the cache first).
  auto model_path = hub::resolve_model(args.model);
  if (!model_path.ok()) return fail(model_path.status());
  args.model = *model_path;

  if (!args.prompt_given && !args.cnv) {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    args.prompt = ss.str();
  }

  auto loaded = engine::Engine::load(args.model, options);
  if (!loaded.ok()) return fail(loaded.status());
  engine::Engine& engine = **loaded;
  if (Status st = sampling.validate(engine.n_vocab()); !st.ok()) return fail(st);
  auto inspect_env = InspectEnv::attach(engine);  // MINFER_DUMP_DIR / MINFER_TRACE
  if (!inspect_env.ok()) return fail(inspect_env.status());
  if (args.meta) {
    tools::InfoOptions info;
    info.show_tensors = false;
    fmt::print(stderr, "{}\n", tools::info_text(engine.file(), info));
  }

  if (args.cnv) {
    auto tmpl = load_template(args, engine);
    if (!tmpl.ok()) return fail(tmpl.status());
    engine::GenerateOptions gen;
    gen.n_predict = args.n_predict;
    gen.stop = args.stop;
    gen.sampling = sampling;
    args.conversation.system = args.system;
    if (args.prompt_given) args.conversation.first_message = args.prompt;
    args.conversation.template_vars = template_vars(engine);
    auto drafter = make_drafter(spec, engine, sampling);
    if (!drafter.ok()) return fail(drafter.status());
    args.conversation.drafter = drafter->get();
    args.conversation.spec = spec.options();
    return run_conversation(engine, std::move(*tmpl), gen, args.conversation);
  }

  auto prompt_text = build_prompt(args, engine);
  if (!prompt_text.ok()) return fail(prompt_text.status());
  std::vector<int32_t> ids = engine.tokenizer().encode(*prompt_text, /*parse_special=*/true);
  if (engine.tokenizer().add_bos() && engine.tokenizer().bos() >= 0)
    ids.insert(ids.begin(), engine.tokenizer().bos());
  if (ids.empty()) return fail(invalid_argument("the prompt is empty"));

  if (!args.dump_graph.empty() || !args.dump_graph_json.empty()) {
    Status st = dump_graph(args, engine, static_cast<int32_t>(ids.size()));
    return st.ok() ? 0 : fail(st);
  }

  engine::GenerateOptions gen;
  gen.n_predict = args.n_predict;
  gen.stop = args.stop;
  gen.sampling = sampling;
  const bool stream = args.output == "text";
  auto on_text = [&](std::string_view text) {
    if (stream) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
  };
  auto drafter = make_drafter(spec, engine, sampling);
  if (!drafter.ok()) return fail(drafter.status());
  engine::SpecStats spec_stats;
  auto result = *drafter ? engine::generate_speculative(engine, **drafter, ids, gen, spec.options(),
                                                        &spec_stats, on_text)
                         : engine::generate(engine, ids, gen, on_text);
  if (!result.ok()) return fail(result.status());
  const engine::Timings& t = result->timings;
  if (stream) {
    fmt::print("\n");
    if (result->stop_reason == "grammar") fmt::print(stderr, "minfer: stopped: {}\n", result->stop_detail);
    fmt::print(stderr, "\nprompt:    {} tokens, {:.1f} ms, {:.2f} tok/s\n", t.n_prompt, t.prompt_ms,
               t.prompt_tps());
    fmt::print(stderr, "generated: {} tokens, {:.1f} ms, {:.2f} tok/s ({})\n", t.n_generated, t.generate_ms,
               t.generate_tps(), result->stop_reason);
    fmt::print(stderr, "total:     {:.1f} ms\n", t.prompt_ms + t.generate_ms);
    if (*drafter) fmt::print(stderr, "{}\n", spec_stats.summary());
  } else {
    nlohmann::ordered_json j = {{"prompt_ids", result->prompt_ids},
                                {"generated_ids", result->generated_ids},
                                {"text", result->text},
                                {"stop_reason", result->stop_reason},
                                {"stop_detail", result->stop_detail},
                                {"timings",
                                 {{"n_prompt", t.n_prompt},
                                  {"prompt_ms", t.prompt_ms},
                                  {"prompt_tps", t.prompt_tps()},
                                  {"n_generated", t.n_generated},
                                  {"generate_ms", t.generate_ms},
                                  {"generate_tps", t.generate_tps()}}}};
    if (*drafter) {
      j["speculative"] = {{"rounds", spec_stats.rounds},
                          {"drafted", spec_stats.drafted},
                          {"accepted", spec_stats.accepted},
                          {"acceptance_rate", spec_stats.acceptance_rate()},
                          {"mean_accepted", spec_stats.mean_accepted()}};
    }
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  }
  return 0;
}

}  // namespace minfer::cli
