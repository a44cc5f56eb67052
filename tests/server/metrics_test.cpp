// Prometheus text format 0.0.4: every sample line has a HELP and TYPE, families use the minfer_ names,
// and the per-op families appear only when op times are present.
#include <sstream>

#include <gtest/gtest.h>

#include "server/metrics.h"

namespace minfer::server {
namespace {

TEST(Metrics, FamiliesAndFormat) {
  engine::BatcherStats s;
  s.n_slots = 4;
  s.queue_depth = 3;
  s.requests_running = 2;
  s.requests_total = 10;
  s.completion_tokens = 123;
  s.kv_cells_used = 100;
  s.kv_cells_total = 4096;
  s.draining = true;
  s.requests_rejected = 1;
  HttpCounters h;
  h.rejected = 2;
  h.in_flight = 5;
  const std::string text = render_metrics(s, h);
  for (const char* line :
       {"minfer_queue_depth 3\n", "minfer_requests_running 2\n", "minfer_requests_total 10\n",
        "minfer_completion_tokens_total 123\n", "minfer_kv_used_cells 100\n", "minfer_kv_free_cells 3996\n",
        "minfer_draining 1\n", "minfer_requests_rejected_total 3\n", "minfer_requests_in_flight 5\n",
        "# TYPE minfer_requests_total counter\n", "# TYPE minfer_queue_depth gauge\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
  EXPECT_EQ(text.find("minfer_op_seconds_total"), std::string::npos);
  // Every sample's family has a TYPE line before it.
  std::istringstream in(text);
  std::string line, typed;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# TYPE ", 0) == 0) {
      typed = line.substr(7, line.find(' ', 7) - 7);
    } else if (line[0] != '#') {
      EXPECT_EQ(line.rfind(typed, 0), 0u) << line;
      EXPECT_EQ(line.rfind("minfer_", 0), 0u) << line;
    }
  }
}

TEST(Metrics, HealthAndMemoryFamilies) {
  engine::BatcherStats s;
  s.worker_stalled = 2;
  s.pending_jobs = 7;
  s.kv_sequences = 3;
  s.kv_shared_cells = 40;
  s.memory_weights_bytes = 5000000000;
  s.memory_kv_bytes = 1 << 20;
  s.memory_activations_bytes = 4096;
  const std::string with_rss = render_metrics(s, {}, {.rss_bytes = 123456789});
  for (const char* line :
       {"minfer_worker_stalled_total 2\n", "# TYPE minfer_worker_stalled_total counter\n",
        "minfer_worker_pending_jobs 7\n", "minfer_kv_sequences 3\n", "minfer_kv_shared_cells 40\n",
        "minfer_memory_weights_bytes 5000000000\n", "minfer_memory_kv_bytes 1048576\n",
        "minfer_memory_activations_bytes 4096\n", "minfer_memory_rss_bytes 123456789\n"}) {
    EXPECT_NE(with_rss.find(line), std::string::npos) << line << with_rss;
  }
  // An unknown RSS is omitted, never reported as 0.
  EXPECT_EQ(render_metrics(s, {}).find("minfer_memory_rss_bytes"), std::string::npos);
  EXPECT_GT(read_process_stats().rss_bytes, 0);
}

TEST(Metrics, PerOpTimesWhenPresent) {
  engine::BatcherStats s;
  s.op_times = {{"matmul", 1.5, 10}, {"rope", 0.25, 4}};
  const std::string text = render_metrics(s, {});
  EXPECT_NE(text.find("minfer_op_seconds_total{op=\"matmul\"} 1.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("minfer_op_calls_total{op=\"rope\"} 4\n"), std::string::npos) << text;
}

// Several models: every per-model family has one sample per model labelled model="ID" (batcher families
// only for loaded models), process-wide families stay unlabelled; one model keeps unlabelled samples.
TEST(Metrics, PerModelLabels) {
  ModelStatus a, b;
  a.id = "alpha";
  a.state = "loaded";
  a.loads = 2;
  a.stats = engine::BatcherStats{};
  a.stats->requests_total = 7;
  a.stats->op_times = {{"matmul", 1.5, 10}};
  b.id = "be\"ta";
  b.waiting = 3;
  HttpCounters h;
  h.rejected = 4;
  h.ready = true;
  const std::string text = render_metrics({a, b}, /*labelled=*/true, h);
  for (const char* line :
       {"minfer_requests_total{model=\"alpha\"} 7\n", "minfer_model_loaded{model=\"alpha\"} 1\n",
        "minfer_model_loaded{model=\"be\\\"ta\"} 0\n",
        "minfer_model_requests_waiting{model=\"be\\\"ta\"} 3\n",
        "minfer_model_loads_total{model=\"alpha\"} 2\n",
        "minfer_op_seconds_total{model=\"alpha\",op=\"matmul\"} 1.5\n", "minfer_requests_rejected_total 4\n",
        "minfer_ready 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  EXPECT_EQ(text.find("minfer_requests_total{model=\"be"), std::string::npos) << text;  // not loaded
  EXPECT_EQ(text.find("minfer_requests_total 7"), std::string::npos) << text;
  const std::string one = render_metrics({a}, /*labelled=*/false, h);
  EXPECT_NE(one.find("minfer_requests_total 7\n"), std::string::npos) << one;
  EXPECT_NE(one.find("minfer_requests_rejected_total 4\n"), std::string::npos) << one;
  EXPECT_NE(one.find("minfer_model_loaded 1\n"), std::string::npos) << one;
  EXPECT_EQ(one.find("model=\""), std::string::npos) << one;
}

}  // namespace
}  // namespace minfer::server
