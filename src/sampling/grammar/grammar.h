// Grammar: a parsed, checked GBNF grammar as flat rule programs (llama.cpp's element encoding): each rule
// is alternatives of element sequences, with repetitions already expanded into helper rules.
// Immutable once built; shared between runs. Parsing lives in gbnf_parser.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace minfer::sampling::grammar {

enum class ElementType : uint8_t {
  kEnd,           // end of the rule
  kAlt,           // start of another alternative
  kRuleRef,       // value = rule id
  kChar,          // value = code point; starts a positive class (followed by kCharAlt / kCharRngUpper)
  kCharNot,       // starts a negated class
  kCharRngUpper,  // value = inclusive upper bound of the range begun by the previous element
  kCharAlt,       // value = another code point of the class
  kCharAny,       // `.`: any code point
};

struct Element {
  ElementType type;
  uint32_t value;
};

class Grammar {
 public:
  // Parses GBNF, checks that every referenced rule exists, that `root` exists and that no rule is left
  // recursive. Unused rules are reported in warnings(). Errors carry line:column.
  static Result<std::shared_ptr<const Grammar>> parse(std::string_view gbnf, std::string_view root = "root");

  // Builds from already-encoded rules (names[i] names rules[i]); runs the same checks as parse().
  static Result<std::shared_ptr<const Grammar>> from_rules(std::vector<std::string> names,
                                                           std::vector<std::vector<Element>> rules,
                                                           std::string_view root);

  // All rules concatenated; a position in this array is what the matcher keeps on its stacks.
  const std::vector<Element>& elements() const { return elements_; }
  const Element& at(uint32_t pos) const { return elements_[pos]; }
  uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
  uint32_t root() const { return root_; }
  size_t n_rules() const { return names_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Re-parsable GBNF of the (expanded) rules, one rule per line, in rule-id order.
  std::string to_gbnf() const;

  // Class matching at `pos` (a kChar / kCharNot / kCharAny element). Returns whether `cp` matches.
  bool match_char(uint32_t pos, uint32_t cp) const;
  // Whether some code point in [low, high] matches the class at `pos` (for partial UTF-8).
  bool match_range(uint32_t pos, uint32_t low, uint32_t high) const;
  // Verdict of the class at `pos` over every code point in [low, high]: none match, all match, or mixed.
  enum class RangeVerdict { kNone, kAll, kMixed };
  RangeVerdict range_verdict(uint32_t pos, uint32_t low, uint32_t high) const;
  // Position just after the class that starts at `pos`.
  uint32_t after_char(uint32_t pos) const;
  bool is_end_of_sequence(uint32_t pos) const {
    return elements_[pos].type == ElementType::kEnd || elements_[pos].type == ElementType::kAlt;
  }

 private:
  std::vector<std::string> names_;
  std::vector<uint32_t> rule_start_;
  std::vector<Element> elements_;
  std::vector<std::string> warnings_;
  uint32_t root_ = 0;
};

// GBNF text -> named rules (no checks beyond syntax). Exposed for tests and the `grammar` command.
struct ParsedGbnf {
  std::vector<std::string> names;
  std::vector<std::vector<Element>> rules;  // rules[i] may be empty when only referenced, never defined
  std::vector<bool> defined;
  std::vector<std::pair<size_t, size_t>> first_ref;  // (line, col) of the first reference per rule
};
Result<ParsedGbnf> parse_gbnf(std::string_view text);

}  // namespace minfer::sampling::grammar
