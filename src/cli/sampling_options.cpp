// The sampling flags of `run` / `serve`: one registration function shared by both commands.
#include "cli/sampling_options.h"

#include <charconv>
#include <utility>

#include "core/text_file.h"

namespace minfer::cli {
namespace {

// A grammar or schema file's text; an empty one is refused (it would mean "no constraint").
std::string read_text_file(const std::string& flag, const std::string& path) {
  auto text = read_regular_file(path);
  if (!text.ok()) throw CLI::ValidationError(flag, std::string(text.status().message()));
  if (text->empty()) throw CLI::ValidationError(flag, "'" + path + "' is empty");
  return std::move(*text);
}

// Refuses an empty --grammar-str / --json-schema-str (it would mean "no constraint").
std::string not_empty(const std::string& v) {
  return v.empty() ? std::string("the text is empty") : std::string();
}

// The original engine's token-id form: ids separated by ',' within a sequence and ';' between sequences
// ("198;13,2"). A breaker made only of digits would silently become a text breaker: refused instead.
bool is_token_id_form(const std::string& v) {
  if (v.empty()) return false;
  bool digit = false;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c != ';' && c != ',' && c != ' ') {
      return false;
    }
  }
  return digit;
}

}  // namespace

void add_sampling_options(CLI::App& app, sampling::SamplerConfig* cfg) {
  const std::string g = "Sampling";
  CLI::Option* temp =
      app.add_option("--temp", cfg->temp, "temperature; 0 = greedy")->capture_default_str()->group(g);
  app.add_flag_callback(
         "--greedy", [cfg] { cfg->temp = 0.0f; }, "greedy decoding (same as --temp 0)")
      ->excludes(temp)
      ->group(g);
  app.add_option("--top-k", cfg->top_k, "top-k sampling; 0 = off")->capture_default_str()->group(g);
  app.add_option("--top-p", cfg->top_p, "nucleus sampling; 1 = off")->capture_default_str()->group(g);
  app.add_option("--min-p", cfg->min_p, "drop tokens below P * max probability; 0 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--typical", cfg->typical_p, "locally typical sampling; 1 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--repeat-penalty", cfg->repeat_penalty, "repeat penalty; 1 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--repeat-last-n", cfg->repeat_last_n, "tokens the penalties look back; 0 = off, -1 = all")
      ->capture_default_str()
      ->group(g);
  app.add_option("--frequency-penalty", cfg->frequency_penalty, "subtract N * count; 0 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--presence-penalty", cfg->presence_penalty, "subtract N once per seen token; 0 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--dry-multiplier", cfg->dry_multiplier, "DRY penalty strength; 0 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--dry-base", cfg->dry_base, "DRY exponential base")->capture_default_str()->group(g);
  app.add_option("--dry-allowed-length", cfg->dry_allowed_length, "DRY: repeats up to this length are free")
      ->capture_default_str()
      ->group(g);
  app.add_option("--dry-penalty-last-n", cfg->dry_penalty_last_n, "DRY look-back; 0 = off, -1 = all")
      ->capture_default_str()
      ->group(g);
  app.add_option_function<std::vector<std::string>>(
         "--dry-sequence-breakers",
         [cfg](const std::vector<std::string>& values) {
           cfg->dry_sequence_breakers.clear();
           for (const std::string& v : values) {
             if (v == "none") continue;
             if (is_token_id_form(v)) {
               throw CLI::ValidationError(
                   "--dry-sequence-breakers",
                   "'" + v +
                       "' is the token-id form (198;13,2), which this build refuses: breakers are strings, "
                       "as in llama.cpp (e.g. --dry-sequence-breakers '\\n' --dry-sequence-breakers ':')");
             }
             auto s = sampling::unescape_breaker(v);
             if (!s.ok()) throw CLI::ValidationError("--dry-sequence-breakers", s.status().message());
             cfg->dry_sequence_breakers.push_back(*s);
           }
         },
         "DRY restart strings (escapes \\n \\t ...), repeatable; 'none' clears; default \\n : \" *; "
         "the token-id form (198;13,2) is refused")
      ->allow_extra_args(false)
      ->group(g);  // one value per flag: a following prompt is not swallowed
  app.add_option("--xtc-probability", cfg->xtc_probability, "XTC: chance to exclude top choices; 0 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--xtc-threshold", cfg->xtc_threshold,
                 "XTC: minimum probability of an excluded choice (<= 0.5)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--mirostat", cfg->mirostat, "mirostat: 0 off, 1 v1, 2 v2 (replaces top-k .. temperature)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--mirostat-tau", cfg->mirostat_tau, "mirostat target surprise (bits)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--mirostat-eta", cfg->mirostat_eta, "mirostat learning rate")
      ->capture_default_str()
      ->group(g);
  app.add_option("--mirostat-m", cfg->mirostat_m, "mirostat v1 estimator window")
      ->capture_default_str()
      ->group(g);
  app.add_option_function<std::vector<std::string>>(
         "--logit-bias",
         [cfg](const std::vector<std::string>& values) {
           for (const std::string& v : values) {
             const Status st = sampling::parse_logit_bias(v, &cfg->logit_bias);
             if (!st.ok()) throw CLI::ValidationError("--logit-bias", st.message());
           }
         },
         "ID:BIAS[,ID:BIAS...] added to raw logits, repeatable (bias in [-100, 100])")
      ->allow_extra_args(false)
      ->group(g);
  app.add_option_function<std::string>(
         "-s,--seed",
         [cfg](const std::string& v) {
           // llama.cpp's -1 (and its LLAMA_DEFAULT_SEED, 4294967295) is "seed from the clock".
           if (v == "-1") {
             cfg->seed = sampling::SamplerConfig::kRandomSeed;
             return;
           }
           uint64_t seed = 0;
           auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seed);
           if (v.empty() || ec != std::errc() || p != v.data() + v.size()) {
             throw CLI::ValidationError("--seed",
                                        "'" + v + "' is not a seed: use an integer >= 0, or -1 for random");
           }
           cfg->seed = seed;
         },
         "RNG seed; a fixed seed reproduces a run (default and -1: random, as llama.cpp)")
      ->group(g);

  const std::string c = "Constrained decoding (one of)";
  CLI::Option* gf =
      app.add_option_function<std::string>(
             "--grammar",
             [cfg](const std::string& path) { cfg->grammar = read_text_file("--grammar", path); },
             "GBNF grammar file (root rule `root`)")
          ->group(c);
  CLI::Option* gs =
      app.add_option("--grammar-str", cfg->grammar, "GBNF grammar text")->check(not_empty)->group(c);
  CLI::Option* sf =
      app.add_option_function<std::string>(
             "--json-schema",
             [cfg](const std::string& path) { cfg->json_schema = read_text_file("--json-schema", path); },
             "JSON Schema file")
          ->group(c);
  CLI::Option* ss =
      app.add_option("--json-schema-str", cfg->json_schema, "JSON Schema text")->check(not_empty)->group(c);
  gf->excludes(gs)->excludes(sf)->excludes(ss);
  gs->excludes(sf)->excludes(ss);
  sf->excludes(ss);
}

}  // namespace minfer::cli
