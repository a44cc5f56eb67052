// Prometheus text rendering (see metrics.h): HELP and TYPE lines, then one sample per family.
#include "server/metrics.h"

#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

namespace minfer::server {
namespace {

void family(std::string* out, const char* name, const char* type, const char* help, double value) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

ProcessStats read_process_stats() {
  ProcessStats p;
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (statm >> size_pages >> resident_pages && page > 0) p.rss_bytes = resident_pages * page;
  return p;
}

namespace {

// A family whose value is one model's batcher counter.
struct BatcherFamily {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const engine::BatcherStats&);
};

double d(int64_t v) {
  return static_cast<double>(v);
}

// In the order the single-model exposition has always listed them (minfer_requests_rejected_total and
// the op times are written apart: they mix in the HTTP layer's count and a second label).
const BatcherFamily kBatcherFamilies[] = {
    {"minfer_requests_total", "counter", "Requests accepted by the batcher.",
     [](const engine::BatcherStats& s) { return d(s.requests_total); }},
    {"minfer_requests_completed_total", "counter", "Requests finished with every choice delivered.",
     [](const engine::BatcherStats& s) { return d(s.requests_completed); }},
    {"minfer_requests_cancelled_total", "counter", "Requests abandoned by their client (disconnects).",
     [](const engine::BatcherStats& s) { return d(s.requests_cancelled); }},
    {"minfer_requests_failed_total", "counter", "Requests answered with a server error (failed forward).",
     [](const engine::BatcherStats& s) { return d(s.requests_failed); }},
    {"minfer_queue_depth", "gauge", "Accepted requests waiting for a slot.",
     [](const engine::BatcherStats& s) { return d(s.queue_depth); }},
    {"minfer_worker_pending_jobs", "gauge", "Requests the worker still owes an answer: queued plus running.",
     [](const engine::BatcherStats& s) { return d(s.pending_jobs); }},
    {"minfer_requests_running", "gauge", "Requests occupying slots now.",
     [](const engine::BatcherStats& s) { return d(s.requests_running); }},
    {"minfer_slots", "gauge", "Decoding slots.", [](const engine::BatcherStats& s) { return d(s.n_slots); }},
    {"minfer_slots_busy", "gauge", "Slots generating or prefilling now.",
     [](const engine::BatcherStats& s) { return d(s.slots_busy); }},
    {"minfer_prompt_tokens_total", "counter", "Prompt tokens of completed requests.",
     [](const engine::BatcherStats& s) { return d(s.prompt_tokens); }},
    {"minfer_prompt_tokens_cached_total", "counter",
     "Prompt tokens whose KV rows were reused instead of recomputed.",
     [](const engine::BatcherStats& s) { return d(s.cached_prompt_tokens); }},
    {"minfer_completion_tokens_total", "counter", "Generated tokens delivered to clients.",
     [](const engine::BatcherStats& s) { return d(s.completion_tokens); }},
    {"minfer_completion_tokens_per_second", "gauge", "Generated tokens per second over the last 16 s.",
     [](const engine::BatcherStats& s) { return static_cast<double>(s.completion_tokens_per_second); }},
    {"minfer_steps_total", "counter", "Batched forward steps run by the worker.",
     [](const engine::BatcherStats& s) { return d(s.steps); }},
    {"minfer_spec_rounds_total", "counter",
     "Speculative verifications (a stream's proposals checked in a step).",
     [](const engine::BatcherStats& s) { return d(s.spec_rounds); }},
    {"minfer_spec_drafted_tokens_total", "counter", "Tokens proposed by speculative drafting.",
     [](const engine::BatcherStats& s) { return d(s.spec_drafted); }},
    {"minfer_spec_accepted_tokens_total", "counter", "Proposed tokens the target accepted.",
     [](const engine::BatcherStats& s) { return d(s.spec_accepted); }},
    {"minfer_kv_used_cells", "gauge", "KV cells holding some sequence's rows.",
     [](const engine::BatcherStats& s) { return d(s.kv_cells_used); }},
    {"minfer_kv_free_cells", "gauge", "KV cells free.",
     [](const engine::BatcherStats& s) { return d(s.kv_cells_total - s.kv_cells_used); }},
    {"minfer_kv_cells", "gauge", "KV cells in the pool (-c).",
     [](const engine::BatcherStats& s) { return d(s.kv_cells_total); }},
    {"minfer_kv_sequences", "gauge",
     "KV sequences holding cells (busy slots and idle slots' cached prefixes).",
     [](const engine::BatcherStats& s) { return d(s.kv_sequences); }},
    {"minfer_kv_shared_cells", "gauge",
     "KV cells owned by more than one sequence (a prompt prefix shared between slots).",
     [](const engine::BatcherStats& s) { return d(s.kv_shared_cells); }},
    {"minfer_worker_stalled_total", "counter",
     "Times the worker made no progress for 64 steps in a row and answered every open request with 500.",
     [](const engine::BatcherStats& s) { return d(s.worker_stalled); }},
    {"minfer_memory_weights_bytes", "gauge", "Bytes of model weights (each tensor once).",
     [](const engine::BatcherStats& s) { return d(s.memory_weights_bytes); }},
    {"minfer_memory_kv_bytes", "gauge", "Bytes of the KV cache buffers.",
     [](const engine::BatcherStats& s) { return d(s.memory_kv_bytes); }},
    {"minfer_memory_activations_bytes", "gauge",
     "Largest activation arena a forward has used (high-water mark).",
     [](const engine::BatcherStats& s) { return d(s.memory_activations_bytes); }},
    {"minfer_drain_abandoned_requests", "gauge", "Requests still in flight when the drain deadline expired.",
     [](const engine::BatcherStats& s) { return d(s.drain_abandoned); }},
};

std::string render(const std::vector<ModelStatus>& models, bool labelled, bool with_router,
                   const HttpCounters& h, const ProcessStats& p) {
  std::string out;
  auto header = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  // `extra`: further labels, already formatted (op="matmul").
  auto sample = [&](const char* name, const ModelStatus* m, double value, const std::string& extra = "") {
    std::string labels;
    if (labelled && m != nullptr) labels = fmt::format("model=\"{}\"", escape_label(m->id));
    if (!extra.empty()) labels += (labels.empty() ? "" : ",") + extra;
    out += labels.empty() ? fmt::format("{} {}\n", name, value)
                          : fmt::format("{}{{{}}} {}\n", name, labels, value);
  };
  bool any_stats = false, draining = h.draining;
  for (const ModelStatus& m : models) {
    any_stats = any_stats || m.stats.has_value();
    if (m.stats && m.stats->draining) draining = true;
  }

  family(&out, "minfer_ready", "gauge", "1 when the model is loaded and the server accepts requests.",
         h.ready ? 1 : 0);
  for (const BatcherFamily& f : kBatcherFamilies) {
    header(f.name, f.type, f.help);
    for (const ModelStatus& m : models) {
      if (m.stats) sample(f.name, &m, f.value(*m.stats));
    }
  }
  header("minfer_requests_rejected_total", "counter",
         "Requests refused before queueing (queue full, no idle slot, draining).");
  for (const ModelStatus& m : models) {
    if (m.stats)
      sample("minfer_requests_rejected_total", &m,
             d(m.stats->requests_rejected + (labelled ? 0 : h.rejected)));
  }
  if (labelled || !any_stats) sample("minfer_requests_rejected_total", nullptr, d(h.rejected));
  family(&out, "minfer_requests_in_flight", "gauge", "Accepted requests whose response is not finished.",
         d(h.in_flight));
  family(&out, "minfer_http_client_errors_total", "counter", "Responses with a 4xx status.", d(h.errors_4xx));
  family(&out, "minfer_http_server_errors_total", "counter", "Responses with a 5xx status.", d(h.errors_5xx));
  if (p.rss_bytes >= 0)
    family(&out, "minfer_memory_rss_bytes", "gauge", "Resident set size of the server process.",
           d(p.rss_bytes));
  family(&out, "minfer_draining", "gauge", "1 while a graceful shutdown is in progress.", draining ? 1 : 0);
  bool any_ops = false;
  for (const ModelStatus& m : models) any_ops = any_ops || (m.stats && !m.stats->op_times.empty());
  if (any_ops) {
    header("minfer_op_seconds_total", "counter", "Seconds spent per graph op (MINFER_OP_TIMING).");
    for (const ModelStatus& m : models) {
      if (!m.stats) continue;
      for (const auto& op : m.stats->op_times)
        sample("minfer_op_seconds_total", &m, op.seconds, fmt::format("op=\"{}\"", escape_label(op.op)));
    }
    header("minfer_op_calls_total", "counter", "Executions per graph op (MINFER_OP_TIMING).");
    for (const ModelStatus& m : models) {
      if (!m.stats) continue;
      for (const auto& op : m.stats->op_times)
        sample("minfer_op_calls_total", &m, d(op.calls), fmt::format("op=\"{}\"", escape_label(op.op)));
    }
  }
  if (!with_router) return out;
  struct RouterFamily {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const ModelStatus&);
  };
  static const RouterFamily kRouterFamilies[] = {
      {"minfer_model_loaded", "gauge", "1 while the model is loaded.",
       [](const ModelStatus& m) { return m.loaded() ? 1.0 : 0.0; }},
      {"minfer_model_requests_in_flight", "gauge",
       "Requests holding the model now (it is not unloaded meanwhile).",
       [](const ModelStatus& m) { return d(m.in_flight); }},
      {"minfer_model_requests_waiting", "gauge",
       "Requests waiting for the model to load, or for room to load it (--max-loaded, --memory-budget).",
       [](const ModelStatus& m) { return d(m.waiting); }},
      {"minfer_model_loads_total", "counter", "Completed loads of the model.",
       [](const ModelStatus& m) { return d(m.loads); }},
      {"minfer_model_load_failures_total", "counter", "Failed loads of the model.",
       [](const ModelStatus& m) { return d(m.load_failures); }},
      {"minfer_model_unloads_total", "counter",
       "Unloads of the model (least recently used first, or --keep-alive).",
       [](const ModelStatus& m) { return d(m.unloads); }},
      {"minfer_model_load_seconds", "gauge", "Duration of the model's latest load.",
       [](const ModelStatus& m) { return m.last_load_seconds; }},
      {"minfer_model_resident_bytes", "gauge",
       "Resident size counted against --memory-budget (0 when unloaded; the file size until measured).",
       [](const ModelStatus& m) { return d(m.resident_bytes); }},
  };
  for (const RouterFamily& f : kRouterFamilies) {
    header(f.name, f.type, f.help);
    for (const ModelStatus& m : models) sample(f.name, &m, f.value(m));
  }
  return out;
}

}  // namespace

std::string render_metrics(const engine::BatcherStats& s, const HttpCounters& h, const ProcessStats& p) {
  ModelStatus m;
  m.state = "loaded";
  m.stats = s;
  return render({m}, /*labelled=*/false, /*with_router=*/false, h, p);
}

std::string render_metrics(const std::vector<ModelStatus>& models, bool labelled, const HttpCounters& h,
                           const ProcessStats& p) {
  return render(models, labelled, /*with_router=*/true, h, p);
}

}  // namespace minfer::server
