// UTF-8 validation and decoding helpers shared by the file readers, tokenizer and templates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace minfer {

// Length of the longest valid UTF-8 prefix of `s` (== s.size() when all of it is valid).
// Rejects overlongs, surrogates and code points above U+10FFFF, like Python's strict decoder.
size_t utf8_valid_prefix(std::string_view s);
inline bool utf8_valid(std::string_view s) { return utf8_valid_prefix(s) == s.size(); }

// Decodes one code point at s[pos]; on invalid input returns -1 and sets len to 1.
int32_t utf8_decode(std::string_view s, size_t pos, size_t* len);

// Bytes in the sequence a UTF-8 lead byte announces (1..4), or 0 for a continuation/invalid byte.
int utf8_sequence_length(uint8_t lead);

}  // namespace minfer
