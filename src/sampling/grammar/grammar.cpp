// Grammar checks (undefined / unused rules, root, left recursion), flattening, printing and class matching.
#include "sampling/grammar/grammar.h"

#include <functional>

namespace minfer::sampling::grammar {
namespace {

bool end_of_seq(const Element& e) {
  return e.type == ElementType::kEnd || e.type == ElementType::kAlt;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// One code point as GBNF source inside a literal (in_class = false) or a class (true).
std::string escape_cp(uint32_t cp, bool in_class) {
  switch (cp) {
    case '\n':
      return "\\n";
    case '\t':
      return "\\t";
    case '\r':
      return "\\r";
    case '\\':
      return "\\\\";
    default:
      break;
  }
  if (!in_class && cp == '"') return "\\\"";
  if (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^'))
    return fmt::format("\\{}", static_cast<char>(cp));
  if (cp < 0x20 || cp == 0x7F) return fmt::format("\\x{:02X}", cp);
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return fmt::format("\\U{:08X}", cp);
  if (cp >= 0x80 && cp <= 0x9F) return fmt::format("\\u{:04X}", cp);
  std::string s;
  append_utf8(s, cp);
  return s;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> Grammar::parse(std::string_view gbnf, std::string_view root) {
  MINFER_ASSIGN_OR_RETURN(ParsedGbnf parsed, parse_gbnf(gbnf));
  for (size_t i = 0; i < parsed.names.size(); ++i) {
    if (!parsed.defined[i]) {
      return invalid_argument("gbnf: undefined rule '{}' (first referenced at line {} col {})",
                              parsed.names[i], parsed.first_ref[i].first, parsed.first_ref[i].second);
    }
  }
  return from_rules(std::move(parsed.names), std::move(parsed.rules), root);
}

Result<std::shared_ptr<const Grammar>> Grammar::from_rules(std::vector<std::string> names,
                                                           std::vector<std::vector<Element>> rules,
                                                           std::string_view root) {
  const size_t n = rules.size();
  if (names.size() != n) return invalid_argument("gbnf: {} rule names for {} rules", names.size(), n);
  uint32_t root_id = UINT32_MAX;
  for (size_t i = 0; i < n; ++i) {
    if (names[i] == root) root_id = static_cast<uint32_t>(i);
    if (rules[i].empty() || rules[i].back().type != ElementType::kEnd) {
      return invalid_argument("gbnf: undefined rule '{}'", names[i]);
    }
    for (const Element& e : rules[i]) {
      if (e.type == ElementType::kRuleRef && e.value >= n) {
        return invalid_argument("gbnf: rule '{}' references rule id {} which does not exist", names[i],
                                e.value);
      }
    }
  }
  if (root_id == UINT32_MAX) return invalid_argument("gbnf: grammar has no '{}' rule", root);

  // Nullable rules (fixed point), then a DFS through leftmost (or leftmost after nullable) references.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (nullable[i]) continue;
      bool alt_nullable = true;
      for (const Element& e : rules[i]) {
        if (end_of_seq(e)) {
          if (alt_nullable) {
            nullable[i] = true;
            changed = true;
            break;
          }
          alt_nullable = true;
        } else if (e.type != ElementType::kRuleRef || !nullable[e.value]) {
          alt_nullable = false;
        }
      }
    }
  }
  std::vector<uint8_t> mark(n, 0);  // 0 new, 1 in progress, 2 done
  std::vector<uint32_t> path;
  std::function<Status(uint32_t)> visit = [&](uint32_t r) -> Status {
    if (mark[r] == 2) return Status();
    if (mark[r] == 1) {
      std::string cycle;
      bool on = false;
      for (uint32_t p : path) {
        on = on || p == r;
        if (on) cycle += names[p] + " -> ";
      }
      return invalid_argument("gbnf: left recursion in rule '{}' ({}{})", names[r], cycle, names[r]);
    }
    mark[r] = 1;
    path.push_back(r);
    bool leftmost = true;
    for (const Element& e : rules[r]) {
      if (end_of_seq(e)) {
        leftmost = true;
      } else if (e.type == ElementType::kRuleRef) {
        if (leftmost) {
          MINFER_RETURN_IF_ERROR(visit(e.value));
          leftmost = nullable[e.value];
        }
      } else if (e.type == ElementType::kChar || e.type == ElementType::kCharNot ||
                 e.type == ElementType::kCharAny) {
        leftmost = false;
      }
    }
    path.pop_back();
    mark[r] = 2;
    return Status();
  };
  for (uint32_t i = 0; i < n; ++i) MINFER_RETURN_IF_ERROR(visit(i));

  auto g = std::make_shared<Grammar>();
  g->root_ = root_id;
  // Unused rules: not reachable from root.
  std::vector<bool> used(n, false);
  std::vector<uint32_t> todo = {root_id};
  used[root_id] = true;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (const Element& e : rules[r]) {
      if (e.type == ElementType::kRuleRef && !used[e.value]) {
        used[e.value] = true;
        todo.push_back(e.value);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!used[i])
      g->warnings_.push_back(
          fmt::format("gbnf: rule '{}' is never used (not reachable from '{}')", names[i], root));
  }
  for (size_t i = 0; i < n; ++i) {
    g->rule_start_.push_back(static_cast<uint32_t>(g->elements_.size()));
    g->elements_.insert(g->elements_.end(), rules[i].begin(), rules[i].end());
  }
  g->names_ = std::move(names);
  return std::shared_ptr<const Grammar>(std::move(g));
}

std::string Grammar::to_gbnf() const {
  std::string out;
  for (uint32_t r = 0; r < names_.size(); ++r) {
    out += names_[r];
    out += " ::=";
    uint32_t pos = rule_start_[r];
    bool in_literal = false;
    bool alt_empty = true;  // an empty alternative prints as "" so a line never ends in '|'

    auto close_literal = [&] {
      if (in_literal) out += '"';
      in_literal = false;
    };
    for (;;) {
      const Element& e = elements_[pos];
      if (e.type == ElementType::kEnd) break;
      if (e.type == ElementType::kAlt) {
        close_literal();
        if (alt_empty) out += " \"\"";
        out += " |";
        alt_empty = true;
        ++pos;
        continue;
      }
      alt_empty = false;
      if (e.type == ElementType::kRuleRef) {
        close_literal();
        out += ' ';
        out += names_[e.value];
        ++pos;
        continue;
      }
      if (e.type == ElementType::kCharAny) {
        close_literal();
        out += " .";
        ++pos;
        continue;
      }
      const uint32_t end = after_char(pos);
      if (e.type == ElementType::kChar && end == pos + 1) {
        if (!in_literal) out += " \"";
        in_literal = true;
        out += escape_cp(e.value, false);
        pos = end;
        continue;
      }
      close_literal();
      out += e.type == ElementType::kCharNot ? " [^" : " [";
      for (uint32_t p = pos; p < end; ++p) {
        if (elements_[p].type == ElementType::kCharRngUpper) out += '-';
        out += escape_cp(elements_[p].value, true);
      }
      out += ']';
      pos = end;
    }
    close_literal();
    if (alt_empty) out += " \"\"";
    out += '\n';
  }
  return out;
}

uint32_t Grammar::after_char(uint32_t pos) const {
  if (elements_[pos].type == ElementType::kCharAny) return pos + 1;
  ++pos;
  while (elements_[pos].type == ElementType::kCharAlt || elements_[pos].type == ElementType::kCharRngUpper)
    ++pos;
  return pos;
}

bool Grammar::match_char(uint32_t pos, uint32_t cp) const {
  const ElementType t = elements_[pos].type;
  if (t == ElementType::kCharAny) return true;
  const bool positive = t == ElementType::kChar;
  bool found = false;
  do {
    if (elements_[pos + 1].type == ElementType::kCharRngUpper) {
      found = found || (elements_[pos].value <= cp && cp <= elements_[pos + 1].value);
      pos += 2;
    } else {
      found = found || elements_[pos].value == cp;
      pos += 1;
    }
  } while (elements_[pos].type == ElementType::kCharAlt);
  return found == positive;
}

bool Grammar::match_range(uint32_t pos, uint32_t low, uint32_t high) const {
  const ElementType t = elements_[pos].type;
  if (t == ElementType::kCharAny) return true;
  const bool positive = t == ElementType::kChar;
  do {
    uint32_t lo = elements_[pos].value;
    uint32_t hi = lo;
    if (elements_[pos + 1].type == ElementType::kCharRngUpper) {
      hi = elements_[pos + 1].value;
      pos += 2;
    } else {
      pos += 1;
    }
    if (positive && lo <= high && low <= hi) return true;
    // A negated class rejects the partial character only if one excluded range covers every completion.
    if (!positive && lo <= low && high <= hi) return false;
  } while (elements_[pos].type == ElementType::kCharAlt);
  return !positive;
}

Grammar::RangeVerdict Grammar::range_verdict(uint32_t pos, uint32_t low, uint32_t high) const {
  const ElementType t = elements_[pos].type;
  if (t == ElementType::kCharAny) return RangeVerdict::kAll;
  const bool positive = t == ElementType::kChar;
  bool covered = false;   // one item covers [low, high]
  bool overlaps = false;  // some item touches it
  do {
    const uint32_t lo = elements_[pos].value;
    uint32_t hi = lo;
    if (elements_[pos + 1].type == ElementType::kCharRngUpper) {
      hi = elements_[pos + 1].value;
      pos += 2;
    } else {
      pos += 1;
    }
    covered = covered || (lo <= low && high <= hi);
    overlaps = overlaps || (lo <= high && low <= hi);
  } while (elements_[pos].type == ElementType::kCharAlt);
  // Coverage by a union of several items is reported as mixed: callers then take the exact path.
  if (covered) return positive ? RangeVerdict::kAll : RangeVerdict::kNone;
  if (!overlaps) return positive ? RangeVerdict::kNone : RangeVerdict::kAll;
  return RangeVerdict::kMixed;
}

}  // namespace minfer::sampling::grammar
