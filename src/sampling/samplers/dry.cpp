// DRY repetition penalty (llama.cpp / koboldcpp semantics): find, with a reversed Z-algorithm, how long a
// repeated suffix each candidate would extend, limited by the most recent sequence breaker.
#include <algorithm>
#include <cmath>

#include "sampling/samplers/samplers.h"

namespace minfer::sampling {
namespace {

constexpr size_t kMaxBreakerChars = 40;  // llama.cpp truncates longer breakers
constexpr size_t kMaxBreakerTail = 20;   // and caps the token tail
constexpr size_t kUnboundedHistory = 1 << 16;

// For each token: a breaker fully inside it restarts alone (empty tail); a token ending with a prefix of
// the breaker restarts only when followed by the tokenization of the rest (needs vocab.tokenize).
void add_breaker(const VocabView& vocab, std::string str,
                 std::unordered_multimap<int32_t, std::vector<int32_t>>* out) {
  if (str.empty()) return;
  if (str.size() > kMaxBreakerChars) str.resize(kMaxBreakerChars);
  for (int32_t id = 0; id < vocab.n_vocab(); ++id) {
    const std::string& word = vocab.token_bytes[static_cast<size_t>(id)];
    if (word.empty()) continue;
    if (word.find(str) != std::string::npos) {
      out->emplace(id, std::vector<int32_t>());
      continue;
    }
    if (!vocab.tokenize) continue;
    size_t pos = std::string::npos;
    while ((pos = word.find(str[0], pos + 1)) != std::string::npos) {
      bool match = true;
      size_t i = 1;
      for (; i < str.size() && pos + i < word.size(); ++i) {
        if (word[pos + i] != str[i]) {
          match = false;
          break;
        }
      }
      if (!match) continue;
      std::vector<int32_t> tail = vocab.tokenize(std::string_view(str).substr(i));
      if (tail.size() > kMaxBreakerTail) tail.resize(kMaxBreakerTail);
      bool dup = false;
      auto range = out->equal_range(id);
      for (auto it = range.first; it != range.second; ++it) dup = dup || it->second == tail;
      if (!dup) out->emplace(id, std::move(tail));
    }
  }
}

}  // namespace

Dry::Dry(const SamplerConfig& cfg, const VocabView& vocab)
    : multiplier_(cfg.dry_multiplier),
      base_(cfg.dry_base),
      allowed_length_(cfg.dry_allowed_length),
      last_n_(cfg.dry_penalty_last_n),
      capacity_(cfg.dry_penalty_last_n < 0 ? kUnboundedHistory
                                           : static_cast<size_t>(cfg.dry_penalty_last_n)) {
  if (!active()) return;
  for (const std::string& s : cfg.dry_sequence_breakers) add_breaker(vocab, s, &breakers_);
}

bool Dry::active() const {
  return multiplier_ != 0.0f && base_ >= 1.0f && last_n_ != 0;
}

void Dry::accept(int32_t token) {
  if (!active()) return;
  history_.push_back(token);
  if (history_.size() > capacity_) history_.pop_front();
}

void Dry::apply(Candidates& c) {
  if (!active()) return;
  const int n = static_cast<int>(history_.size());  // history is already capped to the window
  if (n <= allowed_length_) return;

  // 1. The most recent breaker limits how far back a repetition may reach.
  int rep_limit = n;
  for (int i = 0; i < n; ++i) {
    auto range = breakers_.equal_range(rat(i));
    if (range.first == range.second) continue;
    int longest = -1;
    for (auto it = range.first; it != range.second; ++it) {
      const int len = static_cast<int>(it->second.size());
      if (len <= longest || len > i) continue;
      bool match = true;
      for (int off = 0; off < len && match; ++off)
        match = it->second[static_cast<size_t>(off)] == rat(i - off - 1);
      if (match) longest = len;
    }
    if (longest >= 0) {
      rep_limit = i - longest;
      break;
    }
  }
  if (rep_limit < allowed_length_) return;

  // 2. Z-algorithm over the reversed history: repeat_count_[last - k] = length of the common suffix of the
  //    whole history and the history cut k tokens earlier (capped at rep_limit).
  repeat_count_.assign(static_cast<size_t>(n), 0);
  const int last = n - 1;
  int lt = 0;
  int rt = 0;
  for (int k = 1; k < n; ++k) {
    if (k > rt) {
      int len = 0;
      while (len + k < n && rat(len) == rat(len + k)) ++len;
      repeat_count_[static_cast<size_t>(last - k)] = std::min(len, rep_limit);
      if (len > 0) {
        lt = k;
        rt = k + len - 1;
      }
    } else {
      const int p = k - lt;
      const int right_len = rt - k + 1;
      if (repeat_count_[static_cast<size_t>(last - p)] < right_len) {
        repeat_count_[static_cast<size_t>(last - k)] =
            std::min(repeat_count_[static_cast<size_t>(last - p)], rep_limit);
      } else {
        int i = rt + 1;
        while (i < n && rat(i) == rat(i - k)) ++i;
        repeat_count_[static_cast<size_t>(last - k)] = std::min(i - k, rep_limit);
        lt = k;
        rt = i - 1;
      }
    }
  }

  // 3. The token that followed each repeat would extend it: keep the longest per token.
  max_token_repeat_.clear();
  for (int i = 0; i < n - 1; ++i) {
    const int len = repeat_count_[static_cast<size_t>(i)];
    if (len < allowed_length_) continue;
    const int32_t token = rat(n - 2 - i);
    auto [it, inserted] = max_token_repeat_.emplace(token, len);
    if (!inserted && it->second < len) it->second = len;
  }

  // 4. Exponential penalty, with the exponent capped so the result stays a finite float.
  constexpr float kFloatMaxLog = 88.7228391f;
  int max_exponent = 0;
  if (base_ > 1.000001f) max_exponent = static_cast<int>(kFloatMaxLog / std::log(base_));
  auto penalise = [&](TokenData& t, int len) {
    int exponent = len - allowed_length_;
    if (max_exponent > 0 && exponent > max_exponent) exponent = max_exponent;
    t.logit -= multiplier_ * std::pow(base_, static_cast<float>(exponent));
  };
  if (is_identity_layout(c)) {
    for (const auto& [id, len] : max_token_repeat_) {
      if (id >= 0 && static_cast<size_t>(id) < c.size()) penalise(c.data[static_cast<size_t>(id)], len);
    }
  } else {
    for (TokenData& t : c.data) {
      const auto it = max_token_repeat_.find(t.id);
      if (it != max_token_repeat_.end()) penalise(t, it->second);
    }
  }
  c.sorted = false;
}

}  // namespace minfer::sampling
