// ThreadPool: every thread runs each job exactly once, jobs are separated, and reuse is cheap.
#include <atomic>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"

namespace minfer {
namespace {

TEST(ThreadPool, RunsEveryThreadIndexOncePerJob) {
  for (int n : {1, 2, 4}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.n_threads(), n);
    for (int job = 0; job < 200; ++job) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run([&](int ith, int nth) {
        EXPECT_EQ(nth, n);
        hits[static_cast<size_t>(ith)].fetch_add(1);
      });
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "job " << job << " thread " << i;
    }
  }
}

TEST(ThreadPool, JobsDoNotOverlap) {
  ThreadPool pool(3);
  std::vector<int> data(3000, 0);
  for (int round = 1; round <= 50; ++round) {
    pool.run([&](int ith, int nth) {
      for (size_t i = static_cast<size_t>(ith); i < data.size(); i += static_cast<size_t>(nth)) data[i] += 1;
    });
    for (int v : data) ASSERT_EQ(v, round);
  }
}

TEST(ThreadPool, ZeroOrNegativeCountMeansOneThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.n_threads(), 1);
  int calls = 0;
  pool.run([&](int, int) { ++calls; });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace minfer
