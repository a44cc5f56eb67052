// Speculative-decoding flags shared by the generating commands: --spec-draft MODEL, --spec-draft-n N,
// --spec-draft-adaptive, --spec-lookup N. make_drafter() turns them into a Drafter (or none).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/speculative.h"

namespace minfer::cli {

struct SpecArgs {
  std::string draft_model;  // --spec-draft
  int32_t draft_n = 4;      // --spec-draft-n
  bool adaptive = false;    // --spec-draft-adaptive
  int32_t lookup_n = 0;     // --spec-lookup: prompt-lookup drafting, tokens per round
  bool enabled() const { return !draft_model.empty() || lookup_n > 0; }
  engine::SpecOptions options() const {
    return {.draft_n = lookup_n > 0 && draft_model.empty() ? lookup_n : draft_n, .adaptive = adaptive};
  }
};

void add_spec_options(CLI::App& app, SpecArgs* args);

// After parsing: refuses, naming the flag, a speculation flag that the others make a no-op:
// --spec-draft-n without --spec-draft (with --spec-lookup N, N is the depth), --spec-draft-adaptive
// without --spec-draft or --spec-lookup, and --spec-draft with --spec-lookup.
Status check_spec_args(const CLI::App& app, const SpecArgs& args);

// The drafter the flags ask for: a draft model loaded with the target's context and threads (its
// vocabulary must equal the target's), or prompt lookup; nullptr when speculation is off. Refuses both
// at once, and mirostat.
Result<std::unique_ptr<engine::Drafter>> make_drafter(const SpecArgs& args, engine::Engine& target,
                                                      const sampling::SamplerConfig& sampling);

}  // namespace minfer::cli
