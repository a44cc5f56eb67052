// Incremental UTF-8 assembly for streamed detokenization.
#include "tokenizer/stream_decoder.h"

#include "core/log.h"
#include "core/utf8.h"

namespace minfer::tokenizer {
namespace {

constexpr char kReplacement[] = "\xef\xbf\xbd";

// True when s (shorter than the sequence its lead byte announces) can still grow into a valid character.
bool valid_incomplete(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  for (size_t i = 1; i < s.size(); ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if ((b & 0xc0) != 0x80) return false;
  }
  if (s.size() >= 2) {
    const auto b1 = static_cast<uint8_t>(s[1]);
    if (b0 == 0xe0 && b1 < 0xa0) return false;  // overlong
    if (b0 == 0xed && b1 > 0x9f) return false;  // surrogate
    if (b0 == 0xf0 && b1 < 0x90) return false;  // overlong
    if (b0 == 0xf4 && b1 > 0x8f) return false;  // above U+10FFFF
  }
  return true;
}

}  // namespace

size_t append_complete_utf8(std::string_view bytes, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    const int n = utf8_sequence_length(b);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (i + static_cast<size_t>(n) > bytes.size()) {
      if (valid_incomplete(bytes.substr(i))) return bytes.size() - i;
      out += kReplacement;
      ++i;
      continue;
    }
    const std::string_view seq = bytes.substr(i, static_cast<size_t>(n));
    if (utf8_valid(seq)) {
      out.append(seq);
      i += static_cast<size_t>(n);
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return 0;
}

std::string StreamDecoder::push(int32_t id) {
  if (id < 0 || id >= tok_->n_vocab()) return {};
  const std::string& bytes = tok_->token_bytes(id);
  std::string out;
  if (pending_.empty()) {
    const size_t held = append_complete_utf8(bytes, out);
    pending_.assign(bytes, bytes.size() - held, held);
  } else {
    pending_ += bytes;
    const size_t held = append_complete_utf8(pending_, out);
    pending_.erase(0, pending_.size() - held);
  }
  return out;
}

std::string StreamDecoder::finish() {
  dropped_ = pending_.size();
  if (dropped_ > 0) {
    MINFER_LOG_WARN("tokenizer: the stream ended inside a UTF-8 character; dropped its {} byte(s)", dropped_);
  }
  pending_.clear();
  return {};
}

}  // namespace minfer::tokenizer
