// Writing and reading the KL-divergence base file (layout in perplexity_base_file.h). Written through a
// temporary file and a rename, so an interrupted run never leaves a file that looks complete.
#include "apps/perplexity_base_file.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "apps/perplexity.h"
#include "core/fnv1a.h"

namespace minfer::apps {
namespace {

constexpr char kMagic[4] = {'M', 'F', 'K', 'L'};
// magic, version, n_ctx, n_vocab, n_chunk, n_scored, vocab hash, text hash, n_text_tokens
constexpr size_t kFixedHeaderBytes = 4 + 4 + 4 * 4 + 8 + 8 + 8;

// resize + memcpy rather than insert of the value's bytes: GCC 12 at -O2 (the tsan preset) reports a false
// -Warray-bounds on the inlined insert.
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <typename T>
T get(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

size_t chunk_bytes(const KldBaseInfo& info) {
  return static_cast<size_t>(info.n_scored) * base_row_bytes(info.n_vocab);
}

std::string hex(uint64_t v) {
  return fmt::format("{:016x}", v);
}

}  // namespace

Result<KldBaseWriter> KldBaseWriter::create(const std::string& path, const KldBaseInfo& info) {
  if (info.n_ctx < 4 || info.n_vocab < 1 || info.n_chunk < 1 ||
      info.n_scored != info.n_ctx - 1 - info.n_ctx / 2 ||
      info.tokens.size() != static_cast<size_t>(info.n_chunk) * static_cast<size_t>(info.n_ctx)) {
    return invalid_argument(
        "KL-divergence base '{}': inconsistent header (n_ctx {}, n_vocab {}, {} chunks, {} tokens)", path,
        info.n_ctx, info.n_vocab, info.n_chunk, info.tokens.size());
  }
  std::vector<uint8_t> header(kMagic, kMagic + 4);
  put(header, kKldBaseVersion);
  put(header, info.n_ctx);
  put(header, info.n_vocab);
  put(header, info.n_chunk);
  put(header, info.n_scored);
  put(header, info.vocab_hash);
  put(header, info.text_hash);
  put(header, info.n_text_tokens);
  const auto* tok = reinterpret_cast<const uint8_t*>(info.tokens.data());
  header.insert(header.end(), tok, tok + info.tokens.size() * sizeof(int32_t));
  put(header, fnv1a(header.data(), header.size()));

  KldBaseWriter w;
  w.path_ = path;
  w.info_ = info;
  w.out_ = std::make_unique<std::ofstream>(path + ".tmp", std::ios::binary | std::ios::trunc);
  if (!*w.out_) return io_error("KL-divergence base '{}': cannot write '{}.tmp'", path, path);
  w.out_->write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  if (!*w.out_) return io_error("KL-divergence base '{}': cannot write '{}.tmp'", path, path);
  return w;
}

KldBaseWriter::~KldBaseWriter() {
  if (out_ != nullptr) {
    out_.reset();
    std::remove((path_ + ".tmp").c_str());
  }
}

Status KldBaseWriter::write_chunk(std::span<const uint8_t> rows) {
  if (out_ == nullptr || rows.size() != chunk_bytes(info_) || written_ >= info_.n_chunk) {
    return invalid_argument("KL-divergence base '{}': chunk {} has {} bytes, expected {} (of {} chunks)",
                            path_, written_, rows.size(), chunk_bytes(info_), info_.n_chunk);
  }
  out_->write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size()));
  const uint64_t sum = fnv1a(rows.data(), rows.size());
  out_->write(reinterpret_cast<const char*>(&sum), sizeof(sum));
  if (!*out_) return io_error("KL-divergence base '{}': cannot write '{}.tmp'", path_, path_);
  ++written_;
  return {};
}

Status KldBaseWriter::finish() {
  if (out_ == nullptr || written_ != info_.n_chunk) {
    return invalid_argument("KL-divergence base '{}': {} of {} chunks written", path_, written_,
                            info_.n_chunk);
  }
  out_->flush();
  const bool ok = static_cast<bool>(*out_);
  out_.reset();
  const std::string tmp = path_ + ".tmp";
  if (!ok) {
    std::remove(tmp.c_str());
    return io_error("KL-divergence base '{}': cannot write '{}'", path_, tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path_, ec);
  if (ec) return io_error("KL-divergence base: cannot rename '{}' to '{}': {}", tmp, path_, ec.message());
  return {};
}

Result<KldBaseReader> KldBaseReader::open(const std::string& path) {
  auto fail = [&](const std::string& why) {
    return invalid_argument("KL-divergence base '{}': {}", path, why);
  };
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return not_found("KL-divergence base '{}': cannot open: {}", path, ec.message());
  KldBaseReader r;
  r.path_ = path;
  r.in_.open(path, std::ios::binary);
  if (!r.in_) return not_found("KL-divergence base '{}': cannot open", path);
  std::vector<uint8_t> fixed(kFixedHeaderBytes);
  if (size < kFixedHeaderBytes ||
      !r.in_.read(reinterpret_cast<char*>(fixed.data()), static_cast<std::streamsize>(fixed.size())) ||
      std::memcmp(fixed.data(), kMagic, 4) != 0) {
    return fail(
        "not a minfer KL-divergence base file (write one with --kl-divergence-base FILE without "
        "--kl-divergence)");
  }
  const uint8_t* p = fixed.data() + 4;
  const auto version = get<uint32_t>(p);
  if (version != kKldBaseVersion) {
    return fail(fmt::format("format version {} (this build reads {})", version, kKldBaseVersion));
  }
  KldBaseInfo& info = r.info_;
  info.n_ctx = get<int32_t>(p);
  info.n_vocab = get<int32_t>(p);
  info.n_chunk = get<int32_t>(p);
  info.n_scored = get<int32_t>(p);
  info.vocab_hash = get<uint64_t>(p);
  info.text_hash = get<uint64_t>(p);
  info.n_text_tokens = get<int64_t>(p);
  // Sizes are checked against the file size before anything is allocated from them.
  const bool sane = info.n_ctx >= 4 && info.n_vocab >= 1 && info.n_chunk >= 1 &&
                    info.n_scored == info.n_ctx - 1 - info.n_ctx / 2 && info.n_ctx <= (1 << 24) &&
                    info.n_vocab <= (1 << 24) && info.n_chunk <= (1 << 24);
  if (!sane ||
      static_cast<long double>(info.n_chunk) * static_cast<long double>(chunk_bytes(info) + 8) > 1e18L) {
    return fail("corrupted header (impossible sizes)");
  }
  const uint64_t n_tokens = static_cast<uint64_t>(info.n_chunk) * static_cast<uint64_t>(info.n_ctx);
  const uint64_t header_bytes = kFixedHeaderBytes + n_tokens * 4 + 8;
  const uint64_t expected = header_bytes + static_cast<uint64_t>(info.n_chunk) * (chunk_bytes(info) + 8);
  if (size < expected) {
    return fail(fmt::format("truncated: {} bytes, its header promises {}", size, expected));
  }
  if (size > expected) {
    return fail(fmt::format("trailing bytes: {} bytes, its header promises {}", size, expected));
  }
  info.tokens.resize(n_tokens);
  uint64_t stored = 0;
  r.in_.read(reinterpret_cast<char*>(info.tokens.data()), static_cast<std::streamsize>(n_tokens * 4));
  r.in_.read(reinterpret_cast<char*>(&stored), sizeof(stored));
  if (!r.in_) return fail("truncated header");
  uint64_t h = fnv1a(fixed.data(), fixed.size());
  h = fnv1a(info.tokens.data(), n_tokens * 4, h);
  if (h != stored) return fail("header checksum mismatch (the file is corrupted)");
  for (int32_t t : info.tokens) {
    if (t < 0 || t >= info.n_vocab) return fail(fmt::format("token id {} out of range", t));
  }
  return r;
}

Status KldBaseReader::check(const KldBaseExpect& e) const {
  auto refuse = [&](const std::string& why) {
    return invalid_argument("KL-divergence base '{}' was computed {}", path_, why);
  };
  if (info_.n_vocab != e.n_vocab || info_.vocab_hash != e.vocab_hash) {
    return refuse(fmt::format("with another vocabulary ({} tokens, hash {}; this model: {} tokens, hash {})",
                              info_.n_vocab, hex(info_.vocab_hash), e.n_vocab, hex(e.vocab_hash)));
  }
  if (e.n_ctx && *e.n_ctx != info_.n_ctx) {
    return refuse(fmt::format("with n_ctx {}, not {} (-c)", info_.n_ctx, *e.n_ctx));
  }
  if (e.text_hash && *e.text_hash != info_.text_hash) {
    return refuse(fmt::format("on another text ({} tokens, hash {}; this text hashes to {})",
                              info_.n_text_tokens, hex(info_.text_hash), hex(*e.text_hash)));
  }
  return {};
}

Result<std::span<const uint8_t>> KldBaseReader::read_chunk() {
  if (read_ >= info_.n_chunk) {
    return invalid_argument("KL-divergence base '{}': only {} chunks", path_, info_.n_chunk);
  }
  rows_.resize(chunk_bytes(info_));
  uint64_t stored = 0;
  in_.read(reinterpret_cast<char*>(rows_.data()), static_cast<std::streamsize>(rows_.size()));
  in_.read(reinterpret_cast<char*>(&stored), sizeof(stored));
  if (!in_) return io_error("KL-divergence base '{}': cannot read chunk {}", path_, read_ + 1);
  if (fnv1a(rows_.data(), rows_.size()) != stored) {
    return invalid_argument("KL-divergence base '{}': chunk {} is corrupted (checksum mismatch)", path_,
                            read_ + 1);
  }
  ++read_;
  return std::span<const uint8_t>(rows_);
}

}  // namespace minfer::apps
