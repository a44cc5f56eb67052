// `minfer split` / `minfer merge`: cut a GGUF model into llama-gguf-split parts and join them again.
// Tensor bytes are copied verbatim and a tensor never straddles parts; merging the parts of a file
// gives back that file byte for byte (both sides use ggml's layout rules through gguf::Writer).
//
//   tools::SplitOptions o{.input = "m.gguf", .output_prefix = "out/m", .max_bytes = 200'000'000};
//   MINFER_ASSIGN_OR_RETURN(auto parts, tools::split_model(o));   // out/m-00001-of-0000K.gguf ...
//   MINFER_RETURN_IF_ERROR(tools::merge_model(parts[0], "m2.gguf"));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::tools {

struct SplitOptions {
  std::string input;          // a single GGUF file (a split model is refused: merge it first)
  std::string output_prefix;  // parts are `<prefix>-%05d-of-%05d.gguf`
  // Exactly one limit: a part holds at most max_tensors tensors, or at most max_bytes of tensor data
  // (each tensor counted padded to the alignment, metadata not counted, as llama-gguf-split does). A
  // single tensor larger than max_bytes gets a part of its own.
  uint64_t max_bytes = 0;
  int max_tensors = 0;
  // Called once per part written: (1-based index, count, path).
  std::function<void(int, int, const std::string&)> on_part;
};

// Parses llama-gguf-split's size argument: a number with an optional K, M or G suffix in powers of 1000
// ("200M" = 200'000'000). Fails on anything else, naming the text.
Result<uint64_t> parse_split_size(const std::string& text);

// Writes the parts (each atomically) and returns their paths in order. The first part carries all of the
// input's metadata, every part carries split.no (u16, 0-based), split.count (u16) and
// split.tensors.count (i32). Fails, naming the cause, on an unreadable input, no or two limits, more
// than 99999 parts, or an I/O error.
Result<std::vector<std::string>> split_model(const SplitOptions& options);

// Joins the parts of a split model (any part's path names the set) into one file at `output`, without
// the split.* keys: the inverse of split_model. Refuses an output that is one of the parts, and a file
// that is not part of a split model (no split.count), naming it.
Status merge_model(const std::string& any_part, const std::string& output);

}  // namespace minfer::tools
