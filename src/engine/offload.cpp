#include "engine/offload.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "core/log.h"

namespace minfer::engine {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string block_range(int32_t lo, int32_t hi) {  // [lo, hi)
  if (hi <= lo) return "none";
  return hi - lo == 1 ? fmt::format("block {}", lo) : fmt::format("blocks {}-{}", lo, hi - 1);
}

}  // namespace

Result<int32_t> parse_gpu_layers(std::string_view text) {
  const std::string t = lower(text);
  if (t == "auto") return kGpuLayersAuto;
  if (t == "all") return kGpuLayersAll;
  int32_t n = -1;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || n < 0) {
    return invalid_argument("gpu layers '{}': expected a block count >= 0, auto or all", text);
  }
  return n;
}

Result<std::vector<std::string>> parse_backend_list(std::string_view text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    std::string name = lower(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.empty()) return invalid_argument("backend list '{}': an empty backend name", text);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

Result<uint64_t> parse_memory_size(std::string_view text) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc()) return invalid_argument("memory size '{}': expected a number of bytes, or with K, M, G, T", text);
  std::string unit = lower(std::string_view(end, static_cast<size_t>(text.data() + text.size() - end)));
  if (unit.size() > 1 && (unit.ends_with("ib") || unit.ends_with("b"))) unit = unit.substr(0, 1);
  const uint64_t scale = unit.empty() ? 1 : unit == "k" ? 1ULL << 10 : unit == "m" ? 1ULL << 20
                       : unit == "g" ? 1ULL << 30 : unit == "t" ? 1ULL << 40 : 0;
  if (scale == 0) return invalid_argument("memory size '{}': unknown unit (use K, M, G or T)", text);
  return n * scale;
}

Result<OffloadOptions> offload_from_env(OffloadOptions o) {
  if (o.explicit_request || !o.backends.empty() || o.device >= 0 || o.gpu_layers != kGpuLayersDefault) return o;
  if (const char* e = std::getenv("MINFER_BACKENDS"); e != nullptr && *e != '\0') {
    auto list = parse_backend_list(e);
    if (!list.ok()) return list.status().with_context("MINFER_BACKENDS: ");
    o.backends = std::move(*list);
    o.explicit_request = true;
  }
  if (const char* e = std::getenv("MINFER_GPU_LAYERS"); e != nullptr && *e != '\0') {
    auto n = parse_gpu_layers(e);
    if (!n.ok()) return n.status().with_context("MINFER_GPU_LAYERS: ");
    o.gpu_layers = *n;
    o.explicit_request = true;
  }
  if (const char* e = std::getenv("MINFER_GPU_MEM"); o.gpu_mem_bytes == 0 && e != nullptr && *e != '\0') {
    auto bytes = parse_memory_size(e);
    if (!bytes.ok()) return bytes.status().with_context("MINFER_GPU_MEM: ");
    o.gpu_mem_bytes = *bytes;
  }
  return o;
}

int32_t weight_layer(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int32_t l = -1;
  const auto [end, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), l);
  if (ec != std::errc() || end == name.data() + name.size() || *end != '.') return -1;
  return l;
}

Result<int32_t> resolve_gpu_layers(const OffloadOptions& options, const backend::Backend* device,
                                   const models::HParams& hp, const std::vector<backend::WeightSource>& weights,
                                   uint64_t kv_bytes_per_layer, uint64_t activation_bytes) {
  const int32_t asked = options.gpu_layers;
  if (device == nullptr) {
    if (asked == kGpuLayersAll || asked > 0) {
      return invalid_argument(
          "--gpu-layers {}: no device backend is in use (a CPU-type Vulkan device such as lavapipe is used only "
          "when named with --backend vulkan or --gpu N; `minfer devices` lists them)",
          asked == kGpuLayersAll ? std::string("all") : std::to_string(asked));
    }
    return 0;
  }
  if (asked == kGpuLayersAll) return hp.n_layer;
  if (asked >= 0) return std::min(asked, hp.n_layer);
  // auto (also the default on a device): blocks in order while their weights and KV fit the budget.
  const uint64_t budget = options.gpu_mem_bytes > 0 ? options.gpu_mem_bytes : device->memory_free() / 4 * 3;
  std::vector<uint64_t> block(static_cast<size_t>(hp.n_layer), kv_bytes_per_layer);
  uint64_t outside = 0;  // token embedding, final norm, output head
  std::set<const void*> seen;
  for (const backend::WeightSource& w : weights) {
    if (!seen.insert(w.data).second) continue;
    const int32_t l = weight_layer(w.name);
    if (l >= 0 && l < hp.n_layer) {
      block[static_cast<size_t>(l)] += w.n_bytes;
    } else {
      outside += w.n_bytes;
    }
  }
  uint64_t used = activation_bytes;
  int32_t n = 0;
  while (n < hp.n_layer && used + block[static_cast<size_t>(n)] <= budget) used += block[static_cast<size_t>(n++)];
  if (n == hp.n_layer && used + outside > budget) --n;  // the head would come along: keep the last block off
  MINFER_LOG_INFO("gpu layers auto: {} of {} blocks in a budget of {:.1f} MiB", n, hp.n_layer, mib(budget));
  return n;
}

Status offload_failure(const OffloadPlan& plan, const Status& st) {
  if (st.ok() || plan.device == nullptr) return st;
  Status out = st.with_context(fmt::format("offloading {} of {} blocks: ", plan.n_gpu_layers, plan.n_layer));
  if (st.code() != StatusCode::kOutOfRange) return out;
  return Status(out.code(), out.message() + "; try a smaller --gpu-layers");
}

Status register_weights(OffloadPlan& plan, const models::Model& model, sched::Scheduler& scheduler) {
  const std::vector<backend::WeightSource>& weights = model.weights();
  std::set<std::string> on_device;
  std::set<const void*> counted;
  for (const backend::WeightSource& w : weights) {
    if (plan.device == nullptr || !offloaded(weight_layer(w.name), plan.n_gpu_layers, plan.n_layer)) continue;
    Status st = plan.device->register_weight(w);
    if (st.code() == StatusCode::kUnsupported) {  // no shader for its type: its ops run on the CPU
      MINFER_LOG_INFO("{}; it stays on the CPU", st.message());
      continue;
    }
    if (!st.ok()) return offload_failure(plan, st);
    on_device.insert(w.name);
    if (counted.insert(w.data).second) plan.device_weight_bytes += w.n_bytes;
  }
  for (const backend::WeightSource& w : weights) {
    if (on_device.count(w.name) == 0) MINFER_RETURN_IF_ERROR(plan.host->register_weight(w));
  }
  if (plan.device == nullptr) return {};
  // A device weight that a CPU node reads (its op is one the device refuses) is registered there too.
  MINFER_ASSIGN_OR_RETURN(graph::Graph probe, model.build_graph(graph::GraphParams{2, 1, false}));
  MINFER_RETURN_IF_ERROR(scheduler.assign_ops(probe));
  const auto& backends = scheduler.backends();
  std::set<std::string> fallback;
  for (const graph::Node& n : probe.nodes) {
    if (n.op == graph::OpKind::kWeight || n.backend < 0) continue;
    const backend::Backend* b = backends[static_cast<size_t>(n.backend)];
    if (b->host_memory() && n.op != graph::OpKind::kInput && n.op != graph::OpKind::kReshape &&
        offloaded(n.layer, plan.n_gpu_layers, plan.n_layer)) {
      fallback.insert(std::string(graph::op_name(n.op)));
    }
    if (b != plan.host) continue;
    for (graph::NodeId s : n.src) {
      const graph::Node& w = probe.node(s);
      if (w.op != graph::OpKind::kWeight || plan.host->weight_handle(w.name) != nullptr) continue;
      for (const backend::WeightSource& src : weights) {
        if (src.name == w.name) MINFER_RETURN_IF_ERROR(plan.host->register_weight(src));
      }
    }
  }
  plan.cpu_fallback_ops.assign(fallback.begin(), fallback.end());
  return {};
}

sched::Scheduler::Placement offload_placement(const OffloadPlan& plan) {
  const int32_t n_gpu = plan.n_gpu_layers, n_layer = plan.n_layer;
  return [n_gpu, n_layer](const graph::Node& node, const backend::Backend& b) {
    return b.host_memory() || offloaded(node.layer, n_gpu, n_layer);
  };
}

std::string placement_line(const OffloadPlan& plan, size_t kv_bytes, const std::string& kv_backend,
                           size_t n_splits) {
  const int32_t n = plan.n_gpu_layers, L = plan.n_layer;
  const bool all = n >= L && n > 0;
  std::string line = "placement: ";
  if (plan.device != nullptr) {
    const std::string arithmetic = plan.device->arithmetic();
    line += fmt::format("{} ({}{}{}): {} of {}{}; ", plan.device->name(), plan.device->device_name(),
                        arithmetic.empty() ? "" : "; ", arithmetic, block_range(0, n), L,
                        all ? " + embedding, output norm and head" : "");
  }
  line += fmt::format("CPU: {}{}", block_range(n, L), all ? "" : (n == 0 && plan.device == nullptr
                                                                      ? " (all), embedding and head"
                                                                      : " + embedding, output norm and head"));
  if (plan.device != nullptr) line += fmt::format("; device weights {:.1f} MiB", mib(plan.device_weight_bytes));
  line += fmt::format("; KV {:.1f} MiB on {}; {} split{} per step", mib(kv_bytes), kv_backend, n_splits,
                      n_splits == 1 ? "" : "s");
  if (!plan.cpu_fallback_ops.empty() && n > 0) {
    line += " (offloaded blocks run on the CPU:";
    for (const std::string& op : plan.cpu_fallback_ops) line += " " + op;
    line += ")";
  }
  return line;
}

}  // namespace minfer::engine
