// StreamDecoder: token ids in, text out, one token at a time, never emitting part of a UTF-8 character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {

// Holds the bytes of an incomplete character until the tokens that complete it arrive. Bytes that can
// never become valid UTF-8 (a stray continuation byte, 0xff, a broken sequence) come out as U+FFFD, so
// every string returned is valid UTF-8. Concatenating all push() results and finish() equals
// decode(ids) whenever decode(ids) is valid UTF-8.
//
//   StreamDecoder dec(tok);
//   for (int32_t id : generated) fputs(dec.push(id).c_str(), stdout);
//   fputs(dec.finish().c_str(), stdout);  // dec.dropped_bytes() says whether a character was cut off
class StreamDecoder {
 public:
  // `tok` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tok) : tok_(&tok) {}

  // Text that became complete with this token (possibly empty). Ids outside the vocabulary add nothing.
  std::string push(int32_t id);
  // Ends the stream: incomplete trailing bytes are dropped with a warning in the log and counted in
  // dropped_bytes(); returns "" and resets the decoder for reuse.
  std::string finish();
  // Bytes of an incomplete character dropped by the last finish().
  size_t dropped_bytes() const { return dropped_; }
  // Bytes currently held back.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  std::string pending_;
  size_t dropped_ = 0;
};

// Splits `bytes` into the longest prefix that is complete (invalid bytes replaced by U+FFFD, appended to
// `out`) and returns how many trailing bytes form a valid but incomplete character (0..3).
size_t append_complete_utf8(std::string_view bytes, std::string& out);

}  // namespace minfer::tokenizer
