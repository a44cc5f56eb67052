// Reader for Hugging Face safetensors checkpoints, mmapped: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the raw bytes
// (offsets relative to the end of the header). Every offset and size is checked against the file before
// a tensor is exposed, so a header that lies is refused and nothing is read out of bounds.
//
//   MINFER_ASSIGN_OR_RETURN(tools::Checkpoint ckpt, tools::Checkpoint::open("hf_dir"));
//   const tools::StTensor* t = ckpt.find("model.embed_tokens.weight");   // t->data: view into a mapping
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace minfer::tools {

struct StTensor {
  std::string name;
  std::string dtype;           // as in the file: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;  // row-major, outermost first (PyTorch order: Linear is [out, in])
  std::span<const uint8_t> data;
  std::string file;  // the shard holding it
};

// Byte size of one element of a safetensors dtype; 0 for an unknown dtype.
size_t safetensors_dtype_size(const std::string& dtype);

// Parses one safetensors file held in memory (tensor views point into `bytes`). `name` labels errors.
Result<std::vector<StTensor>> parse_safetensors(std::span<const uint8_t> bytes, const std::string& name);

// A checkpoint folder: `model.safetensors`, or the shards listed by `model.safetensors.index.json`
// (its weight_map must agree with what each shard holds).
class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& dir);

  const StTensor* find(const std::string& name) const;
  const std::map<std::string, StTensor>& tensors() const { return tensors_; }

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, StTensor> tensors_;
};

}  // namespace minfer::tools
