// A multi-turn conversation on one KV sequence: the messages, the tokens the sequence holds, and the
// turn logic (render with the model's template → keep the longest cached prefix → prefill only the rest →
// engine::generate), context shift on overflow, /regen and /clear, and saving/resuming a session (messages as
// JSON plus a FILE.kv companion). No terminal code here: the CLI's REPL drives it, tests drive it directly.
//
//   ChatSession chat(engine, tmpl, {.system = "You are terse."});
//   engine::GenerateOptions gen;  gen.n_predict = 128;
//   MINFER_ASSIGN_OR_RETURN(TurnResult r, chat.send("Hi", gen, print));   // r.stats.n_prefilled, n_cached
//   MINFER_ASSIGN_OR_RETURN(r, chat.send("And then?", gen, print));       // prefills only the new turn
//   MINFER_RETURN_IF_ERROR(chat.save("chat.json"));                       // + chat.json.kv
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/speculative.h"

namespace minfer::apps {

struct ChatSessionOptions {
  std::string system;  // the system prompt (empty: none); kept by clear() and by every context shift
  kv::SeqId seq = 0;
  // On overflow, remove the dropped turns' KV rows in place and shift the rest down (K re-rotated). Off:
  // the exact path, re-prefilling the kept history after the dropped turns (MINFER_NO_CONTEXT_SHIFT=1).
  bool context_shift = true;
  // Variables the template sees besides messages (bos_token, eos_token, enable_thinking, ...).
  nlohmann::ordered_json template_vars = nlohmann::ordered_json::object();
};

// What one turn cost and what the context shift did.
struct TurnStats {
  int32_t n_prefilled = 0;  // prompt tokens evaluated this turn
  int32_t n_cached = 0;     // prompt tokens reused from the KV cache
  int32_t n_dropped_messages = 0;
  int32_t n_dropped_tokens = 0;  // tokens of the dropped turns (rows removed by the shift)
  int32_t n_shifted_rows = 0;    // rows moved to new positions (0 on the exact path)
};

struct TurnResult {
  engine::GenerateResult generation;
  TurnStats stats;
  engine::SpecStats spec;  // with a drafter
  std::string notice;      // a one-line context-shift notice, empty when nothing was dropped
};

// How a session file was resumed.
struct ResumeInfo {
  int32_t n_messages = 0;  // messages restored from the JSON (system prompt included)
  int32_t n_kv_rows = 0;   // KV rows restored from FILE.kv (0 on the fallback)
  std::string fallback;    // why FILE.kv was not used (empty when it was)
};

class ChatSession {
 public:
  // `engine` must outlive the session; the session owns sequence options.seq and clears it first.
  ChatSession(engine::Engine& engine, chat::ChatTemplate tmpl, ChatSessionOptions options);

  // Adds a user message and generates the reply (appended as the assistant message, even when cut short
  // by a stop or cancellation). Fails, leaving the conversation unchanged, when the message alone (with
  // the system prompt and template) does not fit the context ("... N tokens ... context holds M"), on a
  // template error or on an engine error (the KV sequence is then cleared and re-prefilled next turn).
  Result<TurnResult> send(std::string_view user, const engine::GenerateOptions& gen,
                          const std::function<void(std::string_view)>& on_text = {});
  // Drops the last reply and generates it again with a different seed. Fails when there is no reply yet.
  Result<TurnResult> regenerate(const engine::GenerateOptions& gen,
                                const std::function<void(std::string_view)>& on_text = {});
  // Speculative decoding for every later turn (null: off). The drafter must outlive the session; a model
  // drafter's cache follows the conversation like the session's (only what changed is evaluated).
  void set_drafter(engine::Drafter* drafter, const engine::SpecOptions& spec) {
    drafter_ = drafter;
    spec_ = spec;
  }
  // Forgets the conversation but keeps the system prompt (whose KV rows are reused by the next turn).
  void clear();

  // Writes `path` (messages as JSON, system prompt included) and `path`.kv (the KV rows and their
  // tokens, through kv::save_kv_file), each via a temporary file and a rename.
  Status save(const std::string& path) const;
  // Replaces the conversation with the one saved at `path`. A matching `path`.kv restores the KV rows
  // with nothing prefilled; any mismatch (model, context size, cache type, version, an edited JSON, a
  // truncated or corrupt file) is reported in ResumeInfo::fallback and the messages are re-rendered at
  // the next turn instead. Fails only when the JSON itself cannot be read or parsed.
  Result<ResumeInfo> resume(const std::string& path);

  const nlohmann::ordered_json& messages() const { return messages_; }
  // The tokens the KV sequence holds, position i = cached_tokens()[i].
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  // The prompt tokens of the conversation as it stands plus a generation prompt (what the next
  // generation would be conditioned on after a user message) — for tests and tools.
  Result<std::vector<int32_t>> render_tokens(const nlohmann::ordered_json& messages,
                                             bool add_generation_prompt) const;

 private:
  Result<TurnResult> run_turn(const engine::GenerateOptions& gen,
                              const std::function<void(std::string_view)>& on_text);
  // Drops the oldest turns until `prompt` + reserve fits; shifts or trims the cache. Fills stats/notice.
  Status fit_context(std::vector<int32_t>* prompt, int32_t reserve, TurnResult* result);
  Status shift_cache(const std::vector<int32_t>& new_prompt, TurnResult* result);
  void reset_sequence();
  size_t n_head() const { return options_.system.empty() ? 0 : 1; }

  engine::Engine& engine_;
  chat::ChatTemplate template_;
  ChatSessionOptions options_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();  // [{role, content}], system first
  std::vector<int32_t> cached_;                                        // tokens at positions 0..n-1
  uint64_t n_regenerations_ = 0;
  engine::Drafter* drafter_ = nullptr;
  engine::SpecOptions spec_;
};

}  // namespace minfer::apps
