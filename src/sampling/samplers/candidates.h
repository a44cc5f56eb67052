// Candidates: the token list every sampler stage works on (llama_token_data_array semantics: id, logit,
// probability, a `sorted` flag meaning "descending by logit"), plus softmax and the final draw.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace minfer::sampling {

struct TokenData {
  int32_t id = 0;
  float logit = 0.0f;
  float p = 0.0f;
};

struct Candidates {
  std::vector<TokenData> data;
  bool sorted = false;

  size_t size() const { return data.size(); }
  // Fills from raw logits: one entry per token, in id order.
  void assign(std::span<const float> logits);
};

// True when data[i].id == i for every i (candidates straight from assign()), checked at the ends.
inline bool is_identity_layout(const Candidates& c) {
  return !c.data.empty() && !c.sorted && c.data.front().id == 0 &&
         c.data.back().id == static_cast<int32_t>(c.data.size() - 1);
}

// The candidate order every sorting stage uses: logit descending, then id ascending (a total order, so
// partial and full sorts agree on their common prefix).
inline bool logit_desc(const TokenData& a, const TokenData& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}
// Sorts by logit_desc when not sorted yet.
void sort_desc(Candidates& c);
// Fills p with softmax(logit); sorts first when `do_sort`.
void softmax(Candidates& c, bool do_sort);
// Index (into c.data) of the highest logit; ties go to the earliest entry.
size_t argmax_index(const Candidates& c);
// Draws an index from softmax(logit) with one uniform from `rng` (inverse CDF, like llama.cpp's dist).
size_t draw_index(Candidates& c, Rng& rng);

}  // namespace minfer::sampling
