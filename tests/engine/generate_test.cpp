// Generation loop: stop strings are never emitted (even split across tokens), the token limit holds,
// and a seeded run is reproducible.
#include <gtest/gtest.h>

#include "engine/generate.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

TEST(StopMatcher, HoldsBackPrefixesAndDropsTheStopString) {
  StopMatcher m({"</end>", "xyz"});
  bool stopped = false;
  EXPECT_EQ(m.push("hello </e", &stopped), "hello ");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(m.push("n", &stopped), "");
  EXPECT_EQ(m.push("d> tail", &stopped), "");
  EXPECT_TRUE(stopped);
  StopMatcher n({"ab"});
  EXPECT_EQ(n.push("xa", &stopped), "x");
  EXPECT_EQ(n.push("c", &stopped), "ac");
  EXPECT_EQ(n.push("a", &stopped), "");
  EXPECT_EQ(n.flush(), "a");
}

TEST(Generate, SeededRunsReproduceAndRespectTheLimit) {
  EngineOptions o;
  o.n_ctx = 128;
  o.n_threads = 2;
  const std::string path = test::write_tiny_model("tiny-qwen2");
  auto run = [&](uint64_t seed) {
    auto e = Engine::load(path, o);
    EXPECT_TRUE(e.ok());
    GenerateOptions g;
    g.n_predict = 12;
    g.sampling.seed = seed;
    auto r = generate(**e, {10, 20, 30, 40}, g);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return *r;
  };
  const GenerateResult a = run(1), b = run(1);
  EXPECT_EQ(a.generated_ids, b.generated_ids);
  EXPECT_EQ(a.text, b.text);
  EXPECT_LE(a.generated_ids.size(), 12u);
  if (a.stop_reason == "length") {
    EXPECT_EQ(a.generated_ids.size(), 12u);
  }
  EXPECT_EQ(a.timings.n_prompt, 4);
}

TEST(Generate, RefusesAPromptLongerThanTheContext) {
  EngineOptions o;
  o.n_ctx = 8;
  auto e = Engine::load(test::write_tiny_model("tiny-qwen2"), o);
  ASSERT_TRUE(e.ok());
  auto r = generate(**e, std::vector<int32_t>(8, 5), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("context holds 8"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace minfer::engine
