// A read-only memory mapping of a whole file. Tensors are views into it: nothing is copied to the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace minfer {

class MappedFile {
 public:
  // Maps `path` read-only (PROT_READ, MAP_SHARED). An empty file maps to an empty span.
  // Fails with kNotFound / kIo naming the path and the OS error.
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Drops the resident pages of [p, p + n) (page-aligned inward) from this process: for a read-only file
// mapping the data stays in the file and faults back in if read again. Used once a weight has been
// repacked onto the heap, so the model is not counted twice in the resident set.
void release_pages(const void* p, size_t n);

}  // namespace minfer
