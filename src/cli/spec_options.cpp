#include "cli/spec_options.h"

#include "cli/cli_app.h"

namespace minfer::cli {

void add_spec_options(CLI::App& app, SpecArgs* args) {
  app.add_option("--spec-draft,--model-draft", args->draft_model,
                 "speculative decoding: draft model (same vocabulary; any model form; also -md)");
  app.add_option("--spec-draft-n", args->draft_n,
                 "tokens drafted per round (the cap with --spec-draft-adaptive)")
      ->capture_default_str()
      ->check(CLI::Range(1, engine::kMaxDraftDepth));
  app.add_flag("--spec-draft-adaptive", args->adaptive,
               "choose each round's depth from measured acceptance and step costs");
  app.add_option(
         "--spec-lookup", args->lookup_n,
         "speculative decoding without a model: propose up to N tokens from earlier matches in the text")
      ->check(CLI::Range(1, engine::kMaxDraftDepth));
}

Status check_spec_args(const CLI::App& app, const SpecArgs& args) {
  if (!args.draft_model.empty() && args.lookup_n > 0) {
    return invalid_argument("--spec-draft and --spec-lookup are exclusive");
  }
  if (app.count("--spec-draft-n") > 0 && args.draft_model.empty()) {
    return invalid_argument(
        "--spec-draft-n sets the depth of a draft model's rounds and needs --spec-draft MODEL{}",
        args.lookup_n > 0 ? " (with --spec-lookup N, N is the depth)" : "");
  }
  if (args.adaptive && !args.enabled()) {
    return invalid_argument(
        "--spec-draft-adaptive needs speculative decoding: --spec-draft MODEL or --spec-lookup N");
  }
  return {};
}

Result<std::unique_ptr<engine::Drafter>> make_drafter(const SpecArgs& args, engine::Engine& target,
                                                      const sampling::SamplerConfig& sampling) {
  if (!args.draft_model.empty() && args.lookup_n > 0) {
    return invalid_argument("--spec-draft and --spec-lookup are exclusive");
  }
  if (!args.enabled()) return std::unique_ptr<engine::Drafter>();
  if (sampling.mirostat != 0) {
    return unsupported(
        "speculative decoding cannot be combined with mirostat (its state moves with every draw)");
  }
  if (args.lookup_n > 0) return std::unique_ptr<engine::Drafter>(std::make_unique<engine::LookupDrafter>());
  engine::EngineOptions o = target.options();
  o.quiet = false;  // the draft's own placement line
  auto draft_path = resolve_model_arg(args.draft_model);
  if (!draft_path.ok()) return draft_path.status().with_context("--spec-draft: ");
  auto draft = engine::Engine::load(*draft_path, o);
  if (!draft.ok()) return draft.status().with_context("--spec-draft: ");
  auto drafter = engine::ModelDrafter::create(std::move(*draft), target);
  if (!drafter.ok()) return drafter.status().with_context("--spec-draft: ");
  return std::unique_ptr<engine::Drafter>(std::move(*drafter));
}

}  // namespace minfer::cli
