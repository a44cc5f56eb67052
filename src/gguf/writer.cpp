#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <unordered_set>

namespace minfer::gguf {
namespace {

class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void put(T v) {
    append(&v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    append(s.data(), s.size());
  }
  // resize + memcpy rather than insert: GCC 12 at -O3 reports a false -Wstringop-overflow on insert.
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_->size();
    out_->resize(at + n);
    std::memcpy(out_->data() + at, p, n);
  }
  void put_array(const Array& a) {
    put<uint32_t>(static_cast<uint32_t>(a.elem_type));
    put<uint64_t>(a.count);
    if (a.elem_type == ValueType::STRING) {
      for (const std::string& s : a.strings) put_string(s);
    } else if (a.elem_type == ValueType::ARRAY) {
      for (const Array& inner : a.arrays) put_array(inner);
    } else {
      append(a.raw.data(), a.raw.size());
    }
  }
  void put_value(const Value& v) {
    if (v.type() == ValueType::STRING) {
      put_string(v.as_string());
    } else if (v.type() == ValueType::ARRAY) {
      put_array(v.as_array());
    } else {
      append(v.raw(), value_type_size(v.type()));
    }
  }

 private:
  std::vector<uint8_t>* out_;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

Status Writer::add(std::string name, DType type, std::vector<int64_t> ne, Pending pending) {
  if (name.empty()) return invalid_argument("gguf writer: empty tensor name");
  for (const Pending& p : tensors_) {
    if (p.info.name == name) return invalid_argument("gguf writer: duplicate tensor '{}'", name);
  }
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    return invalid_argument("gguf writer: tensor '{}' has {} dimensions", name, ne.size());
  }
  TensorInfo& t = pending.info;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = static_cast<int>(ne.size());
  for (size_t d = 0; d < ne.size(); ++d) t.ne[d] = ne[d];
  auto row = row_bytes(type, t.ne[0]);
  if (!row) {
    return invalid_argument("gguf writer: tensor '{}': ne[0]={} is not a multiple of the {} block size", t.name,
                            t.ne[0], dtype_name(type));
  }
  t.n_bytes = *row * static_cast<uint64_t>(t.ne[1] * t.ne[2] * t.ne[3]);
  const size_t have = pending.producer ? t.n_bytes : (pending.owned.empty() ? pending.view.size() : pending.owned.size());
  if (have != t.n_bytes) {
    return invalid_argument("gguf writer: tensor '{}' has {} bytes of data, its shape needs {}", t.name, have, t.n_bytes);
  }
  tensors_.push_back(std::move(pending));
  return {};
}

Status Writer::add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::span<const uint8_t> data) {
  Pending p;
  p.view = data;
  return add(std::move(name), type, std::move(ne), std::move(p));
}

Status Writer::add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> data) {
  Pending p;
  p.owned = std::move(data);
  return add(std::move(name), type, std::move(ne), std::move(p));
}

Status Writer::add_tensor(std::string name, DType type, std::vector<int64_t> ne, Producer producer) {
  Pending p;
  p.producer = std::move(producer);
  return add(std::move(name), type, std::move(ne), std::move(p));
}

Status Writer::emit(const std::function<Status(const void*, size_t)>& sink, const Progress& progress,
                    int producers_ahead) const {
  uint64_t alignment = kDefaultAlignment;
  if (const Value* a = metadata_.find(kAlignmentKey)) {
    if (a->type() != ValueType::U32 || a->as_u64() == 0 || (a->as_u64() & (a->as_u64() - 1)) != 0) {
      return invalid_argument("gguf writer: {} must be a u32 power of two", kAlignmentKey);
    }
    alignment = a->as_u64();
  }

  std::vector<uint8_t> header;
  Encoder enc(&header);
  enc.put<uint32_t>(kMagic);
  enc.put<uint32_t>(kVersion);
  enc.put<uint64_t>(tensors_.size());
  enc.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_.entries()) {
    enc.put_string(key);
    enc.put<uint32_t>(static_cast<uint32_t>(value.type()));
    enc.put_value(value);
  }
  uint64_t offset = 0;
  for (const Pending& p : tensors_) {
    enc.put_string(p.info.name);
    enc.put<uint32_t>(static_cast<uint32_t>(p.info.n_dims));
    for (int d = 0; d < p.info.n_dims; ++d) enc.put<uint64_t>(static_cast<uint64_t>(p.info.ne[d]));
    enc.put<uint32_t>(static_cast<uint32_t>(p.info.type));
    enc.put<uint64_t>(offset);
    offset = align_up(offset + p.info.n_bytes, alignment);
  }
  header.resize(align_up(header.size(), alignment), 0);
  MINFER_RETURN_IF_ERROR(sink(header.data(), header.size()));

  // Producers running ahead of the tensor being written, in tensor order. An early return leaves the rest
  // to the futures' destructors, which wait for them.
  std::deque<std::future<Result<std::vector<uint8_t>>>> ahead;
  size_t next_to_start = 0;
  const size_t window = static_cast<size_t>(std::max(producers_ahead, 1));
  static const std::vector<uint8_t> kZeros(4096, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Pending& p = tensors_[i];
    std::vector<uint8_t> produced;
    std::span<const uint8_t> data = p.owned.empty() ? p.view : std::span<const uint8_t>(p.owned);
    if (p.producer) {
      if (window > 1) {
        for (next_to_start = std::max(next_to_start, i);
             next_to_start < tensors_.size() && ahead.size() < window; ++next_to_start) {
          if (tensors_[next_to_start].producer) {
            ahead.push_back(std::async(std::launch::async, tensors_[next_to_start].producer));
          }
        }
        MINFER_ASSIGN_OR_RETURN(produced, ahead.front().get());
        ahead.pop_front();
      } else {
        MINFER_ASSIGN_OR_RETURN(produced, p.producer());
      }
      if (produced.size() != p.info.n_bytes) {
        return error(StatusCode::kInternal, "gguf writer: tensor '{}' producer gave {} bytes, expected {}", p.info.name,
                     produced.size(), p.info.n_bytes);
      }
      data = produced;
    }
    MINFER_RETURN_IF_ERROR(sink(data.data(), data.size()));
    uint64_t pad = align_up(p.info.n_bytes, alignment) - p.info.n_bytes;
    while (pad > 0) {
      const size_t n = std::min<uint64_t>(pad, kZeros.size());
      MINFER_RETURN_IF_ERROR(sink(kZeros.data(), n));
      pad -= n;
    }
    if (progress) progress(i + 1, tensors_.size());
  }
  return {};
}

Result<std::vector<uint8_t>> Writer::to_bytes() const {
  std::vector<uint8_t> out;
  MINFER_RETURN_IF_ERROR(emit(
      [&](const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
        return Status();
      },
      {}));
  return out;
}

Status Writer::write(const std::string& path, const Progress& progress, int producers_ahead) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return io_error("gguf writer: cannot create {}: {}", tmp, std::strerror(errno));
  Status st = emit(
      [&](const void* p, size_t n) {
        if (n > 0 && std::fwrite(p, 1, n, f) != n)
          return io_error("gguf writer: {}: write failed: {}", tmp, std::strerror(errno));
        return Status();
      },
      progress, producers_ahead);
  if (std::fclose(f) != 0 && st.ok()) st = io_error("gguf writer: {}: close failed: {}", tmp, std::strerror(errno));
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = io_error("gguf writer: cannot rename {} to {}: {}", tmp, path, std::strerror(errno));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

}  // namespace minfer::gguf
