// Several models in one server (server/model_router.h) over loopback HTTP: models loaded on demand, an
// eviction under max_loaded 1 while the other model's stream goes on, keep-alive unloads, 404s naming the
// known models in each API's shape, the bounded wait, the memory budget, /v1/models and labelled metrics.
// Greedy outputs are compared with the same model served alone (the single-model TestServer).
#include <chrono>
#include <future>

#include "server/model_router.h"
#include "server/test_server.h"

namespace minfer::server::test {
namespace {

std::string write_model(const std::string& name, uint64_t seed) {
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3");
  o.seed = seed;
  const std::string path = minfer::test::temp_dir() + "/" + name + ".gguf";
  auto w = tools::make_synthetic_model(o);
  if (!w.ok() || !w->write(path).ok()) return "";
  return path;
}

// The loader `minfer serve` uses, reduced to what the tests need (TestServer's engine options).
Result<std::unique_ptr<LoadedModel>> load_tiny(const ModelSpec& spec) {
  auto m = std::make_unique<LoadedModel>();
  engine::EngineOptions eo;
  eo.n_ctx = 1024;
  eo.n_threads = 1;
  MINFER_ASSIGN_OR_RETURN(m->owned_engine, engine::Engine::load(spec.path, eo));
  // The GGUF's template when it has one, as TestServer (the single-model reference) does.
  std::string source;
  if (m->owned_engine->file().metadata().contains("tokenizer.chat_template"))
    source = *m->owned_engine->file().metadata().get_string("tokenizer.chat_template");
  if (source.empty()) {
    m->chat_template = chat::ChatTemplate::chatml();
  } else {
    MINFER_ASSIGN_OR_RETURN(m->chat_template, chat::ChatTemplate::parse(source));
  }
  engine::BatcherOptions bo;
  bo.n_slots = 4;
  bo.queue_depth = 8;
  MINFER_ASSIGN_OR_RETURN(m->owned_batcher, engine::Batcher::create(*m->owned_engine, bo));
  m->engine = m->owned_engine.get();
  m->batcher = m->owned_batcher.get();
  return m;
}

class MultiServer {
 public:
  MultiServer(std::vector<ModelSpec> specs, RouterOptions ro) {
    ServerOptions so;
    so.model_id = specs.front().id;
    so.sampling.temp = 0.0f;
    server_ = std::make_unique<Server>(so);
    server_->set_router(std::make_unique<ModelRouter>(std::move(specs), load_tiny, ro));
    HttpOptions ho;
    ho.port = 0;
    ho.n_threads = 32;
    auto h = HttpServer::bind(*server_, ho);
    EXPECT_TRUE(h.ok()) << h.status().message();
    http_ = std::move(*h);
    thread_ = std::thread([this] { http_->run(); });
  }
  ~MultiServer() {
    http_->stop();
    thread_.join();
  }
  int port() const { return http_->port(); }
  Server& server() { return *server_; }

 private:
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
};

Reply send(int port, const std::string& method, const std::string& path, const json& body = nullptr) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  auto r = method == "GET" ? c.Get(path.c_str()) : c.Post(path.c_str(), body.dump(), "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

json chat_body(const std::string& model, int max_tokens, bool stream = false) {
  json b = {{"messages", {{{"role", "user"}, {"content", "Say something"}}}},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
  if (!model.empty()) b["model"] = model;
  if (stream) b["stream"] = true;
  return b;
}

// The assistant content of a chat answer, or of a stream's deltas.
std::string content_of(const Reply& r) {
  return r.body["choices"][0]["message"]["content"].get<std::string>();
}
std::string streamed_content(const std::string& raw) {
  std::string out;
  for (const std::string& p : sse_payloads(raw)) {
    if (p == "[DONE]") continue;
    const json j = json::parse(p);
    const json& d = j["choices"][0]["delta"];
    if (d.contains("content") && d["content"].is_string()) out += d["content"].get<std::string>();
  }
  return out;
}

// The greedy answer of `path` served alone, as every single-model server answers it.
std::string alone(const std::string& path, int max_tokens) {
  TestServerOptions o;
  o.model_path = path;
  TestServer s(o);
  EXPECT_TRUE(s.ok());
  Reply r = post(s, "/v1/chat/completions", chat_body("", max_tokens).dump());
  EXPECT_EQ(r.status, 200) << r.raw;
  return content_of(r);
}

std::string state_of(int port, const std::string& id) {
  Reply m = send(port, "GET", "/v1/models");
  for (const json& e : m.body["data"]) {
    if (e["id"] == id) return e["status"]["value"].get<std::string>();
  }
  return "absent";
}

double labelled(int port, const std::string& family, const std::string& id) {
  return metric(send(port, "GET", "/metrics").raw, family + "{model=\"" + id + "\"}");
}

class MultiModel : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = write_model("alpha", 21);
    b_ = write_model("beta", 22);
    ASSERT_FALSE(a_.empty());
    ASSERT_FALSE(b_.empty());
  }
  std::vector<ModelSpec> specs() const { return {{"alpha", a_, {}}, {"beta", b_, {"b-alias"}}}; }
  std::string a_, b_;
};

TEST_F(MultiModel, TwoModelsLoadOnDemandAndAnswerAsWhenServedAlone) {
  MultiServer s(specs(), {});
  const int port = s.port();
  Reply list = send(port, "GET", "/v1/models");
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["data"].size(), 2u) << list.raw;
  EXPECT_EQ(list.body["data"][0]["id"], "alpha");
  EXPECT_EQ(list.body["data"][1]["id"], "beta");
  for (const json& m : list.body["data"]) {
    EXPECT_EQ(m["object"], "model");
    EXPECT_EQ(m["loaded"], false);
    EXPECT_EQ(m["status"]["value"], "unloaded");
  }
  Reply ra = send(port, "POST", "/v1/chat/completions", chat_body("alpha", 12));
  ASSERT_EQ(ra.status, 200) << ra.raw;
  EXPECT_EQ(ra.body["model"], "alpha");
  EXPECT_EQ(state_of(port, "alpha"), "loaded");
  EXPECT_EQ(state_of(port, "beta"), "unloaded");
  // The alias selects beta; the answer names its id.
  Reply rb = send(port, "POST", "/v1/chat/completions", chat_body("b-alias", 12));
  ASSERT_EQ(rb.status, 200) << rb.raw;
  EXPECT_EQ(rb.body["model"], "beta");
  EXPECT_EQ(state_of(port, "alpha"), "loaded");
  EXPECT_EQ(state_of(port, "beta"), "loaded");
  Reply one = send(port, "GET", "/v1/models/beta");
  EXPECT_EQ(one.body["loaded"], true) << one.raw;
  EXPECT_EQ(one.body["meta"]["n_ctx"], 1024) << one.raw;
  // No model named: the first one.
  Reply rd = send(port, "POST", "/v1/chat/completions", chat_body("", 12));
  EXPECT_EQ(rd.body["model"], "alpha") << rd.raw;
  // The other APIs route by model too.
  Reply msg =
      send(port, "POST", "/v1/messages",
           {{"model", "beta"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  EXPECT_EQ(msg.status, 200) << msg.raw;
  EXPECT_EQ(msg.body["model"], "beta");
  Reply resp =
      send(port, "POST", "/v1/responses", {{"model", "beta"}, {"input", "x"}, {"max_output_tokens", 4}});
  EXPECT_EQ(resp.status, 200) << resp.raw;
  EXPECT_EQ(resp.body["model"], "beta");
  // The two models are different and each answers as when served alone.
  EXPECT_EQ(content_of(ra), alone(a_, 12));
  EXPECT_EQ(content_of(rb), alone(b_, 12));
  EXPECT_EQ(content_of(rd), content_of(ra));
  EXPECT_NE(content_of(ra), content_of(rb));
}

TEST_F(MultiModel, UnknownModelIs404NamingTheKnownOnesInEachApisShape) {
  MultiServer s(specs(), {});
  const int port = s.port();
  Reply chat = send(port, "POST", "/v1/chat/completions", chat_body("gpt-4", 4));
  EXPECT_EQ(chat.status, 404) << chat.raw;
  EXPECT_EQ(chat.body["error"]["param"], "model");
  EXPECT_NE(chat.body["error"]["message"].get<std::string>().find("'gpt-4'"), std::string::npos) << chat.raw;
  EXPECT_NE(chat.body["error"]["message"].get<std::string>().find("'alpha', 'beta'"), std::string::npos)
      << chat.raw;
  Reply resp = send(port, "POST", "/v1/responses", {{"model", "gpt-4"}, {"input", "x"}});
  EXPECT_EQ(resp.status, 404) << resp.raw;
  EXPECT_EQ(resp.body["error"]["param"], "model");
  Reply emb = send(port, "POST", "/v1/embeddings", {{"model", "gpt-4"}, {"input", "x"}});
  EXPECT_EQ(emb.status, 404) << emb.raw;
  Reply msg =
      send(port, "POST", "/v1/messages",
           {{"model", "claude-x"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  EXPECT_EQ(msg.status, 404) << msg.raw;
  EXPECT_EQ(msg.body["type"], "error");
  EXPECT_EQ(msg.body["error"]["type"], "not_found_error");
  EXPECT_NE(msg.body["error"]["message"].get<std::string>().find("'alpha', 'beta'"), std::string::npos)
      << msg.raw;
  Reply get_one = send(port, "GET", "/v1/models/gpt-4");
  EXPECT_EQ(get_one.status, 404) << get_one.raw;
  // Nothing was loaded for them.
  EXPECT_EQ(state_of(port, "alpha"), "unloaded");
  EXPECT_EQ(state_of(port, "beta"), "unloaded");
}

// max_loaded 1: a request for beta waits (counted) while alpha is in flight, alpha's stream goes on
// meanwhile, and beta loads once alpha is idle (alpha is unloaded). No request is lost, and every answer
// equals the model served alone.
TEST_F(MultiModel, EvictionUnderMaxLoadedOneWhileTheOtherModelStreams) {
  MultiServer s(specs(), {.max_loaded = 1});
  const int port = s.port();
  Reply first = send(port, "POST", "/v1/chat/completions", chat_body("alpha", 16));
  ASSERT_EQ(first.status, 200) << first.raw;
  // A request in flight on alpha, held by the test so that its length does not depend on timing.
  ApiError err;
  std::shared_ptr<ModelLease> hold = s.server().router().acquire("alpha", nullptr, &err);
  ASSERT_TRUE(hold) << err.message;
  auto beta = std::async(std::launch::async,
                         [&] { return send(port, "POST", "/v1/chat/completions", chat_body("beta", 16)); });
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    waiting = labelled(port, "minfer_model_requests_waiting", "beta") >= 1;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(waiting) << send(port, "GET", "/metrics").raw;
  EXPECT_EQ(state_of(port, "beta"), "unloaded");
  // alpha keeps serving, streaming included, while beta waits.
  Reply stream = send(port, "POST", "/v1/chat/completions", chat_body("alpha", 16, true));
  ASSERT_EQ(stream.status, 200) << stream.raw;
  ASSERT_FALSE(sse_payloads(stream.raw).empty());
  EXPECT_EQ(sse_payloads(stream.raw).back(), "[DONE]");
  EXPECT_EQ(streamed_content(stream.raw), content_of(first));
  EXPECT_EQ(beta.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  hold.reset();  // alpha idle: beta may take its place
  Reply rb = beta.get();
  ASSERT_EQ(rb.status, 200) << rb.raw;
  EXPECT_EQ(rb.body["model"], "beta");
  EXPECT_EQ(state_of(port, "alpha"), "unloaded");
  EXPECT_EQ(state_of(port, "beta"), "loaded");
  EXPECT_EQ(labelled(port, "minfer_model_unloads_total", "alpha"), 1);
  EXPECT_EQ(labelled(port, "minfer_model_requests_waiting", "beta"), 0);
  // alpha again: it replaces beta and answers as before.
  Reply again = send(port, "POST", "/v1/chat/completions", chat_body("alpha", 16));
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(content_of(again), content_of(first));
  EXPECT_EQ(labelled(port, "minfer_model_loads_total", "alpha"), 2);
  EXPECT_EQ(content_of(first), alone(a_, 16));
  EXPECT_EQ(content_of(rb), alone(b_, 16));
}

// Waiting is bounded: one more request than max_waiting is refused at once with 503 (529 for Anthropic).
TEST_F(MultiModel, WaitingForALoadIsBounded) {
  MultiServer s(specs(), {.max_loaded = 1, .max_waiting = 1});
  const int port = s.port();
  ApiError err;
  std::shared_ptr<ModelLease> hold = s.server().router().acquire("alpha", nullptr, &err);
  ASSERT_TRUE(hold) << err.message;
  auto waiter = std::async(std::launch::async,
                           [&] { return send(port, "POST", "/v1/chat/completions", chat_body("beta", 4)); });
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    waiting = labelled(port, "minfer_model_requests_waiting", "beta") >= 1;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(waiting);
  Reply refused = send(port, "POST", "/v1/chat/completions", chat_body("beta", 4));
  EXPECT_EQ(refused.status, 503) << refused.raw;
  EXPECT_NE(refused.raw.find("waiting for models to load"), std::string::npos) << refused.raw;
  Reply anthropic =
      send(port, "POST", "/v1/messages",
           {{"model", "beta"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  EXPECT_EQ(anthropic.status, 529) << anthropic.raw;
  hold.reset();
  EXPECT_EQ(waiter.get().status, 200);
}

TEST_F(MultiModel, KeepAliveUnloadsIdleModels) {
  MultiServer s(specs(), {.keep_alive = std::chrono::milliseconds(0)});
  const int port = s.port();
  Reply r1 = send(port, "POST", "/v1/chat/completions", chat_body("beta", 8));
  ASSERT_EQ(r1.status, 200) << r1.raw;
  std::string state = "loaded";
  for (int i = 0; i < 600 && state != "unloaded"; ++i) {
    state = state_of(port, "beta");
    if (state != "unloaded") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(state, "unloaded");
  EXPECT_EQ(labelled(port, "minfer_model_unloads_total", "beta"), 1);
  Reply r2 = send(port, "POST", "/v1/chat/completions", chat_body("beta", 8));
  ASSERT_EQ(r2.status, 200) << r2.raw;
  EXPECT_EQ(content_of(r2), content_of(r1));
  EXPECT_EQ(labelled(port, "minfer_model_loads_total", "beta"), 2);
}

TEST_F(MultiModel, MemoryBudgetRefusesAModelThatCannotFit) {
  MultiServer s(specs(), {.memory_budget = 1024});
  Reply r = send(s.port(), "POST", "/v1/chat/completions", chat_body("alpha", 4));
  EXPECT_EQ(r.status, 500) << r.raw;
  EXPECT_NE(r.raw.find("--memory-budget"), std::string::npos) << r.raw;
  EXPECT_EQ(state_of(s.port(), "alpha"), "unloaded");
}

TEST_F(MultiModel, MetricsLabelEveryPerModelFamily) {
  MultiServer s(specs(), {});
  const int port = s.port();
  ASSERT_EQ(send(port, "POST", "/v1/chat/completions", chat_body("alpha", 5)).status, 200);
  const std::string text = send(port, "GET", "/metrics").raw;
  EXPECT_EQ(metric(text, "minfer_requests_total{model=\"alpha\"}"), 1) << text;
  EXPECT_EQ(metric(text, "minfer_completion_tokens_total{model=\"alpha\"}"), 5) << text;
  EXPECT_EQ(metric(text, "minfer_model_loaded{model=\"alpha\"}"), 1) << text;
  EXPECT_EQ(metric(text, "minfer_model_loaded{model=\"beta\"}"), 0) << text;
  EXPECT_GT(metric(text, "minfer_model_load_seconds{model=\"alpha\"}"), 0) << text;
  // No per-model family is left unlabelled; the process-wide ones are.
  EXPECT_EQ(metric(text, "minfer_requests_total"), -1) << text;
  EXPECT_EQ(metric(text, "minfer_kv_cells"), -1) << text;
  EXPECT_EQ(metric(text, "minfer_ready"), 1) << text;
  EXPECT_GE(metric(text, "minfer_requests_in_flight"), 0) << text;
}

TEST(KeepAlive, OllamaDurations) {
  using std::chrono::milliseconds;
  EXPECT_EQ(*parse_keep_alive("5m"), milliseconds(300000));
  EXPECT_EQ(*parse_keep_alive("30s"), milliseconds(30000));
  EXPECT_EQ(*parse_keep_alive("1h30m"), milliseconds(5400000));
  EXPECT_EQ(*parse_keep_alive("250ms"), milliseconds(250));
  EXPECT_EQ(*parse_keep_alive("0"), milliseconds(0));
  EXPECT_EQ(*parse_keep_alive("90"), milliseconds(90000));
  EXPECT_LT(parse_keep_alive("-1")->count(), 0);
  EXPECT_LT(parse_keep_alive("-5m")->count(), 0);
  for (const char* bad : {"", "5x", "m", "-", "1.5.2s", "5 m"}) {
    auto r = parse_keep_alive(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("duration"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace minfer::server::test
