// Automaton: the grammar's pushdown automaton, determinised lazily over bytes. A state is an interned set
// of parse stacks (positions in the grammar's rule programs) plus a pending partial UTF-8 character;
// step(state, byte) is memoised in a dense 256-entry row per state, so repeated masks cost one table
// load per trie node. Per run (mutable caches); the Grammar it reads is shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sampling/grammar/grammar.h"

namespace minfer::sampling::grammar {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;  // a transition not computed yet

  explicit Automaton(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  int32_t initial() const { return initial_; }

  // Row-major [state][byte] transition table (kUnknown where not computed). Invalidated by step().
  const int32_t* transitions() const { return trans_.data(); }

  // Next state after `byte`, or kDead when no parse can continue (including invalid UTF-8).
  int32_t step(int32_t state, uint8_t byte) {
    const int32_t t = trans_[static_cast<size_t>(state) * 256 + byte];
    return t != kUnknown ? t : compute(state, byte);
  }
  // Steps through `bytes`; stops at kDead.
  int32_t step_bytes(int32_t state, std::string_view bytes);

  // End of input is legal here: some parse is complete and no partial character is pending.
  bool accepting(int32_t state) const;
  bool has_partial(int32_t state) const { return states_[static_cast<size_t>(state)].remain != 0; }
  size_t n_states() const { return states_.size(); }
  // Number of parse stacks in the state (diagnostics).
  size_t n_stacks(int32_t state) const;

  // Forgets every cached state except `keep`; returns keep's new id. Bounds memory on long runs.
  int32_t compact(int32_t keep);

  // A grammar whose parses multiply with the input (nested repetitions of a nullable or overlapping
  // item, e.g. `x*{7}{1,75}`) would need exponential time and memory per byte. A step that reaches
  // more than kMaxStacks distinct parse stacks answers kDead and sets this flag for good, so callers
  // can refuse the grammar by name instead of hanging.
  static constexpr size_t kMaxStacks = 1 << 14;
  bool overflowed() const { return overflowed_; }

 private:
  using Stack = std::vector<uint32_t>;
  struct State {
    int32_t set;
    uint32_t partial;  // bits decoded so far of a multi-byte character
    int32_t remain;    // continuation bytes still expected
    int32_t len;       // length of the pending character's encoding (2..4), 0 when none
    // >= 0: every completion of the pending character leads to this stack set (each stack's class
    // accepts all or none of them), so `partial` is dropped and such states collapse into a few.
    int32_t pending;
  };
  struct KeyHash {
    size_t operator()(const std::pair<uint64_t, int32_t>& k) const {
      return std::hash<uint64_t>()(k.first * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(k.second));
    }
  };

  struct StackHash {
    size_t operator()(const Stack& s) const;
  };
  // One step's expansion: every stack reached (expanded once: nullable chains would otherwise repeat
  // the same sub-expansions exponentially often) and the ones that wait for input.
  struct Expansion {
    std::vector<Stack> out;
    std::unordered_set<Stack, StackHash> seen;
    bool overflow = false;
  };

  int32_t compute(int32_t state, uint8_t byte);
  void expand(Stack stack, Expansion& ex) const;
  // Interns the expansion's stacks; -1 (and overflowed_) when it overflowed.
  int32_t intern_expansion(Expansion& ex);
  int32_t intern_set(std::vector<Stack> stacks);
  int32_t intern_state(int32_t set, uint32_t partial, int32_t remain, int32_t len, int32_t pending);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<std::vector<Stack>> sets_;
  std::vector<uint8_t> set_accepting_;
  std::unordered_map<std::string, int32_t> set_ids_;
  std::vector<State> states_;
  std::unordered_map<std::pair<uint64_t, int32_t>, int32_t, KeyHash> state_ids_;
  std::vector<int32_t> trans_;  // states_.size() * 256
  int32_t initial_ = kDead;
  bool overflowed_ = false;
};

}  // namespace minfer::sampling::grammar
