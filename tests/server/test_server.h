// An in-process `minfer serve` for tests: a tiny generated model, the real Batcher, Server and HTTP
// layer on 127.0.0.1 with an ephemeral port, plus small HTTP/SSE helpers over cpp-httplib's client.
#pragma once

#include <functional>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/fixtures.h"
#include "engine/batcher.h"
#include "engine/engine.h"
#include "gguf/reader.h"
#include "server/embeddings.h"
#include "server/http.h"
#include "server/server.h"
#include "tools/synthetic_model.h"

namespace minfer::server::test {

using json = nlohmann::ordered_json;

// A tiny random-weight qwen3 model; with `real_vocab` the tokenizer and chat template of Qwen3 (vocab
// fixture) are copied in, so tool and reasoning templates render as on the real model.
inline std::string tiny_model(bool real_vocab = false) {
  static std::string paths[2];
  std::string& p = paths[real_vocab ? 1 : 0];
  if (!p.empty()) return p;
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3");
  o.seed = 11;
  std::optional<gguf::File> vocab;
  if (real_vocab) {
    auto f = gguf::File::open(minfer::test::fixture_path("tokenizer/qwen3-vocab.gguf"));
    if (!f.ok()) return "";
    vocab = std::move(*f);
    o.vocab_source = &*vocab;
  }
  const std::string path =
      minfer::test::temp_dir() + (real_vocab ? "/tiny-qwen3-vocab.gguf" : "/tiny-qwen3.gguf");
  auto w = tools::make_synthetic_model(o);
  if (!w.ok() || !w->write(path).ok()) return "";
  p = path;
  return p;
}

struct TestServerOptions {
  bool real_vocab = false;
  int32_t n_ctx = 1024;
  int32_t n_slots = 4;
  int32_t queue_depth = 8;
  std::string api_key;
  bool reasoning = true;
  size_t max_body = 1 << 20;
  std::string slots_file;
  int32_t responses_store = 100;
  std::function<Status(int64_t)> fault_injector;  // the batcher's test hook: a failed forward
  std::function<bool()> stall_injector;           // the batcher's test hook: a step that makes no progress
  std::string model_path;                         // when set: this GGUF instead of tiny_model()
  bool embeddings = false;                        // serve /v1/embeddings (server/embeddings.h)
  std::optional<engine::Pooling> pooling;         // --pooling; nullopt: the GGUF's
  engine::OffloadOptions offload;                 // --backend / --gpu / --gpu-layers (default: the CPU's)
};

class TestServer {
 public:
  explicit TestServer(TestServerOptions o = {}) {
    const std::string path = o.model_path.empty() ? tiny_model(o.real_vocab) : o.model_path;
    if (path.empty()) return;
    engine::EngineOptions eo;
    eo.n_ctx = o.n_ctx;
    eo.n_threads = 1;
    eo.offload = o.offload;
    auto e = engine::Engine::load(path, eo);
    EXPECT_TRUE(e.ok()) << e.status().message();
    if (!e.ok()) return;
    engine_ = std::move(*e);
    std::string source;
    if (engine_->file().metadata().contains("tokenizer.chat_template"))
      source = *engine_->file().metadata().get_string("tokenizer.chat_template");
    auto tmpl = source.empty() ? Result<chat::ChatTemplate>(chat::ChatTemplate::chatml())
                               : chat::ChatTemplate::parse(source);
    EXPECT_TRUE(tmpl.ok());
    engine::BatcherOptions bo;
    bo.n_slots = o.n_slots;
    bo.queue_depth = o.queue_depth;
    bo.slots_file = o.slots_file;
    bo.fault_injector = o.fault_injector;
    bo.stall_injector = o.stall_injector;
    auto b = engine::Batcher::create(*engine_, bo);
    EXPECT_TRUE(b.ok()) << b.status().message();
    batcher_ = std::move(*b);
    ServerOptions so;
    so.model_id = "tiny";
    so.api_key = o.api_key;
    so.reasoning = o.reasoning;
    so.responses_store = o.responses_store;
    so.sampling.temp = 0.0f;
    server_ = std::make_unique<Server>(so);
    if (o.embeddings) {
      auto em = Embedder::create(path, eo, o.pooling);
      EXPECT_TRUE(em.ok()) << em.status().message();
      if (!em.ok()) return;
      embedder_ = std::move(*em);
      server_->set_embedder(embedder_.get());
    }
    server_->set_model(engine_.get(), batcher_.get(), std::move(*tmpl));
    HttpOptions ho;
    ho.port = 0;
    ho.max_body = o.max_body;
    ho.n_threads = 32;
    auto h = HttpServer::bind(*server_, ho);
    EXPECT_TRUE(h.ok()) << h.status().message();
    http_ = std::move(*h);
    thread_ = std::thread([this] { http_->run(); });
  }
  ~TestServer() {
    if (http_) http_->stop();
    if (thread_.joinable()) thread_.join();
    http_.reset();
    batcher_.reset();
  }
  bool ok() const { return http_ != nullptr; }
  int port() const { return http_->port(); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(120, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }
  engine::Engine& engine() { return *engine_; }
  engine::Batcher& batcher() { return *batcher_; }
  Server& server() { return *server_; }
  HttpServer& http() { return *http_; }

 private:
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::Batcher> batcher_;
  std::unique_ptr<Embedder> embedder_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
};

struct Reply {
  int status = 0;
  json body;
  std::string raw;
  std::string header(const char* name) const { return headers.count(name) ? headers.find(name)->second : ""; }
  std::multimap<std::string, std::string> headers;
};

inline Reply post(const TestServer& s, const std::string& path, const std::string& body,
                  const std::string& key = "") {
  auto c = s.client();
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  auto r = c.Post(path.c_str(), h, body, "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  for (const auto& [k, v] : r->headers) out.headers.emplace(k, v);
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

inline Reply get(const TestServer& s, const std::string& path, const std::string& key = "") {
  auto c = s.client();
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  auto r = c.Get(path.c_str(), h);
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  for (const auto& [k, v] : r->headers) out.headers.emplace(k, v);
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

// The `data:` payloads of an SSE body, in order; `[DONE]` is kept as the string "[DONE]".
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string frame = body.substr(pos, end - pos);
    if (frame.rfind("data: ", 0) == 0) out.push_back(frame.substr(6));
    pos = end + 2;
  }
  return out;
}

// One Prometheus sample's value, or -1 when absent.
inline double metric(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  size_t at = ("\n" + text).find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() - 1));
}

}  // namespace minfer::server::test
