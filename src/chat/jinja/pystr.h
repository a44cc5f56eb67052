// Python str semantics over UTF-8 bytes: lengths and indices count code points, whitespace is
// Python's str.isspace() set. Case mapping covers ASCII, Latin-1/Extended-A, Greek and Cyrillic only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::chat::jinja::pystr {

// Byte offset where each code point starts, plus s.size() at the end (size = len(s) + 1).
// An invalid byte counts as one code point, so any byte string has a well-defined length.
std::vector<size_t> offsets(std::string_view s);
size_t length(std::string_view s);
// Code point index of byte offset `byte` (which must be a code point boundary).
size_t index_of_byte(std::string_view s, size_t byte);

bool is_space(uint32_t cp);
// str.strip/lstrip/rstrip; `chars` unset = whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split/rsplit; `sep` unset = runs of whitespace. maxsplit < 0 = no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string capitalize(std::string_view s);
std::string title(std::string_view s);  // str.title()
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// The byte size replace() would produce, computed without building it (to bound it first).
size_t replaced_size(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// find/rfind return a code point index or -1; count counts non-overlapping occurrences.
int64_t find(std::string_view s, std::string_view sub);
int64_t rfind(std::string_view s, std::string_view sub);
int64_t count(std::string_view s, std::string_view sub);
// Appends the UTF-8 encoding of `cp`.
void append_utf8(std::string& out, uint32_t cp);

}  // namespace minfer::chat::jinja::pystr
