// Split-model naming (llama.cpp's gguf-split convention): `<stem>-00001-of-00003.gguf`.
// Part metadata keys: split.no (u16, 0-based), split.count (u16), split.tensors.count (i32).
#pragma once

#include <optional>
#include <string>

namespace minfer::gguf {

inline constexpr char kSplitNoKey[] = "split.no";
inline constexpr char kSplitCountKey[] = "split.count";
inline constexpr char kSplitTensorsCountKey[] = "split.tensors.count";

struct SplitName {
  std::string stem;  // path without the `-0000K-of-0000N.gguf` suffix
  int index = 0;     // 1-based, as in the file name
  int count = 0;
};

// Recognises a split part's path; nullopt for an ordinary file name.
std::optional<SplitName> parse_split_path(const std::string& path);
// `<stem>-%05d-of-%05d.gguf` for 1-based `index`.
std::string split_path(const std::string& stem, int index, int count);

}  // namespace minfer::gguf
