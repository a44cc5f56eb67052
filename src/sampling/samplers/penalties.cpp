// Repeat / frequency / presence penalties over a sliding window of accepted tokens (llama.cpp semantics:
// a positive logit is divided by the repeat penalty, a non-positive one multiplied).
#include "sampling/samplers/samplers.h"

namespace minfer::sampling {

Penalties::Penalties(int32_t last_n, float repeat, float frequency, float presence)
    : last_n_(last_n), repeat_(repeat), frequency_(frequency), presence_(presence) {}

bool Penalties::active() const {
  return last_n_ != 0 && (repeat_ != 1.0f || frequency_ != 0.0f || presence_ != 0.0f);
}

void Penalties::accept(int32_t token) {
  if (!active()) return;
  ++counts_[token];
  history_.push_back(token);
  if (last_n_ > 0 && history_.size() > static_cast<size_t>(last_n_)) {
    const int32_t old = history_.front();
    history_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
  }
}

void Penalties::apply(Candidates& c) const {
  if (!active() || counts_.empty()) return;
  auto penalise = [&](TokenData& t, int32_t count) {
    if (t.logit <= 0.0f) {
      t.logit *= repeat_;
    } else {
      t.logit /= repeat_;
    }
    t.logit -= static_cast<float>(count) * frequency_ + (count > 0 ? 1.0f : 0.0f) * presence_;
  };
  if (is_identity_layout(c)) {
    // Fresh candidates are indexed by id: touch only the penalised tokens.
    for (const auto& [id, count] : counts_) {
      if (static_cast<size_t>(id) < c.size()) penalise(c.data[static_cast<size_t>(id)], count);
    }
  } else {
    for (TokenData& t : c.data) {
      const auto it = counts_.find(t.id);
      if (it != counts_.end()) penalise(t, it->second);
    }
  }
  c.sorted = false;
}

}  // namespace minfer::sampling
