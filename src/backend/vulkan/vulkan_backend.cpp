// The Vulkan backend's executor: resolves node pointers to device windows and describes one dispatch (or
// a few, for tensors wider than one binding) per node; synchronize() runs the split's list (tape.h). Shapes
// are checked here, once; shaders assume them.
#include "backend/vulkan/vulkan_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/env.h"
#include "quant/quant.h"

namespace minfer::backend {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::OpKind;

constexpr uint32_t kWorkgroup = 64;  // threads per workgroup; a multiple of every subgroup size up to 64
constexpr uint32_t kMaxCols = 8;     // tokens per matrix-vector dispatch (MAX_COLS in the shaders)
constexpr uint32_t kMatmatWorkgroup = 256;  // matmat.comp: MM_LANES x TG threads
constexpr uint64_t kTileRows = 8;           // TR in matmat.comp
constexpr uint64_t kTileTokens = 32;        // TT in matmat.comp
// matmat_q8.comp's shared memory: 512 slots of 11 words and the tree's 32 x 64 floats.
constexpr uint32_t kMatmatQ8SharedBytes = 512 * 11 * 4 + 32 * 64 * 4;

// Every type the CPU computes has a path in matvec.comp and get_rows.comp.
bool matrix_type(DType t) {
  return quant::is_compute_type(t);
}
// Elements per block (the shaders read groups of four inside blocks); 1 for the plain types.
int64_t block_elems(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ? 256
         : t == DType::F32 || t == DType::F16 || t == DType::BF16 ? 1
                                                                  : 32;
}
int64_t rows_of(const graph::Shape& ne) {
  return ne[1] * ne[2] * ne[3];
}

// Push constant blocks, field for field as the shaders declare them.
struct MatvecPush {
  uint32_t k, n, row0, rows, row_bytes, w_skip, x_skip, y_skip;
};
struct MatmatPush {
  uint32_t k, n, row0, rows, row_bytes, w_skip, x_skip, y_skip, m, row_tiles;
};
struct QuantizePush {
  uint32_t k, m, x_skip, a_skip;
};
struct GetRowsPush {
  uint32_t d, n, row_bytes, row_lo, row_hi, src_skip, ids_skip, dst_skip;
};
struct RmsNormPush {
  uint32_t d, rows, x_skip, w_skip, y_skip;
  float eps;
};
struct ElementwisePush {
  uint32_t n, d, broadcast, a_skip, b_skip, y_skip;
};
struct RopePush {
  uint32_t head_dim, n_head, n_tokens, n_rot;
  float theta_scale;
  uint32_t x_skip, pos_skip, y_skip;
};
struct KvStorePush {
  uint32_t row_elems, row_bytes, n_tokens, src_skip, cells_skip, dst_skip;
};
struct AttentionPush {
  uint32_t head_dim, n_head, group, n_tokens, row_bytes, head_bytes, q_skip, k_skip, v_skip, off_skip,
      cells_skip, y_skip;
  float scale;
};

constexpr int32_t kMaxHeadDim = 256;    // MAX_HEAD_DIM in attention.comp
constexpr uint64_t kMaxGroupHeads = 8;  // MAXG in attention.comp: query heads per workgroup
constexpr int64_t kMaxQ8Blocks = 256;   // MAX_BLOCKS in kv_store.comp (q8_0 blocks per cell row)

// KV cache element types with kv_store and attention shaders.
bool kv_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::Q8_0;
}

uint32_t u32(uint64_t v) {
  return static_cast<uint32_t>(v);
}

}  // namespace

// An arena of node buffers: device-local memory plus a reserved, inaccessible address range whose
// addresses stand for offsets into it.
struct VulkanBackend::Arena final : public Buffer {
  std::unique_ptr<vk::DeviceBuffer> memory;
  void* reserved = nullptr;
  size_t bytes = 0;
  std::shared_ptr<std::map<uintptr_t, Arena*>> registry;
  std::shared_ptr<size_t> live_bytes;  // the backend's count of live buffer bytes

  ~Arena() override {
    if (live_bytes) *live_bytes -= bytes;
    registry->erase(reinterpret_cast<uintptr_t>(reserved));
    if (reserved) munmap(reserved, std::max<size_t>(bytes, 1));
  }
  void* base() override { return reserved; }
  size_t size() const override { return bytes; }
  bool host_visible() const override { return false; }
};

Result<std::unique_ptr<VulkanBackend>> VulkanBackend::create(int device_index) {
  MINFER_ASSIGN_OR_RETURN(auto dev, vk::Device::open(device_index));
  const vk::DeviceInfo& info = dev->info();
  MINFER_ASSIGN_OR_RETURN(const bool int8, env_bool("MINFER_VULKAN_INT_DOT", info.integer_dot_fast));
  std::unique_ptr<VulkanBackend> backend(new VulkanBackend(std::move(dev)));
  MINFER_RETURN_IF_ERROR(backend->set_int8_matmul(int8));
  return backend;
}

VulkanBackend::VulkanBackend(std::unique_ptr<vk::Device> dev)
    : dev_(std::move(dev)), arenas_(std::make_shared<std::map<uintptr_t, Arena*>>()) {
  pipelines_ = std::make_unique<vk::PipelineCache>(*dev_);
  tapes_ = std::make_unique<vk::Tapes>(*dev_);
}

VulkanBackend::~VulkanBackend() {
  (void)dev_->submit_and_wait();
  tapes_.reset();
  ring_.clear();
  weights_.clear();
  pipelines_.reset();
}

uint64_t VulkanBackend::max_binding() const {
  const uint64_t dev_max = dev_->info().max_storage_buffer_range;
  return max_binding_override_ ? std::min(max_binding_override_, dev_max) : dev_max;
}

uint64_t VulkanBackend::max_allocation() const {
  const uint64_t dev_max = dev_->info().max_allocation_bytes;
  if (dev_max == 0) return max_allocation_override_;
  return max_allocation_override_ ? std::min(max_allocation_override_, dev_max) : dev_max;
}

uint64_t VulkanBackend::memory_free() const {
  return dev_->free_memory(weight_bytes_ + *buffer_bytes_);
}

size_t VulkanBackend::buffer_alignment() const {
  return std::max<size_t>(64, dev_->info().min_storage_buffer_offset_alignment);
}

bool VulkanBackend::supports_op(const Graph& graph, const Node& node) const {
  auto src = [&](size_t i) -> const Node& { return graph.node(node.src[i]); };
  auto registered = [&](const Node& w) {
    if (w.op != OpKind::kWeight) return false;
    auto it = weights_.find(w.name);
    return it != weights_.end() && matrix_type(it->second->type) && it->second->type == w.type;
  };
  switch (node.op) {
    case OpKind::kMatMul:
      return registered(src(0)) && src(1).type == DType::F32 && node.type == DType::F32 &&
             src(0).ne[0] % block_elems(src(0).type) == 0;
    case OpKind::kGetRows:
      return (registered(src(0)) || (src(0).op != OpKind::kWeight && src(0).type == DType::F32)) &&
             src(1).type == DType::I32 && node.type == DType::F32;
    case OpKind::kRmsNorm:
      return src(0).type == DType::F32 && src(1).type == DType::F32 &&
             (src(1).op != OpKind::kWeight || weights_.count(src(1).name) > 0);
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kSwiGlu:
      return src(0).type == DType::F32 && src(1).type == DType::F32 &&
             (src(1).op != OpKind::kWeight || weights_.count(src(1).name) > 0);
    case OpKind::kSilu:
      return src(0).type == DType::F32;
    case OpKind::kRope:  // rope.comp: NEOX pairs, unscaled, no frequency factors (llama's modes are not yet)
      return src(0).type == DType::F32 && node.params.n_rot > 0 && node.params.n_rot % 2 == 0 &&
             node.params.n_rot <= node.ne[0] && node.params.rope_mode == graph::RopeMode::kNeox &&
             node.params.rope_freq_scale == 1.0f && node.src.size() == 2;
    case OpKind::kReshape:
      return true;
    // The cache's element type is the KV cache's, not the graph's: execute() refuses any but F32, F16 and
    // Q8_0 by name (the only types KvCache accepts).
    case OpKind::kKvStore:  // K and V, or K alone (a K shift's store)
      return src(0).type == DType::F32 &&
             (node.src.size() == 1 || (src(1).type == DType::F32 && src(0).n_elements() == src(1).n_elements()));
    case OpKind::kKvRows:  // get_rows.comp over the layer's K cells
      return node.type == DType::F32;
    case OpKind::kAttention:  // attention.comp has no sliding window (gemma3's local layers stay on the CPU)
      return src(0).type == DType::F32 && node.type == DType::F32 && node.params.n_swa == 0 && node.params.n_head > 0 &&
             node.params.n_head_kv > 0 && node.params.n_head % node.params.n_head_kv == 0 &&
             node.params.head_dim > 0 && node.params.head_dim <= kMaxHeadDim;
    case OpKind::kInput:
    case OpKind::kWeight:
    case OpKind::kMoeRoute:  // mixture of experts: CPU-only (docs/BACKENDS.md)
    case OpKind::kMoeWeights:
    case OpKind::kMatMulId:
    case OpKind::kMoeSum:
    case OpKind::kGelu:  // gemma3's GeGLU, embedding scale and logit soft-cap: CPU-only (docs/BACKENDS.md)
    case OpKind::kScale:
    case OpKind::kSoftcap:
      return false;
  }
  return false;
}

Status VulkanBackend::register_weight(const WeightSource& w) {
  auto entry = std::make_unique<Weight>();
  entry->ne0 = w.ne[0];
  entry->ne1 = w.ne[1] * w.ne[2] * w.ne[3];
  entry->type = w.type;
  std::vector<float> converted;
  const void* bytes = w.data;
  size_t n_bytes = w.n_bytes;
  if (entry->ne1 == 1 && w.type != DType::F32) {  // norms and biases are read as f32 by the elementwise ops
    if (!quant::is_compute_type(w.type)) {
      return unsupported("Vulkan backend: tensor '{}' has type {}, which minfer cannot compute with", w.name,
                         dtype_name(w.type));
    }
    converted.resize(static_cast<size_t>(entry->ne0));
    quant::dequantize_row(w.type, w.data, converted.data(), entry->ne0);
    entry->type = DType::F32;
    bytes = converted.data();
    n_bytes = converted.size() * sizeof(float);
  } else if (!matrix_type(w.type)) {
    return unsupported("Vulkan backend: tensor '{}' has type {}, which has no Vulkan shader", w.name,
                       dtype_name(w.type));
  }
  const auto rb = minfer::row_bytes(entry->type, entry->ne0);
  if (!rb || *rb * static_cast<uint64_t>(entry->ne1) != n_bytes) {
    return invalid_argument("Vulkan backend: tensor '{}': {} bytes do not hold {} rows of {} {} elements",
                            w.name, n_bytes, entry->ne1, entry->ne0, dtype_name(entry->type));
  }
  entry->row_bytes = static_cast<size_t>(*rb);
  // A tensor larger than one allocation goes in parts of whole rows (DeviceBuffer::create rounds each up
  // to 16 bytes): the shaders bind windows of rows anyway, and a window never spans two parts.
  const uint64_t max_alloc = max_allocation();
  const auto rows = static_cast<uint64_t>(entry->ne1);
  uint64_t part_rows = std::max<uint64_t>(rows, 1);
  if (max_alloc != 0 && n_bytes + 16 > max_alloc) {
    part_rows = std::min(rows, (max_alloc - 16) / entry->row_bytes);
    if (part_rows == 0) {
      return error(StatusCode::kOutOfRange,
                   "vulkan: tensor '{}': one row ({} bytes) exceeds {}'s largest "
                   "allocation ({} bytes)",
                   w.name, entry->row_bytes, dev_->info().name, max_alloc);
    }
  }
  const uint64_t n_parts = std::max<uint64_t>(1, (rows + part_rows - 1) / part_rows);
  entry->table = {{}, part_rows, 0, rows, entry->row_bytes};
  for (uint64_t i = 0; i < n_parts; ++i) {
    const uint64_t part_bytes = std::min(part_rows, rows - i * part_rows) * entry->row_bytes;
    const std::string what = n_parts == 1
                                 ? fmt::format("tensor '{}'", w.name)
                                 : fmt::format("tensor '{}' (part {} of {})", w.name, i + 1, n_parts);
    MINFER_ASSIGN_OR_RETURN(auto part,
                            vk::DeviceBuffer::create(*dev_, part_bytes, vk::MemoryKind::kDeviceLocal, what));
    // The staging buffer's allocation or the copy's submit can fail too: name the tensor either way.
    const auto* src = static_cast<const uint8_t*>(bytes) + i * part_rows * entry->row_bytes;
    if (Status st = vk::upload(*dev_, *part, 0, src, part_bytes); !st.ok())
      return st.with_context(fmt::format("vulkan: uploading {} ({} bytes): ", what, part_bytes));
    entry->table.parts.push_back(part.get());
    entry->parts.push_back(std::move(part));
  }
  weight_bytes_ += n_bytes;
  weights_[w.name] = std::move(entry);
  return {};
}

const void* VulkanBackend::weight_handle(const std::string& name) const {
  auto it = weights_.find(name);
  return it == weights_.end() ? nullptr : it->second.get();
}

Result<std::unique_ptr<Buffer>> VulkanBackend::alloc_buffer(size_t bytes) {
  auto arena = std::make_unique<Arena>();
  arena->bytes = bytes;
  arena->registry = arenas_;
  MINFER_ASSIGN_OR_RETURN(arena->memory,
                          vk::DeviceBuffer::create(*dev_, bytes, vk::MemoryKind::kDeviceLocal, "device buffer"));
  void* r = mmap(nullptr, std::max<size_t>(bytes, 1), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (r == MAP_FAILED)
    return error(StatusCode::kOutOfRange, "Vulkan backend: cannot reserve {} bytes of addresses", bytes);
  arena->reserved = r;
  (*arenas_)[reinterpret_cast<uintptr_t>(r)] = arena.get();
  arena->live_bytes = buffer_bytes_;
  *buffer_bytes_ += bytes;
  return std::unique_ptr<Buffer>(std::move(arena));
}

Result<const VulkanBackend::Arena*> VulkanBackend::find_arena(const void* ptr, size_t bytes,
                                                              uint64_t* offset) const {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = arenas_->upper_bound(addr);
  if (it == arenas_->begin()) return static_cast<const Arena*>(nullptr);
  --it;
  const Arena* a = it->second;
  if (addr >= it->first + std::max<size_t>(a->bytes, 1)) return static_cast<const Arena*>(nullptr);
  *offset = addr - it->first;
  if (*offset + bytes > a->bytes) {
    return Status(StatusCode::kInternal,
                  fmt::format("Vulkan backend: {} bytes at arena offset {} run past its {} bytes", bytes,
                              *offset, a->bytes));
  }
  return a;
}

Result<VulkanBackend::Tensor> VulkanBackend::locate(const void* ptr, size_t bytes) {
  uint64_t off = 0;
  MINFER_ASSIGN_OR_RETURN(const Arena* a, find_arena(ptr, bytes, &off));
  if (a != nullptr) return Tensor{a->memory.get(), off};
  // Host memory: copy it into the ring, where the described work reads it, in a slot of a power of two
  // bytes (see the header: a growing window list keeps its offset and binding until it doubles).
  const uint64_t align = buffer_alignment();
  const uint64_t slot = std::bit_ceil(std::max<uint64_t>({bytes, 256, align}));
  if (ring_.empty() || ring_used_ + slot > ring_.back()->size()) {
    const size_t want =
        std::max<size_t>({slot, size_t{1} << 20, ring_.empty() ? 0 : ring_.back()->size() * 2});
    MINFER_ASSIGN_OR_RETURN(
        auto buf, vk::DeviceBuffer::create(*dev_, want, vk::MemoryKind::kHostVisible, "input upload ring"));
    ring_.push_back(std::move(buf));
    ring_used_ = 0;
  }
  vk::DeviceBuffer& ring = *ring_.back();
  off = ring_used_;
  std::memcpy(static_cast<uint8_t*>(ring.mapped()) + off, ptr, bytes);
  ring_used_ = (off + slot + align - 1) / align * align;
  return Tensor{&ring, off, slot};
}

Result<vk::Window> VulkanBackend::bind(const Tensor& t, uint64_t bytes) const {
  // A ring slot is bound whole (its start is aligned, so the window is exactly the slot), short of the
  // binding limit.
  const uint64_t want = t.slot > bytes ? std::max(bytes, std::min(t.slot, max_binding())) : bytes;
  return vk::window(*dev_, *t.buffer, t.offset, want, max_binding());
}

Result<const vk::Pipeline*> VulkanBackend::pipeline(std::string_view shader, uint32_t n_bindings,
                                                    uint32_t push_bytes,
                                                    std::initializer_list<uint32_t> spec) {
  return pipelines_->get(shader, n_bindings, push_bytes,
                         std::span<const uint32_t>(spec.begin(), spec.size()));
}

Status VulkanBackend::dispatch(const vk::Pipeline& p, std::initializer_list<vk::Window> bindings,
                               const void* push, uint64_t groups) {
  // A 2-D grid when one dimension cannot hold every group; shaders flatten it back (group_index()).
  const uint64_t max_x = std::min<uint64_t>(dev_->info().max_workgroup_count[0], 65535);
  const uint64_t gx = std::min(groups, max_x);
  const uint64_t gy = gx == 0 ? 0 : (groups + gx - 1) / gx;
  MINFER_ASSIGN_OR_RETURN(
      vk::Dispatch d,
      vk::describe_dispatch(*dev_, p, std::span<const vk::Window>(bindings.begin(), bindings.size()), push,
                            u32(gx), u32(gy), 1));
  if (gx != 0 && gy != 0) pending_.push_back(d);
  return {};
}

Status VulkanBackend::matmul(const Weight& w, const Graph& graph, NodeId x_node, const Tensor& x,
                             const Tensor& y, int64_t m) {
  const uint64_t k = static_cast<uint64_t>(w.ne0), n = static_cast<uint64_t>(w.ne1);
  const uint64_t align = std::max<uint64_t>(4, dev_->info().min_storage_buffer_offset_alignment);
  const uint64_t max_rows = (max_binding() - align - 4) / w.row_bytes;
  if (max_rows == 0) {
    return unsupported("one weight row ({} bytes) exceeds a binding", w.row_bytes);
  }
  // Tokens one binding holds (activations and outputs; quantized activations are smaller).
  const uint64_t per_binding = (max_binding() - align - 4) / (std::max(k, n) * 4);
  if (per_binding == 0) {
    return unsupported("one token's activations ({} floats) exceed a binding", std::max(k, n));
  }
  // The int8 path for quantized weights when chosen (int8_matmul()): each token chunk's activations are
  // quantized once into act_q8_ (quantize_q8.comp), and the matmul shaders read them there.
  const bool int8 = int8_matmul_ && block_elems(w.type) > 1;
  const uint64_t act_words = int8 ? k / 4 + k / 16 : k;  // per token, in the buffer the shaders read
  // More than matvec_max_tokens_ tokens: the tiled shader, as many tokens per dispatch as a binding holds;
  // else the matrix-vector one, up to kMaxCols per dispatch. Both compute each output with the same
  // operations in the same order (shaders/matmul.glsl, matmul_q8.glsl), so which one runs never changes a
  // bit; a device without 256-thread workgroups in x (Vulkan guarantees 128), or for int8 without the shared
  // memory of its tiles, runs the matrix-vector shader at every size, with the same results.
  const vk::DeviceInfo& info = dev_->info();
  const bool tiled = static_cast<uint64_t>(m) > matvec_max_tokens_ &&
                     info.max_workgroup_invocations >= kMatmatWorkgroup &&
                     info.max_workgroup_size_x >= kMatmatWorkgroup &&
                     (!int8 || info.max_shared_memory_bytes >= kMatmatQ8SharedBytes);
  const std::string_view matvec_shader = int8 ? "matvec_q8" : "matvec";
  const std::string_view matmat_shader = int8 ? "matmat_q8" : "matmat";
  for (int64_t t0 = 0; t0 < m; t0 += static_cast<int64_t>(per_binding)) {
    const auto chunk = static_cast<uint64_t>(std::min<int64_t>(static_cast<int64_t>(per_binding), m - t0));
    Tensor act{x.buffer, x.offset + static_cast<uint64_t>(t0) * k * 4};
    if (int8) {
      const DType format = quant::vec_dot_type(w.type);
      const uint32_t fmt = format == DType::Q8_0   ? 0
                           : format == DType::Q8_1 ? 1
                                                   : 2;  // FMT in quantize_q8.comp
      MINFER_ASSIGN_OR_RETURN(
          act, quantize_activations({&graph, x_node, fmt, k, static_cast<uint64_t>(t0), chunk}, act));
    }
    for (uint64_t row0 = 0, rows = 0; row0 < n; row0 += rows) {
      MINFER_ASSIGN_OR_RETURN(vk::Window ww, bind_rows(w.table, row0, max_rows, &rows));
      const uint64_t step = tiled ? chunk : kMaxCols;
      for (uint64_t c0 = 0; c0 < chunk; c0 += step) {
        const auto cols = static_cast<uint32_t>(std::min(step, chunk - c0));
        MINFER_ASSIGN_OR_RETURN(vk::Window aw,
                                bind({act.buffer, act.offset + c0 * act_words * 4}, cols * act_words * 4));
        MINFER_ASSIGN_OR_RETURN(
            vk::Window yw,
            bind({y.buffer, y.offset + (static_cast<uint64_t>(t0) + c0) * n * 4}, cols * n * 4));
        if (tiled) {
          MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p,
                                  pipeline(matmat_shader, 3, sizeof(MatmatPush),
                                           {kMatmatWorkgroup, static_cast<uint32_t>(w.type)}));
          const uint64_t row_tiles = (rows + kTileRows - 1) / kTileRows;
          const MatmatPush push{u32(k),       u32(n),           u32(row0),        u32(rows), u32(w.row_bytes),
                                u32(ww.skip), u32(aw.skip / 4), u32(yw.skip / 4), cols,      u32(row_tiles)};
          MINFER_RETURN_IF_ERROR(
              dispatch(*p, {ww, aw, yw}, &push, row_tiles * ((cols + kTileTokens - 1) / kTileTokens)));
          continue;
        }
        MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p,
                                pipeline(matvec_shader, 3, sizeof(MatvecPush),
                                         {kWorkgroup, static_cast<uint32_t>(w.type), cols}));
        const MatvecPush push{u32(k),           u32(n),       u32(row0),        u32(rows),
                              u32(w.row_bytes), u32(ww.skip), u32(aw.skip / 4), u32(yw.skip / 4)};
        MINFER_RETURN_IF_ERROR(dispatch(*p, {ww, aw, yw}, &push, rows));
      }
    }
  }
  return {};
}

Result<VulkanBackend::Tensor> VulkanBackend::quantize_activations(const QuantizedActs& key, const Tensor& x) {
  if (act_q8_holds_ == key) return Tensor{act_q8_.get(), 0};
  const uint64_t k = key.k, m = key.m;
  const uint64_t bytes = m * (k / 4 + k / 16) * 4;
  if (!act_q8_ || act_q8_->size() < bytes) {
    // Work described before still reads the old buffer: it stays alive until the split is submitted.
    if (act_q8_) act_q8_retired_.push_back(std::move(act_q8_));
    const uint64_t want =
        std::max<uint64_t>(bytes, act_q8_retired_.empty() ? 0 : act_q8_retired_.back()->size() * 2);
    MINFER_ASSIGN_OR_RETURN(act_q8_, vk::DeviceBuffer::create(*dev_, want, vk::MemoryKind::kDeviceLocal,
                                                              "int8 matmul activations"));
  }
  MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p,
                          pipeline("quantize_q8", 2, sizeof(QuantizePush), {kWorkgroup, key.fmt}));
  MINFER_ASSIGN_OR_RETURN(vk::Window xw, bind(x, m * k * 4));
  MINFER_ASSIGN_OR_RETURN(vk::Window aw, vk::window(*dev_, *act_q8_, 0, bytes, max_binding()));
  const QuantizePush push{u32(k), u32(m), u32(xw.skip / 4), u32(aw.skip / 4)};
  const uint64_t units = k / 32;
  act_q8_holds_.reset();  // a failed dispatch leaves act_q8_ undefined
  MINFER_RETURN_IF_ERROR(dispatch(*p, {xw, aw}, &push, m * ((units + kWorkgroup - 1) / kWorkgroup)));
  act_q8_holds_ = key;
  ++act_quantizations_;
  return Tensor{act_q8_.get(), 0};
}

Status VulkanBackend::set_int8_matmul(bool on) {
  if (on && !dev_->info().integer_dot) {
    return unsupported(
        "vulkan: {} has no integer dot product (VK_KHR_shader_integer_dot_product): the int8 "
        "matmul cannot run there (unset MINFER_VULKAN_INT_DOT)",
        dev_->info().name);
  }
  int8_matmul_ = on;
  return {};
}

Result<vk::Window> VulkanBackend::bind_rows(const RowTable& t, uint64_t row0, uint64_t max_rows,
                                            uint64_t* n) const {
  const uint64_t part = row0 / t.part_rows, first = row0 % t.part_rows;
  *n = std::min({max_rows, t.rows - row0, t.part_rows - first});
  return vk::window(*dev_, *t.parts[part], t.offset + first * t.row_bytes, *n * t.row_bytes, max_binding());
}

Status VulkanBackend::get_rows(const Node& node, DType type, const RowTable& table, const Tensor& ids,
                               int64_t n, const Tensor& out) {
  const uint64_t d = static_cast<uint64_t>(node.ne[0]);
  const uint64_t align = std::max<uint64_t>(4, dev_->info().min_storage_buffer_offset_alignment);
  const uint64_t row_bytes = table.row_bytes;
  const uint64_t max_rows = (max_binding() - align - 4) / row_bytes;
  if (max_rows == 0) {
    return unsupported("one table row ({} bytes) exceeds a binding", row_bytes);
  }
  const uint64_t max_ids = (max_binding() - align - 4) / (d * 4);  // output rows one binding holds
  if (max_ids == 0) {
    return unsupported("one output row ({} bytes) exceeds a binding", d * 4);
  }
  MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p, pipeline("get_rows", 3, sizeof(GetRowsPush),
                                                          {kWorkgroup, static_cast<uint32_t>(type)}));
  // Every (table window, id chunk) pair: each dispatch writes the ids of its chunk that fall in its window.
  for (uint64_t lo = 0, rows = 0; lo < table.rows; lo += rows) {
    MINFER_ASSIGN_OR_RETURN(vk::Window tw, bind_rows(table, lo, max_rows, &rows));
    const uint64_t hi = lo + rows;
    for (uint64_t i0 = 0; i0 < static_cast<uint64_t>(n); i0 += max_ids) {
      const uint64_t cnt = std::min<uint64_t>(max_ids, static_cast<uint64_t>(n) - i0);
      MINFER_ASSIGN_OR_RETURN(vk::Window iw, bind({ids.buffer, ids.offset + i0 * 4}, cnt * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window ow, bind({out.buffer, out.offset + i0 * d * 4}, cnt * d * 4));
      const GetRowsPush push{u32(d),  u32(cnt),     u32(row_bytes),   u32(lo),
                             u32(hi), u32(tw.skip), u32(iw.skip / 4), u32(ow.skip / 4)};
      MINFER_RETURN_IF_ERROR(dispatch(*p, {tw, iw, ow}, &push, cnt));
    }
  }
  return {};
}

Status VulkanBackend::execute(const Graph& graph, NodeId id, std::span<void* const> data,
                              const ExecContext& ctx) {
  Status st = record(graph, id, data, ctx);
  if (st.ok()) return st;
  abandon();
  const Node& node = graph.node(id);
  // Errors from below (a binding too large, a lost device, a refused allocation) gain the node.
  if (st.message().rfind("node ", 0) == 0) return st;
  return st.with_context(fmt::format("node {} ({} '{}'): ", id, graph::op_name(node.op), node.name));
}

Status VulkanBackend::record(const Graph& graph, NodeId id, std::span<void* const> data,
                             const ExecContext& ctx) {
  const Node& node = graph.node(id);
  if (!dev_->lost().ok()) return dev_->lost();
  auto src_node = [&](size_t i) -> const Node& { return graph.node(node.src[i]); };
  auto ptr = [&](size_t i) { return data[static_cast<size_t>(node.src[i])]; };
  auto f32_bytes = [](const Node& n) { return static_cast<uint64_t>(n.n_elements()) * 4; };
  // An f32 source: a registered 1-D weight (its device buffer) or a node buffer.
  auto f32_src = [&](size_t i) -> Result<Tensor> {
    const Node& s = src_node(i);
    if (s.op == OpKind::kWeight) {
      const auto* w = static_cast<const Weight*>(ptr(i));
      if (w == nullptr || w->type != DType::F32 || w->parts.size() != 1) {
        return invalid_argument("node {} ({}): weight '{}' is not an f32 tensor in one allocation on Vulkan",
                                id, node.name, s.name);
      }
      return Tensor{w->parts[0].get(), 0};
    }
    return locate(ptr(i), f32_bytes(s));
  };
  auto out = [&]() { return locate(data[static_cast<size_t>(id)], f32_bytes(node)); };
  const uint64_t n_el = static_cast<uint64_t>(node.n_elements());
  const int64_t d = node.ne[0];
  if (n_el > UINT32_MAX)
    return unsupported("node {} ({}): {} elements exceed the shaders' 32-bit indices", id, node.name, n_el);

  switch (node.op) {
    case OpKind::kInput:
    case OpKind::kWeight:
    case OpKind::kReshape:
      return {};
    case OpKind::kMatMul: {
      const auto* w = static_cast<const Weight*>(ptr(0));
      if (w == nullptr || src_node(0).op != OpKind::kWeight) {
        return invalid_argument("node {} ({}): matmul weight is not registered on Vulkan", id, node.name);
      }
      const int64_t m = rows_of(src_node(1).ne);
      if (src_node(1).ne[0] != w->ne0 || node.ne[0] != w->ne1 || rows_of(node.ne) != m) {
        return invalid_argument("node {} ({}): matmul of weight {}x{} with activations {}x{} into {}x{}", id,
                                node.name, w->ne0, w->ne1, src_node(1).ne[0], m, node.ne[0],
                                rows_of(node.ne));
      }
      MINFER_ASSIGN_OR_RETURN(Tensor x, f32_src(1));
      MINFER_ASSIGN_OR_RETURN(Tensor y, out());
      return matmul(*w, graph, node.src[1], x, y, m);
    }
    case OpKind::kGetRows: {
      const int64_t n = src_node(1).ne[0];
      const auto* host_ids = static_cast<const int32_t*>(ptr(1));
      const bool ids_on_host = src_node(1).op == OpKind::kInput;
      MINFER_ASSIGN_OR_RETURN(Tensor ids, locate(ptr(1), static_cast<uint64_t>(n) * 4));
      MINFER_ASSIGN_OR_RETURN(Tensor o, out());
      if (src_node(0).op == OpKind::kWeight) {
        const auto* w = static_cast<const Weight*>(ptr(0));
        if (w == nullptr || w->ne0 != d) {
          return invalid_argument("node {} ({}): table '{}' is not registered on Vulkan with rows of {}", id,
                                  node.name, src_node(0).name, d);
        }
        if (ids_on_host) {  // ids the host can see are checked here; the shader skips any outside the table
          for (int64_t i = 0; i < n; ++i) {
            if (host_ids[i] < 0 || host_ids[i] >= w->ne1) {
              return invalid_argument("node {} ({}): row id {} outside [0, {})", id, node.name, host_ids[i],
                                      w->ne1);
            }
          }
        }
        return get_rows(node, w->type, w->table, ids, n, o);
      }
      const int64_t table_rows = rows_of(src_node(0).ne);
      if (ids_on_host) {
        for (int64_t i = 0; i < n; ++i) {
          if (host_ids[i] < 0 || host_ids[i] >= table_rows) {
            return invalid_argument("node {} ({}): row id {} outside [0, {})", id, node.name, host_ids[i],
                                    table_rows);
          }
        }
      }
      MINFER_ASSIGN_OR_RETURN(Tensor t, f32_src(0));
      const auto rows = static_cast<uint64_t>(table_rows);
      return get_rows(node, DType::F32, {{t.buffer}, rows, t.offset, rows, static_cast<uint64_t>(d) * 4}, ids,
                      n, o);
    }
    case OpKind::kRmsNorm: {
      if (src_node(1).n_elements() != d) {
        return invalid_argument("node {} ({}): norm weight has {} elements, rows have {}", id, node.name,
                                src_node(1).n_elements(), d);
      }
      MINFER_ASSIGN_OR_RETURN(Tensor x, f32_src(0));
      MINFER_ASSIGN_OR_RETURN(Tensor w, f32_src(1));
      MINFER_ASSIGN_OR_RETURN(Tensor y, out());
      MINFER_ASSIGN_OR_RETURN(vk::Window xw, bind(x, n_el * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window ww, bind(w, static_cast<uint64_t>(d) * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window yw, bind(y, n_el * 4));
      MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p,
                              pipeline("rms_norm", 3, sizeof(RmsNormPush), {kWorkgroup}));
      const uint64_t rows = n_el / static_cast<uint64_t>(d);
      const RmsNormPush push{u32(d),           u32(rows),        u32(xw.skip / 4),
                             u32(ww.skip / 4), u32(yw.skip / 4), node.params.eps};
      return dispatch(*p, {xw, ww, yw}, &push, rows);
    }
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kSilu:
    case OpKind::kSwiGlu: {
      const bool unary = node.op == OpKind::kSilu;
      const bool broadcast =
          !unary && node.op != OpKind::kSwiGlu && rows_of(src_node(1).ne) == 1 && rows_of(node.ne) > 1;
      if (!unary) {
        const uint64_t want = broadcast ? static_cast<uint64_t>(d) : n_el;
        if (static_cast<uint64_t>(src_node(1).n_elements()) != want ||
            src_node(0).n_elements() != node.n_elements()) {
          return invalid_argument("node {} ({}): {} of {} and {} elements into {}", id, node.name,
                                  graph::op_name(node.op), src_node(0).n_elements(), src_node(1).n_elements(),
                                  n_el);
        }
      }
      MINFER_ASSIGN_OR_RETURN(Tensor a, f32_src(0));
      Tensor b = a;
      if (!unary) {
        MINFER_ASSIGN_OR_RETURN(b, f32_src(1));
      }
      MINFER_ASSIGN_OR_RETURN(Tensor y, out());
      MINFER_ASSIGN_OR_RETURN(vk::Window aw, bind(a, n_el * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window bw,
                              bind(b, unary ? n_el * 4 : (broadcast ? static_cast<uint64_t>(d) : n_el) * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window yw, bind(y, n_el * 4));
      const uint32_t op = node.op == OpKind::kAdd ? 0 : node.op == OpKind::kMul ? 1 : unary ? 2 : 3;
      MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p,
                              pipeline("elementwise", 3, sizeof(ElementwisePush), {kWorkgroup, op}));
      const ElementwisePush push{u32(n_el),        u32(d),           broadcast ? 1u : 0u,
                                 u32(aw.skip / 4), u32(bw.skip / 4), u32(yw.skip / 4)};
      return dispatch(*p, {aw, bw, yw}, &push, (n_el + kWorkgroup - 1) / kWorkgroup);
    }
    case OpKind::kRope: {
      const int64_t n_tokens = node.ne[2] * node.ne[3];
      if (src_node(1).ne[0] != n_tokens) {
        return invalid_argument("node {} ({}): {} positions for {} tokens", id, node.name, src_node(1).ne[0],
                                n_tokens);
      }
      MINFER_ASSIGN_OR_RETURN(Tensor x, f32_src(0));
      MINFER_ASSIGN_OR_RETURN(Tensor pos, locate(ptr(1), static_cast<uint64_t>(n_tokens) * 4));
      MINFER_ASSIGN_OR_RETURN(Tensor y, out());
      MINFER_ASSIGN_OR_RETURN(vk::Window xw, bind(x, n_el * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window pw, bind(pos, static_cast<uint64_t>(n_tokens) * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window yw, bind(y, n_el * 4));
      MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p, pipeline("rope", 3, sizeof(RopePush), {kWorkgroup}));
      const float theta_scale =
          std::pow(node.params.rope_freq_base, -2.0f / static_cast<float>(node.params.n_rot));
      const RopePush push{u32(node.ne[0]), u32(node.ne[1]),  u32(n_tokens),    u32(node.params.n_rot),
                          theta_scale,     u32(xw.skip / 4), u32(pw.skip / 4), u32(yw.skip / 4)};
      return dispatch(*p, {xw, pw, yw}, &push, (n_el + kWorkgroup - 1) / kWorkgroup);
    }
    case OpKind::kKvStore:
    case OpKind::kKvRows:
    case OpKind::kAttention:
      return kv_op(graph, id, data, ctx);
    case OpKind::kMoeRoute:
    case OpKind::kMoeWeights:
    case OpKind::kMatMulId:
    case OpKind::kMoeSum:
    case OpKind::kGelu:
    case OpKind::kScale:
    case OpKind::kSoftcap:
      break;
  }
  return unsupported("node {} ({} '{}'): the Vulkan backend has no shader for it", id,
                     graph::op_name(node.op), node.name);
}

Result<VulkanBackend::Tensor> VulkanBackend::locate_cells(const void* ptr, size_t bytes, const char* what,
                                                          int32_t layer) const {
  uint64_t off = 0;
  MINFER_ASSIGN_OR_RETURN(const Arena* a, find_arena(ptr, bytes, &off));
  if (a == nullptr) {
    return invalid_argument(
        "the {} cells of layer {} are not in a Vulkan buffer (KvLayerView must point into "
        "buffers from VulkanBackend::alloc_buffer)",
        what, layer);
  }
  if (off % 4 != 0) {
    return invalid_argument("the {} cells of layer {} start at arena offset {}, not a multiple of 4", what,
                            layer, off);
  }
  if (bytes > max_binding()) {
    return unsupported("the {} cells of layer {} ({} bytes) exceed one storage binding ({} bytes)", what,
                       layer, bytes, max_binding());
  }
  return Tensor{a->memory.get(), off};
}

Status VulkanBackend::kv_op(const Graph& graph, NodeId id, std::span<void* const> data,
                            const ExecContext& ctx) {
  const Node& node = graph.node(id);
  auto src_node = [&](size_t i) -> const Node& { return graph.node(node.src[i]); };
  auto ptr = [&](size_t i) { return data[static_cast<size_t>(node.src[i])]; };
  const int32_t layer = node.params.layer;
  if (layer < 0 || static_cast<size_t>(layer) >= ctx.kv.size() || ctx.batch == nullptr) {
    return invalid_argument("no KV cells for layer {}", layer);
  }
  const KvLayerView& kv = ctx.kv[static_cast<size_t>(layer)];
  const BatchView& batch = *ctx.batch;
  const auto n_tokens = static_cast<int64_t>(batch.tokens.size());
  if (!kv_type(kv.type)) {
    return unsupported("KV cache type {} has no Vulkan {} shader (f32, f16 and q8_0 have)",
                       dtype_name(kv.type), graph::op_name(node.op));
  }
  const auto rb = minfer::row_bytes(kv.type, kv.row_elems);
  if (!rb || *rb != kv.row_bytes || kv.n_cells <= 0) {
    return invalid_argument("layer {}: {} cells of {} {} elements in rows of {} bytes", layer, kv.n_cells,
                            kv.row_elems, dtype_name(kv.type), kv.row_bytes);
  }
  const uint64_t region = static_cast<uint64_t>(kv.n_cells) * kv.row_bytes;
  if (region > UINT32_MAX) {
    return unsupported("layer {}: {} bytes of KV cells exceed the shaders' 32-bit offsets", layer, region);
  }
  MINFER_ASSIGN_OR_RETURN(Tensor k, locate_cells(kv.k, region, "K", layer));
  MINFER_ASSIGN_OR_RETURN(Tensor v, locate_cells(kv.v, region, "V", layer));
  MINFER_ASSIGN_OR_RETURN(vk::Window kw, bind(k, region));
  MINFER_ASSIGN_OR_RETURN(vk::Window vw, bind(v, region));

  if (node.op == OpKind::kKvStore || node.op == OpKind::kKvRows) {
    const uint64_t elems = static_cast<uint64_t>(n_tokens) * static_cast<uint64_t>(kv.row_elems);
    const size_t n_src = node.op == OpKind::kKvStore ? node.src.size() : 0;
    for (size_t i = 0; i < n_src; ++i) {
      if (static_cast<uint64_t>(src_node(i).n_elements()) != elems)
        return invalid_argument("{} has {} elements, the layer's cells take {} x {}", i == 0 ? "K" : "V",
                                src_node(i).n_elements(), n_tokens, kv.row_elems);
    }
    if (node.op == OpKind::kKvRows && static_cast<uint64_t>(node.n_elements()) != elems) {
      return invalid_argument("{} K elements read, the layer's cells give {} x {}", node.n_elements(), n_tokens,
                              kv.row_elems);
    }
    if (batch.store_cells.size() != static_cast<size_t>(n_tokens)) {
      return invalid_argument("{} store cells for {} tokens", batch.store_cells.size(), n_tokens);
    }
    for (int32_t cell : batch.store_cells) {
      if (cell < 0 || cell >= kv.n_cells)
        return invalid_argument("KV cell {} outside [0, {})", cell, kv.n_cells);
    }
    if (node.op == OpKind::kKvRows) {  // the K cells as a table of n_cells rows, read like a weight
      if (n_tokens == 0) return {};
      MINFER_ASSIGN_OR_RETURN(Tensor cells, locate(batch.store_cells.data(), batch.store_cells.size() * 4));
      MINFER_ASSIGN_OR_RETURN(Tensor o, locate(data[static_cast<size_t>(id)], elems * 4));
      const auto n_cells = static_cast<uint64_t>(kv.n_cells);
      return get_rows(node, kv.type, {{k.buffer}, n_cells, k.offset, n_cells, kv.row_bytes}, cells, n_tokens, o);
    }
    if (kv.type == DType::Q8_0 && kv.row_elems / 32 > kMaxQ8Blocks) {
      return unsupported("q8_0 cell rows of {} elements (the kv_store shader takes up to {})", kv.row_elems,
                         kMaxQ8Blocks * 32);
    }
    if (n_tokens == 0) return {};
    MINFER_ASSIGN_OR_RETURN(Tensor cells, locate(batch.store_cells.data(), batch.store_cells.size() * 4));
    MINFER_ASSIGN_OR_RETURN(vk::Window cw, bind(cells, batch.store_cells.size() * 4));
    MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p, pipeline("kv_store", 3, sizeof(KvStorePush),
                                                            {kWorkgroup, static_cast<uint32_t>(kv.type)}));
    for (size_t i = 0; i < n_src; ++i) {  // K, then V (a K shift stores K alone)
      MINFER_ASSIGN_OR_RETURN(Tensor x, locate(ptr(i), elems * 4));
      MINFER_ASSIGN_OR_RETURN(vk::Window xw, bind(x, elems * 4));
      const vk::Window& dw = i == 0 ? kw : vw;
      const KvStorePush push{u32(kv.row_elems), u32(kv.row_bytes), u32(n_tokens),
                             u32(xw.skip / 4),  u32(cw.skip / 4),  u32(dw.skip)};
      MINFER_RETURN_IF_ERROR(dispatch(*p, {xw, cw, dw}, &push, static_cast<uint64_t>(n_tokens)));
    }
    return {};
  }

  const graph::OpParams& prm = node.params;
  if (static_cast<int64_t>(prm.n_head_kv) * prm.head_dim != kv.row_elems) {
    return invalid_argument("{} KV heads x {} != cell width {}", prm.n_head_kv, prm.head_dim, kv.row_elems);
  }
  if (prm.head_dim > kMaxHeadDim || (kv.type == DType::Q8_0 && prm.head_dim % 32 != 0)) {
    return unsupported("attention heads of {} dimensions on a {} cache (the shader takes up to {}{})",
                       prm.head_dim, dtype_name(kv.type), kMaxHeadDim,
                       kv.type == DType::Q8_0 ? ", multiples of 32" : "");
  }
  const Node& q_node = src_node(0);
  if (q_node.ne[0] != prm.head_dim || q_node.ne[1] != prm.n_head || q_node.ne[2] * q_node.ne[3] != n_tokens ||
      node.ne[0] != static_cast<int64_t>(prm.head_dim) * prm.n_head || rows_of(node.ne) != n_tokens) {
    return invalid_argument("q {}x{}x{} and output {}x{} do not match {} heads of {} for {} tokens",
                            q_node.ne[0], q_node.ne[1], q_node.ne[2] * q_node.ne[3], node.ne[0],
                            rows_of(node.ne), prm.n_head, prm.head_dim, n_tokens);
  }
  // The windows are host data from the engine: checked here, since a shader reading past the cells would
  // return garbage instead of failing.
  const auto& offs = batch.window_offsets;
  if (offs.size() != static_cast<size_t>(n_tokens) + 1 || (n_tokens > 0 && offs[0] < 0) ||
      (n_tokens > 0 && static_cast<size_t>(offs.back()) > batch.window_cells.size())) {
    return invalid_argument("{} window offsets for {} tokens over {} window cells", offs.size(), n_tokens,
                            batch.window_cells.size());
  }
  for (size_t i = 0; i + 1 < offs.size(); ++i) {
    if (offs[i + 1] < offs[i]) return invalid_argument("window offsets decrease at token {}", i);
  }
  for (int32_t cell : batch.window_cells) {
    if (cell < 0 || cell >= kv.n_cells)
      return invalid_argument("window cell {} outside [0, {})", cell, kv.n_cells);
  }
  if (n_tokens == 0) return {};
  const uint64_t q_bytes = static_cast<uint64_t>(q_node.n_elements()) * 4;
  MINFER_ASSIGN_OR_RETURN(Tensor q, locate(ptr(0), q_bytes));
  MINFER_ASSIGN_OR_RETURN(Tensor out, locate(data[static_cast<size_t>(id)], q_bytes));
  MINFER_ASSIGN_OR_RETURN(Tensor ot, locate(offs.data(), offs.size() * 4));
  // Every window empty: bind the offsets again in place of the (unread) cells, since a binding needs bytes.
  Tensor ct = ot;
  uint64_t cells_bytes = offs.size() * 4;
  if (!batch.window_cells.empty()) {
    cells_bytes = batch.window_cells.size() * 4;
    MINFER_ASSIGN_OR_RETURN(ct, locate(batch.window_cells.data(), cells_bytes));
  }
  MINFER_ASSIGN_OR_RETURN(vk::Window qw, bind(q, q_bytes));
  MINFER_ASSIGN_OR_RETURN(vk::Window yw, bind(out, q_bytes));
  MINFER_ASSIGN_OR_RETURN(vk::Window ow, bind(ot, offs.size() * 4));
  MINFER_ASSIGN_OR_RETURN(vk::Window cw, bind(ct, cells_bytes));
  MINFER_ASSIGN_OR_RETURN(const vk::Pipeline* p,
                          pipeline("attention", 6, sizeof(AttentionPush), {static_cast<uint32_t>(kv.type)}));
  const size_t head_bytes = *minfer::row_bytes(kv.type, prm.head_dim);
  const AttentionPush push{u32(prm.head_dim), u32(prm.n_head),   u32(prm.n_head / prm.n_head_kv),
                           u32(n_tokens),     u32(kv.row_bytes), u32(head_bytes),
                           u32(qw.skip / 4),  u32(kw.skip),      u32(vw.skip),
                           u32(ow.skip / 4),  u32(cw.skip / 4),  u32(yw.skip / 4),
                           prm.scale};
  // One workgroup per (token, KV head, up to kMaxGroupHeads of its query heads).
  const uint64_t group = static_cast<uint64_t>(prm.n_head / prm.n_head_kv);
  const uint64_t chunks = (group + kMaxGroupHeads - 1) / kMaxGroupHeads;
  return dispatch(*p, {qw, kw, vw, ow, cw, yw}, &push,
                  static_cast<uint64_t>(n_tokens) * static_cast<uint64_t>(prm.n_head_kv) * chunks);
}

void VulkanBackend::reset_ring() {
  if (ring_.size() > 1) ring_.erase(ring_.begin(), ring_.end() - 1);
  ring_used_ = 0;
  act_q8_retired_.clear();
  act_q8_holds_.reset();  // the next split's nodes are new (a cached plan's node ids repeat every step)
}

void VulkanBackend::abandon() {
  pending_.clear();
  reset_ring();  // nothing submitted reads the ring
}

Status VulkanBackend::synchronize() {
  Status st = tapes_->run(pending_);
  // The ring's bytes were read by the work just finished (or abandoned with it): reuse them.
  reset_ring();
  return st;
}

Status VulkanBackend::upload(void* dst, const void* src, size_t bytes) {
  MINFER_RETURN_IF_ERROR(synchronize());
  uint64_t off = 0;
  MINFER_ASSIGN_OR_RETURN(const Arena* a, find_arena(dst, bytes, &off));
  if (a == nullptr)
    return invalid_argument("Vulkan backend: upload destination {} is not in a Vulkan buffer", dst);
  return vk::upload(*dev_, *a->memory, off, src, bytes, &staging_);
}

Status VulkanBackend::download(void* dst, const void* src, size_t bytes) {
  MINFER_RETURN_IF_ERROR(synchronize());
  uint64_t off = 0;
  MINFER_ASSIGN_OR_RETURN(const Arena* a, find_arena(src, bytes, &off));
  if (a == nullptr)
    return invalid_argument("Vulkan backend: read-back source {} is not in a Vulkan buffer", src);
  return vk::download(*dev_, *a->memory, off, dst, bytes, &staging_);
}

}  // namespace minfer::backend
