// Registers every sampling flag (llama.cpp names) on a CLI11 app, writing into a SamplerConfig.
// Used by `run` and `serve`; value checks against the vocabulary happen later in SamplerConfig::validate.
#pragma once

#include <CLI/CLI.hpp>

#include "sampling/config.h"

namespace minfer::cli {

// Adds --temp --greedy --top-k --top-p --min-p --typical --repeat-penalty --repeat-last-n
// --frequency-penalty --presence-penalty --dry-* --xtc-* --mirostat* --logit-bias --seed and the
// mutually exclusive --grammar / --grammar-str / --json-schema / --json-schema-str. `cfg` must outlive
// app.parse(). File flags read their file during parsing; a malformed value fails the parse, naming it.
void add_sampling_options(CLI::App& app, sampling::SamplerConfig* cfg);
inline void add_sampling_options(CLI::App& app, sampling::SamplerConfig& cfg) {
  add_sampling_options(app, &cfg);
}

}  // namespace minfer::cli
