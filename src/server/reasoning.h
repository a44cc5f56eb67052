// Reasoning split: output that opens with a `<think>...</think>` block (or a prompt that already opened one)
// puts the block's text in reasoning_content and the rest in content. Streaming-safe: a tag split across
// tokens is held back, so joined deltas equal the non-streamed split. Disabled (--reasoning-format none),
// everything is content. Text is never dropped except the tags and the whitespace right after `</think>`.
#pragma once

#include <string>
#include <string_view>

namespace minfer::server {

class ReasoningSplitter {
 public:
  struct Output {
    std::string reasoning;
    std::string content;
  };
  // starts_in_think: the prompt ended inside an open <think> (e.g. a template that forces thinking).
  explicit ReasoningSplitter(bool enabled = true, bool starts_in_think = false);
  Output push(std::string_view text);
  Output flush();

 private:
  enum class State { kStart, kThink, kAfter, kContent };
  void run(Output* out);
  bool enabled_;
  State state_;
  std::string buffer_;
};

// True when a rendered prompt ends with an open "<think>" (trailing whitespace ignored).
bool prompt_opens_think(std::string_view prompt);

}  // namespace minfer::server
