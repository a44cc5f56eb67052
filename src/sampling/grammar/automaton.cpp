// Lazy byte-level determinisation of the grammar's stack machine (llama.cpp's advance_stack / accept
// semantics), with interned stack sets and memoised transitions.
#include "sampling/grammar/automaton.h"

#include <algorithm>
#include <cstring>

namespace minfer::sampling::grammar {

Automaton::Automaton(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  Expansion ex;
  uint32_t pos = grammar_->rule_start(grammar_->root());
  for (;;) {
    Stack s;
    if (!grammar_->is_end_of_sequence(pos)) s.push_back(pos);
    expand(std::move(s), ex);
    while (!grammar_->is_end_of_sequence(pos)) ++pos;
    if (grammar_->at(pos).type == ElementType::kAlt) {
      ++pos;
    } else {
      break;
    }
  }
  const int32_t set = intern_expansion(ex);
  initial_ = intern_state(set >= 0 ? set : intern_set({}), 0, 0, 0, -1);
}

size_t Automaton::StackHash::operator()(const Stack& s) const {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint32_t v : s) h = (h ^ v) * 0x100000001b3ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

void Automaton::expand(Stack stack, Expansion& ex) const {
  if (ex.overflow || !ex.seen.insert(stack).second) return;
  if (ex.seen.size() > 4 * kMaxStacks) {
    ex.overflow = true;
    return;
  }
  if (stack.empty() || grammar_->at(stack.back()).type != ElementType::kRuleRef) {
    ex.out.push_back(std::move(stack));  // empty (a complete parse) or waiting at a character class
    if (ex.out.size() > kMaxStacks) ex.overflow = true;
    return;
  }
  // Replace the reference by its continuation, then push each alternative's first element.
  const uint32_t top = stack.back();
  uint32_t sub = grammar_->rule_start(grammar_->at(top).value);
  stack.pop_back();
  if (!grammar_->is_end_of_sequence(top + 1)) stack.push_back(top + 1);
  for (;;) {
    Stack next = stack;
    if (!grammar_->is_end_of_sequence(sub)) next.push_back(sub);
    expand(std::move(next), ex);
    while (!grammar_->is_end_of_sequence(sub)) ++sub;
    if (grammar_->at(sub).type == ElementType::kAlt) {
      ++sub;
    } else {
      break;
    }
  }
}

int32_t Automaton::intern_expansion(Expansion& ex) {
  if (ex.overflow) {
    overflowed_ = true;
    return -1;
  }
  return ex.out.empty() ? -1 : intern_set(std::move(ex.out));
}

int32_t Automaton::intern_set(std::vector<Stack> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key;
  for (const Stack& s : stacks) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    const size_t at = key.size();
    key.resize(at + 4 * (n + 1));
    std::memcpy(key.data() + at, &n, 4);
    if (n > 0) std::memcpy(key.data() + at + 4, s.data(), 4 * static_cast<size_t>(n));
  }
  auto [it, inserted] = set_ids_.emplace(std::move(key), static_cast<int32_t>(sets_.size()));
  if (inserted) {
    set_accepting_.push_back(!stacks.empty() && stacks.front().empty() ? 1 : 0);
    sets_.push_back(std::move(stacks));
  }
  return it->second;
}

int32_t Automaton::intern_state(int32_t set, uint32_t partial, int32_t remain, int32_t len, int32_t pending) {
  const uint64_t key = (static_cast<uint64_t>(set) << 32) | (static_cast<uint64_t>(len) << 28) |
                       (static_cast<uint64_t>(remain) << 24) | partial;
  auto [it, inserted] =
      state_ids_.emplace(std::make_pair(key, pending), static_cast<int32_t>(states_.size()));
  if (inserted) {
    states_.push_back(State{set, partial, remain, len, pending});
    trans_.resize(states_.size() * 256, kUnknown);
  }
  return it->second;
}

int32_t Automaton::compute(int32_t state, uint8_t byte) {
  const State st = states_[static_cast<size_t>(state)];
  int32_t result = kDead;
  auto done = [&](int32_t r) {
    trans_[static_cast<size_t>(state) * 256 + byte] = r;
    return r;
  };
  if (st.remain > 0 && st.pending >= 0) {
    // The pending character's outcome is already known: only check that this is a continuation byte.
    if ((byte & 0xC0) == 0x80) {
      result = st.remain == 1 ? intern_state(st.pending, 0, 0, 0, -1)
                              : intern_state(st.set, 0, st.remain - 1, st.len, st.pending);
    }
    return done(result);
  }
  // Strict UTF-8: leads C2..F4 only, and (below) no overlong forms, surrogates or code points past
  // U+10FFFF, so every accepted byte string decodes cleanly.
  uint32_t value = 0;
  int32_t remain = 0;
  int32_t len = st.len;
  if (st.remain == 0) {
    if (byte < 0x80) {
      value = byte;
    } else if (byte >= 0xC2 && byte <= 0xDF) {
      value = byte & 0x1Fu;
      remain = 1;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      value = byte & 0x0Fu;
      remain = 2;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      value = byte & 0x07u;
      remain = 3;
    } else {
      return done(kDead);
    }
    len = remain + 1;
  } else {
    if ((byte & 0xC0) != 0x80) return done(kDead);
    value = (st.partial << 6) | (byte & 0x3Fu);
    remain = st.remain - 1;
  }
  const std::vector<Stack>& stacks = sets_[static_cast<size_t>(st.set)];
  if (remain == 0) {
    Expansion ex;
    for (const Stack& s : stacks) {
      if (s.empty() || !grammar_->match_char(s.back(), value)) continue;
      Stack n(s.begin(), s.end() - 1);
      const uint32_t after = grammar_->after_char(s.back());
      if (!grammar_->is_end_of_sequence(after)) n.push_back(after);
      expand(std::move(n), ex);
    }
    const int32_t set = intern_expansion(ex);
    if (set >= 0) result = intern_state(set, 0, 0, 0, -1);
    return done(result);
  }
  // The code points this partial character can still become, limited to what its length may encode.
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  static const uint32_t kMax[5] = {0, 0, 0x7FF, 0xFFFF, 0x10FFFF};
  uint32_t low = value << (6 * remain);
  uint32_t high = low | ((1u << (6 * remain)) - 1);
  if (high < kMin[len] || low > kMax[len]) return done(kDead);
  if (len == 3 && low >= 0xD800 && high <= 0xDFFF) return done(kDead);  // surrogates
  const bool all_valid =
      low >= kMin[len] && high <= kMax[len] && !(len == 3 && low <= 0xDFFF && high >= 0xD800);
  low = std::max(low, kMin[len]);
  high = std::min(high, kMax[len]);
  if (all_valid) {
    // When every stack accepts all or none of the completions, decide the outcome now.
    bool uniform = true;
    Expansion ex;
    for (const Stack& s : stacks) {
      if (s.empty()) continue;
      const Grammar::RangeVerdict v = grammar_->range_verdict(s.back(), low, high);
      if (v == Grammar::RangeVerdict::kMixed) {
        uniform = false;
        break;
      }
      if (v == Grammar::RangeVerdict::kAll) {
        Stack n(s.begin(), s.end() - 1);
        const uint32_t after = grammar_->after_char(s.back());
        if (!grammar_->is_end_of_sequence(after)) n.push_back(after);
        expand(std::move(n), ex);
      }
    }
    if (uniform) {
      const int32_t set = intern_expansion(ex);
      if (set >= 0) result = intern_state(st.set, 0, remain, len, set);
      return done(result);
    }
  }
  // Keep the partial character only if some stack can accept one of its completions.
  for (const Stack& s : stacks) {
    if (!s.empty() && grammar_->match_range(s.back(), low, high)) {
      result = intern_state(st.set, value, remain, len, -1);
      break;
    }
  }
  return done(result);
}

int32_t Automaton::step_bytes(int32_t state, std::string_view bytes) {
  for (char c : bytes) {
    if (state == kDead) return kDead;
    state = step(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool Automaton::accepting(int32_t state) const {
  const State& st = states_[static_cast<size_t>(state)];
  return st.remain == 0 && set_accepting_[static_cast<size_t>(st.set)] != 0;
}

size_t Automaton::n_stacks(int32_t state) const {
  return sets_[static_cast<size_t>(states_[static_cast<size_t>(state)].set)].size();
}

int32_t Automaton::compact(int32_t keep) {
  const State st = states_[static_cast<size_t>(keep)];
  std::vector<Stack> stacks = sets_[static_cast<size_t>(st.set)];
  std::vector<Stack> pending;
  if (st.pending >= 0) pending = sets_[static_cast<size_t>(st.pending)];
  std::vector<Stack> init = sets_[static_cast<size_t>(states_[static_cast<size_t>(initial_)].set)];
  sets_.clear();
  set_accepting_.clear();
  set_ids_.clear();
  states_.clear();
  state_ids_.clear();
  trans_.clear();
  initial_ = intern_state(intern_set(std::move(init)), 0, 0, 0, -1);
  const int32_t set = intern_set(std::move(stacks));
  const int32_t pending_set = st.pending >= 0 ? intern_set(std::move(pending)) : -1;
  return intern_state(set, st.partial, st.remain, st.len, pending_set);
}

}  // namespace minfer::sampling::grammar
