// The KL-divergence base file: a base model's per-token distributions over the scored positions of a text
// (`minfer perplexity --kl-divergence-base FILE`), read back by `--kl-divergence` to compare another model
// with it. Versioned and checked: it records the vocabulary, the text's tokens and n_ctx it was computed
// with, and a file from another vocabulary, text or n_ctx, or a corrupted one, is refused by name.
//
// Layout (little endian):
//   header: "MFKL" | u32 version | i32 n_ctx | i32 n_vocab | i32 n_chunk | i32 n_scored | u64 vocab hash |
//           u64 text tokens hash | i64 n_text_tokens | i32 tokens[n_chunk * n_ctx] (the evaluated chunks,
//           before any BOS replacement) | u64 FNV-1a 64 of the header bytes before it
//   then per chunk: n_scored rows of base_row_bytes(n_vocab) (perplexity.h) | u64 FNV-1a 64 of those rows
// Each chunk is checked when it is read, so a run on a corrupted file stops at the first bad chunk, before
// using it; a file of the wrong size is refused when opened.
//
//   MINFER_ASSIGN_OR_RETURN(auto w, KldBaseWriter::create("base.kld", info));  // writes base.kld.tmp
//   for (...) MINFER_RETURN_IF_ERROR(w.write_chunk(rows));                     // n_scored rows each
//   MINFER_RETURN_IF_ERROR(w.finish());                                          // renames to base.kld
//   MINFER_ASSIGN_OR_RETURN(auto r, KldBaseReader::open("base.kld"));
//   MINFER_RETURN_IF_ERROR(r.check({.n_vocab = ..., .vocab_hash = ...}));
//   MINFER_ASSIGN_OR_RETURN(std::span<const uint8_t> rows, r.read_chunk(0));
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::apps {

inline constexpr uint32_t kKldBaseVersion = 1;

struct KldBaseInfo {
  int32_t n_ctx = 0;
  int32_t n_vocab = 0;
  int32_t n_chunk = 0;
  int32_t n_scored = 0;     // rows per chunk: n_ctx - 1 - n_ctx/2
  uint64_t vocab_hash = 0;  // vocab_hash (perplexity.h) of the base model
  uint64_t text_hash = 0;   // tokens_hash of the whole tokenized text
  int64_t n_text_tokens = 0;
  std::vector<int32_t> tokens;  // n_chunk * n_ctx: the chunks as tokenized, without BOS replacement
};

// What a reader's file must match. Empty optionals are not checked (e.g. no -f: the file's own tokens).
struct KldBaseExpect {
  int32_t n_vocab = 0;
  uint64_t vocab_hash = 0;
  std::optional<int32_t> n_ctx;
  std::optional<uint64_t> text_hash;
};

class KldBaseWriter {
 public:
  // Opens path + ".tmp" and writes the header. Fails on an I/O error or inconsistent sizes.
  static Result<KldBaseWriter> create(const std::string& path, const KldBaseInfo& info);
  // Appends one chunk: exactly n_scored * base_row_bytes(n_vocab) bytes.
  Status write_chunk(std::span<const uint8_t> rows);
  // After n_chunk chunks: flushes and renames the temporary file to `path`.
  Status finish();
  // An unfinished writer removes its temporary file.
  ~KldBaseWriter();
  KldBaseWriter(KldBaseWriter&&) = default;
  KldBaseWriter& operator=(KldBaseWriter&&) = delete;

 private:
  KldBaseWriter() = default;
  std::string path_;
  KldBaseInfo info_;
  std::unique_ptr<std::ofstream> out_;  // null once finished (or moved from)
  int32_t written_ = 0;
};

class KldBaseReader {
 public:
  // Reads and checks the header: errors say "not a minfer KL-divergence base file", "version N (this
  // build reads 1)", "header checksum mismatch", "truncated" or "trailing bytes" (a size other than the
  // header promises), each naming the file.
  static Result<KldBaseReader> open(const std::string& path);
  const KldBaseInfo& info() const { return info_; }
  // Refuses a file for another vocabulary ("vocabulary"), n_ctx ("n_ctx") or text ("text"), by name.
  Status check(const KldBaseExpect& expect) const;
  // The rows of the next chunk (chunks are read in order), after checking its checksum ("chunk N is
  // corrupted"). The span stays valid until the next call.
  Result<std::span<const uint8_t>> read_chunk();

 private:
  std::string path_;
  KldBaseInfo info_;
  std::ifstream in_;
  int32_t read_ = 0;
  std::vector<uint8_t> rows_;
};

}  // namespace minfer::apps
