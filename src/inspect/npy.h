// numpy's .npy format, version 1.0: the 6-byte magic "\x93NUMPY", version 1.0, a little-endian uint16 header
// length, then a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
// with spaces and a final '\n' so the data starts at a multiple of 64 bytes; then the C-order data.
// Only '<f4' and '<i4' are written and read (all the engine's activations and inputs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::inspect {

// The magic, version, length and padded dict for `descr` and `shape` (outermost dimension first).
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);

// Writes header + `n_bytes` of data. kIo naming the path on failure.
Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const void* data, size_t n_bytes);

struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<float> values;  // '<i4' data converted to float
};
// Reads a file written by write_npy (or numpy for these dtypes); errors name the path and what is wrong.
Result<NpyArray> read_npy(const std::string& path);

}  // namespace minfer::inspect
