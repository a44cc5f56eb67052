// Fan-out of server-sent events to every open page: each subscriber has its own bounded queue, so a slow
// tab never blocks the run (a tab that falls more than kMaxQueued events behind is dropped and reconnects).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace minfer::viz {

class EventHub {
 public:
  static constexpr size_t kMaxQueued = 4096;

  // A new subscriber id; it receives events published from now on.
  int64_t subscribe();
  void unsubscribe(int64_t id);
  // Queues an already framed event ("event: x\ndata: ...\n\n") for every subscriber.
  void publish(const std::string& frame);
  // The next frame for `id`: nullopt after `timeout` with nothing queued, or when it was dropped/closed
  // (then *closed is set).
  std::optional<std::string> next(int64_t id, std::chrono::milliseconds timeout, bool* closed);
  // Wakes every waiting subscriber and closes them (server shutdown).
  void close_all();
  size_t n_subscribers() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_id_ = 1;
  bool closed_ = false;
  std::map<int64_t, std::deque<std::string>> queues_;
};

}  // namespace minfer::viz
