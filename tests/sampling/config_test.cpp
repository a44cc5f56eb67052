// SamplerConfig::validate refusals (each names the flag and value) and the flag text formats.
#include <gtest/gtest.h>

#include <cmath>

#include "sampling/config.h"

namespace minfer::sampling {
namespace {

void expect_refused(const SamplerConfig& cfg, const std::string& needle) {
  const Status st = cfg.validate(100);
  ASSERT_FALSE(st.ok()) << "expected a refusal mentioning " << needle;
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(SamplerConfig, DefaultsMatchLlamaCppAndValidate) {
  SamplerConfig cfg;
  EXPECT_FLOAT_EQ(cfg.temp, 0.8f);
  EXPECT_EQ(cfg.top_k, 40);
  EXPECT_FLOAT_EQ(cfg.top_p, 0.95f);
  EXPECT_FLOAT_EQ(cfg.min_p, 0.0f);
  EXPECT_FLOAT_EQ(cfg.typical_p, 1.0f);
  EXPECT_FLOAT_EQ(cfg.repeat_penalty, 1.0f);
  EXPECT_EQ(cfg.repeat_last_n, 64);
  EXPECT_FLOAT_EQ(cfg.dry_multiplier, 0.0f);
  EXPECT_FLOAT_EQ(cfg.dry_base, 1.75f);
  EXPECT_EQ(cfg.dry_allowed_length, 2);
  EXPECT_EQ(cfg.mirostat, 0);
  EXPECT_FLOAT_EQ(cfg.mirostat_tau, 5.0f);
  EXPECT_FLOAT_EQ(cfg.mirostat_eta, 0.1f);
  EXPECT_FLOAT_EQ(cfg.xtc_probability, 0.0f);
  EXPECT_TRUE(cfg.validate(100).ok());
}

TEST(SamplerConfig, RefusesNonsenseNamingTheValue) {
  SamplerConfig c;
  c.temp = -0.5f;
  expect_refused(c, "--temp");
  c = {};
  c.temp = NAN;
  expect_refused(c, "--temp");
  c = {};
  c.top_p = 1.5f;
  expect_refused(c, "--top-p must be in [0, 1], got 1.5");
  c = {};
  c.top_k = -1;
  expect_refused(c, "--top-k");
  c = {};
  c.min_p = -0.1f;
  expect_refused(c, "--min-p");
  c = {};
  c.typical_p = 2.0f;
  expect_refused(c, "--typical");
  c = {};
  c.repeat_penalty = 0.0f;
  expect_refused(c, "--repeat-penalty");
  c = {};
  c.repeat_last_n = -2;
  expect_refused(c, "--repeat-last-n");
  c = {};
  c.dry_base = 0.5f;
  expect_refused(c, "--dry-base");
  c = {};
  c.dry_multiplier = -1.0f;
  expect_refused(c, "--dry-multiplier");
  c = {};
  c.xtc_threshold = 0.7f;
  expect_refused(c, "--xtc-threshold");
  c = {};
  c.xtc_probability = 1.2f;
  expect_refused(c, "--xtc-probability");
  c = {};
  c.mirostat = 3;
  expect_refused(c, "--mirostat must be 0");
  c = {};
  c.mirostat_tau = 0.0f;
  expect_refused(c, "--mirostat-tau");
  c = {};
  c.mirostat_m = 0;
  expect_refused(c, "--mirostat-m");
  c = {};
  c.logit_bias = {{100, 1.0f}};
  expect_refused(c, "token id 100 is outside the vocabulary");
  c = {};
  c.logit_bias = {{-1, 1.0f}};
  expect_refused(c, "token id -1");
  c = {};
  c.logit_bias = {{5, 150.0f}};
  expect_refused(c, "bias 150 for token 5 is outside [-100, 100]");
  c = {};
  c.grammar = "root ::= \"a\"";
  c.json_schema = "{}";
  expect_refused(c, "mutually exclusive");
}

TEST(SamplerConfig, ParsesLogitBias) {
  std::vector<LogitBias> b;
  ASSERT_TRUE(parse_logit_bias("15043:-2.0,198:1.5", &b).ok());
  ASSERT_TRUE(parse_logit_bias("7+3,8-0.5", &b).ok());
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].token, 15043);
  EXPECT_FLOAT_EQ(b[0].bias, -2.0f);
  EXPECT_EQ(b[1].token, 198);
  EXPECT_FLOAT_EQ(b[1].bias, 1.5f);
  EXPECT_EQ(b[2].token, 7);
  EXPECT_FLOAT_EQ(b[2].bias, 3.0f);
  EXPECT_EQ(b[3].token, 8);
  EXPECT_FLOAT_EQ(b[3].bias, -0.5f);
  EXPECT_FALSE(parse_logit_bias("abc:1", &b).ok());
  EXPECT_FALSE(parse_logit_bias("12:x", &b).ok());
  EXPECT_FALSE(parse_logit_bias("12", &b).ok());
  EXPECT_FALSE(parse_logit_bias("1:1,,2:2", &b).ok());
}

TEST(SamplerConfig, UnescapesBreakers) {
  EXPECT_EQ(*unescape_breaker("a\\nb"), "a\nb");
  EXPECT_EQ(*unescape_breaker("\\\""), "\"");
  EXPECT_FALSE(unescape_breaker("\\q").ok());
}

}  // namespace
}  // namespace minfer::sampling
