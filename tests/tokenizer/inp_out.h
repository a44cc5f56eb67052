// Readers for llama.cpp's tokenizer test-vector format: `.inp` strings each followed by
// "\n__ggml_vocab_test__\n", `.out` one line of space-prefixed ids per string.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/fixtures.h"

namespace minfer::tokenizer::tok_test {

inline std::vector<std::string> read_inp(const std::string& path) {
  const std::string data = minfer::test::read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t m; (m = data.find(sep, pos)) != std::string::npos; pos = m + sep.size()) {
    out.push_back(data.substr(pos, m - pos));
  }
  return out;
}

inline std::vector<std::vector<int32_t>> read_out(const std::string& path) {
  std::istringstream in(minfer::test::read_file(path));
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

inline std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) s += fmt::format(" {}", id);
  return s;
}

}  // namespace minfer::tokenizer::tok_test
