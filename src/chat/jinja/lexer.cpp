// Template lexer mirroring jinja2 3.1's Lexer.tokeniter: data/tag splitting with lstrip_blocks,
// trim_blocks and -/+ modifiers, then Python-like tokens inside {{ }} and {% %}.
#include "chat/jinja/lexer.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "chat/jinja/error.h"
#include "chat/jinja/pystr.h"
#include "core/utf8.h"

namespace minfer::chat::jinja {
namespace {

// Length of the Python-whitespace code point at `pos`, or 0.
size_t space_at(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t len = 1;
  const int32_t cp = utf8_decode(s, pos, &len);
  return (cp >= 0 && pystr::is_space(static_cast<uint32_t>(cp))) ? len : 0;
}

size_t skip_space(std::string_view s, size_t pos) {
  while (size_t len = space_at(s, pos)) pos += len;
  return pos;
}

// text.rstrip() with Python whitespace.
std::string_view rstrip_py(std::string_view text) {
  return std::string_view(text.data(), pystr::strip(text, std::nullopt, false, true).size());
}

int count_newlines(std::string_view s, size_t begin, size_t end) {
  int n = 0;
  for (size_t i = begin; i < end; ++i) n += s[i] == '\n';
  return n;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body (non-ASCII passes through).
std::string unescape(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out.push_back(c);
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) fail(line, "malformed \\{}{} escape in string literal", e, std::string(n, 'X'));
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail(line, "illegal Unicode character in string literal");
        pystr::append_utf8(out, cp);
        i += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          pystr::append_utf8(out, cp);
        } else if (e == 'N') {
          fail(line, "\\N{{...}} escapes are not supported in string literals");
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      if (!lex_root()) break;
    }
    tokens_.push_back(Token{TokenType::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  void emit(TokenType type, std::string value, int line) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  // Applies the -/+/lstrip_blocks rules to the text before a tag (OptionalLStrip in jinja2).
  std::string_view adjust_text(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') return rstrip_py(text);
    if (sign == '+' || is_variable) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return text;
    if (l_pos == text.size()) return text;
    for (size_t p = l_pos; p < text.size();) {
      const size_t len = space_at(text, p);
      if (len == 0) return text;
      p += len;
    }
    return text.substr(0, l_pos);
  }

  // Matches `{%[-+]?\s*raw\s*(-%}\s*|%})` at `at`; returns the end or npos.
  size_t match_raw_begin(size_t at) const {
    size_t p = at + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_space(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p = skip_space(src_, p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return skip_space(src_, p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  bool lex_root() {
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        emit(TokenType::kData, src_.substr(pos_), line_);
        line_ += count_newlines(src_, pos_, src_.size());
        pos_ = src_.size();
        return false;
      }
      const char k = src_[tag + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++tag;
    }
    const char kind = src_[tag + 1];
    const char sign = (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) ? src_[tag + 2] : 0;
    const std::string_view text = adjust_text(std::string_view(src_).substr(pos_, tag - pos_), sign, kind == '{');
    if (!text.empty()) emit(TokenType::kData, std::string(text), line_);
    line_ += count_newlines(src_, pos_, tag);
    line_starting_ = false;

    if (kind == '%') {
      const size_t raw_end = match_raw_begin(tag);
      if (raw_end != std::string::npos) {
        line_ += count_newlines(src_, tag, raw_end);
        line_starting_ = src_[raw_end - 1] == '\n';
        pos_ = raw_end;
        lex_raw();
        return true;
      }
    }
    pos_ = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      lex_comment();
    } else {
      lex_tag(kind == '{');
    }
    return true;
  }

  void lex_comment() {
    const int start_line = line_;
    for (size_t p = pos_; p + 1 < src_.size(); ++p) {
      size_t end = std::string::npos;
      if ((src_[p] == '+' || src_[p] == '-') && src_.compare(p + 1, 2, "#}") == 0) {
        end = p + 3;
        if (src_[p] == '-') end = skip_space(src_, end);
      } else if (src_.compare(p, 2, "#}") == 0) {
        end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end == std::string::npos) continue;
      line_ += count_newlines(src_, pos_, end);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail(start_line, "missing end of comment tag");
  }

  void lex_raw() {
    const int start_line = line_;
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      const char sign = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : 0;
      if (sign) ++q;
      q = skip_space(src_, q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = skip_space(src_, q + 6);
      size_t end = std::string::npos;
      if (src_.compare(q, 3, "+%}") == 0) {
        end = q + 3;
      } else if (src_.compare(q, 3, "-%}") == 0) {
        end = skip_space(src_, q + 3);
      } else if (src_.compare(q, 2, "%}") == 0) {
        end = q + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end == std::string::npos) continue;
      const std::string_view text = adjust_text(std::string_view(src_).substr(pos_, p - pos_), sign, false);
      if (!text.empty()) emit(TokenType::kData, std::string(text), line_);
      line_ += count_newlines(src_, pos_, end);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail(start_line, "missing end of raw directive");
  }

  // Tries the end-of-tag rule at pos_; returns true (and advances) when the tag ends here.
  bool match_tag_end(bool variable) {
    const std::string_view rest = std::string_view(src_).substr(pos_);
    const char* close = variable ? "}}" : "%}";
    size_t end = std::string::npos;
    if (!variable && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == close) {
      end = pos_ + 3;
    } else if (rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close) {
      end = skip_space(src_, pos_ + 3);
    } else if (rest.substr(0, 2) == close) {
      end = pos_ + 2;
      if (!variable && end < src_.size() && src_[end] == '\n') ++end;
    }
    if (end == std::string::npos) return false;
    emit(variable ? TokenType::kVarEnd : TokenType::kBlockEnd, "", line_);
    line_ += count_newlines(src_, pos_, end);
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
    return true;
  }

  void lex_tag(bool variable) {
    emit(variable ? TokenType::kVarBegin : TokenType::kBlockBegin, "", line_);
    std::string balance;  // expected closing brackets
    while (true) {
      if (pos_ >= src_.size()) fail(line_, "unexpected end of template inside {}", variable ? "'{{ }}'" : "'{% %}'");
      if (balance.empty() && match_tag_end(variable)) return;
      if (size_t ws = space_at(src_, pos_)) {
        const size_t end = skip_space(src_, pos_ + ws);
        line_ += count_newlines(src_, pos_, end);
        pos_ = end;
        continue;
      }
      const char c = src_[pos_];
      if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        emit(TokenType::kName, src_.substr(start, pos_ - start), line_);
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(balance);
      }
    }
  }

  void lex_number() {
    const size_t start = pos_;
    auto digits = [&] {
      // (\d+_)*\d+
      while (pos_ < src_.size() && is_digit(src_[pos_])) {
        ++pos_;
        if (pos_ + 1 < src_.size() && src_[pos_] == '_' && is_digit(src_[pos_ + 1])) ++pos_;
      }
    };
    digits();
    bool is_float = false;
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot) {
      const size_t int_end = pos_;
      if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
        ++pos_;
        digits();
        is_float = true;
      }
      const size_t before_exp = pos_;
      if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
        size_t p = pos_ + 1;
        if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
        if (p < src_.size() && is_digit(src_[p])) {
          pos_ = p;
          digits();
          is_float = true;
        } else {
          pos_ = before_exp;
        }
      }
      if (!is_float) pos_ = int_end;
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t;
    t.line = line_;
    t.value = text;
    if (is_float) {
      t.type = TokenType::kFloat;
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.type = TokenType::kInt;
      errno = 0;
      const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno != 0 || v > static_cast<unsigned long long>(INT64_MAX)) fail(line_, "integer literal {} is too large", text);
      t.int_value = static_cast<int64_t>(v);
    }
    tokens_.push_back(std::move(t));
  }

  void lex_string(char quote) {
    const int start_line = line_;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) fail(start_line, "unterminated string literal");
    const std::string_view body = std::string_view(src_).substr(pos_ + 1, p - pos_ - 1);
    emit(TokenType::kString, unescape(body, start_line), start_line);
    line_ += count_newlines(src_, pos_, p);
    pos_ = p + 1;
  }

  void lex_operator(std::string& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        emit(TokenType::kOp, std::string(op), line_);
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      size_t len = 1;
      utf8_decode(src_, pos_, &len);
      fail(line_, "unexpected char '{}'", src_.substr(pos_, len));
    }
    if (c == '(') balance.push_back(')');
    if (c == '[') balance.push_back(']');
    if (c == '{') balance.push_back('}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(line_, "unexpected '{}'", c);
      if (balance.back() != c) fail(line_, "unexpected '{}', expected '{}'", c, balance.back());
      balance.pop_back();
    }
    emit(TokenType::kOp, std::string(1, c), line_);
    ++pos_;
  }

  const std::string& src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace minfer::chat::jinja
