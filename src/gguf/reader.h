// GGUF reader: parses an untrusted byte buffer (parse) or mmaps a file and its split parts (File::open).
// Every malformation is a Status naming the field and byte offset; nothing is trusted before it is
// bounds-checked, and no allocation is sized from a header count without checking it against the bytes left.
//
//   MINFER_ASSIGN_OR_RETURN(gguf::File file, gguf::File::open("model.gguf"));
//   const gguf::TensorInfo* t = file.find_tensor("token_embd.weight");  // t->data points into the mapping
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "gguf/format.h"
#include "gguf/metadata.h"

namespace minfer::gguf {

struct Parsed {
  uint32_t version = 0;
  Metadata metadata;
  std::vector<TensorInfo> tensors;  // file order; data pointers set into `bytes`
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // absolute start of the data section
};

// Parses one GGUF part held in memory. `name` only labels errors. Never reads outside `bytes`.
Result<Parsed> parse(std::span<const uint8_t> bytes, std::string_view name);

// An opened GGUF model: one file, or all parts of a split model merged into one tensor index.
// Metadata is the first part's. Tensor data stays in the read-only mappings owned here.
class File {
 public:
  // Opens `path`; if it is named `<stem>-0000K-of-0000N.gguf`, opens all N parts (any K works).
  static Result<File> open(const std::string& path);

  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t n_parts() const { return parts_.size(); }
  const std::string& part_path(size_t i) const { return parts_[i].path(); }
  uint64_t part_size(size_t i) const { return parts_[i].size(); }
  uint64_t data_offset(size_t part) const { return data_offsets_[part]; }

 private:
  std::vector<MappedFile> parts_;
  std::vector<uint64_t> data_offsets_;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
};

}  // namespace minfer::gguf
