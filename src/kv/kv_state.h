// Saving and restoring sequences of the KV cache: the rows of every layer for a sequence's cells, with the
// tokens they hold, in a versioned, checksummed file that records what produced it (model, context size,
// cache type). Used by the server's --slots-file and the CLI's --session FILE.kv. It never trusts a file:
// a wrong magic, version, identity, size or checksum is a named error and the cache is left unchanged.
//
//   KvFileIdentity id{.model = "sha-of-metadata", .n_ctx = 4096, .cache_type = DType::F16};
//   std::vector<SavedSequence> seqs = {{.seq = 0, .tokens = tokens}};
//   MINFER_RETURN_IF_ERROR(save_kv_file("slots.bin", id, kv, seqs));        // temp + rename
//   MINFER_ASSIGN_OR_RETURN(auto loaded, load_kv_file("slots.bin", id, kv));  // sequences must be empty
//
// File layout (little endian): "MFKV" | u32 version | u64 payload bytes | u64 FNV-1a 64 of the payload |
// payload. Payload: identity (string model, i64 n_ctx, u32 cache type, i32 n_seq, i64 row_bytes,
// i32 n_layer) |
// u32 n_sequences | per sequence: i32 seq, u32 n_tokens, i32 tokens[n], then per layer the K rows and the
// V rows of positions 0..n-1 (row_bytes each). Strings are u32 length + bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kv/kv_cache.h"

namespace minfer::kv {

inline constexpr uint32_t kKvFileVersion = 2;  // 2: the identity records n_seq

// What a file must match to be restored into a cache.
struct KvFileIdentity {
  std::string model;  // a stable id of the weights (e.g. a hash of the GGUF metadata and tensor table)
  int64_t n_ctx = 0;
  DType cache_type = DType::F16;
  // Sequences the writer had (the server's --n-slots): a file from another count is refused, because its
  // slot i is not this run's slot i and dropping or renumbering slots would lose them silently. 0 for
  // single-sequence users (sessions), which must then match 0.
  int32_t n_seq = 0;
};

// One sequence: tokens[i] sits at position i (positions 0..n-1 must all be present in the cache).
struct SavedSequence {
  SeqId seq = 0;
  std::vector<int32_t> tokens;
};

// Writes `seqs` (their tokens and KV rows) to `path` via a temporary file and a rename.
// Fails when a sequence's cells do not cover positions 0..tokens.size()-1, or on an I/O error.
Status save_kv_file(const std::string& path, const KvFileIdentity& identity, const KvCache& kv,
                    const std::vector<SavedSequence>& seqs);

// Reads `path`, checks it against `identity` and the cache's geometry, and restores each sequence into
// fresh cells (the sequences must be empty in `kv`). Errors name the cause: "not a minfer KV file",
// "version 7 (this build reads 1)", "saved for model X", "n_ctx 2048 != 4096", "cache type", "4 sequences
// (--n-slots)", "truncated", "checksum mismatch", "KV cache full". On any error the cache is unchanged.
Result<std::vector<SavedSequence>> load_kv_file(const std::string& path, const KvFileIdentity& identity,
                                                KvCache& kv);

}  // namespace minfer::kv
