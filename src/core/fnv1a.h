// FNV-1a, 64-bit: the checksum and identity hash of minfer's own files (KV state and slots files, chat
// sessions, KLD base files). It detects corruption and mismatched inputs; it is not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minfer {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;

// The hash `h` continued over `n` bytes at `data` (a new hash starts from kFnv1aOffset).
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace minfer
