// Helpers for splitting streamed model output at literal tags (<think>, <tool_call>): text that may be the
// start of a tag is held back until the next piece decides.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace minfer::server {

inline bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
inline size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace minfer::server
