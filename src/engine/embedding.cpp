#include "engine/embedding.h"

#include <cmath>

#include "kv/kv_cache.h"

namespace minfer::engine {

std::string_view pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::kNone:
      return "none";
    case Pooling::kMean:
      return "mean";
    case Pooling::kCls:
      return "cls";
    case Pooling::kLast:
      return "last";
  }
  return "?";
}

Result<Pooling> parse_pooling(std::string_view name) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    if (name == pooling_name(p)) return p;
  }
  return invalid_argument("unknown pooling '{}' (choose none, mean, cls or last)", name);
}

Result<std::optional<Pooling>> pooling_from_gguf(const gguf::File& file) {
  MINFER_ASSIGN_OR_RETURN(std::string arch, file.metadata().get_string("general.architecture"));
  const std::string key = arch + ".pooling_type";
  if (!file.metadata().contains(key)) return std::optional<Pooling>();
  MINFER_ASSIGN_OR_RETURN(uint32_t v, file.metadata().get_u32(key));
  switch (v) {
    case 0:
      return std::optional<Pooling>(Pooling::kNone);
    case 1:
      return std::optional<Pooling>(Pooling::kMean);
    case 2:
      return std::optional<Pooling>(Pooling::kCls);
    case 3:
      return std::optional<Pooling>(Pooling::kLast);
    case 4:
      return unsupported("{} = 4 (rank: a reranker's score head) is not supported; only none, mean, cls and last",
                         key);
    default:
      return invalid_argument("{} = {} is not a llama.cpp pooling type (0 none, 1 mean, 2 cls, 3 last)", key, v);
  }
}

void l2_normalize(std::vector<float>* v) {
  double sum = 0.0;
  for (float x : *v) sum += static_cast<double>(x) * x;
  const double norm = std::sqrt(sum);
  const float scale = norm > 0.0 ? static_cast<float>(1.0 / norm) : 0.0f;
  for (float& x : *v) x *= scale;
}

Result<std::vector<std::vector<float>>> embed(Engine& engine, const std::vector<std::vector<int32_t>>& inputs,
                                              Pooling pooling, const std::function<bool()>& keep_going) {
  if (pooling == Pooling::kNone)
    return invalid_argument("pooling 'none' gives one vector per token, not one per input; choose mean, cls or last");
  const int32_t n_ctx = engine.n_ctx();
  const auto n_embd = static_cast<size_t>(engine.hparams().n_embd);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) return invalid_argument("input {} is empty (no tokens to embed)", i);
    if (static_cast<int64_t>(inputs[i].size()) > n_ctx) {
      return error(StatusCode::kOutOfRange, "input {} has {} tokens, more than the context of {} tokens", i,
                   inputs[i].size(), n_ctx);
    }
  }
  kv::KvCache& kv = engine.kv();
  std::vector<std::vector<float>> out;
  out.reserve(inputs.size());
  size_t next = 0;
  while (next < inputs.size()) {
    // One decode per group: consecutive inputs while their tokens fit the cells and the sequence ids.
    Batch batch;
    size_t end = next;
    size_t cells = 0;
    while (end < inputs.size() && end - next < static_cast<size_t>(kv::kMaxSequences) &&
           cells + inputs[end].size() <= static_cast<size_t>(n_ctx)) {
      const std::vector<int32_t>& in = inputs[end];
      const auto seq = static_cast<kv::SeqId>(end - next);
      const auto n = static_cast<int32_t>(in.size());
      for (int32_t p = 0; p < n; ++p) {
        const bool want = pooling == Pooling::kMean || (pooling == Pooling::kCls && p == 0) ||
                          (pooling == Pooling::kLast && p == n - 1);
        batch.add(in[static_cast<size_t>(p)], p, seq, want);
      }
      cells += in.size();
      ++end;
    }
    if (keep_going && !keep_going()) return error(StatusCode::kUnavailable, "embeddings: cancelled");
    auto rows = engine.decode(batch, Engine::Output::kEmbeddings);
    kv.clear();  // the sequences are not continued: the next group starts from an empty cache
    if (!rows.ok()) return rows.status();
    const float* r = rows->data();
    for (size_t i = next; i < end; ++i) {
      std::vector<float> v(r, r + n_embd);
      r += n_embd;
      if (pooling == Pooling::kMean) {
        std::vector<double> acc(v.begin(), v.end());
        for (size_t t = 1; t < inputs[i].size(); ++t, r += n_embd) {
          for (size_t j = 0; j < n_embd; ++j) acc[j] += r[j];
        }
        const double inv = 1.0 / static_cast<double>(inputs[i].size());
        for (size_t j = 0; j < n_embd; ++j) v[j] = static_cast<float>(acc[j] * inv);
      }
      l2_normalize(&v);
      out.push_back(std::move(v));
    }
    next = end;
  }
  return out;
}

}  // namespace minfer::engine
