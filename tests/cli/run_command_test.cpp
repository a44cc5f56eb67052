// The generating CLI and bench end to end on a tiny generated model: JSON output, graph export, flag
// validation, and llama-bench field names.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/fixtures.h"
#include "tools/synthetic_model.h"

namespace minfer::cli {
namespace {

std::string tiny_model() {
  static const std::string path = [] {
    tools::SyntheticOptions o;
    o.shape = *tools::synthetic_preset("tiny-qwen3");
    const std::string p = test::temp_dir() + "/tiny.gguf";
    EXPECT_TRUE(tools::make_synthetic_model(o)->write(p).ok());
    return p;
  }();
  return path;
}

TEST(RunCommand, JsonOutputHasIdsTextStopReasonAndTimings) {
  testing::internal::CaptureStdout();
  const int rc = run_command({tiny_model(), "hello there", "-n", "5", "--seed", "3", "-o", "json", "-t", "1"});
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_FALSE(j["prompt_ids"].empty());
  EXPECT_LE(j["generated_ids"].size(), 5u);
  EXPECT_TRUE(j["stop_reason"] == "length" || j["stop_reason"] == "eog");
  EXPECT_EQ(j["timings"]["n_prompt"], j["prompt_ids"].size());
}

TEST(RunCommand, DumpsTheGraphAndExits) {
  const std::string dot = test::temp_dir() + "/g.dot", json = test::temp_dir() + "/g.json";
  testing::internal::CaptureStdout();
  ASSERT_EQ(run_command({tiny_model(), "hi", "--dump-graph", dot, "--dump-graph-json", json}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("Graph DOT exported to"), std::string::npos);
  const auto j = nlohmann::json::parse(test::read_file(json));
  EXPECT_EQ(j["format"], "minfer-graph-v1");
  EXPECT_EQ(j["phase"], "prefill");
  EXPECT_GT(j["n_fused"].get<int>(), 0);  // SwiGLU per layer
  EXPECT_NE(test::read_file(dot).find("digraph"), std::string::npos);
}

TEST(RunCommand, RejectsBadFlagsAndValues) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_command({tiny_model(), "x", "--no-such-flag"}), 2);
  EXPECT_EQ(run_command({tiny_model(), "x", "--cache-type", "q4_0"}), 1);
  EXPECT_NE(run_command({tiny_model(), "x", "--temp", "-1"}), 0);
  EXPECT_EQ(run_command({"/nonexistent.gguf", "x"}), 1);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("KV cache type 'q4_0' is not supported"), std::string::npos) << err;
  EXPECT_NE(err.find("/nonexistent.gguf"), std::string::npos) << err;
}

TEST(BenchCommand, JsonUsesLlamaBenchFieldNames) {
  testing::internal::CaptureStdout();
  const int rc = bench_command({tiny_model(), "-p", "16", "-n", "4", "-r", "2", "-o", "json", "-t", "1"});
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  const auto rows = nlohmann::json::parse(out);
  ASSERT_EQ(rows.size(), 2u);
  for (const char* field : {"n_prompt", "n_gen", "n_threads", "avg_ts", "stddev_ts", "samples_ts", "model_type",
                            "model_size"}) {
    EXPECT_TRUE(rows[0].contains(field)) << field;
  }
  EXPECT_EQ(rows[0]["n_prompt"], 16);
  EXPECT_EQ(rows[1]["n_gen"], 4);
  EXPECT_EQ(rows[1]["samples_ts"].size(), 2u);
}

}  // namespace
}  // namespace minfer::cli
