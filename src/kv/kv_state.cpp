#include "kv/kv_state.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/fnv1a.h"

namespace minfer::kv {
namespace {

constexpr char kMagic[4] = {'M', 'F', 'K', 'V'};
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void put_string(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    put_bytes(s.data(), s.size());
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Bounds-checked reads over the untrusted payload.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  bool get(T* v) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool get_string(std::string* s) {
    uint32_t n = 0;
    if (!get(&n) || bytes_.size() - pos_ < n) return false;
    s->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  const uint8_t* take(size_t n) {
    if (bytes_.size() - pos_ < n) return nullptr;
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace

Status save_kv_file(const std::string& path, const KvFileIdentity& identity, const KvCache& kv,
                    const std::vector<SavedSequence>& seqs) {
  const auto views = kv.views();
  const size_t row_bytes = views.empty() ? 0 : views[0].row_bytes;
  Writer w;
  w.put_string(identity.model);
  w.put(static_cast<int64_t>(identity.n_ctx));
  w.put(static_cast<uint32_t>(identity.cache_type));
  w.put(static_cast<int32_t>(identity.n_seq));
  w.put(static_cast<int64_t>(row_bytes));
  w.put(static_cast<int32_t>(views.size()));
  w.put(static_cast<uint32_t>(seqs.size()));
  for (const SavedSequence& s : seqs) {
    const auto cells = kv.seq_cells(s.seq);
    const size_t n = s.tokens.size();
    if (cells.size() < n) {
      return invalid_argument("KV save: sequence {} holds {} cells for {} tokens", s.seq, cells.size(), n);
    }
    for (size_t i = 0; i < n; ++i) {
      if (cells[i].first != static_cast<int32_t>(i)) {
        return invalid_argument("KV save: sequence {} lacks position {}", s.seq, i);
      }
    }
    w.put(static_cast<int32_t>(s.seq));
    w.put(static_cast<uint32_t>(n));
    w.put_bytes(s.tokens.data(), n * sizeof(int32_t));
    std::vector<uint8_t> row(row_bytes);
    for (size_t l = 0; l < views.size(); ++l) {
      for (bool v : {false, true}) {
        for (size_t i = 0; i < n; ++i) {  // through the cache: a layer may live in device memory
          MINFER_RETURN_IF_ERROR(kv.read_row(static_cast<int32_t>(l), v, cells[i].second, row.data()));
          w.put_bytes(row.data(), row_bytes);
        }
      }
    }
  }
  const std::vector<uint8_t>& payload = w.bytes();
  Writer header;
  header.put_bytes(kMagic, 4);
  header.put(kKvFileVersion);
  header.put(static_cast<uint64_t>(payload.size()));
  header.put(fnv1a(payload.data(), payload.size()));

  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(header.bytes().data()),
              static_cast<std::streamsize>(header.bytes().size()));
    out.write(reinterpret_cast<const char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return io_error("KV save: cannot write '{}'", tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return io_error("KV save: cannot rename '{}' to '{}'", tmp, path);
  }
  return {};
}

Result<std::vector<SavedSequence>> load_kv_file(const std::string& path, const KvFileIdentity& identity,
                                                KvCache& kv) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("KV file '{}': cannot open", path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fail = [&](std::string_view why) { return invalid_argument("KV file '{}': {}", path, why); };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 4) != 0)
    return fail("not a minfer KV file");
  Reader head(std::span<const uint8_t>(bytes).first(kHeaderBytes));
  uint32_t version = 0;
  uint64_t payload_bytes = 0, checksum = 0;
  (void)head.take(4);
  (void)head.get(&version);
  (void)head.get(&payload_bytes);
  (void)head.get(&checksum);
  if (version != kKvFileVersion) {
    return fail(fmt::format("format version {} (this build reads {})", version, kKvFileVersion));
  }
  if (payload_bytes != bytes.size() - kHeaderBytes) {
    return fail(fmt::format("truncated or padded: {} payload bytes, header says {}",
                            bytes.size() - kHeaderBytes, payload_bytes));
  }
  const std::span<const uint8_t> payload = std::span<const uint8_t>(bytes).subspan(kHeaderBytes);
  if (fnv1a(payload.data(), payload.size()) != checksum) return fail("checksum mismatch");

  Reader r(payload);
  std::string model;
  int64_t n_ctx = 0, row_bytes = 0;
  uint32_t cache_type = 0, n_seqs = 0;
  int32_t n_layer = 0, n_seq = 0;
  if (!r.get_string(&model) || !r.get(&n_ctx) || !r.get(&cache_type) || !r.get(&n_seq) ||
      !r.get(&row_bytes) || !r.get(&n_layer) || !r.get(&n_seqs)) {
    return fail("truncated identity");
  }
  if (model != identity.model) return fail(fmt::format("saved for another model ({})", model));
  if (n_ctx != identity.n_ctx)
    return fail(fmt::format("saved with n_ctx {}, this run uses {}", n_ctx, identity.n_ctx));
  if (cache_type != static_cast<uint32_t>(identity.cache_type)) {
    return fail(fmt::format("saved with cache type {}, this run uses {}",
                            dtype_name(static_cast<DType>(cache_type)), dtype_name(identity.cache_type)));
  }
  if (n_seq != identity.n_seq) {
    return fail(fmt::format("saved with {} sequences (--n-slots), this run uses {}", n_seq, identity.n_seq));
  }
  const auto views = kv.views();
  if (views.empty() || n_layer != static_cast<int32_t>(views.size()) ||
      row_bytes != static_cast<int64_t>(views[0].row_bytes)) {
    return fail("the cache geometry (layers, row size) differs");
  }

  // Parse everything before touching the cache, so a bad file changes nothing.
  struct Pending {
    SavedSequence seq;
    const uint8_t* rows = nullptr;  // [n_layer][K, V][n][row_bytes]
  };
  std::vector<Pending> pending;
  uint64_t seen = 0;
  for (uint32_t i = 0; i < n_seqs; ++i) {
    Pending p;
    uint32_t n = 0;
    if (!r.get(&p.seq.seq) || !r.get(&n)) return fail("truncated sequence header");
    if (p.seq.seq < 0 || p.seq.seq >= kMaxSequences)
      return fail(fmt::format("sequence id {} out of range", p.seq.seq));
    if ((seen >> p.seq.seq) & 1) return fail(fmt::format("sequence {} appears twice", p.seq.seq));
    seen |= uint64_t{1} << p.seq.seq;
    if (n > static_cast<uint64_t>(kv.n_cells())) return fail(fmt::format("{} tokens exceed the context", n));
    const uint8_t* ids = r.take(size_t{n} * sizeof(int32_t));
    if (ids == nullptr) return fail("truncated tokens");
    p.seq.tokens.resize(n);
    std::memcpy(p.seq.tokens.data(), ids, size_t{n} * sizeof(int32_t));
    p.rows = r.take(static_cast<size_t>(n_layer) * 2 * n * static_cast<size_t>(row_bytes));
    if (p.rows == nullptr) return fail("truncated KV rows");
    if (kv.seq_pos_max(p.seq.seq) >= 0)
      return fail(fmt::format("sequence {} is not empty in the cache", p.seq.seq));
    pending.push_back(std::move(p));
  }
  if (!r.done()) return fail("trailing bytes after the last sequence");

  std::vector<SavedSequence> out;
  for (size_t i = 0; i < pending.size(); ++i) {
    const Pending& p = pending[i];
    const size_t n = p.seq.tokens.size();
    std::vector<SeqId> ids(n, p.seq.seq);
    std::vector<int32_t> positions(n);
    for (size_t j = 0; j < n; ++j) positions[j] = static_cast<int32_t>(j);
    auto cells = kv.allocate(ids, positions);
    if (!cells.ok()) {
      for (size_t j = 0; j < i; ++j) kv.seq_rm(pending[j].seq.seq, 0, -1);
      return cells.status().with_context(fmt::format("KV file '{}': ", path));
    }
    const uint8_t* src = p.rows;
    for (size_t l = 0; l < views.size(); ++l) {
      for (bool v : {false, true}) {
        for (size_t j = 0; j < n; ++j) {
          Status st = kv.write_row(static_cast<int32_t>(l), v, (*cells)[j], src);
          if (!st.ok()) {
            for (size_t k = 0; k <= i; ++k) kv.seq_rm(pending[k].seq.seq, 0, -1);
            return st.with_context(fmt::format("KV file '{}': ", path));
          }
          src += views[l].row_bytes;
        }
      }
    }
    out.push_back(p.seq);
  }
  return out;
}

}  // namespace minfer::kv
