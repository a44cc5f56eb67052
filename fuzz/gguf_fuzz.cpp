// libFuzzer target: gguf::parse on arbitrary bytes must return a Status or a valid parse, never crash.
#include <cstddef>
#include <cstdint>

#include "gguf/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = minfer::gguf::parse({data, size}, "fuzz");
  if (parsed.ok()) {
    // Touch every tensor's bytes: an accepted file must not point outside the buffer.
    volatile uint8_t sink = 0;
    for (const auto& t : parsed->tensors) {
      if (t.n_bytes > 0) sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
    }
  }
  return 0;
}
