// libFuzzer target: chat messages as JSON (what `minfer template --messages` and the chat endpoints
// take: an array of messages, or an object with messages/tools/add_generation_prompt) rendered by the
// real Qwen templates. Parsing must not throw, rendering must return a Status or bounded text.
// Templates: every *.jinja in $MINFER_FUZZ_TEMPLATES, else the fixtures' chat/templates, plus ChatML.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace {

using minfer::chat::ChatTemplate;

std::vector<ChatTemplate> load() {
  std::vector<ChatTemplate> out{ChatTemplate::chatml()};
  const char* env = std::getenv("MINFER_FUZZ_TEMPLATES");
  const std::filesystem::path dir = env != nullptr ? env : MINFER_FUZZ_DEFAULT_TEMPLATES;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".jinja") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto t = ChatTemplate::parse(ss.str());
    if (!t.ok()) std::abort();  // the fixture templates all parse (tests/chat)
    out.push_back(std::move(t).value());
  }
  std::fprintf(stderr, "chat_messages_fuzz: %zu templates\n", out.size());
  return out;
}

const std::vector<ChatTemplate>& templates() {
  static const std::vector<ChatTemplate> t = load();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)templates();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 14)) return 0;
  const auto j = nlohmann::ordered_json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  minfer::chat::ChatInputs inputs;
  if (j.is_object()) {
    auto m = j.find("messages");
    if (m == j.end()) return 0;
    inputs.messages = *m;
    if (auto t = j.find("tools"); t != j.end()) inputs.tools = *t;
    if (auto g = j.find("add_generation_prompt"); g != j.end() && g->is_boolean()) {
      inputs.add_generation_prompt = g->get<bool>();
    }
  } else {
    inputs.messages = j;
  }
  if (!inputs.messages.is_array()) return 0;
  minfer::chat::jinja::RenderOptions options;
  options.max_output_bytes = size_t{1} << 16;
  options.max_loop_iterations = 20000;
  options.now_unix = 0;
  for (const ChatTemplate& t : templates()) {
    auto rendered = t.render(inputs, options);
    if (rendered.ok() && rendered->size() > options.max_output_bytes) __builtin_trap();
  }
  return 0;
}
