#include "viz/event_hub.h"

namespace minfer::viz {

int64_t EventHub::subscribe() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t id = next_id_++;
  queues_[id];
  return id;
}

void EventHub::unsubscribe(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  queues_.erase(id);
}

void EventHub::publish(const std::string& frame) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = queues_.begin(); it != queues_.end();) {
      if (it->second.size() >= kMaxQueued) {
        it = queues_.erase(it);  // too far behind: next() reports it closed
      } else {
        it->second.push_back(frame);
        ++it;
      }
    }
  }
  cv_.notify_all();
}

std::optional<std::string> EventHub::next(int64_t id, std::chrono::milliseconds timeout, bool* closed) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] {
    auto it = queues_.find(id);
    return closed_ || it == queues_.end() || !it->second.empty();
  };
  cv_.wait_for(lock, timeout, ready);
  auto it = queues_.find(id);
  if (closed_ || it == queues_.end()) {
    *closed = true;
    return std::nullopt;
  }
  *closed = false;
  if (it->second.empty()) return std::nullopt;
  std::string frame = std::move(it->second.front());
  it->second.pop_front();
  return frame;
}

void EventHub::close_all() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

size_t EventHub::n_subscribers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queues_.size();
}

}  // namespace minfer::viz
