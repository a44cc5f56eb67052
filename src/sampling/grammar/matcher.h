// GrammarMatcher: one run's position in a grammar. Masks the logits of the current state (cached per
// automaton state), advances token by token, and explains refusals (the token, its accepted prefix).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/status.h"
#include "sampling/grammar/automaton.h"
#include "sampling/grammar/token_mask.h"

namespace minfer::sampling::grammar {

class GrammarMatcher {
 public:
  static constexpr size_t kDefaultMaxStates = 1 << 15;  // dense rows are 1 KiB each: ~32 MiB

  // `max_states`: automaton states kept before the caches are dropped (all but the current state).
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::shared_ptr<const VocabView> vocab, size_t max_states = kDefaultMaxStates);

  // Allowed tokens in the current state. Cached: a state seen before costs a hash lookup.
  const TokenMask& mask();
  // Advances by one token. EOG is legal only in an accepting state. On refusal the matcher keeps its
  // state and the error names the token and the longest prefix of its bytes the grammar accepts.
  Status accept_token(int32_t token);
  // Advances by raw bytes (tests, forced text); same refusal rule.
  Status accept_bytes(std::string_view bytes);

  // Speculative drafting: where the matcher is now; restore() returns to it. While a position is held,
  // compaction (which renumbers automaton states) waits.
  struct Position {
    int32_t state = 0;
    bool finished = false;
    size_t accepted = 0;  // length of accepted_text()
  };
  Position hold();
  void restore(const Position& p);
  void release_hold() { held_ = false; }

  // An error once the grammar turned out too ambiguous to follow (Automaton::overflowed): every later
  // mask and step is then meaningless, so callers check this after mask().
  Status health() const;

  bool accepting() const { return automaton_.accepting(state_); }
  bool finished() const { return finished_; }  // an EOG token was accepted
  // Text accepted so far, for error messages (last 40 bytes are shown).
  const std::string& accepted_text() const { return accepted_; }
  size_t n_cached_masks() const { return masks_.size(); }
  size_t n_automaton_states() const { return automaton_.n_states(); }

 private:
  void maybe_compact();

  std::shared_ptr<const TokenTrie> trie_;
  std::shared_ptr<const VocabView> vocab_;
  Automaton automaton_;
  int32_t state_;
  bool finished_ = false;
  std::string accepted_;
  std::unordered_map<int32_t, TokenMask> masks_;
  size_t max_states_;
  bool held_ = false;
};

// Whether `text` as a whole is in the grammar's language (tests and tools; no vocabulary needed).
bool grammar_accepts(const std::shared_ptr<const Grammar>& grammar, std::string_view text);

}  // namespace minfer::sampling::grammar
