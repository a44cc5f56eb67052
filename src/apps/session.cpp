// Multi-turn conversation: incremental prefill against the tokens the KV sequence already holds, context
// shift on overflow, /regen, /clear, session files. Generation itself is engine::generate().
#include "apps/session.h"

#include <algorithm>

#include <fmt/format.h>

namespace minfer::apps {

ChatSession::ChatSession(engine::Engine& engine, chat::ChatTemplate tmpl, ChatSessionOptions options)
    : engine_(engine), template_(std::move(tmpl)), options_(std::move(options)) {
  clear();
  reset_sequence();
}

void ChatSession::clear() {
  messages_ = nlohmann::ordered_json::array();
  if (!options_.system.empty()) messages_.push_back({{"role", "system"}, {"content", options_.system}});
}

void ChatSession::reset_sequence() {
  engine_.kv().seq_rm(options_.seq, 0, -1);
  cached_.clear();
}

Result<std::vector<int32_t>> ChatSession::render_tokens(const nlohmann::ordered_json& messages,
                                                        bool add_generation_prompt) const {
  chat::ChatInputs inputs;
  inputs.messages = messages;
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.extra = options_.template_vars;
  auto text = template_.render(inputs);
  if (!text.ok()) return text.status().with_context("chat template: ");
  const tokenizer::Tokenizer& tok = engine_.tokenizer();
  return tok.encode_chat(*text);
}

Result<TurnResult> ChatSession::send(std::string_view user, const engine::GenerateOptions& gen,
                                     const std::function<void(std::string_view)>& on_text) {
  const nlohmann::ordered_json before = messages_;
  messages_.push_back({{"role", "user"}, {"content", std::string(user)}});
  auto result = run_turn(gen, on_text);
  if (!result.ok()) messages_ = before;
  return result;
}

Result<TurnResult> ChatSession::regenerate(const engine::GenerateOptions& gen,
                                           const std::function<void(std::string_view)>& on_text) {
  if (messages_.empty() || messages_.back()["role"] != "assistant") {
    return invalid_argument("/regen: there is no reply to regenerate yet");
  }
  const nlohmann::ordered_json before = messages_;
  messages_.erase(messages_.end() - 1);
  engine::GenerateOptions again = gen;
  // A different stream of random numbers for each regeneration (greedy decoding repeats itself anyway);
  // a clock seed is new every time already.
  ++n_regenerations_;
  if (gen.sampling.seed != sampling::SamplerConfig::kRandomSeed) {
    again.sampling.seed = gen.sampling.seed + 0x9E3779B97F4A7C15ull * n_regenerations_;
  }
  auto result = run_turn(again, on_text);
  if (!result.ok()) messages_ = before;
  return result;
}

Result<TurnResult> ChatSession::run_turn(const engine::GenerateOptions& gen,
                                         const std::function<void(std::string_view)>& on_text) {
  TurnResult result;
  MINFER_ASSIGN_OR_RETURN(std::vector<int32_t> prompt,
                          render_tokens(messages_, /*add_generation_prompt=*/true));
  const int32_t n_ctx = engine_.n_ctx();
  // Room kept for the reply when deciding whether the turn fits: the requested length, at most half the
  // context (a quarter when unbounded); a longer reply stops with reason "context".
  const int32_t reserve = gen.n_predict >= 0 ? std::min(gen.n_predict, n_ctx / 2) : n_ctx / 4;
  MINFER_RETURN_IF_ERROR(fit_context(&prompt, reserve, &result));

  // Keep the longest prefix the sequence already holds; at least one token is evaluated for the logits.
  const size_t keep = std::min(engine::common_prefix(cached_, prompt), prompt.size() - 1);
  engine_.kv().seq_rm(options_.seq, static_cast<int32_t>(keep), -1);
  cached_.resize(keep);

  engine::GenerateOptions options = gen;
  options.seq = options_.seq;
  options.n_cached = static_cast<int32_t>(keep);
  auto generated = drafter_ != nullptr ? engine::generate_speculative(engine_, *drafter_, prompt, options,
                                                                      spec_, &result.spec, on_text)
                                       : engine::generate(engine_, prompt, options, on_text);
  if (!generated.ok()) {
    reset_sequence();  // a failed decode leaves the sequence in an unknown state: start over next turn
    return generated.status();
  }
  // The sequence now holds the prompt and the generated tokens except perhaps the last sampled one.
  std::vector<int32_t> held = prompt;
  held.insert(held.end(), generated->generated_ids.begin(), generated->generated_ids.end());
  held.resize(static_cast<size_t>(engine_.kv().seq_pos_max(options_.seq) + 1));
  cached_ = std::move(held);

  messages_.push_back({{"role", "assistant"}, {"content", generated->text}});
  result.stats.n_prefilled = generated->timings.n_prompt;
  result.stats.n_cached = generated->timings.n_cached;
  result.generation = std::move(*generated);
  return result;
}

Status ChatSession::fit_context(std::vector<int32_t>* prompt, int32_t reserve, TurnResult* result) {
  const int64_t n_ctx = engine_.n_ctx();
  auto fits = [&](const std::vector<int32_t>& p) {
    return static_cast<int64_t>(p.size()) + reserve <= n_ctx;
  };
  if (fits(*prompt)) return {};

  size_t last_user = messages_.size();
  for (size_t i = messages_.size(); i-- > n_head();) {
    if (messages_[i]["role"] == "user") {
      last_user = i;
      break;
    }
  }
  // The current turn alone (system prompt + this message) must fit, or nothing can be dropped to help.
  nlohmann::ordered_json alone = nlohmann::ordered_json::array();
  for (size_t i = 0; i < n_head(); ++i) alone.push_back(messages_[i]);
  for (size_t i = last_user; i < messages_.size(); ++i) alone.push_back(messages_[i]);
  MINFER_ASSIGN_OR_RETURN(std::vector<int32_t> minimal, render_tokens(alone, true));
  if (static_cast<int64_t>(minimal.size()) >= n_ctx) {
    return error(StatusCode::kOutOfRange,
                 "the message needs {} tokens (with the system prompt and template) but the context holds {} "
                 "(raise --n-ctx)",
                 minimal.size(), n_ctx);
  }

  const std::vector<int32_t> old_prompt = *prompt;
  const size_t n_before = messages_.size();
  // Drop whole turns (a user message and the replies after it), oldest first, never the system prompt
  // and never the current turn.
  while (!fits(*prompt) && last_user > n_head()) {
    size_t end = n_head() + 1;
    while (end < last_user && messages_[end]["role"] != "user") ++end;
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(n_head()),
                    messages_.begin() + static_cast<std::ptrdiff_t>(end));
    last_user -= end - n_head();
    MINFER_ASSIGN_OR_RETURN(*prompt, render_tokens(messages_, true));
  }
  result->stats.n_dropped_messages = static_cast<int32_t>(n_before - messages_.size());
  result->stats.n_dropped_tokens =
      static_cast<int32_t>(old_prompt.size()) - static_cast<int32_t>(prompt->size());
  if (options_.context_shift) MINFER_RETURN_IF_ERROR(shift_cache(*prompt, result));
  result->notice = fmt::format("context full: dropped the {} oldest message(s) ({} tokens); {}",
                               result->stats.n_dropped_messages, result->stats.n_dropped_tokens,
                               result->stats.n_shifted_rows > 0
                                   ? fmt::format("{} KV rows shifted in place", result->stats.n_shifted_rows)
                                   : std::string("re-prefilling the kept history"));
  return {};
}

Status ChatSession::shift_cache(const std::vector<int32_t>& new_prompt, TurnResult* result) {
  // The cache holds head + dropped turns + kept turns; the new prompt is head + kept turns + the new one.
  // Keep the head (the system prompt, or without one everything the prompts share), then find where the
  // kept turns start in the cache: the position whose tokens match the new prompt after the head longest.
  // The dropped rows are matched by position, not by content: a reply whose text re-tokenizes differently
  // is still removed whole.
  const size_t shared = engine::common_prefix(cached_, new_prompt);
  size_t k = shared;
  if (n_head() > 0) {
    nlohmann::ordered_json head = nlohmann::ordered_json::array({messages_[0]});
    MINFER_ASSIGN_OR_RETURN(std::vector<int32_t> h, render_tokens(head, false));
    k = std::min(h.size(), shared);
  }
  if (k >= new_prompt.size()) return {};
  size_t best_end = 0, best_len = 0;
  for (size_t e = k + 1; e < cached_.size(); ++e) {
    if (cached_[e] != new_prompt[k]) continue;
    size_t len = 0;
    while (e + len < cached_.size() && k + len < new_prompt.size() && cached_[e + len] == new_prompt[k + len])
      ++len;
    if (len > best_len) {
      best_len = len;
      best_end = e;
    }
  }
  if (best_len == 0) return {};  // nothing of the kept turns is cached: the exact path costs the same

  const auto delta = static_cast<int32_t>(best_end - k);
  engine_.kv().seq_rm(options_.seq, static_cast<int32_t>(k), static_cast<int32_t>(best_end));
  if (Status st = engine_.seq_add(options_.seq, static_cast<int32_t>(best_end), -1, -delta); !st.ok()) {
    reset_sequence();
    return st;
  }
  result->stats.n_shifted_rows = static_cast<int32_t>(cached_.size() - best_end);
  cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(k),
                cached_.begin() + static_cast<std::ptrdiff_t>(best_end));
  return {};
}

}  // namespace minfer::apps
