#include "gguf/split.h"

#include <cctype>

#include <fmt/format.h>

namespace minfer::gguf {

std::optional<SplitName> parse_split_path(const std::string& path) {
  // Suffix: "-" 5+ digits "-of-" 5+ digits ".gguf"
  static constexpr std::string_view kExt = ".gguf";
  if (path.size() < kExt.size() || path.compare(path.size() - kExt.size(), kExt.size(), kExt) != 0) {
    return std::nullopt;
  }
  size_t end = path.size() - kExt.size();
  auto read_digits_back = [&](size_t stop, size_t* start) {
    size_t i = stop;
    while (i > 0 && std::isdigit(static_cast<unsigned char>(path[i - 1]))) --i;
    *start = i;
    return stop - i;
  };
  size_t count_start = 0;
  size_t n_count = read_digits_back(end, &count_start);
  static constexpr std::string_view kOf = "-of-";
  if (n_count < 5 || n_count > 9 || count_start < kOf.size() ||
      path.compare(count_start - kOf.size(), kOf.size(), kOf) != 0) {
    return std::nullopt;
  }
  size_t index_end = count_start - kOf.size();
  size_t index_start = 0;
  size_t n_index = read_digits_back(index_end, &index_start);
  if (n_index < 5 || n_index > 9 || index_start < 2 || path[index_start - 1] != '-') return std::nullopt;  // stem non-empty
  SplitName out;
  out.stem = path.substr(0, index_start - 1);
  out.index = std::stoi(path.substr(index_start, n_index));
  out.count = std::stoi(path.substr(count_start, n_count));
  if (out.index < 1 || out.count < 1 || out.index > out.count) return std::nullopt;
  return out;
}

std::string split_path(const std::string& stem, int index, int count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", stem, index, count);
}

}  // namespace minfer::gguf
