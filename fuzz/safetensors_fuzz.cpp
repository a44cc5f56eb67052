// libFuzzer target: a safetensors file (what `minfer convert` reads from a downloaded checkpoint). Parsing
// must return a Status or tensors whose views lie inside the input with sizes that match dtype x shape.
#include <cstddef>
#include <cstdint>
#include <span>

#include "tools/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 16)) return 0;
  const std::span<const uint8_t> bytes(data, size);
  auto tensors = minfer::tools::parse_safetensors(bytes, "fuzz.safetensors");
  if (!tensors.ok()) return 0;
  for (const minfer::tools::StTensor& t : *tensors) {
    if (t.data.data() < data || t.data.data() + t.data.size() > data + size) __builtin_trap();
    const size_t element = minfer::tools::safetensors_dtype_size(t.dtype);
    size_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) __builtin_trap();
      n *= static_cast<size_t>(d);
    }
    if (element != 0 && n * element != t.data.size()) __builtin_trap();
    volatile uint8_t sink = 0;
    for (uint8_t b : t.data) sink = sink ^ b;  // every byte of every view is readable
    (void)sink;
  }
  return 0;
}
