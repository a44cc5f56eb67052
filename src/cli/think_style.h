// Dims Qwen3-style <think>…</think> reasoning in streamed reply text with ANSI escapes. Text arrives in
// arbitrary pieces, so a piece ending in a partial tag is held back until the tag resolves.
#pragma once

#include <string>
#include <string_view>

namespace minfer::cli {

class ThinkStyler {
 public:
  static constexpr std::string_view kDim = "\x1b[2m";
  static constexpr std::string_view kReset = "\x1b[0m";

  // `color` off: push() returns its input unchanged and nothing is held back.
  explicit ThinkStyler(bool color) : color_(color) {}
  // Returns the text that is safe to print now, with the dim/reset escapes around think blocks.
  std::string push(std::string_view text);
  // Releases held-back text and resets the colour if a block was left open (end of a reply).
  std::string finish();

 private:
  bool color_;
  bool in_think_ = false;
  std::string pending_;
};

}  // namespace minfer::cli
