// The published chat templates of Llama 3.1 / 3.2, Mistral v0.3 and Gemma 3 (tests/chat/references/templates)
// render every case of tests/chat/references/cases byte for byte as jinja2 renders it with transformers'
// settings (make_references.py); cases the template refuses fail with the template's own message.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace minfer::chat {
namespace {

const std::string kDir = MINFER_CHAT_REFERENCES;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> case_names() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kDir + "/cases")) {
    const std::string file = e.path().filename().string();
    if (file.size() > 5 && file.ends_with(".json")) out.push_back(file.substr(0, file.size() - 5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::ordered_json spec_of(const std::string& name) {
  return nlohmann::ordered_json::parse(slurp(kDir + "/cases/" + name + ".json"));
}

Result<std::string> render_case(const nlohmann::ordered_json& spec) {
  MINFER_ASSIGN_OR_RETURN(auto tmpl, ChatTemplate::parse(slurp(kDir + "/" + spec["template"].get<std::string>())));
  ChatInputs inputs;
  inputs.messages = spec["messages"];
  inputs.tools = spec["tools"];
  inputs.add_generation_prompt = spec["add_generation_prompt"].get<bool>();
  inputs.extra = spec["template_vars"];
  jinja::RenderOptions options;
  options.now_unix = spec["now_unix"].get<int64_t>();  // the script's fixed strftime_now clock
  return tmpl.render(inputs, options);
}

class ChatReferences : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatReferences, RendersAsTransformers) {
  const auto spec = spec_of(GetParam());
  auto rendered = render_case(spec);
  if (spec.contains("expected_error")) {
    ASSERT_FALSE(rendered.ok()) << "the template should refuse this conversation";
    EXPECT_NE(rendered.status().message().find(spec["expected_error"].get<std::string>()), std::string::npos)
        << rendered.status().message();
    return;
  }
  const std::string expected = slurp(kDir + "/cases/" + GetParam() + ".txt");
  ASSERT_EQ(expected, spec["expected"].get<std::string>()) << ".txt and .json disagree";
  ASSERT_TRUE(rendered.ok()) << rendered.status().message();
  EXPECT_EQ(*rendered, expected);
}

INSTANTIATE_TEST_SUITE_P(Published, ChatReferences, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// The issue asks for at least 6 conversations per family, with tools and a system message among them.
TEST(ChatReferences, EveryFamilyHasSixCasesWithToolsAndSystem) {
  for (const std::string family : {"llama3.1-", "llama3.2-", "mistral-v0.3-", "gemma3-"}) {
    SCOPED_TRACE(family);
    int n = 0;
    bool tools = false, system = false;
    for (const std::string& name : case_names()) {
      if (!name.starts_with(family)) continue;
      const auto spec = spec_of(name);
      if (spec.contains("expected_error")) continue;
      ++n;
      tools = tools || !spec["tools"].is_null();
      system = system || spec["messages"][0]["role"] == "system";
    }
    EXPECT_GE(n, 6);
    EXPECT_TRUE(tools);
    EXPECT_TRUE(system);
  }
}

}  // namespace
}  // namespace minfer::chat
