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

std::string render_metrics(const engine::BatcherStats& s, const HttpCounters& h, const ProcessStats& p) {
  std::string out;
  auto d = [](int64_t v) { return static_cast<double>(v); };
  family(&out, "minfer_ready", "gauge", "1 when the model is loaded and the server accepts requests.",
         h.ready ? 1 : 0);
  family(&out, "minfer_requests_total", "counter", "Requests accepted by the batcher.", d(s.requests_total));
  family(&out, "minfer_requests_completed_total", "counter", "Requests finished with every choice delivered.",
         d(s.requests_completed));
  family(&out, "minfer_requests_rejected_total", "counter",
         "Requests refused before queueing (queue full, no idle slot, draining).",
         d(s.requests_rejected + h.rejected));
  family(&out, "minfer_requests_cancelled_total", "counter",
         "Requests abandoned by their client (disconnects).", d(s.requests_cancelled));
  family(&out, "minfer_requests_failed_total", "counter",
         "Requests answered with a server error (failed forward).", d(s.requests_failed));
  family(&out, "minfer_requests_in_flight", "gauge", "Accepted requests whose response is not finished.",
         d(h.in_flight));
  family(&out, "minfer_http_client_errors_total", "counter", "Responses with a 4xx status.", d(h.errors_4xx));
  family(&out, "minfer_http_server_errors_total", "counter", "Responses with a 5xx status.", d(h.errors_5xx));
  family(&out, "minfer_queue_depth", "gauge", "Accepted requests waiting for a slot.", s.queue_depth);
  family(&out, "minfer_worker_pending_jobs", "gauge",
         "Requests the worker still owes an answer: queued plus running.", s.pending_jobs);
  family(&out, "minfer_requests_running", "gauge", "Requests occupying slots now.", s.requests_running);
  family(&out, "minfer_slots", "gauge", "Decoding slots.", s.n_slots);
  family(&out, "minfer_slots_busy", "gauge", "Slots generating or prefilling now.", s.slots_busy);
  family(&out, "minfer_prompt_tokens_total", "counter", "Prompt tokens of completed requests.",
         d(s.prompt_tokens));
  family(&out, "minfer_prompt_tokens_cached_total", "counter",
         "Prompt tokens whose KV rows were reused instead of recomputed.", d(s.cached_prompt_tokens));
  family(&out, "minfer_completion_tokens_total", "counter", "Generated tokens delivered to clients.",
         d(s.completion_tokens));
  family(&out, "minfer_completion_tokens_per_second", "gauge",
         "Generated tokens per second over the last 16 s.", s.completion_tokens_per_second);
  family(&out, "minfer_steps_total", "counter", "Batched forward steps run by the worker.", d(s.steps));
  family(&out, "minfer_spec_rounds_total", "counter",
         "Speculative verifications (a stream's proposals checked in a step).", d(s.spec_rounds));
  family(&out, "minfer_spec_drafted_tokens_total", "counter", "Tokens proposed by speculative drafting.",
         d(s.spec_drafted));
  family(&out, "minfer_spec_accepted_tokens_total", "counter", "Proposed tokens the target accepted.",
         d(s.spec_accepted));
  family(&out, "minfer_kv_used_cells", "gauge", "KV cells holding some sequence's rows.", d(s.kv_cells_used));
  family(&out, "minfer_kv_free_cells", "gauge", "KV cells free.", d(s.kv_cells_total - s.kv_cells_used));
  family(&out, "minfer_kv_cells", "gauge", "KV cells in the pool (-c).", d(s.kv_cells_total));
  family(&out, "minfer_kv_sequences", "gauge",
         "KV sequences holding cells (busy slots and idle slots' cached prefixes).", s.kv_sequences);
  family(&out, "minfer_kv_shared_cells", "gauge",
         "KV cells owned by more than one sequence (a prompt prefix shared between slots).",
         d(s.kv_shared_cells));
  family(&out, "minfer_worker_stalled_total", "counter",
         "Times the worker made no progress for 64 steps in a row and answered every open request with 500.",
         d(s.worker_stalled));
  family(&out, "minfer_memory_weights_bytes", "gauge", "Bytes of model weights (each tensor once).",
         d(s.memory_weights_bytes));
  family(&out, "minfer_memory_kv_bytes", "gauge", "Bytes of the KV cache buffers.", d(s.memory_kv_bytes));
  family(&out, "minfer_memory_activations_bytes", "gauge",
         "Largest activation arena a forward has used (high-water mark).", d(s.memory_activations_bytes));
  if (p.rss_bytes >= 0)
    family(&out, "minfer_memory_rss_bytes", "gauge", "Resident set size of the server process.",
           d(p.rss_bytes));
  family(&out, "minfer_draining", "gauge", "1 while a graceful shutdown is in progress.", s.draining ? 1 : 0);
  family(&out, "minfer_drain_abandoned_requests", "gauge",
         "Requests still in flight when the drain deadline expired.", d(s.drain_abandoned));
  if (!s.op_times.empty()) {
    out += "# HELP minfer_op_seconds_total Seconds spent per graph op (MINFER_OP_TIMING).\n";
    out += "# TYPE minfer_op_seconds_total counter\n";
    for (const auto& op : s.op_times)
      out += fmt::format("minfer_op_seconds_total{{op=\"{}\"}} {}\n", escape_label(op.op), op.seconds);
    out += "# HELP minfer_op_calls_total Executions per graph op (MINFER_OP_TIMING).\n";
    out += "# TYPE minfer_op_calls_total counter\n";
    for (const auto& op : s.op_times)
      out += fmt::format("minfer_op_calls_total{{op=\"{}\"}} {}\n", escape_label(op.op), op.calls);
  }
  return out;
}

}  // namespace minfer::server
