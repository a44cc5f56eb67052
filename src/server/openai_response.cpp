// Choice assembly and OpenAI JSON pieces (see openai_response.h).
#include "server/openai_response.h"

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "tokenizer/tokenizer.h"

namespace minfer::server {

using json = nlohmann::ordered_json;

ChoiceAssembler::ChoiceAssembler(bool reasoning, bool starts_in_think, bool tools, ToolCallFormat format)
    : splitter_(reasoning, starts_in_think), tools_(format), parse_tools_(tools && format != ToolCallFormat::kNone) {}

void ChoiceAssembler::absorb(ReasoningSplitter::Output r, bool final, Delta* d) {
  d->reasoning = std::move(r.reasoning);
  if (parse_tools_) {
    ToolCallParser::Output t = tools_.push(r.content);
    if (final) {
      ToolCallParser::Output rest = tools_.flush();
      t.content += rest.content;
      for (auto& c : rest.calls) t.calls.push_back(std::move(c));
    }
    d->content = std::move(t.content);
    d->calls = std::move(t.calls);
  } else {
    d->content = std::move(r.content);
  }
  reasoning_ += d->reasoning;
  content_ += d->content;
  for (const auto& c : d->calls) calls_.push_back(c);
}

Delta ChoiceAssembler::push(std::string_view text) {
  Delta d;
  absorb(splitter_.push(text), false, &d);
  return d;
}

Delta ChoiceAssembler::finish() {
  Delta d;
  absorb(splitter_.flush(), true, &d);
  return d;
}

std::string finish_reason(const std::string& batcher_reason, bool has_tool_calls) {
  if (has_tool_calls) return "tool_calls";
  if (batcher_reason == "length") return "length";
  return "stop";
}

std::optional<ApiError> grammar_dead_end(const engine::BatchEvent& done) {
  if (done.kind != engine::BatchEvent::Kind::kDone || done.finish_reason != "grammar") return std::nullopt;
  return bad_request(fmt::format("generation reached a dead end of the grammar: {}",
                                 done.detail.empty() ? "no token is allowed" : done.detail));
}

json usage_json(const engine::BatchUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json tool_calls_json(const std::vector<ToolCall>& calls, int32_t first_index, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c;
    if (with_index) c["index"] = first_index + static_cast<int32_t>(i);
    c["id"] = calls[i].id;
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

namespace {
json token_entry(int32_t id, float logprob, const tokenizer::Tokenizer& tok) {
  const std::string bytes = id >= 0 && id < tok.n_vocab() ? tok.token_bytes(id) : std::string();
  json b = json::array();
  for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
  return {{"token", bytes}, {"logprob", logprob}, {"bytes", std::move(b)}};
}
}  // namespace

json chat_logprob_entry(const engine::BatchEvent& ev, const tokenizer::Tokenizer& tok) {
  json e = token_entry(ev.token, ev.logprob, tok);
  json top = json::array();
  for (const auto& t : ev.top) top.push_back(token_entry(t.token, t.logprob, tok));
  e["top_logprobs"] = std::move(top);
  return e;
}

std::string make_response_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base =
      std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(base + counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  return fmt::format("{}-{:016x}", prefix, rng());
}

}  // namespace minfer::server
