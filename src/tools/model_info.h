// `minfer info`: a report of a GGUF file's metadata, tensor table, totals and hyperparameters.
// Touches only the header (metadata and tensor infos), never tensor data, so it is instant on any size.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"

namespace minfer::tools {

struct InfoOptions {
  size_t array_preview = 3;  // elements shown from each end of a long array
  bool show_tensors = true;
};

nlohmann::ordered_json info_json(const gguf::File& file, const InfoOptions& options = {});
std::string info_text(const gguf::File& file, const InfoOptions& options = {});

}  // namespace minfer::tools
