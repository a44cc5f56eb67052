#include "gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/utf8.h"
#include "gguf/split.h"

namespace minfer::gguf {
namespace {

// Nested arrays deeper than this are refused: no real file uses more than one level.
constexpr int kMaxArrayDepth = 8;

// Bounds-checked little-endian reads over an untrusted buffer. Every failure names the field and offset.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, std::string_view name) : bytes_(bytes), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  Status fail(std::string_view field, size_t at, std::string_view problem) const {
    return invalid_argument("gguf: {}: {} at byte {}: {}", name_, field, at, problem);
  }

  template <typename T>
  Status read(T* out, std::string_view field) {
    if (remaining() < sizeof(T)) {
      return fail(field, pos_, fmt::format("truncated (needs {} bytes, {} left)", sizeof(T), remaining()));
    }
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_bytes(size_t n, const uint8_t** out, std::string_view field) {
    if (remaining() < n) return fail(field, pos_, fmt::format("truncated (needs {} bytes, {} left)", n, remaining()));
    *out = bytes_.data() + pos_;
    pos_ += n;
    return {};
  }

  Status read_string(std::string* out, std::string_view field) {
    const size_t at = pos_;
    uint64_t len = 0;
    MINFER_RETURN_IF_ERROR(read(&len, field));
    if (len > remaining()) {
      return fail(field, at, fmt::format("string length {} exceeds the {} bytes left", len, remaining()));
    }
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    const size_t valid = utf8_valid_prefix(s);
    if (valid != s.size()) return fail(field, pos_ + valid, "string is not valid UTF-8");
    out->assign(s);
    pos_ += len;
    return {};
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view name_;
  size_t pos_ = 0;
};

Status read_value_type(Cursor& c, ValueType* out, std::string_view field) {
  const size_t at = c.pos();
  uint32_t id = 0;
  MINFER_RETURN_IF_ERROR(c.read(&id, field));
  if (!value_type_name(id)) return c.fail(field, at, fmt::format("unknown value type {}", id));
  *out = static_cast<ValueType>(id);
  return {};
}

Status read_array(Cursor& c, Array* out, int depth, const std::string& field);

Status read_value(Cursor& c, ValueType type, Value* out, int depth, const std::string& field) {
  if (type == ValueType::STRING) {
    std::string s;
    MINFER_RETURN_IF_ERROR(c.read_string(&s, field));
    *out = Value::string(std::move(s));
    return {};
  }
  if (type == ValueType::ARRAY) {
    Array a;
    MINFER_RETURN_IF_ERROR(read_array(c, &a, depth + 1, field));
    *out = Value::array(std::move(a));
    return {};
  }
  const uint8_t* raw = nullptr;
  const size_t at = c.pos();
  MINFER_RETURN_IF_ERROR(c.read_bytes(value_type_size(type), &raw, field));
  if (type == ValueType::BOOL && *raw > 1) return c.fail(field, at, fmt::format("bool byte is {}", *raw));
  *out = Value::from_raw(type, raw);
  return {};
}

Status read_array(Cursor& c, Array* out, int depth, const std::string& field) {
  const size_t at = c.pos();
  if (depth > kMaxArrayDepth) return c.fail(field, at, fmt::format("arrays nested deeper than {}", kMaxArrayDepth));
  MINFER_RETURN_IF_ERROR(read_value_type(c, &out->elem_type, field + " (array element type)"));
  const size_t count_at = c.pos();
  MINFER_RETURN_IF_ERROR(c.read(&out->count, field + " (array count)"));
  // The smallest encoding of one element bounds the count by the bytes left: no allocation is ever
  // sized from a count the file cannot back.
  size_t min_elem = value_type_size(out->elem_type);
  if (out->elem_type == ValueType::STRING) min_elem = 8;
  if (out->elem_type == ValueType::ARRAY) min_elem = 12;
  if (out->count > c.remaining() / min_elem) {
    return c.fail(field, count_at,
                  fmt::format("array count {} of {} cannot fit in the {} bytes left", out->count,
                              value_type_name(out->elem_type), c.remaining()));
  }
  if (out->elem_type == ValueType::STRING) {
    out->strings.resize(out->count);
    for (uint64_t i = 0; i < out->count; ++i) MINFER_RETURN_IF_ERROR(c.read_string(&out->strings[i], field));
  } else if (out->elem_type == ValueType::ARRAY) {
    out->arrays.resize(out->count);
    for (uint64_t i = 0; i < out->count; ++i) MINFER_RETURN_IF_ERROR(read_array(c, &out->arrays[i], depth + 1, field));
  } else {
    const uint8_t* raw = nullptr;
    const size_t raw_at = c.pos();
    MINFER_RETURN_IF_ERROR(c.read_bytes(out->count * min_elem, &raw, field));
    if (out->elem_type == ValueType::BOOL) {
      for (uint64_t i = 0; i < out->count; ++i) {
        if (raw[i] > 1) return c.fail(field, raw_at + i, fmt::format("bool byte is {}", raw[i]));
      }
    }
    out->raw.assign(raw, raw + out->count * min_elem);
  }
  return {};
}

Status read_tensor_info(Cursor& c, TensorInfo* t) {
  const size_t at = c.pos();
  MINFER_RETURN_IF_ERROR(c.read_string(&t->name, "tensor name"));
  if (t->name.empty()) return c.fail("tensor name", at, "empty tensor name");
  const std::string field = fmt::format("tensor '{}'", t->name);
  uint32_t n_dims = 0;
  const size_t dims_at = c.pos();
  MINFER_RETURN_IF_ERROR(c.read(&n_dims, field + " n_dims"));
  if (n_dims == 0 || n_dims > static_cast<uint32_t>(kMaxDims)) {
    return c.fail(field + " n_dims", dims_at, fmt::format("{} dimensions (1..{} allowed)", n_dims, kMaxDims));
  }
  t->n_dims = static_cast<int>(n_dims);
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const size_t ne_at = c.pos();
    uint64_t ne = 0;
    MINFER_RETURN_IF_ERROR(c.read(&ne, field + " ne"));
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return c.fail(field + fmt::format(" ne[{}]", d), ne_at, fmt::format("dimension {} is negative", static_cast<int64_t>(ne)));
    }
    const auto ne_signed = static_cast<int64_t>(ne);
    if (ne_signed != 0 && n_elements > std::numeric_limits<int64_t>::max() / ne_signed) {
      return c.fail(field + fmt::format(" ne[{}]", d), ne_at, "element count overflows int64");
    }
    n_elements *= ne_signed;
    t->ne[d] = ne_signed;
  }
  const size_t type_at = c.pos();
  uint32_t type_id = 0;
  MINFER_RETURN_IF_ERROR(c.read(&type_id, field + " type"));
  auto traits = dtype_traits(type_id);
  if (!traits) return c.fail(field + " type", type_at, fmt::format("unknown tensor type {}", type_id));
  t->type = traits->type;
  if (t->ne[0] % traits->block_size != 0) {
    return c.fail(field + " ne[0]", dims_at + 4,
                  fmt::format("{} is not a multiple of the {} block size {}", t->ne[0], traits->name, traits->block_size));
  }
  // n_elements fits int64, so the byte count (<= n_elements * 4 for every type) fits uint64.
  const uint64_t blocks = static_cast<uint64_t>(n_elements / traits->block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) {
    return c.fail(field, at, "byte size overflows uint64");
  }
  t->n_bytes = blocks * traits->block_bytes;
  MINFER_RETURN_IF_ERROR(c.read(&t->offset, field + " offset"));
  return {};
}

}  // namespace

Result<Parsed> parse(std::span<const uint8_t> bytes, std::string_view name) {
  Cursor c(bytes, name);
  Parsed out;
  uint32_t magic = 0;
  MINFER_RETURN_IF_ERROR(c.read(&magic, "magic"));
  if (magic != kMagic) return c.fail("magic", 0, fmt::format("not a GGUF file (magic 0x{:08x})", magic));
  MINFER_RETURN_IF_ERROR(c.read(&out.version, "version"));
  if (out.version == 1 || out.version == 2) {
    return unsupported("gguf: {}: GGUF version {} is not supported (only version 3); re-convert the model", name,
                       out.version);
  }
  if (out.version != kVersion) return c.fail("version", 4, fmt::format("unknown GGUF version {}", out.version));

  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  MINFER_RETURN_IF_ERROR(c.read(&n_tensors, "tensor count"));
  MINFER_RETURN_IF_ERROR(c.read(&n_kv, "metadata count"));
  // Minimal encodings: a KV is >= 13 bytes (key length, value type, one byte); a tensor info >= 29.
  if (n_kv > c.remaining() / 13) {
    return c.fail("metadata count", 16, fmt::format("{} entries cannot fit in {} bytes", n_kv, c.remaining()));
  }
  if (n_tensors > c.remaining() / 29) {
    return c.fail("tensor count", 8, fmt::format("{} tensors cannot fit in {} bytes", n_tensors, c.remaining()));
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = c.pos();
    std::string key;
    MINFER_RETURN_IF_ERROR(c.read_string(&key, fmt::format("metadata key #{}", i)));
    if (key.empty()) return c.fail(fmt::format("metadata key #{}", i), at, "empty key");
    if (out.metadata.contains(key)) return c.fail(fmt::format("metadata key '{}'", key), at, "duplicate key");
    ValueType type{};
    const std::string field = fmt::format("metadata '{}'", key);
    MINFER_RETURN_IF_ERROR(read_value_type(c, &type, field));
    Value value;
    MINFER_RETURN_IF_ERROR(read_value(c, type, &value, 0, field));
    out.metadata.set(std::move(key), std::move(value));
  }

  if (const Value* a = out.metadata.find(kAlignmentKey)) {
    if (a->type() != ValueType::U32) {
      return invalid_argument("gguf: {}: {} has type {}, expected u32", name, kAlignmentKey, value_type_name(a->type()));
    }
    const auto align = static_cast<uint32_t>(a->as_u64());
    if (align == 0 || (align & (align - 1)) != 0) {
      return invalid_argument("gguf: {}: {} = {} is not a power of two", name, kAlignmentKey, align);
    }
    out.alignment = align;
  }

  out.tensors.resize(n_tensors);
  std::unordered_set<std::string_view> names;
  names.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t at = c.pos();
    MINFER_RETURN_IF_ERROR(read_tensor_info(c, &out.tensors[i]));
    if (!names.insert(out.tensors[i].name).second) {
      return c.fail(fmt::format("tensor '{}'", out.tensors[i].name), at, "duplicate tensor name");
    }
  }

  const uint64_t header_end = c.pos();
  out.data_offset = (header_end + out.alignment - 1) / out.alignment * out.alignment;
  const uint64_t file_size = bytes.size();
  if (n_tensors > 0 && out.data_offset > file_size) {
    return invalid_argument("gguf: {}: data section at byte {} starts past the end of the file ({} bytes)", name,
                            out.data_offset, file_size);
  }
  const uint64_t data_size = file_size >= out.data_offset ? file_size - out.data_offset : 0;
  for (TensorInfo& t : out.tensors) {
    if (t.offset % out.alignment != 0) {
      return invalid_argument("gguf: {}: tensor '{}' offset {} is not a multiple of the alignment {}", name, t.name,
                              t.offset, out.alignment);
    }
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return invalid_argument(
          "gguf: {}: tensor '{}' data [{}, +{}) lies past the end of the file (data section holds {} bytes)", name,
          t.name, out.data_offset + t.offset, t.n_bytes, data_size);
    }
    t.file_offset = out.data_offset + t.offset;
    t.data = bytes.data() + t.file_offset;
  }
  // Overlap: sort a view by offset and compare neighbours.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(out.tensors.size());
  for (const TensorInfo& t : out.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* prev = by_offset[i - 1];
    if (prev->n_bytes > 0 && by_offset[i]->offset < prev->offset + prev->n_bytes) {
      return invalid_argument("gguf: {}: tensor '{}' data at byte {} overlaps tensor '{}' ({} bytes at byte {})", name,
                              by_offset[i]->name, by_offset[i]->file_offset, prev->name, prev->n_bytes, prev->file_offset);
    }
  }
  return out;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<File> File::open(const std::string& path) {
  std::vector<std::string> paths = {path};
  const std::optional<SplitName> split = parse_split_path(path);
  if (split && split->count > 1) {
    paths.clear();
    for (int i = 1; i <= split->count; ++i) paths.push_back(split_path(split->stem, i, split->count));
  }

  File file;
  for (size_t part = 0; part < paths.size(); ++part) {
    auto mapped = MappedFile::open(paths[part]);
    if (!mapped.ok()) {
      if (split && split->count > 1) {
        return mapped.status().with_context(
            fmt::format("gguf: split part {} of {} is missing or unreadable: ", part + 1, paths.size()));
      }
      return mapped.status().with_context("gguf: ");
    }
    MINFER_ASSIGN_OR_RETURN(Parsed parsed, parse(mapped->bytes(), paths[part]));

    if (split && split->count > 1) {
      auto no = parsed.metadata.get_u32(kSplitNoKey);
      auto count = parsed.metadata.get_u32(kSplitCountKey);
      if (!no.ok() || !count.ok()) {
        return invalid_argument("gguf: {}: split part lacks {} / {}", paths[part], kSplitNoKey, kSplitCountKey);
      }
      if (*no != part || *count != paths.size()) {
        return invalid_argument("gguf: {}: inconsistent split part: {}={} {}={}, expected {} and {}", paths[part],
                                kSplitNoKey, *no, kSplitCountKey, *count, part, paths.size());
      }
    }
    if (part == 0) {
      file.metadata_ = std::move(parsed.metadata);
      file.version_ = parsed.version;
      file.alignment_ = parsed.alignment;
    }
    for (TensorInfo& t : parsed.tensors) {
      t.part = static_cast<uint32_t>(part);
      if (!file.tensor_index_.emplace(t.name, file.tensors_.size()).second) {
        return invalid_argument("gguf: {}: tensor '{}' appears in more than one split part", paths[part], t.name);
      }
      file.tensors_.push_back(std::move(t));
    }
    file.data_offsets_.push_back(parsed.data_offset);
    file.parts_.push_back(std::move(*mapped));
  }

  if (split && split->count > 1) {
    auto expected = file.metadata_.get_i64(kSplitTensorsCountKey);
    if (expected.ok() && static_cast<uint64_t>(*expected) != file.tensors_.size()) {
      return invalid_argument("gguf: {}: {} = {} but the {} parts hold {} tensors", paths[0], kSplitTensorsCountKey,
                              *expected, paths.size(), file.tensors_.size());
    }
  }
  return file;
}

}  // namespace minfer::gguf
