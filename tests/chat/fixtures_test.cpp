// Parity tier: every reference rendering in ../shared/fixtures/chat/cases (jinja2 3.1.2 with
// transformers' settings) is reproduced byte for byte from the model's own template.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/fixtures.h"

namespace minfer::chat {
namespace {

// The cases the fixtures hold (chat/cases/<name>.json + .txt), listed when the binary runs.
std::vector<std::string> case_names() {
  std::vector<std::string> out;
  for (const std::string& file : minfer::test::fixture_entries("chat/cases", ".json")) {
    out.push_back(file.substr(0, file.size() - 5));
  }
  if (out.empty()) out.push_back("");  // one placeholder: gtest wants an instance; it never passes
  return out;
}

class ChatFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatFixtures, ReferenceRenderingIsReproducedByteForByte) {
  const std::string& name = GetParam();
  if (name.empty()) return minfer::test::no_parity_cases("chat");
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
  minfer::test::record_parity_case("chat", name);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ChatFixtures, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           if (p.param.empty()) return std::string("NoFixtures");
                           std::string s = p.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

TEST(ChatFixtureTemplates, AllParse) {
  MINFER_REQUIRE_FIXTURES();
  for (const auto& e : std::filesystem::directory_iterator(minfer::test::fixture_path("chat/templates"))) {
    SCOPED_TRACE(e.path().filename().string());
    auto tmpl = ChatTemplate::parse(minfer::test::read_file(e.path().string()));
    EXPECT_TRUE(tmpl.ok()) << tmpl.status().message();
  }
}

}  // namespace
}  // namespace minfer::chat
