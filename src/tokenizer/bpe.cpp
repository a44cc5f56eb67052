// Merge table and the heap-driven BPE merge loop.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <climits>

#include "core/check.h"

namespace minfer::tokenizer {

Status MergeTable::init(int32_t n_tokens, size_t n_merges) {
  id_bits_ = std::max(1, static_cast<int>(std::bit_width(static_cast<uint32_t>(std::max(n_tokens, 2) - 1))));
  rank_bits_ = 64 - 2 * id_bits_;
  if (rank_bits_ < 2 || n_merges + 1 >= (uint64_t{1} << std::min(rank_bits_, 40))) {
    return invalid_argument("tokenizer: {} tokens and {} merges do not fit the merge table", n_tokens,
                            n_merges);
  }
  rank_mask_ = (uint64_t{1} << rank_bits_) - 1;
  size_t cap = 16;
  while (cap < n_merges + n_merges / 2) cap <<= 1;  // load <= 2/3
  slots_.assign(cap, 0);
  results_.assign(n_merges, -1);
  mask_ = cap - 1;
  shift_ = 64 - std::countr_zero(cap);
  size_ = 0;
  return Status::ok_status();
}

bool MergeTable::insert(int32_t left, int32_t right, int32_t rank, int32_t result) {
  MINFER_CHECK(static_cast<size_t>(rank) < results_.size() && (size_ + 1) * 3 <= slots_.size() * 2,
               "merge table: rank {} or size {} beyond init()", rank, size_);
  const uint64_t key = key_of(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    uint64_t& s = slots_[i];
    if (s != 0 && (s & ~rank_mask_) == key) return false;
    if (s == 0) {
      s = key | (static_cast<uint64_t>(rank) + 1);
      results_[static_cast<size_t>(rank)] = result;
      ++size_;
      return true;
    }
  }
}

namespace {

struct HeapGreater {
  bool operator()(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) const {
    return a.order > b.order;
  }
};

void push_candidate(const MergeTable& merges, BpeScratch& s, int32_t left) {
  if (left < 0) return;
  const int32_t right = s.symbols[left].next;
  if (right < 0) return;
  const int32_t a = s.symbols[left].id;
  const int32_t b = s.symbols[right].id;
  const MergeTable::Merge m = merges.find(a, b);
  if (m.rank < 0) return;
  s.heap.push_back({(static_cast<uint64_t>(m.rank) << 32) | static_cast<uint32_t>(left), a, b, m.result});
  std::push_heap(s.heap.begin(), s.heap.end(), HeapGreater{});
}

// Words this short (most of them) merge faster by rescanning a small rank array than through the heap;
// the order of merges is the same: lowest rank, then leftmost.
constexpr int32_t kShortWord = 32;

void bpe_short_word(const MergeTable& merges, const std::array<int32_t, 256>& byte_ids, std::string_view word,
                    std::vector<int32_t>& out) {
  int32_t ids[kShortWord];
  int32_t ranks[kShortWord];  // ranks[i]: pair (ids[i], ids[i + 1]), INT_MAX when it never merges
  int32_t results[kShortWord];
  auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) ids[i] = byte_ids[static_cast<uint8_t>(word[i])];
  auto pair = [&](int32_t i) {
    const MergeTable::Merge m = merges.find(ids[i], ids[i + 1]);
    ranks[i] = m.rank < 0 ? INT_MAX : m.rank;
    results[i] = m.result;
  };
  for (int32_t i = 0; i + 1 < n; ++i) pair(i);
  while (n > 1) {
    int32_t best = 0;
    for (int32_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT_MAX) break;
    ids[best] = results[best];
    for (int32_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --n;
    if (best + 1 < n) pair(best);
    if (best > 0) pair(best - 1);
  }
  out.insert(out.end(), ids, ids + n);
}

}  // namespace

void bpe_word(const MergeTable& merges, const std::array<int32_t, 256>& byte_ids, std::string_view word,
              BpeScratch& s, std::vector<int32_t>& out) {
  const auto n = static_cast<int32_t>(word.size());
  if (n == 1) {
    out.push_back(byte_ids[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (n <= kShortWord) {
    bpe_short_word(merges, byte_ids, word, out);
    return;
  }
  s.symbols.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    s.symbols[i] = {byte_ids[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  s.heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(merges, s, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), HeapGreater{});
    const BpeScratch::Candidate c = s.heap.back();
    s.heap.pop_back();
    const auto left = static_cast<int32_t>(c.order & 0xffffffffu);
    BpeScratch::Symbol& l = s.symbols[left];
    // Stale when either side has changed since the candidate was queued (merged away symbols have id -1).
    if (l.id != c.left_id || l.next < 0) continue;
    BpeScratch::Symbol& r = s.symbols[l.next];
    if (r.id != c.right_id) continue;
    l.id = c.result;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) s.symbols[r.next].prev = left;
    push_candidate(merges, s, l.prev);
    push_candidate(merges, s, left);
  }
  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) out.push_back(s.symbols[i].id);
}

}  // namespace minfer::tokenizer
