// ThinkStyler: a two-state scanner (outside / inside a think block) over streamed text.
#include "cli/think_style.h"

namespace minfer::cli {

std::string ThinkStyler::push(std::string_view text) {
  if (!color_) return std::string(text);
  pending_.append(text);
  std::string out;
  for (;;) {
    const std::string_view tag = in_think_ ? "</think>" : "<think>";
    const size_t at = pending_.find(tag);
    if (at == std::string::npos) break;
    out.append(pending_, 0, at);
    if (!in_think_) {
      out.append(kDim);
      out.append(tag);
    } else {
      out.append(tag);
      out.append(kReset);
    }
    in_think_ = !in_think_;
    pending_.erase(0, at + tag.size());
  }
  // Hold back the longest tail that could still become the tag.
  const std::string_view tag = in_think_ ? "</think>" : "<think>";
  size_t keep = 0;
  for (size_t len = std::min(tag.size() - 1, pending_.size()); len > 0; --len) {
    if (std::string_view(pending_).substr(pending_.size() - len) == tag.substr(0, len)) {
      keep = len;
      break;
    }
  }
  out.append(pending_, 0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string ThinkStyler::finish() {
  std::string out;
  out.swap(pending_);
  if (in_think_) out.append(kReset);
  in_think_ = false;
  return out;
}

}  // namespace minfer::cli
