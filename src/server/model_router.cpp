// The model router (see model_router.h): per-model state under one mutex, loads and unloads outside it,
// a keep-alive thread that unloads idle models.
#include "server/model_router.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "core/check.h"
#include "core/log.h"
#include "gguf/split.h"
#include "server/embeddings.h"

namespace minfer::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kWaitPoll{100};

// The bytes of the GGUF on disk (every part of a split set): the resident estimate before a first load.
int64_t file_bytes(const std::string& path) {
  std::error_code ec;
  if (auto split = gguf::parse_split_path(path)) {
    int64_t total = 0;
    for (int i = 1; i <= split->count; ++i) {
      const auto n = std::filesystem::file_size(gguf::split_path(split->stem, i, split->count), ec);
      if (!ec) total += static_cast<int64_t>(n);
    }
    return total;
  }
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

std::string gib(int64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30));
}

}  // namespace

LoadedModel::LoadedModel() = default;
LoadedModel::~LoadedModel() = default;

ModelLease::~ModelLease() {
  // Dropped before the count, so that an unload started once the count is 0 holds the last reference.
  model_.reset();
  router_->release(index_);
}

ModelRouter::ModelRouter(std::vector<ModelSpec> specs, ModelLoader loader, RouterOptions options)
    : loader_(std::move(loader)), options_(options) {
  MINFER_CHECK(!specs.empty(), "ModelRouter: no models");
  std::set<std::string> names;
  for (ModelSpec& s : specs) {
    MINFER_CHECK(names.insert(s.id).second, "ModelRouter: duplicate model name '{}'", s.id);
    for (const std::string& a : s.aliases) {
      if (a != s.id) MINFER_CHECK(names.insert(a).second, "ModelRouter: duplicate model name '{}'", a);
    }
    Entry e;
    e.estimate_bytes = file_bytes(s.path);
    e.spec = std::move(s);
    entries_.push_back(std::move(e));
  }
  if (loader_ && options_.keep_alive.count() >= 0)
    keep_alive_thread_ = std::thread([this] { keep_alive_loop(); });
}

ModelRouter::~ModelRouter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (keep_alive_thread_.joinable()) keep_alive_thread_.join();
  // Each LoadedModel stops its batcher before its engines go.
  for (Entry& e : entries_) e.model.reset();
}

Status ModelRouter::adopt(const std::string& id, std::unique_ptr<LoadedModel> model) {
  std::lock_guard<std::mutex> lock(mu_);
  auto index = find(id);
  if (!index) return not_found("model '{}' is not one of {}", id, known_list());
  Entry& e = entries_[*index];
  e.model = std::move(model);
  e.state = State::kLoaded;
  e.last_used = Clock::now();
  e.loads += 1;
  e.estimate_bytes = measured_bytes(*e.model);
  cv_.notify_all();
  return {};
}

std::optional<size_t> ModelRouter::find(const std::string& name) const {
  if (name.empty()) return 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const ModelSpec& s = entries_[i].spec;
    if (s.id == name || std::find(s.aliases.begin(), s.aliases.end(), name) != s.aliases.end()) return i;
  }
  return std::nullopt;
}

bool ModelRouter::knows(const std::string& name) const {
  return find(name).has_value();
}

std::string ModelRouter::known_list() const {
  std::string out;
  for (const Entry& e : entries_) out += (out.empty() ? "'" : ", '") + e.spec.id + "'";
  return out;
}

int64_t ModelRouter::measured_bytes(const LoadedModel& model) {
  if (model.batcher == nullptr) return 0;
  const engine::BatcherStats s = model.batcher->stats();
  return s.memory_weights_bytes + s.memory_kv_bytes + s.memory_activations_bytes;
}

std::optional<std::vector<size_t>> ModelRouter::plan_room(size_t want, bool* never) const {
  *never = options_.memory_budget > 0 && entries_[want].estimate_bytes > options_.memory_budget;
  if (*never) return std::nullopt;
  int64_t count = 0, bytes = 0;
  std::vector<size_t> idle;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (i == want || e.state == State::kUnloaded) continue;
    ++count;
    bytes += e.estimate_bytes;
    if (e.state == State::kLoaded && e.leases == 0) idle.push_back(i);
  }
  std::sort(idle.begin(), idle.end(),
            [this](size_t a, size_t b) { return entries_[a].last_used < entries_[b].last_used; });
  auto fits = [&] {
    return (options_.max_loaded <= 0 || count + 1 <= options_.max_loaded) &&
           (options_.memory_budget <= 0 || bytes + entries_[want].estimate_bytes <= options_.memory_budget);
  };
  std::vector<size_t> victims;
  for (size_t i : idle) {
    if (fits()) break;
    victims.push_back(i);
    --count;
    bytes -= entries_[i].estimate_bytes;
  }
  if (!fits()) return std::nullopt;
  return victims;
}

void ModelRouter::unload(std::unique_lock<std::mutex>& lock, const std::vector<size_t>& victims) {
  if (victims.empty()) return;
  std::vector<std::shared_ptr<LoadedModel>> doomed;
  for (size_t v : victims) {
    MINFER_LOG_INFO("router: unloading model '{}'", entries_[v].spec.id);
    doomed.push_back(std::move(entries_[v].model));
  }
  lock.unlock();
  doomed.clear();  // each batcher stops (no request is open on it), then its engines are freed
  lock.lock();
  for (size_t v : victims) {
    entries_[v].state = State::kUnloaded;
    entries_[v].unloads += 1;
  }
  cv_.notify_all();
}

std::shared_ptr<ModelLease> ModelRouter::acquire(const std::string& name,
                                                 const std::function<bool()>& client_alive, ApiError* error) {
  const auto found = find(name);
  if (!found) {
    *error = {404, fmt::format("model '{}' does not exist (this server serves {})", name, known_list()),
              "invalid_request_error", "model"};
    return nullptr;
  }
  const size_t index = *found;
  Entry& e = entries_[index];
  const auto deadline = Clock::now() + options_.wait_timeout;
  std::unique_lock<std::mutex> lock(mu_);
  bool counted = false;
  int64_t epoch_seen = 0;
  auto stop_waiting = [&] {
    if (!counted) return;
    counted = false;
    e.waiting -= 1;
    total_waiting_ -= 1;
  };
  for (;;) {
    if (draining_ || stopping_) {
      stop_waiting();
      *error = {503, "draining", "unavailable_error", {}};
      return nullptr;
    }
    if (e.state == State::kLoaded) {
      stop_waiting();
      e.leases += 1;
      e.last_used = Clock::now();
      return std::shared_ptr<ModelLease>(new ModelLease(this, index, e.spec.id, e.model));
    }
    if (e.state == State::kUnloaded) {
      if (counted && e.load_epoch != epoch_seen && !e.last_load_error.ok()) {
        stop_waiting();
        *error = {500,
                  fmt::format("model '{}' failed to load: {}", e.spec.id, e.last_load_error.message()),
                  "server_error",
                  {}};
        return nullptr;
      }
      if (!loader_) {
        stop_waiting();
        *error = {500,
                  fmt::format("model '{}' is not loaded and this server has no loader", e.spec.id),
                  "server_error",
                  {}};
        return nullptr;
      }
      bool never = false;
      auto victims = plan_room(index, &never);
      if (never) {
        stop_waiting();
        *error = {
            500,
            fmt::format("model '{}' needs about {} ({} bytes), more than --memory-budget {} alone", e.spec.id,
                        gib(e.estimate_bytes), e.estimate_bytes, gib(options_.memory_budget)),
            "server_error",
            {}};
        return nullptr;
      }
      if (victims) {
        stop_waiting();
        for (size_t v : *victims) entries_[v].state = State::kUnloading;
        e.state = State::kLoading;
        unload(lock, *victims);
        lock.unlock();
        MINFER_LOG_INFO("router: loading model '{}' from {}", e.spec.id, e.spec.path);
        const auto t0 = Clock::now();
        auto loaded = loader_(e.spec);
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        lock.lock();
        e.load_epoch += 1;
        if (!loaded.ok()) {
          e.state = State::kUnloaded;
          e.last_load_error = loaded.status();
          e.load_failures += 1;
          cv_.notify_all();
          MINFER_LOG_ERROR("router: model '{}' failed to load: {}", e.spec.id, loaded.status().message());
          *error = {500,
                    fmt::format("model '{}' failed to load: {}", e.spec.id, loaded.status().message()),
                    "server_error",
                    {}};
          return nullptr;
        }
        e.model = std::move(*loaded);
        e.state = State::kLoaded;
        e.last_load_error = Status();
        e.loads += 1;
        e.last_load_seconds = seconds;
        e.estimate_bytes = measured_bytes(*e.model);
        e.last_used = Clock::now();
        MINFER_LOG_INFO("router: model '{}' loaded in {:.2f} s ({})", e.spec.id, seconds,
                        gib(e.estimate_bytes));
        cv_.notify_all();
        continue;  // loaded: take the lease above
      }
    }
    // Loading, unloading, or no room while the resident models are busy: wait.
    if (!counted) {
      if (total_waiting_ >= options_.max_waiting) {
        *error = {503,
                  fmt::format("{} requests are already waiting for models to load (at most {}); retry later",
                              total_waiting_, options_.max_waiting),
                  "unavailable_error",
                  {}};
        return nullptr;
      }
      counted = true;
      e.waiting += 1;
      total_waiting_ += 1;
      epoch_seen = e.load_epoch;
    }
    if (Clock::now() >= deadline) {
      std::string busy;
      for (const Entry& o : entries_) {
        if (o.state != State::kUnloaded && &o != &e)
          busy += fmt::format("{}'{}' ({} in flight)", busy.empty() ? "" : ", ", o.spec.id, o.leases);
      }
      stop_waiting();
      *error = {503,
                fmt::format("model '{}' could not be loaded within {} s: no room next to the busy models {}",
                            e.spec.id, options_.wait_timeout.count() / 1000, busy),
                "unavailable_error",
                {}};
      return nullptr;
    }
    cv_.wait_for(lock, kWaitPoll);
    if (client_alive) {
      lock.unlock();
      const bool alive = client_alive();
      lock.lock();
      if (!alive) {
        stop_waiting();
        *error = {499, "client closed the connection", "invalid_request_error", {}};
        return nullptr;
      }
    }
  }
}

void ModelRouter::release(size_t index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[index];
    e.leases -= 1;
    e.last_used = Clock::now();
  }
  cv_.notify_all();
}

void ModelRouter::keep_alive_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const auto now = Clock::now();
    auto next = Clock::time_point::max();
    std::vector<size_t> expired;
    for (size_t i = 0; i < entries_.size(); ++i) {
      Entry& e = entries_[i];
      if (e.state != State::kLoaded || e.leases > 0) continue;
      const auto expiry = e.last_used + options_.keep_alive;
      if (expiry <= now) {
        expired.push_back(i);
      } else {
        next = std::min(next, expiry);
      }
    }
    if (!expired.empty()) {
      for (size_t v : expired) entries_[v].state = State::kUnloading;
      unload(lock, expired);
      continue;
    }
    if (next == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
  }
}

std::vector<ModelStatus> ModelRouter::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelStatus> out;
  for (const Entry& e : entries_) {
    ModelStatus s;
    s.id = e.spec.id;
    s.path = e.spec.path;
    switch (e.state) {
      case State::kUnloaded:
        s.state = "unloaded";
        break;
      case State::kLoading:
        s.state = "loading";
        break;
      case State::kLoaded:
        s.state = "loaded";
        break;
      case State::kUnloading:
        s.state = "unloading";
        break;
    }
    s.in_flight = e.leases;
    s.waiting = e.waiting;
    s.loads = e.loads;
    s.load_failures = e.load_failures;
    s.unloads = e.unloads;
    s.last_load_seconds = e.last_load_seconds;
    s.resident_bytes = e.state == State::kUnloaded ? 0 : e.estimate_bytes;
    if (e.state == State::kLoaded && e.model) {
      s.stats = e.model->batcher->stats();
      const engine::Engine& eng = *e.model->engine;
      s.n_vocab = eng.n_vocab();
      s.n_ctx = eng.n_ctx();
      s.n_ctx_train = eng.hparams().n_ctx_train;
      s.n_embd = eng.hparams().n_embd;
    }
    out.push_back(std::move(s));
  }
  return out;
}

int64_t ModelRouter::drain(std::chrono::milliseconds deadline) {
  std::vector<std::shared_ptr<LoadedModel>> loaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    for (Entry& e : entries_) {
      if (e.state == State::kLoaded && e.model) loaded.push_back(e.model);
    }
  }
  cv_.notify_all();
  const auto end = Clock::now() + deadline;
  int64_t abandoned = 0;
  for (const auto& m : loaded) {
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()));
    abandoned += m->batcher->drain(left);
  }
  return abandoned;
}

Result<std::chrono::milliseconds> parse_keep_alive(const std::string& text) {
  using std::chrono::milliseconds;
  auto bad = [&] {
    return invalid_argument("'{}' is not a duration (use e.g. 5m, 30s, 1h30m, 250ms, 0, or -1 for forever)",
                            text);
  };
  if (text.empty()) return bad();
  if (text[0] == '-') {  // Ollama: any negative duration keeps the model loaded forever
    if (text.size() == 1) return bad();
    return milliseconds(-1);
  }
  size_t pos = 0;
  double total_ms = 0;
  bool any = false;
  while (pos < text.size()) {
    size_t end = pos;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
      ++end;
    if (end == pos) return bad();
    char* stop = nullptr;
    const std::string number = text.substr(pos, end - pos);
    const double v = std::strtod(number.c_str(), &stop);
    if (*stop != '\0') return bad();
    size_t unit_end = end;
    while (unit_end < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_end]))) ++unit_end;
    const std::string unit = text.substr(end, unit_end - end);
    double scale = 0;
    if (unit.empty()) {
      if (any || unit_end != text.size()) return bad();  // a bare number is seconds, alone
      scale = 1000;
    } else if (unit == "ms") {
      scale = 1;
    } else if (unit == "s") {
      scale = 1000;
    } else if (unit == "m") {
      scale = 60e3;
    } else if (unit == "h") {
      scale = 3600e3;
    } else {
      return bad();
    }
    total_ms += v * scale;
    any = true;
    pos = unit_end;
  }
  if (total_ms > 1e15) return bad();
  return milliseconds(static_cast<int64_t>(total_ms));
}

}  // namespace minfer::server
