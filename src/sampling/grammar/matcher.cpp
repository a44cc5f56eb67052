// GrammarMatcher: per-state mask cache over the shared trie, token advancement and refusal messages.
#include "sampling/grammar/matcher.h"

namespace minfer::sampling::grammar {
namespace {

constexpr size_t kMaxMasks = 512;  // 19 KiB each for a 152k vocabulary

std::string printable(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7F) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

std::string tail(const std::string& s) {
  return s.size() <= 40 ? printable(s) : "..." + printable(std::string_view(s).substr(s.size() - 40));
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                               std::shared_ptr<const VocabView> vocab, size_t max_states)
    : trie_(std::move(trie)),
      vocab_(std::move(vocab)),
      automaton_(std::move(grammar)),
      state_(automaton_.initial()),
      max_states_(max_states) {}

const TokenMask& GrammarMatcher::mask() {
  auto it = masks_.find(state_);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxMasks) masks_.clear();
  TokenMask& m = masks_[state_];
  compute_mask(*trie_, automaton_, state_, &m);
  return m;
}

GrammarMatcher::Position GrammarMatcher::hold() {
  held_ = true;
  return {state_, finished_, accepted_.size()};
}

void GrammarMatcher::restore(const Position& p) {
  state_ = p.state;
  finished_ = p.finished;
  accepted_.resize(p.accepted);
  held_ = false;
  maybe_compact();
}

void GrammarMatcher::maybe_compact() {
  if (held_ || automaton_.n_states() < max_states_) return;
  state_ = automaton_.compact(state_);
  masks_.clear();
}

Status GrammarMatcher::health() const {
  if (!automaton_.overflowed()) return Status();
  return invalid_argument(
      "grammar: more than {} alternative parses are open after '{}' (choices that only later text "
      "decides, or repetitions of an item that can be empty or match the same text in several ways, "
      "multiply them); rewrite the grammar so that fewer choices are pending at once",
      Automaton::kMaxStacks, tail(accepted_));
}

Status GrammarMatcher::accept_bytes(std::string_view bytes) {
  int32_t s = state_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int32_t next = automaton_.step(s, static_cast<uint8_t>(bytes[i]));
    MINFER_RETURN_IF_ERROR(health());
    if (next == Automaton::kDead) {
      return invalid_argument(
          "grammar: '{}' is rejected after '{}': only its first {} byte(s) '{}' are accepted",
          printable(bytes), tail(accepted_), i, printable(bytes.substr(0, i)));
    }
    s = next;
  }
  state_ = s;
  accepted_ += bytes;
  maybe_compact();
  return Status();
}

Status GrammarMatcher::accept_token(int32_t token) {
  if (finished_) return invalid_argument("grammar: token {} after end of generation", token);
  if (token < 0 || token >= vocab_->n_vocab())
    return invalid_argument("grammar: token id {} out of range", token);
  if (vocab_->is_eog(token)) {
    if (!accepting()) {
      return invalid_argument(
          "grammar: end of generation (token {}) is not allowed after '{}': the grammar "
          "expects more input",
          token, tail(accepted_));
    }
    finished_ = true;
    return Status();
  }
  const std::string& bytes = vocab_->token_bytes[static_cast<size_t>(token)];
  if (bytes.empty())
    return invalid_argument("grammar: control token {} is never allowed by a grammar", token);
  return accept_bytes(bytes).with_context(fmt::format("token {}: ", token));
}

bool grammar_accepts(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  Automaton a(grammar);
  const int32_t s = a.step_bytes(a.initial(), text);
  return s != Automaton::kDead && a.accepting(s);
}

}  // namespace minfer::sampling::grammar
