// Parity tier: every reference rendering in ../shared/fixtures/chat/cases (jinja2 3.1.2 with
// transformers' settings) is reproduced byte for byte from the model's own template.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/fixtures.h"

namespace minfer::chat {
namespace {

std::vector<std::string> case_names() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(minfer::test::fixture_path("chat/cases"))) {
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ChatFixtures, EveryReferenceRenderingIsReproducedByteForByte) {
  MINFER_REQUIRE_FIXTURES();
  const std::vector<std::string> names = case_names();
  ASSERT_EQ(names.size(), 30u) << "the fixtures README lists 30 cases";
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const auto spec = nlohmann::ordered_json::parse(minfer::test::read_file(minfer::test::fixture_path("chat/cases/" + name + ".json")));
    const std::string expected = minfer::test::read_file(minfer::test::fixture_path("chat/cases/" + name + ".txt"));
    ASSERT_EQ(expected, spec["expected"].get<std::string>()) << "fixture .txt and .json disagree";
    auto tmpl = ChatTemplate::parse(minfer::test::read_file(minfer::test::fixture_path("chat/" + spec["template"].get<std::string>())));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
    ChatInputs inputs;
    inputs.messages = spec["messages"];
    inputs.tools = spec["tools"];
    inputs.add_generation_prompt = spec["add_generation_prompt"].get<bool>();
    inputs.extra = spec["template_vars"];
    auto rendered = tmpl->render(inputs);
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    EXPECT_EQ(*rendered, expected);
  }
}

TEST(ChatFixtures, AllFixtureTemplatesParse) {
  MINFER_REQUIRE_FIXTURES();
  for (const auto& e : std::filesystem::directory_iterator(minfer::test::fixture_path("chat/templates"))) {
    SCOPED_TRACE(e.path().filename().string());
    auto tmpl = ChatTemplate::parse(minfer::test::read_file(e.path().string()));
    EXPECT_TRUE(tmpl.ok()) << tmpl.status().message();
  }
}

}  // namespace
}  // namespace minfer::chat
