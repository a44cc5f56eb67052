// ReasoningSplitter: a four-state machine over the generated text (see reasoning.h).
#include "server/reasoning.h"

#include <algorithm>

#include "server/tag_scan.h"

namespace minfer::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool enabled, bool starts_in_think)
    : enabled_(enabled),
      state_(!enabled          ? State::kContent
             : starts_in_think ? State::kThink
                               : State::kStart) {}

ReasoningSplitter::Output ReasoningSplitter::push(std::string_view text) {
  Output out;
  if (state_ == State::kContent) {
    out.content.assign(text);
    return out;
  }
  buffer_.append(text);
  run(&out);
  return out;
}

void ReasoningSplitter::run(Output* out) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t i = 0;
        while (i < buffer_.size() && is_space(buffer_[i])) ++i;
        std::string_view rest = std::string_view(buffer_).substr(i);
        if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return;  // undecided
        if (rest.substr(0, kOpen.size()) == kOpen) {
          buffer_.erase(0, i + kOpen.size());
          state_ = State::kThink;
          continue;
        }
        state_ = State::kContent;
        out->content += buffer_;
        buffer_.clear();
        return;
      }
      case State::kThink: {
        const size_t close = buffer_.find(kClose);
        if (close != std::string::npos) {
          out->reasoning += buffer_.substr(0, close);
          buffer_.erase(0, close + kClose.size());
          state_ = State::kAfter;
          continue;
        }
        const size_t keep = partial_tag_suffix(buffer_, kClose);
        out->reasoning += buffer_.substr(0, buffer_.size() - keep);
        buffer_.erase(0, buffer_.size() - keep);
        return;
      }
      case State::kAfter: {
        size_t i = 0;
        while (i < buffer_.size() && is_space(buffer_[i])) ++i;
        buffer_.erase(0, i);
        if (buffer_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out->content += buffer_;
        buffer_.clear();
        return;
    }
  }
}

ReasoningSplitter::Output ReasoningSplitter::flush() {
  Output out;
  if (state_ == State::kThink) {
    out.reasoning = std::move(buffer_);  // an unterminated block is still reasoning
  } else if (state_ != State::kAfter) {
    out.content = std::move(buffer_);
  }
  buffer_.clear();
  return out;
}

bool prompt_opens_think(std::string_view prompt) {
  while (!prompt.empty() && is_space(prompt.back())) prompt.remove_suffix(1);
  if (prompt.size() < kOpen.size() || prompt.substr(prompt.size() - kOpen.size()) != kOpen) return false;
  return true;
}

}  // namespace minfer::server
