// The shared sampling flags: every flag lands in SamplerConfig, file flags read files, and conflicting
// or malformed values fail the parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "cli/sampling_options.h"
#include "common/fixtures.h"

namespace minfer::cli {
namespace {

// Parses `args` (without the program name); returns false on a parse error.
bool parse(std::vector<std::string> args, sampling::SamplerConfig* cfg) {
  CLI::App app("test");
  add_sampling_options(app, cfg);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError&) {
    return false;
  }
  return true;
}

TEST(SamplingOptions, EveryFlagLandsInTheConfig) {
  sampling::SamplerConfig cfg;
  ASSERT_TRUE(parse({"--temp",
                     "0.5",
                     "--top-k",
                     "7",
                     "--top-p",
                     "0.9",
                     "--min-p",
                     "0.1",
                     "--typical",
                     "0.8",
                     "--repeat-penalty",
                     "1.2",
                     "--repeat-last-n",
                     "32",
                     "--frequency-penalty",
                     "0.3",
                     "--presence-penalty",
                     "0.4",
                     "--dry-multiplier",
                     "0.8",
                     "--dry-base",
                     "2",
                     "--dry-allowed-length",
                     "3",
                     "--dry-penalty-last-n",
                     "128",
                     "--dry-sequence-breakers",
                     "\\n",
                     "--dry-sequence-breakers",
                     "###",
                     "--xtc-probability",
                     "0.5",
                     "--xtc-threshold",
                     "0.2",
                     "--mirostat",
                     "2",
                     "--mirostat-tau",
                     "4",
                     "--mirostat-eta",
                     "0.2",
                     "--mirostat-m",
                     "50",
                     "--logit-bias",
                     "15043:-2.0,198:1.5",
                     "--logit-bias",
                     "7+1",
                     "--seed",
                     "99",
                     "--grammar-str",
                     "root ::= \"a\""},
                    &cfg));
  EXPECT_FLOAT_EQ(cfg.temp, 0.5f);
  EXPECT_EQ(cfg.top_k, 7);
  EXPECT_FLOAT_EQ(cfg.top_p, 0.9f);
  EXPECT_FLOAT_EQ(cfg.min_p, 0.1f);
  EXPECT_FLOAT_EQ(cfg.typical_p, 0.8f);
  EXPECT_FLOAT_EQ(cfg.repeat_penalty, 1.2f);
  EXPECT_EQ(cfg.repeat_last_n, 32);
  EXPECT_FLOAT_EQ(cfg.frequency_penalty, 0.3f);
  EXPECT_FLOAT_EQ(cfg.presence_penalty, 0.4f);
  EXPECT_FLOAT_EQ(cfg.dry_multiplier, 0.8f);
  EXPECT_FLOAT_EQ(cfg.dry_base, 2.0f);
  EXPECT_EQ(cfg.dry_allowed_length, 3);
  EXPECT_EQ(cfg.dry_penalty_last_n, 128);
  EXPECT_EQ(cfg.dry_sequence_breakers, (std::vector<std::string>{"\n", "###"}));
  EXPECT_FLOAT_EQ(cfg.xtc_probability, 0.5f);
  EXPECT_FLOAT_EQ(cfg.xtc_threshold, 0.2f);
  EXPECT_EQ(cfg.mirostat, 2);
  EXPECT_FLOAT_EQ(cfg.mirostat_tau, 4.0f);
  EXPECT_FLOAT_EQ(cfg.mirostat_eta, 0.2f);
  EXPECT_EQ(cfg.mirostat_m, 50);
  ASSERT_EQ(cfg.logit_bias.size(), 3u);
  EXPECT_EQ(cfg.logit_bias[2].token, 7);
  EXPECT_EQ(cfg.seed, 99u);
  EXPECT_EQ(cfg.grammar, "root ::= \"a\"");
}

TEST(SamplingOptions, RepeatableFlagsTakeOneValueEach) {
  sampling::SamplerConfig cfg;
  CLI::App app("test");
  std::string prompt;
  app.add_option("prompt", prompt);
  add_sampling_options(app, &cfg);
  std::vector<std::string> args = {"--logit-bias", "1:2", "--dry-sequence-breakers", "none", "hello"};
  std::reverse(args.begin(), args.end());
  ASSERT_NO_THROW(app.parse(args));
  EXPECT_EQ(prompt, "hello");
  EXPECT_TRUE(cfg.dry_sequence_breakers.empty());
  EXPECT_EQ(cfg.logit_bias.size(), 1u);
}

TEST(SamplingOptions, GreedyAndFiles) {
  sampling::SamplerConfig cfg;
  ASSERT_TRUE(parse({"--greedy"}, &cfg));
  EXPECT_FLOAT_EQ(cfg.temp, 0.0f);
  const std::string path = test::temp_dir() + "/schema.json";
  std::ofstream(path) << R"({"type":"boolean"})";
  sampling::SamplerConfig cfg2;
  ASSERT_TRUE(parse({"--json-schema", path}, &cfg2));
  EXPECT_EQ(cfg2.json_schema, R"({"type":"boolean"})");
}

TEST(SamplingOptions, RefusesConflictsAndMalformedValues) {
  sampling::SamplerConfig cfg;
  EXPECT_FALSE(parse({"--grammar-str", "root ::= \"a\"", "--json-schema-str", "{}"}, &cfg));
  EXPECT_FALSE(parse({"--greedy", "--temp", "0.5"}, &cfg));
  EXPECT_FALSE(parse({"--logit-bias", "abc"}, &cfg));
  EXPECT_FALSE(parse({"--grammar", "/nonexistent/file.gbnf"}, &cfg));
  EXPECT_FALSE(parse({"--top-k", "many"}, &cfg));
  EXPECT_FALSE(parse({"--dry-sequence-breakers", "\\q"}, &cfg));
}

}  // namespace
}  // namespace minfer::cli
