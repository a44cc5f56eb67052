// GBNF text -> rules, following llama.cpp's grammar-parser syntax: `name ::= alternatives`, string
// literals and character classes with escapes, `.`, groups, `*` `+` `?` `{m}` `{m,}` `{m,n}`, `#` comments.
// Repetitions become helper rules exactly as llama.cpp expands them, so the language is the same.
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "sampling/grammar/grammar.h"

namespace minfer::sampling::grammar {
namespace {

constexpr int kMaxRepetitions = 10000;  // {m,n} bounds above this are refused (the expansion is linear)
// Elements all repetitions of one grammar may expand to. Bounds alone do not bound memory: x{10000}{10000}
// or a long literal repeated copies the item m times and n-m rules of it, so the total is capped too.
constexpr size_t kMaxExpandedElements = 1000000;

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : src_(text) {}

  Result<ParsedGbnf> run() {
    skip_space(true);
    while (pos_ < src_.size()) {
      MINFER_RETURN_IF_ERROR(parse_rule());
      if (!err_.ok()) return err_;
    }
    return std::move(out_);
  }

 private:
  Status fail(size_t at, std::string_view msg) {
    size_t line = 1;
    size_t col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string near(src_.substr(at, std::min<size_t>(20, src_.size() - std::min(at, src_.size()))));
    for (char& c : near) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return invalid_argument("gbnf: line {} col {}: {}{}", line, col, msg,
                            near.empty() ? std::string(" (at end of input)") : fmt::format(" at '{}'", near));
  }

  char peek(size_t off = 0) const { return pos_ + off < src_.size() ? src_[pos_ + off] : '\0'; }

  void skip_space(bool newline_ok) {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\r' && src_[pos_] != '\n') ++pos_;
      } else if (newline_ok && (c == '\r' || c == '\n')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  uint32_t symbol_id(std::string_view name, size_t at) {
    if (auto it = ids_.find(std::string(name)); it != ids_.end()) return it->second;
    ids_.emplace(std::string(name), static_cast<uint32_t>(out_.names.size()));
    out_.names.emplace_back(name);
    out_.rules.emplace_back();
    out_.defined.push_back(false);
    out_.first_ref.push_back(line_col(at));
    return static_cast<uint32_t>(out_.names.size() - 1);
  }

  uint32_t generate_symbol(const std::string& base) {
    const std::string name = fmt::format("{}_{}", base, out_.names.size());
    ids_.emplace(name, static_cast<uint32_t>(out_.names.size()));
    out_.names.push_back(name);
    out_.rules.emplace_back();
    out_.defined.push_back(true);
    out_.first_ref.emplace_back(0, 0);
    return static_cast<uint32_t>(out_.names.size() - 1);
  }

  // Line and column of byte `at`. Calls come in increasing order (references as they are read), so the
  // scan resumes where the previous one stopped: linear in the text overall, not per reference (a
  // printed grammar with thousands of rules took minutes to parse; found by fuzz/gbnf_fuzz.cpp).
  std::pair<size_t, size_t> line_col(size_t at) const {
    size_t line = 1;
    size_t col = 1;
    size_t i = 0;
    if (at >= lc_at_) {
      i = lc_at_;
      line = lc_line_;
      col = lc_col_;
    }
    for (; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    lc_at_ = i;
    lc_line_ = line;
    lc_col_ = col;
    return {line, col};
  }

  void set_rule(uint32_t id, std::vector<Element> rule) {
    out_.rules[id] = std::move(rule);
    out_.defined[id] = true;
  }

  // Decodes one UTF-8 code point of the grammar source (lenient like llama.cpp for the lead byte).
  Result<uint32_t> decode_utf8() {
    static const int kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    const auto lead = static_cast<uint8_t>(src_[pos_]);
    const int len = kLen[lead >> 4];
    if (len == 0) return fail(pos_, "invalid UTF-8 lead byte");
    static const uint8_t kMask[5] = {0, 0xFF, 0x1F, 0x0F, 0x07};
    uint32_t value = lead & kMask[len];
    const size_t start = pos_++;
    for (int i = 1; i < len; ++i, ++pos_) {
      if (pos_ >= src_.size() || (static_cast<uint8_t>(src_[pos_]) & 0xC0) != 0x80) {
        return fail(start, "truncated UTF-8 sequence");
      }
      value = (value << 6) | (static_cast<uint8_t>(src_[pos_]) & 0x3F);
    }
    return value;
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t value = 0;
    const size_t start = pos_;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char c = peek();
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value += static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        value += static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        value += static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return fail(start, fmt::format("expecting {} hex digits", digits));
      }
    }
    return value;
  }

  Result<uint32_t> parse_char() {
    if (pos_ >= src_.size()) return fail(pos_, "unexpected end of input");
    if (src_[pos_] == '\\') {
      const size_t start = pos_;
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'x':
          return parse_hex(2);
        case 'u':
          return parse_hex(4);
        case 'U':
          return parse_hex(8);
        case 't':
          return uint32_t{'\t'};
        case 'r':
          return uint32_t{'\r'};
        case 'n':
          return uint32_t{'\n'};
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
          return static_cast<uint32_t>(e);
        default:
          return fail(start, "unknown escape");
      }
    }
    return decode_utf8();
  }

  Status parse_rule() {
    const size_t name_start = pos_;
    while (pos_ < src_.size() && is_word_char(src_[pos_])) ++pos_;
    if (pos_ == name_start) return fail(pos_, "expecting a rule name");
    const std::string_view name = src_.substr(name_start, pos_ - name_start);
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") return fail(pos_, "expecting ::=");
    pos_ += 3;
    skip_space(true);
    const uint32_t id = symbol_id(name, name_start);
    if (out_.defined[id]) return fail(name_start, fmt::format("rule '{}' is defined twice", name));
    out_.defined[id] = true;  // reserve before the body so self-references see it defined
    MINFER_RETURN_IF_ERROR(parse_alternates(std::string(name), id, false));
    if (peek() == '\r') {
      pos_ += peek(1) == '\n' ? 2 : 1;
    } else if (peek() == '\n') {
      ++pos_;
    } else if (pos_ < src_.size()) {
      return fail(pos_, "expecting newline or end");
    }
    skip_space(true);
    return Status();
  }

  Status parse_alternates(const std::string& rule_name, uint32_t rule_id, bool nested) {
    std::vector<Element> rule;
    MINFER_RETURN_IF_ERROR(parse_sequence(rule_name, rule, nested));
    while (peek() == '|') {
      rule.push_back({ElementType::kAlt, 0});
      ++pos_;
      skip_space(true);
      MINFER_RETURN_IF_ERROR(parse_sequence(rule_name, rule, nested));
    }
    rule.push_back({ElementType::kEnd, 0});
    set_rule(rule_id, std::move(rule));
    return Status();
  }

  Status handle_repetitions(const std::string& rule_name, std::vector<Element>& out, size_t last_sym_start,
                            int min_times, int max_times, size_t at) {
    if (last_sym_start == out.size()) return fail(at, "expecting a preceding item to */+/?/{");
    const std::vector<Element> prev(out.begin() + static_cast<ptrdiff_t>(last_sym_start), out.end());
    // Checked before anything is copied: min_times - 1 inline copies plus one rule per optional copy.
    const int n_opt = max_times < 0 ? 1 : max_times - min_times;
    const size_t copies = static_cast<size_t>(std::max(min_times - 1, 0)) + static_cast<size_t>(n_opt);
    const size_t added = copies * (prev.size() + 3);
    if (added > kMaxExpandedElements - expanded_) {
      return fail(at, fmt::format("rule '{}': repetitions expand to more than {} grammar elements", rule_name,
                                  kMaxExpandedElements));
    }
    expanded_ += added;
    if (min_times == 0) {
      out.resize(last_sym_start);
    } else {
      for (int i = 1; i < min_times; ++i) {
        const size_t n = out.size();
        out.resize(n + prev.size());
        std::memcpy(out.data() + n, prev.data(), prev.size() * sizeof(Element));
      }
    }
    // x{m,n}: the n-m optional copies nest: opt_k ::= x opt_{k-1} |  ;  x* is rec ::= x rec |
    uint32_t last_rec = 0;
    for (int i = 0; i < n_opt; ++i) {
      std::vector<Element> rec = prev;
      const uint32_t rec_id = generate_symbol(rule_name);
      if (i > 0 || max_times < 0) rec.push_back({ElementType::kRuleRef, max_times < 0 ? rec_id : last_rec});
      rec.push_back({ElementType::kAlt, 0});
      rec.push_back({ElementType::kEnd, 0});
      set_rule(rec_id, std::move(rec));
      last_rec = rec_id;
    }
    if (n_opt > 0) out.push_back({ElementType::kRuleRef, last_rec});
    return Status();
  }

  Status parse_sequence(const std::string& rule_name, std::vector<Element>& out, bool nested) {
    size_t last_sym_start = out.size();
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == '"') {
        ++pos_;
        last_sym_start = out.size();
        while (peek() != '"') {
          if (pos_ >= src_.size()) return fail(pos_, "unexpected end of input in string literal");
          MINFER_ASSIGN_OR_RETURN(const uint32_t cp, parse_char());
          out.push_back({ElementType::kChar, cp});
        }
        ++pos_;
        skip_space(nested);
      } else if (c == '[') {
        ++pos_;
        ElementType start_type = ElementType::kChar;
        if (peek() == '^') {
          ++pos_;
          start_type = ElementType::kCharNot;
        }
        last_sym_start = out.size();
        while (peek() != ']') {
          if (pos_ >= src_.size()) return fail(pos_, "unexpected end of input in character class");
          MINFER_ASSIGN_OR_RETURN(const uint32_t cp, parse_char());
          const ElementType type = out.size() > last_sym_start ? ElementType::kCharAlt : start_type;
          out.push_back({type, cp});
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
            ++pos_;
            const size_t range_at = pos_;
            MINFER_ASSIGN_OR_RETURN(const uint32_t upper, parse_char());
            if (upper < cp) return fail(range_at, "character range upper bound is below its lower bound");
            out.push_back({ElementType::kCharRngUpper, upper});
          }
        }
        if (out.size() == last_sym_start) return fail(pos_, "empty character class");
        ++pos_;
        skip_space(nested);
      } else if (is_word_char(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && is_word_char(src_[pos_])) ++pos_;
        const uint32_t ref = symbol_id(src_.substr(start, pos_ - start), start);
        last_sym_start = out.size();
        out.push_back({ElementType::kRuleRef, ref});
        skip_space(nested);
      } else if (c == '(') {
        // Bounded so a hostile grammar cannot overflow the stack (the parser recurses per group).
        if (depth_ >= kMaxGroupNesting)
          return fail(pos_, fmt::format("groups nested deeper than {}", kMaxGroupNesting));
        ++pos_;
        skip_space(true);
        const uint32_t sub = generate_symbol(rule_name);
        ++depth_;
        const Status nested_status = parse_alternates(rule_name, sub, true);
        --depth_;
        MINFER_RETURN_IF_ERROR(nested_status);
        last_sym_start = out.size();
        out.push_back({ElementType::kRuleRef, sub});
        if (peek() != ')') return fail(pos_, "expecting ')'");
        ++pos_;
        skip_space(nested);
      } else if (c == '.') {
        last_sym_start = out.size();
        out.push_back({ElementType::kCharAny, 0});
        ++pos_;
        skip_space(nested);
      } else if (c == '*' || c == '+' || c == '?') {
        const size_t at = pos_;
        ++pos_;
        skip_space(nested);
        const int min_times = c == '+' ? 1 : 0;
        const int max_times = c == '?' ? 1 : -1;
        MINFER_RETURN_IF_ERROR(handle_repetitions(rule_name, out, last_sym_start, min_times, max_times, at));
      } else if (c == '{') {
        const size_t at = pos_;
        ++pos_;
        skip_space(nested);
        if (!is_digit(peek())) return fail(pos_, "expecting an integer in {m,n}");
        MINFER_ASSIGN_OR_RETURN(const int min_times, parse_int());
        skip_space(nested);
        int max_times = -1;
        if (peek() == '}') {
          max_times = min_times;
          ++pos_;
        } else if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          if (is_digit(peek())) {
            MINFER_ASSIGN_OR_RETURN(max_times, parse_int());
            skip_space(nested);
          }
          if (peek() != '}') return fail(pos_, "expecting '}'");
          ++pos_;
        } else {
          return fail(pos_, "expecting ',' or '}'");
        }
        if (max_times >= 0 && max_times < min_times) return fail(at, "repetition {m,n} has n < m");
        skip_space(nested);
        MINFER_RETURN_IF_ERROR(handle_repetitions(rule_name, out, last_sym_start, min_times, max_times, at));
      } else if (c == '<' || c == '!') {
        return fail(pos_, "token references (<[id]>, !<...>) are not supported");
      } else {
        break;
      }
    }
    return Status();
  }

  Result<int> parse_int() {
    const size_t start = pos_;
    long value = 0;
    while (is_digit(peek())) {
      value = value * 10 + (peek() - '0');
      if (value > kMaxRepetitions)
        return fail(start, fmt::format("repetition bound above {}", kMaxRepetitions));
      ++pos_;
    }
    return static_cast<int>(value);
  }

  static constexpr int kMaxGroupNesting = 64;
  std::string_view src_;
  size_t pos_ = 0;
  int depth_ = 0;                                        // open parenthesized groups
  size_t expanded_ = 0;                                  // elements added by repetitions so far
  std::unordered_map<std::string, uint32_t> ids_;        // rule name -> id (the first one of that name)
  mutable size_t lc_at_ = 0, lc_line_ = 1, lc_col_ = 1;  // where line_col() stopped
  ParsedGbnf out_;
  Status err_;
};

}  // namespace

Result<ParsedGbnf> parse_gbnf(std::string_view text) {
  return Parser(text).run();
}

}  // namespace minfer::sampling::grammar
