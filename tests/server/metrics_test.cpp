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

TEST(Metrics, PerOpTimesWhenPresent) {
  engine::BatcherStats s;
  s.op_times = {{"matmul", 1.5, 10}, {"rope", 0.25, 4}};
  const std::string text = render_metrics(s, {});
  EXPECT_NE(text.find("minfer_op_seconds_total{op=\"matmul\"} 1.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("minfer_op_calls_total{op=\"rope\"} 4\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace minfer::server
