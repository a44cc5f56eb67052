// Tokenizer::encode/decode: special-token partition (llama.cpp's order: longest special first, every
// occurrence), then per fragment pre-tokenization and BPE with a per-thread word cache.
#include "tokenizer/tokenizer.h"

#include <atomic>
#include <cstring>

#include "core/byte_unicode.h"
#include "tokenizer/spm.h"

namespace minfer::tokenizer {
namespace {

std::atomic<uint64_t> g_next_cache_key{1};

uint64_t hash_word(std::string_view s) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}

// Word -> ids for one vocabulary, owned by one thread: no locks. Starts small and doubles up to kMaxSlots
// (so a short prompt does not pay for a big table); cleared when full at that size or when the thread
// starts encoding with another vocabulary.
class WordCache {
 public:
  static constexpr size_t kMinSlots = size_t{1} << 12;
  static constexpr size_t kMaxSlots = size_t{1} << 17;  // ~3 MB with keys and ids
  static constexpr size_t kMaxWord = 128;               // longer words are rare repeats; not worth the space

  void reset(uint64_t owner) {
    owner_ = owner;
    slots_.assign(kMinSlots, Slot{});
    keys_.clear();
    ids_.clear();
    entries_ = 0;
  }
  uint64_t owner() const { return owner_; }

  // Appends the cached ids of `word` to out and returns true, or returns false.
  bool lookup(std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.ids_len == 0) return false;
      if (s.hash == h && s.key_len == word.size() &&
          std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
        out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
        return true;
      }
    }
  }

  void insert(std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
    if ((entries_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) {
        reset(owner_);
      } else {
        grow();
      }
    }
    place(Slot{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(word.size()),
               static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)});
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + n);
    ++entries_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0;
    uint32_t key_len = 0;
    uint32_t ids_off = 0;
    uint32_t ids_len = 0;  // 0 = empty slot (every word has at least one id)
  };

  void place(const Slot& slot) {
    const size_t mask = slots_.size() - 1;
    for (size_t i = slot.hash & mask;; i = (i + 1) & mask) {
      if (slots_[i].ids_len == 0) {
        slots_[i] = slot;
        return;
      }
    }
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.ids_len != 0) place(s);
    }
  }

  uint64_t owner_ = 0;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t entries_ = 0;
};

struct ThreadState {
  WordCache cache;
  BpeScratch scratch;
  SpmScratch spm;
  std::string escaped;    // a SentencePiece fragment with spaces as `▁`
  std::string word_text;  // a word in the vocabulary's byte-to-unicode spelling (ignore_merges)
};

// `word` spelled as byte-level BPE vocabularies store tokens (GPT-2's byte-to-unicode map).
void byte_level_text(std::string_view word, std::string& out) {
  out.clear();
  for (char ch : word) {
    const uint32_t cp = byte_to_codepoint(static_cast<uint8_t>(ch));
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
}

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

struct Fragment {
  int32_t token;  // -1: raw text [off, off + len)
  size_t off;
  size_t len;
};

// llama.cpp's clean_spaces passes over detokenized text, in its order: " ?", " !", " .", " ," lose the
// space; a lone "'" between spaces loses both; " 's", " 'm", " 're", " 've" lose the space.
void clean_spaces(std::string& text) {
  auto pass = [&](auto&& body) {
    const size_t n = text.size();
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; ++i) body(i, n, total);
    text.resize(total);
  };
  pass([&](size_t i, size_t, size_t& total) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  });
  pass([&](size_t& i, size_t n, size_t& total) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  });
  pass([&](size_t i, size_t n, size_t& total) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  });
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const Vocab> vocab)
    : vocab_(std::move(vocab)), cache_key_(g_next_cache_key.fetch_add(1)) {}

Result<Tokenizer> Tokenizer::from_spec(const VocabSpec& spec) {
  MINFER_ASSIGN_OR_RETURN(Vocab vocab, Vocab::build(spec));
  return Tokenizer(std::make_shared<const Vocab>(std::move(vocab)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  encode(text, add_special, parse_special, out);
  return out;
}

void Tokenizer::encode(std::string_view text, bool add_special, bool parse_special,
                       std::vector<int32_t>& out) const {
  // llama.cpp's llama_tokenize: BOS before the text and EOS after it, each only where the vocabulary asks
  // for it (an empty text still gets them: tokenizers' encode('', add_special_tokens=True)).
  const SpecialIds& ids = vocab_->special_ids();
  if (add_special && vocab_->add_bos() && ids.bos >= 0) out.push_back(ids.bos);
  encode_fragments(text, parse_special, out);
  if (add_special && vocab_->add_eos() && ids.eos >= 0) out.push_back(ids.eos);
}

std::string Tokenizer::bos_text() const {
  const int32_t id = vocab_->special_ids().bos;
  return id >= 0 && id < n_vocab() ? std::string(vocab_->text(id)) : std::string();
}

std::string Tokenizer::eos_text() const {
  const int32_t id = vocab_->special_ids().eos;
  return id >= 0 && id < n_vocab() ? std::string(vocab_->text(id)) : std::string();
}

std::vector<int32_t> Tokenizer::encode_chat(std::string_view rendered) const {
  // llama.cpp's common_chat_template apply: a template that writes {{ bos_token }} itself would get a second
  // BOS from add_special, so the text loses a leading BOS text (and a trailing EOS text) that encode adds.
  const std::string bos = bos_text(), eos = eos_text();
  const SpecialIds& ids = vocab_->special_ids();
  if (vocab_->add_bos() && ids.bos >= 0 && !bos.empty() && rendered.starts_with(bos))
    rendered.remove_prefix(bos.size());
  if (vocab_->add_eos() && ids.eos >= 0 && !eos.empty() && rendered.ends_with(eos))
    rendered.remove_suffix(eos.size());
  return encode(rendered, /*add_special=*/true, /*parse_special=*/true);
}

void Tokenizer::encode_fragments(std::string_view text, bool parse_special, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  out.reserve(out.size() + text.size() / 3);
  std::vector<Fragment> fragments{{-1, 0, text.size()}};
  std::vector<Fragment> next;
  for (const int32_t id : vocab_->specials()) {
    // CONTROL/UNKNOWN only with parse_special; USER_DEFINED always (llama.cpp, after HF tokenizers).
    if (!parse_special && vocab_->has_attr(id, kAttrControl | kAttrUnknown)) continue;
    const std::string_view special = vocab_->text(id);
    if (text.find(special) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view region = text.substr(0, f.off + f.len);
      size_t pos = f.off;
      for (size_t m; (m = region.find(special, pos)) != std::string_view::npos;) {
        if (m > pos) next.push_back({-1, pos, m - pos});
        next.push_back({id, 0, 0});
        pos = m + special.size();
      }
      if (pos < f.off + f.len) next.push_back({-1, pos, f.off + f.len - pos});
    }
    fragments.swap(next);
  }
  // SentencePiece: a space before the first raw fragment and before each one that follows a special token
  // (llama.cpp's is_prev_special, true at the start whether or not BOS is added).
  const bool spm = vocab_->kind() == VocabKind::kSpm;
  bool prev_special = true;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
    } else if (spm) {
      encode_spm(text.substr(f.off, f.len), prev_special && vocab_->add_space_prefix(), out);
      prev_special = false;
    } else {
      encode_text(text.substr(f.off, f.len), out);
      prev_special = false;
    }
  }
}

void Tokenizer::encode_spm(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const {
  ThreadState& ts = thread_state();
  if (ts.cache.owner() != cache_key_) ts.cache.reset(cache_key_);
  const Vocab& v = *vocab_;
  constexpr std::string_view kSpace = "\xe2\x96\x81";
  std::string& s = ts.escaped;
  s.clear();
  s.reserve(text.size() + text.size() / 4 + 3);
  if (space_prefix) s += kSpace;
  for (const char c : text) {
    if (c == ' ') {
      s += kSpace;
    } else {
      s += c;
    }
  }
  // The merges never cross a cut before a `▁` whose preceding symbol no token joins to a `▁`
  // (Vocab::spm_can_split_after), so each piece between such cuts is tokenized (and cached) on its own.
  auto emit = [&](std::string_view piece) {
    if (piece.size() > WordCache::kMaxWord) {
      spm_tokenize(v, piece, ts.spm, out);
      return;
    }
    const uint64_t h = hash_word(piece);
    if (ts.cache.lookup(piece, h, out)) return;
    const size_t first = out.size();
    spm_tokenize(v, piece, ts.spm, out);
    ts.cache.insert(piece, h, out.data() + first, out.size() - first);
  };
  const std::string_view all(s);
  size_t start = 0, prev = 0;
  for (size_t off = 0; off < all.size();) {
    const size_t len = std::min(spm_char_len(static_cast<uint8_t>(all[off])), all.size() - off);
    if (off > start && len == 3 && all.compare(off, 3, kSpace) == 0 &&
        v.spm_can_split_after(all.substr(prev, off - prev))) {
      emit(all.substr(start, off - start));
      start = off;
    }
    prev = off;
    off += len;
  }
  if (start < all.size()) emit(all.substr(start));
}

std::string Tokenizer::detokenize(std::span<const int32_t> ids, bool remove_special,
                                  bool unparse_special) const {
  const Vocab& v = *vocab_;
  bool remove_space = v.add_space_prefix();
  if (remove_special && v.add_bos() && !ids.empty() && ids.front() == v.special_ids().bos) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && v.add_eos() && !ids.empty() && ids.back() == v.special_ids().eos) {
    ids = ids.first(ids.size() - 1);
  }
  std::string text;
  for (const int32_t id : ids) {
    if (id < 0 || id >= n_vocab()) {
      remove_space = false;
      continue;
    }
    std::string_view piece;
    if (unparse_special || !v.has_attr(id, kAttrControl | kAttrUnknown)) piece = v.bytes(id);
    if (remove_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    remove_space = false;
    text.append(piece);
  }
  if (v.clean_spaces()) clean_spaces(text);
  return text;
}

void Tokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  ThreadState& ts = thread_state();
  if (ts.cache.owner() != cache_key_) ts.cache.reset(cache_key_);
  const Vocab& v = *vocab_;
  WordSplitter split(v.pre_tokenizer(), text);
  const bool ignore_merges = v.pre_tokenizer() == PreTokenizer::kLlama3;
  for (std::string_view word; split.next(&word);) {
    if (word.size() == 1) {
      out.push_back(v.byte_token(static_cast<uint8_t>(word[0])));
      continue;
    }
    if (ignore_merges) {  // llama.cpp's ignore_merges (llama3): a word that is a token is that token
      byte_level_text(word, ts.word_text);
      if (const int32_t id = v.find(ts.word_text); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    if (word.size() > WordCache::kMaxWord) {
      bpe_word(v.merges(), v.byte_ids(), word, ts.scratch, out);
      continue;
    }
    const uint64_t h = hash_word(word);
    if (ts.cache.lookup(word, h, out)) continue;
    const size_t first = out.size();
    bpe_word(v.merges(), v.byte_ids(), word, ts.scratch, out);
    ts.cache.insert(word, h, out.data() + first, out.size() - first);
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id >= 0 && id < n_vocab()) out += vocab_->bytes(id);
  }
  return out;
}

}  // namespace minfer::tokenizer
