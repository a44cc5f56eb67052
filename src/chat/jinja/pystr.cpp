// Python str methods over UTF-8 (see pystr.h for what is approximated).
#include "chat/jinja/pystr.h"

#include <algorithm>

#include "core/utf8.h"

namespace minfer::chat::jinja::pystr {
namespace {

// Decodes the code point at `pos`; an invalid byte decodes as itself (length 1).
uint32_t decode_at(std::string_view s, size_t pos, size_t* len) {
  const int32_t cp = utf8_decode(s, pos, len);
  return cp < 0 ? static_cast<uint8_t>(s[pos]) : static_cast<uint32_t>(cp);
}

struct CodePoint {
  uint32_t cp;
  size_t begin;
  size_t end;
  bool invalid;  // a byte that is not valid UTF-8 (kept as is by case mapping)
};

std::vector<CodePoint> decode_all(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    const int32_t cp = utf8_decode(s, pos, &len);
    out.push_back({cp < 0 ? static_cast<uint8_t>(s[pos]) : static_cast<uint32_t>(cp), pos, pos + len, cp < 0});
    pos += len;
  }
  return out;
}

bool in_chars(uint32_t cp, const std::vector<CodePoint>& chars) {
  for (const CodePoint& c : chars) {
    if (c.cp == cp) return true;
  }
  return false;
}

// Letters Python treats as cased; outside ASCII only the Latin, Greek and Cyrillic blocks are known.
bool is_cased(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return true;
  if (cp >= 0xc0 && cp <= 0x24f) return cp != 0xd7 && cp != 0xf7;
  return cp >= 0x370 && cp <= 0x52f;
}

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (the scripts chat
// templates plausibly case-map); other code points are returned unchanged.
uint32_t to_upper(uint32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp < 0xb5) return cp;
  if (cp == 0xb5) return 0x39c;
  if (cp >= 0xe0 && cp <= 0xfe && cp != 0xf7) return cp - 32;
  if (cp == 0xff) return 0x178;
  if (cp >= 0x100 && cp <= 0x17f) {
    if (cp == 0x131) return 'I';
    if (cp == 0x17f) return 'S';
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) return (cp % 2 == 0) ? cp - 1 : cp;
    if (cp == 0x130 || cp == 0x138 || cp == 0x149) return cp;
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp >= 0x3b1 && cp <= 0x3cb && cp != 0x3c2) return cp - 32;
  if (cp == 0x3c2) return 0x3a3;
  if (cp >= 0x430 && cp <= 0x44f) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45f) return cp - 80;
  return cp;
}

uint32_t to_lower(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0xc0) return cp;
  if (cp >= 0xc0 && cp <= 0xde && cp != 0xd7) return cp + 32;
  if (cp == 0x178) return 0xff;
  if (cp >= 0x100 && cp <= 0x17f) {
    if (cp == 0x130 || cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17f) return cp;
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) return (cp % 2 == 1) ? cp + 1 : cp;
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3ab && cp != 0x3a2) return cp + 32;
  if (cp >= 0x410 && cp <= 0x42f) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40f) return cp + 80;
  return cp;
}

void append_mapped(std::string& out, std::string_view s, const CodePoint& c, uint32_t mapped);

bool is_line_break(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
         cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

namespace {
void append_mapped(std::string& out, std::string_view s, const CodePoint& c, uint32_t mapped) {
  if (c.invalid) {
    out.append(s.substr(c.begin, c.end - c.begin));
  } else {
    append_utf8(out, mapped);
  }
}
}  // namespace

std::vector<size_t> offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    out.push_back(pos);
    size_t len = 1;
    decode_at(s, pos, &len);
    pos += len;
  }
  out.push_back(s.size());
  return out;
}

size_t length(std::string_view s) { return index_of_byte(s, s.size()); }

size_t index_of_byte(std::string_view s, size_t byte) {
  size_t n = 0;
  for (size_t pos = 0; pos < byte && pos < s.size(); ++n) {
    size_t len = 1;
    decode_at(s, pos, &len);
    pos += len;
  }
  return n;
}

bool is_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<CodePoint> cps = decode_all(s);
  std::vector<CodePoint> set;
  if (chars) set = decode_all(*chars);
  auto strippable = [&](uint32_t cp) { return chars ? in_chars(cp, set) : is_space(cp); };
  size_t b = 0;
  size_t e = cps.size();
  if (left) {
    while (b < e && strippable(cps[b].cp)) ++b;
  }
  if (right) {
    while (e > b && strippable(cps[e - 1].cp)) --e;
  }
  if (b == e) return {};
  return std::string(s.substr(cps[b].begin, cps[e - 1].end - cps[b].begin));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::vector<CodePoint> cps = decode_all(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && is_space(cps[i].cp)) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(cps[i].begin));
      break;
    }
    const size_t start = i;
    while (i < cps.size() && !is_space(cps[i].cp)) ++i;
    out.emplace_back(s.substr(cps[start].begin, (i < cps.size() ? cps[i].begin : s.size()) - cps[start].begin));
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    return {out.rbegin(), out.rend()};
  }
  const std::vector<CodePoint> cps = decode_all(s);
  size_t i = cps.size();
  while (true) {
    while (i > 0 && is_space(cps[i - 1].cp)) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(0, cps[i - 1].end));
      break;
    }
    const size_t end = i;
    while (i > 0 && !is_space(cps[i - 1].cp)) --i;
    out.emplace_back(s.substr(cps[i].begin, cps[end - 1].end - cps[i].begin));
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const std::vector<CodePoint> cps = decode_all(s);
  size_t start = 0;  // byte offset of the current line
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_line_break(cps[i].cp)) continue;
    const size_t content_end = cps[i].begin;
    if (cps[i].cp == '\r' && i + 1 < cps.size() && cps[i + 1].cp == '\n') ++i;
    const size_t brk_end = cps[i].end;
    out.emplace_back(s.substr(start, (keepends ? brk_end : content_end) - start));
    start = brk_end;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const CodePoint& c : decode_all(s)) {
    append_mapped(out, s, c, to_lower(c.cp));
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const CodePoint& c : decode_all(s)) append_mapped(out, s, c, to_upper(c.cp));
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (const CodePoint& c : decode_all(s)) {
    append_mapped(out, s, c, first ? to_upper(c.cp) : to_lower(c.cp));
    first = false;
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (const CodePoint& c : decode_all(s)) {
    append_mapped(out, s, c, prev_cased ? to_lower(c.cp) : to_upper(c.cp));
    prev_cased = is_cased(c.cp);
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    const std::vector<CodePoint> cps = decode_all(s);
    int64_t done = 0;
    for (const CodePoint& c : cps) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      out += s.substr(c.begin, c.end - c.begin);
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += repl;
    pos = hit + old.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

size_t replaced_size(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  int64_t n = old.empty() ? static_cast<int64_t>(length(s)) + 1 : pystr::count(s, old);
  if (count >= 0) n = std::min(n, count);
  return s.size() + static_cast<size_t>(n) * repl.size() - static_cast<size_t>(n) * old.size();
}

int64_t find(std::string_view s, std::string_view sub) {
  const size_t hit = s.find(sub);
  return hit == std::string_view::npos ? -1 : static_cast<int64_t>(index_of_byte(s, hit));
}

int64_t rfind(std::string_view s, std::string_view sub) {
  const size_t hit = s.rfind(sub);
  return hit == std::string_view::npos ? -1 : static_cast<int64_t>(index_of_byte(s, hit));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

}  // namespace minfer::chat::jinja::pystr
