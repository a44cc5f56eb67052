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

// The model's chat template (or --chat-template FILE); generic ChatML, with a notice, when it has none.
Result<chat::ChatTemplate> load_template(const RunArgs& args, engine::Engine& engine) {
  std::string source;
  if (!args.chat_template_file.empty()) {
    auto text = read_regular_file(args.chat_template_file);
    if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
      return chat_template_file_missing(args.chat_template_file);
    }
    if (!text.ok()) return text.status().with_context("--chat-template: ");
    if (text->empty())
      return invalid_argument("--chat-template '{}': the file is empty", args.chat_template_file);
    source = std::move(*text);
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
  vars["bos_token"] = tok.bos_text();
  vars["eos_token"] = tok.eos_text();
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

// The context for a prompt of `n_prompt` tokens. The engine's context holds it: kept. An explicit -c that
// does not: an error naming both counts. The default context: grown to the prompt plus -n (all of the
// trained length for -n -1), at most the model's trained length, and said on stderr.
Result<int32_t> fitted_context(engine::Engine& engine, int32_t n_prompt, int32_t n_predict, bool ctx_given) {
  const int32_t n_ctx = engine.n_ctx();
  const int32_t n_train = engine.hparams().n_ctx_train;
  if (n_prompt < n_ctx) return n_ctx;
  if (ctx_given && n_ctx < n_train) {
    return error(StatusCode::kOutOfRange,
                 "the prompt has {} tokens but -c/--ctx-size is {}; raise -c above {} or leave it unset to "
                 "fit the prompt",
                 n_prompt, n_ctx, n_prompt);
  }
  if (n_prompt >= n_train) {
    return error(StatusCode::kOutOfRange,
                 "the prompt has {} tokens but the model's trained context is {}: it cannot fit", n_prompt,
                 n_train);
  }
  const int64_t want = n_predict >= 0 ? int64_t{n_prompt} + n_predict + 1 : int64_t{n_train};
  const int32_t grown = static_cast<int32_t>(std::min<int64_t>(n_train, ((want + 255) / 256) * 256));
  fmt::print(stderr,
             "minfer: the prompt has {} tokens, more than the default context of {}: context grown to {} "
             "(the model's trained length is {})\n",
             n_prompt, n_ctx, grown, n_train);
  return grown;
}

// llama-cli flags that mean something else here: refused by name, never reinterpreted.
const std::vector<RefusedFlag>& run_refusals() {
  static const std::vector<RefusedFlag> kRefused = {
      {{"-i", "--interactive", "-if", "--interactive-first"},
       "llama.cpp's interactive mode is not supported; --cnv is the multi-turn chat"},
      {{"-r", "--reverse-prompt"},
       "in llama.cpp this hands control back to the user in interactive mode; here --stop STR ends the "
       "generation at a string"},
      {{"-e", "--escape", "--no-escape"},
       "llama.cpp unescapes \\n and friends in the prompt; minfer passes the prompt through as written"},
      {{"-ins", "--instruct"}, "llama.cpp's old instruct mode is not supported; --cnv is the chat"},
  };
  return kRefused;
}

}  // namespace

int run_command(const Args& argv) {
  CLI::App app("Generate text with a Qwen-family GGUF model.", "minfer");
  RunArgs args;
  sampling::SamplerConfig sampling;
  ModelArg model;
  std::string prompt_pos, prompt_file, flash_attn = "auto";
  DeviceArgs device;
  add_model_arg(app, &model);
  app.add_option("prompt", prompt_pos, "prompt text (read from stdin when omitted)");
  app.add_option("-p,--prompt", args.prompt, "prompt text (instead of the positional prompt)");
  app.add_option("-f,--file", prompt_file,
                 "read the prompt from a file (one trailing newline dropped, as llama.cpp)");
  app.add_option("-n,--n-predict", args.n_predict, "tokens to generate (-1: until end of generation)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 30));
  app.add_option("-c,--ctx-size,--n-ctx", args.n_ctx,
                 "context size in tokens (above the model's trained length: that length, said on stderr). "
                 "Unset: 4096, grown to fit a longer prompt up to the trained length")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("-t,--threads", args.threads, "threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", args.batch, "prompt tokens per forward pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--stop", args.stop, "stop string (repeatable; never printed)")
      ->check([](const std::string& v) {
        return v.empty() ? std::string("an empty stop string") : std::string();
      });
  app.add_option("--system,--system-prompt", args.system, "system prompt (also -sys)");
  app.add_flag("--no-template", args.no_template, "send the prompt as is, without the chat template");
  app.add_option("--chat-template,--chat-template-file", args.chat_template_file,
                 "Jinja chat template file overriding the model's");
  app.add_flag("--jinja")
      ->description("accepted: chat templates are always rendered by minfer's own Jinja engine")
      ->group("llama.cpp compatibility");
  app.add_option("--cache-type", args.cache_type,
                 "KV cache type: f32, f16 (default) or q8_0 (env MINFER_CACHE_TYPE)");
  app.add_flag("--meta", args.meta, "print the model's metadata before generating");
  app.add_option("--dump-graph", args.dump_graph, "write the prefill graph as Graphviz DOT and exit");
  app.add_option("--dump-graph-json", args.dump_graph_json, "write the prefill graph as JSON and exit");
  app.add_option("-o,--output", args.output, "text (stream) or json")->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--cnv,--conversation", args.cnv,
               "multi-turn chat: a REPL with /commands (the prompt, if given, is the first turn; also -cnv)")
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
  add_device_options(app, &device);
  add_flash_attn_option(app, &flash_attn);
  if (int code = parse_args(app, argv, run_refusals()); code >= 0) return code;
  if (Status st = check_spec_args(app, spec); !st.ok()) return fail(st);
  auto offload = offload_options(app, device);
  if (!offload.ok()) return fail(offload.status());
  auto model_arg = take_model(model, {&prompt_pos});
  if (!model_arg.ok()) return fail(model_arg.status());
  args.model = *model_arg;
  const int prompt_sources = (app.count("--prompt") > 0) + (!prompt_pos.empty() || app.count("prompt") > 0) +
                             (app.count("--file") > 0);
  if (prompt_sources > 1)
    return fail(invalid_argument("the prompt was given twice: use one of a positional prompt, -p, -f"));
  if (!prompt_pos.empty()) args.prompt = prompt_pos;
  if (!prompt_file.empty()) {
    auto text = read_regular_file(prompt_file);
    if (!text.ok()) return fail(text.status().with_context("-f/--file: "));
    args.prompt = std::move(*text);
    // llama.cpp's -f drops one trailing newline (the one an editor ends a file with).
    if (!args.prompt.empty() && args.prompt.back() == '\n') args.prompt.pop_back();
  }
  args.prompt_given = prompt_sources > 0;
  const bool ctx_given = app.count("--ctx-size") > 0;
  if (!args.cnv && (args.conversation.single_turn || args.conversation.multiline ||
                    !args.conversation.session.empty() || app.count("--color") > 0)) {
    return fail(invalid_argument("-st, -mli, --session and --color need --cnv"));
  }
  if (args.cnv && (!args.dump_graph.empty() || !args.dump_graph_json.empty())) {
    return fail(
        invalid_argument("--dump-graph and --dump-graph-json export the prompt's graph and exit; they "
                         "cannot be combined with --cnv"));
  }
  if (args.no_template && (app.count("--system") > 0 || app.count("--chat-template") > 0)) {
    return fail(invalid_argument("{} has no effect with --no-template (the prompt is sent as is)",
                                 app.count("--system") > 0 ? "--system" : "--chat-template"));
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
  options.offload = *offload;
  options.quiet = true;  // the placement line is printed once, for the engine that runs (it may be reloaded)

  // A path, a split part, a cached short name, or an hf:/ollama: URI (downloaded into the cache first).
  auto model_path = resolve_model_arg(args.model);
  if (!model_path.ok()) return fail(model_path.status());
  args.model = *model_path;

  if (!args.prompt_given && !args.cnv) {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    args.prompt = ss.str();
    if (args.prompt.empty()) {
      return fail(
          invalid_argument("no prompt: none was given and stdin was empty (give one as PROMPT, -p or -f)"));
    }
  }

  auto loaded = engine::Engine::load(args.model, options);
  if (!loaded.ok()) return fail(loaded.status());

  // The prompt (with --cnv: the first turn) as token ids, and a context that holds it.
  std::vector<int32_t> ids;
  if (!args.cnv || args.prompt_given) {
    auto prompt_text = build_prompt(args, **loaded);
    if (!prompt_text.ok()) return fail(prompt_text.status());
    const tokenizer::Tokenizer& tok = (*loaded)->tokenizer();
    ids = args.no_template ? tok.encode(*prompt_text, /*add_special=*/true, /*parse_special=*/true)
                           : tok.encode_chat(*prompt_text);
    if (ids.empty() && !args.cnv) return fail(invalid_argument("the prompt is empty"));
    auto n_ctx = fitted_context(**loaded, static_cast<int32_t>(ids.size()), args.n_predict, ctx_given);
    if (!n_ctx.ok()) return fail(n_ctx.status());
    if (*n_ctx != (*loaded)->n_ctx()) {
      options.n_ctx = *n_ctx;
      loaded = engine::Engine::load(args.model, options);
      if (!loaded.ok()) return fail(loaded.status());
    }
  }
  engine::Engine& engine = **loaded;
  warn_ctx_above_train(ctx_given, args.n_ctx, engine);
  engine.print_placement();
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
  // A grammar that allows no next token is a failed generation (the output is incomplete), not a stop.
  if (result->stop_reason == "grammar") {
    return fail(invalid_argument("grammar dead end: {}", result->stop_detail));
  }
  return 0;
}

}  // namespace minfer::cli
