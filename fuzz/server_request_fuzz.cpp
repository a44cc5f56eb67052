// libFuzzer target: the server's request bodies (POST /v1/chat/completions and /v1/completions, any
// client may send them). The first byte picks the endpoint, the rest is the body. Parsing must answer an
// ApiError or a request; an accepted request's sampling config (grammar, JSON Schema, tool grammar) must
// compile or be refused with a Status, and an accepted chat request must render through ChatML or be
// refused with a Status. The tool-call parsers of every family read the same bytes as model output, whole
// and split in two, and must lose no byte that is not part of a call. Bits 1-2 of the first byte pick the
// model's tool-call syntax for the request's grammar.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "sampling/sampler.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace {

// Every single byte as a token plus an end-of-generation token: enough for grammars to compile masks.
std::shared_ptr<const minfer::sampling::VocabView> byte_vocab() {
  static const auto vocab = [] {
    auto v = std::make_shared<minfer::sampling::VocabView>();
    for (int b = 0; b < 256; ++b) v->token_bytes.emplace_back(1, static_cast<char>(b));
    v->token_bytes.emplace_back();  // the EOG token (a control token: no bytes)
    v->eog_ids = {256};
    return v;
  }();
  return vocab;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (size_t{1} << 15)) return 0;
  namespace s = minfer::server;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  s::RequestLimits limits;
  limits.n_vocab = 257;
  limits.n_slots = 4;
  limits.tool_format = static_cast<s::ToolCallFormat>((data[0] >> 1) & 3);
  s::OpenAiRequest req;
  const bool chat = (data[0] & 1) == 0;
  auto err = chat ? s::parse_chat_request(body, limits, &req) : s::parse_completion_request(body, limits, &req);
  if (!err) {
    if (req.n < 1 || req.n > limits.n_slots) __builtin_trap();  // validated here, relied on later
    (void)minfer::sampling::Sampler::create(req.sampling, byte_vocab());
    if (chat) {
      static const minfer::chat::ChatTemplate chatml = minfer::chat::ChatTemplate::chatml();
      (void)chatml.render(req.chat);
    }
  }
  s::ToolCall call;
  (void)s::parse_tool_call_body(body, &call);
  for (auto format : {s::ToolCallFormat::kHermes, s::ToolCallFormat::kLlama3, s::ToolCallFormat::kMistral}) {
    const size_t cut = body.empty() ? 0 : data[0] % body.size();
    std::string whole, split;
    size_t calls_whole = 0, calls_split = 0;
    {
      s::ToolCallParser p(format);
      auto a = p.push(body);
      auto b = p.flush();
      whole = a.content + b.content;
      calls_whole = a.calls.size() + b.calls.size();
    }
    {
      s::ToolCallParser p(format);
      auto a = p.push(body.substr(0, cut));
      auto b = p.push(body.substr(cut));
      auto c = p.flush();
      split = a.content + b.content + c.content;
      calls_split = a.calls.size() + b.calls.size() + c.calls.size();
    }
    if (whole != split || calls_whole != calls_split) __builtin_trap();  // streaming must not change the split
    if (calls_whole == 0 && whole != body) __builtin_trap();           // no call: every byte is content
  }
  return 0;
}
