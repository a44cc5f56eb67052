// GGUF v3 writer: metadata in insertion order, tensor infos, aligned and zero-padded data, written
// atomically (temp file + rename). Reading a file and writing it back gives the same bytes, because the
// layout rules are ggml's: each tensor at the next multiple of general.alignment, padded with zeros.
//
//   gguf::Writer w;
//   w.metadata().set("general.architecture", gguf::Value::string("qwen2"));
//   MINFER_RETURN_IF_ERROR(w.add_tensor("token_embd.weight", DType::F32, {64, 256}, bytes));
//   MINFER_RETURN_IF_ERROR(w.write("tiny.gguf"));
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/format.h"
#include "gguf/metadata.h"

namespace minfer::gguf {

class Writer {
 public:
  // Produces a tensor's bytes when the writer reaches it (lets quantize stream a large model).
  using Producer = std::function<Result<std::vector<uint8_t>>()>;
  // Called after each tensor is written: (index, count).
  using Progress = std::function<void(size_t, size_t)>;

  Metadata& metadata() { return metadata_; }
  const Metadata& metadata() const { return metadata_; }

  // `data` is borrowed and must stay valid until write(); its size must equal the type's byte size
  // for `ne` (ggml order, fastest first). Fails on a duplicate name or a size mismatch.
  Status add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::span<const uint8_t> data);
  Status add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> data);
  Status add_tensor(std::string name, DType type, std::vector<int64_t> ne, Producer producer);

  size_t n_tensors() const { return tensors_.size(); }

  // Writes `path` via `path.tmp` + rename, so an interrupted write never leaves a partial file behind.
  // `producers_ahead` > 1 runs that many tensors' producers at once, on their own threads, ahead of the
  // one being written (the bytes are the same; at most that many tensors are held in memory). Only for
  // producers that share no mutable state, such as make-model's, each drawing from its own seed.
  Status write(const std::string& path, const Progress& progress = {}, int producers_ahead = 1) const;
  // The whole file in memory (tests, fuzz seeds).
  Result<std::vector<uint8_t>> to_bytes() const;

 private:
  struct Pending {
    TensorInfo info;
    std::span<const uint8_t> view;
    std::vector<uint8_t> owned;
    Producer producer;
  };
  Status add(std::string name, DType type, std::vector<int64_t> ne, Pending pending);
  Status emit(const std::function<Status(const void*, size_t)>& sink, const Progress& progress,
              int producers_ahead = 1) const;

  Metadata metadata_;
  std::vector<Pending> tensors_;
};

}  // namespace minfer::gguf
