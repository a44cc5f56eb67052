// `minfer perplexity` end to end on a tiny generated model: llama-perplexity's output, JSON, the base file
// written and read back (a model against itself: KLD 0, top token 100%), refusals of mismatched or
// corrupted base files by name, and the errors for a bad path, an empty or short text and bad flags.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/fixtures.h"
#include "tools/synthetic_model.h"

namespace minfer::cli {
namespace {

struct Ran {
  int rc;
  std::string out, err;
};

Ran run(const Args& args) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int rc = perplexity_command(args);
  std::string out = testing::internal::GetCapturedStdout();
  std::string err = testing::internal::GetCapturedStderr();
  return {rc, out, err};
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

class PerplexityCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir();
    model_ = dir_ + "/tiny.gguf";
    tools::SyntheticOptions o;
    o.shape = *tools::synthetic_preset("tiny-qwen3");
    ASSERT_TRUE(tools::make_synthetic_model(o)->write(model_).ok());
    text_ = write("text.txt", paragraph(12));
  }
  static std::string paragraph(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) {
      s += "The keeper of the light climbed the stairs at dawn and wrote the weather in his book. ";
    }
    return s;
  }
  std::string write(const std::string& name, const std::string& body) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary) << body;
    return p;
  }
  nlohmann::json json_of(const Ran& r) {
    EXPECT_EQ(r.rc, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  }
  std::string dir_, model_, text_;
};

TEST_F(PerplexityCommand, PrintsTheRunningPplPerChunkAndTheFinalEstimate) {
  const Ran r = run({model_, "-f", text_, "-c", "64", "--chunks", "3", "-t", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "[1]")) << r.out;
  EXPECT_TRUE(has(r.out, "[3]")) << r.out;
  EXPECT_FALSE(has(r.out, "[4]")) << r.out;
  EXPECT_TRUE(has(r.out, "Final estimate: PPL = ")) << r.out;
  EXPECT_TRUE(has(r.out, " +/- ")) << r.out;
  EXPECT_TRUE(has(r.err, "3 chunks of n_ctx=64 (31 scored tokens each)")) << r.err;
  EXPECT_TRUE(has(r.err, "seconds per pass - ETA")) << r.err;
}

TEST_F(PerplexityCommand, JsonWithMinusMAndChunksEvaluatedTogetherOrApartAgree) {
  // -b 64 with -c 64: one chunk per forward; -b 256: four chunks as four sequences of one batch.
  const nlohmann::json one = json_of(
      run({"-m", model_, "-f", text_, "-c", "64", "-b", "64", "--chunks", "4", "-t", "1", "-o", "json"}));
  const nlohmann::json four =
      json_of(run({model_, "-f", text_, "-c", "64", "-b", "256", "--chunks", "4", "-t", "1", "-o", "json"}));
  ASSERT_TRUE(one.is_object());
  ASSERT_TRUE(four.is_object());
  EXPECT_EQ(one["n_chunk"], 4);
  EXPECT_EQ(one["n_seq"], 1);
  EXPECT_EQ(four["n_seq"], 4);
  EXPECT_EQ(one["n_scored"], 4 * 31);
  ASSERT_EQ(one["chunks"].size(), 4u);
  EXPECT_DOUBLE_EQ(one["chunks"][3]["ppl"].get<double>(), one["ppl"].get<double>());
  EXPECT_GT(one["ppl"].get<double>(), 1.0);
  EXPECT_GT(one["ppl_uncertainty"].get<double>(), 0.0);
  // Logits do not depend on how sequences share a batch (tests/engine: bitwise), so neither does PPL.
  EXPECT_NEAR(one["ppl"].get<double>(), four["ppl"].get<double>(), 1e-6 * one["ppl"].get<double>());
}

TEST_F(PerplexityCommand, KlDivergenceOfAModelAgainstItsOwnBaseIsZero) {
  const std::string base = dir_ + "/base.kld";
  const nlohmann::json ppl = json_of(run({model_, "-f", text_, "-c", "64", "--chunks", "5", "-t", "1",
                                          "--kl-divergence-base", base, "-o", "json"}));
  ASSERT_TRUE(std::filesystem::exists(base));
  EXPECT_EQ(ppl["kl_divergence_base"], base);

  const Ran text_run = run({model_, "-f", text_, "-t", "1", "--kl-divergence-base", base, "--kl-divergence"});
  ASSERT_EQ(text_run.rc, 0) << text_run.err;
  for (const char* line :
       {"chunk             PPL", "====== Perplexity statistics ======", "Mean PPL(Q)/PPL(base)",
        "====== KL divergence statistics ======", "Mean    KLD:", "Maximum KLD:", "99.0%   KLD:",
        "Median  KLD:", "RMS Δp    :", "Same top p: 100.000 ±"}) {
    EXPECT_TRUE(has(text_run.out, line)) << line << "\n" << text_run.out;
  }
  // Without -f the base file's own tokens are used; the numbers are the same.
  const nlohmann::json k =
      json_of(run({model_, "-t", "1", "--kl-divergence-base", base, "--kl-divergence", "-o", "json"}));
  ASSERT_TRUE(k.is_object());
  const nlohmann::json& s = k["statistics"];
  EXPECT_EQ(s["count"], 5 * 31);
  // Half a step of the 16-bit base encoding (16 nats / 65535 / 2) bounds each token's KLD from itself.
  EXPECT_LE(std::abs(s["kld"]["mean"].get<double>()), 1.3e-4);
  EXPECT_LE(s["kld"]["max"].get<double>(), 1.3e-4);
  EXPECT_EQ(s["same_top_p"]["value"].get<double>(), 1.0);
  // PPL(base) comes from the 16-bit rows, whose log-probs are clipped 16 below the top one
  // (llama-perplexity's encoding); on random weights many targets lie there, so PPL(Q)/PPL(base) is >= 1
  // here, not 1.
  EXPECT_GE(s["ppl_ratio"]["value"].get<double>(), 1.0 - 1.3e-4);
  EXPECT_NEAR(s["ppl"]["value"].get<double>(), ppl["ppl"].get<double>(), 1e-5 * ppl["ppl"].get<double>());
  EXPECT_EQ(k["chunks"].size(), 5u);
}

TEST_F(PerplexityCommand, BaseFilesFromAnotherTextOrContextOrCorruptedAreRefusedByName) {
  const std::string base = dir_ + "/base.kld";
  ASSERT_EQ(
      run({model_, "-f", text_, "-c", "64", "--chunks", "2", "-t", "1", "--kl-divergence-base", base}).rc, 0);

  Ran r = run({model_, "-f", text_, "-c", "32", "-t", "1", "--kl-divergence-base", base, "--kl-divergence"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "was computed with n_ctx 64, not 32 (-c)")) << r.err;

  const std::string other = write("other.txt", "A different text entirely. " + paragraph(12));
  r = run({model_, "-f", other, "-t", "1", "--kl-divergence-base", base, "--kl-divergence"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "was computed on another text")) << r.err;

  // A flipped byte in the last chunk's rows: chunk 1 is evaluated, chunk 2 is refused before it is used.
  const auto size = static_cast<std::streamoff>(std::filesystem::file_size(base));
  {
    std::fstream f(base, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(size - 100);
    f.put('\x7f');
    f.put('\x01');
  }
  r = run({model_, "-f", text_, "-t", "1", "--kl-divergence-base", base, "--kl-divergence"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "chunk 2 is corrupted (checksum mismatch)")) << r.err;

  std::filesystem::resize_file(base, static_cast<uintmax_t>(size - 1));
  r = run({model_, "--kl-divergence-base", base, "--kl-divergence"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "truncated")) << r.err;

  r = run({model_, "--kl-divergence-base", text_, "--kl-divergence"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "not a minfer KL-divergence base file")) << r.err;
}

TEST_F(PerplexityCommand, OneTrailingNewlineOfTheTextIsDroppedAsLlamaCppDoes) {
  auto n_tokens = [&](const std::string& name, const std::string& body) {
    const nlohmann::json j =
        json_of(run({model_, "-f", write(name, body), "-c", "64", "--chunks", "2", "-t", "1", "-o", "json"}));
    return j.value("n_tokens", -1);
  };
  const int plain = n_tokens("plain.txt", paragraph(12));
  ASSERT_GT(plain, 0);
  EXPECT_EQ(n_tokens("newline.txt", paragraph(12) + "\n"), plain);
  EXPECT_EQ(n_tokens("two-newlines.txt", paragraph(12) + "\n\n"), plain + 1) << "only one newline is dropped";
  const Ran r = run({model_, "-f", write("only-newline.txt", "\n")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "the text is empty")) << r.err;
}

TEST_F(PerplexityCommand, BadInputsAreClearErrors) {
  Ran r = run({model_, "-f", dir_ + "/missing.txt"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "-f '" + dir_ + "/missing.txt': no such file")) << r.err;
  r = run({model_, "-f", dir_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "not a regular file")) << r.err;
  r = run({model_, "-f", write("empty.txt", "")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "the text is empty")) << r.err;
  r = run({model_, "-f", write("short.txt", "Too short for two chunks."), "-c", "64", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "needs at least 128 (two chunks)")) << r.err;
  r = run({model_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "give the text to evaluate with -f FILE")) << r.err;
  r = run({model_, "-f", text_, "--kl-divergence"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--kl-divergence needs --kl-divergence-base FILE")) << r.err;
  r = run({model_, "-f", text_, "--chunks", "0"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--chunks 0")) << r.err;
  r = run({model_, "-f", text_, "-c", "2"});
  EXPECT_EQ(r.rc, 2);  // below the range CLI11 checks
  r = run({model_, "-f", text_, "-c", "1000000", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "exceeds the model's training context")) << r.err;
  r = run({dir_ + "/no-model.gguf", "-f", text_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "no-model.gguf")) << r.err;
  r = run({model_, "-f", text_, "--kl-divergence-base", dir_ + "/no-such-dir/base.kld", "-c", "64",
           "--chunks", "2", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "cannot write")) << r.err;
}

}  // namespace
}  // namespace minfer::cli
