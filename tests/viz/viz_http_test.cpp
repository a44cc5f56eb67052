// `minfer viz` routes over loopback HTTP on a tiny generated model: the page and graph are served, the
// event stream carries every token with its top-5 and node times, a second run is refused while one is in
// progress, the tokens equal a greedy generate() without the page, and the stats endpoint agrees with a
// MINFER_DUMP_DIR dump of the same step.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "engine/generate.h"
#include "inspect/dump_observer.h"
#include "inspect/npy.h"
#include "inspect/tensor_stats.h"
#include "server/http.h"
#include "tools/synthetic_model.h"
#include "viz/viz_app.h"

namespace minfer::viz {
namespace {

using nlohmann::json;

std::string tiny_model() {
  static const std::string path = [] {
    tools::SyntheticOptions o;
    o.shape = *tools::synthetic_preset("tiny-qwen3");
    o.seed = 5;
    auto w = tools::make_synthetic_model(o);
    EXPECT_TRUE(w.ok());
    const std::string p = test::temp_dir() + "/viz-tiny.gguf";
    EXPECT_TRUE(w->write(p).ok());
    return p;
  }();
  return path;
}

std::unique_ptr<engine::Engine> load() {
  engine::EngineOptions o;
  o.n_ctx = 256;
  o.n_threads = 2;
  auto e = engine::Engine::load(tiny_model(), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

// Holds the first step of the next run until released: makes "a run is in progress" deterministic.
class Gate : public sched::NodeObserver {
 public:
  void begin_step(const sched::Plan&) override {
    if (!armed_) return;
    armed_ = false;
    entered_.set_value();
    release_.get_future().wait();
  }
  void on_node(const sched::Plan&, const sched::NodeEvent&) override {}
  std::promise<void> entered_, release_;
  bool armed_ = true;
};

struct VizServer {
  std::unique_ptr<engine::Engine> engine = load();
  std::unique_ptr<VizApp> app;
  std::unique_ptr<server::HttpServer> http;
  std::thread thread;
  VizServer() {
    auto a = VizApp::create(*engine, {});
    EXPECT_TRUE(a.ok()) << a.status().message();
    app = std::move(*a);
    VizApp* va = app.get();
    auto h =
        server::HttpServer::bind([va](const server::HttpRequest& r,
                                      const std::function<bool()>& alive) { return va->handle(r, alive); },
                                 {.host = "127.0.0.1", .port = 0, .max_body = 1 << 20, .n_threads = 8});
    EXPECT_TRUE(h.ok()) << h.status().message();
    http = std::move(*h);
    thread = std::thread([this] { http->run(); });
  }
  ~VizServer() {
    app->shutdown();
    http->stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", http->port());
    c.set_read_timeout(60, 0);
    return c;
  }
};

// The events of one SSE body: (event name, JSON payload).
std::vector<std::pair<std::string, json>> parse_events(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  size_t at = 0;
  while (true) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) break;
    const std::string frame = body.substr(at, end - at);
    at = end + 2;
    std::string name, data;
    size_t line = 0;
    while (line < frame.size()) {
      size_t nl = frame.find('\n', line);
      if (nl == std::string::npos) nl = frame.size();
      const std::string l = frame.substr(line, nl - line);
      if (l.rfind("event: ", 0) == 0) name = l.substr(7);
      if (l.rfind("data: ", 0) == 0) data = l.substr(6);
      line = nl + 1;
    }
    if (!name.empty()) out.emplace_back(name, json::parse(data, nullptr, false));
  }
  return out;
}

TEST(Viz, ServesThePageTheLayoutLibraryAndTheGraph) {
  VizServer s;
  auto c = s.client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page->body.find("vendor/dagre.min.js"), std::string::npos);
  auto dagre = c.Get("/vendor/dagre.min.js");
  ASSERT_TRUE(dagre);
  EXPECT_EQ(dagre->status, 200);
  EXPECT_GT(dagre->body.size(), 10000u);
  for (const char* phase : {"decode", "prefill"}) {
    auto g = c.Get(std::string("/api/graph/") + phase);
    ASSERT_TRUE(g);
    ASSERT_EQ(g->status, 200);
    const json j = json::parse(g->body);
    EXPECT_EQ(j["format"], "minfer-graph-v1");
    EXPECT_EQ(j["phase"], phase);
    EXPECT_GT(j["nodes"].size(), 20u);
  }
  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto no_stats = c.Get("/api/nodes/5/stats");
  ASSERT_TRUE(no_stats);
  EXPECT_EQ(no_stats->status, 404);  // nothing has run yet
  auto bad_id = c.Get("/api/nodes/x/stats");
  ASSERT_TRUE(bad_id);
  EXPECT_EQ(bad_id->status, 400);
  auto bad = c.Post("/api/run", R"({"prompt": 5})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto too_many = c.Post("/api/run", R"({"prompt": "hi", "n_predict": 100000})", "application/json");
  ASSERT_TRUE(too_many);
  EXPECT_EQ(too_many->status, 400);
  EXPECT_NE(too_many->body.find("n_predict"), std::string::npos);
}

TEST(Viz, StreamsTokensRefusesASecondRunAndStatsAgreeWithADump) {
  VizServer s;
  const std::string dump_dir = test::temp_dir() + "/viz-dump";
  std::filesystem::remove_all(dump_dir);
  auto dump = inspect::DumpObserver::create({dump_dir, "", {}});
  ASSERT_TRUE(dump.ok());
  Gate gate;
  s.engine->add_observer(dump->get());  // before any run: the run thread only reads the list
  s.engine->add_observer(&gate);

  // Two tabs watch the same run.
  std::promise<void> hello1, hello2;
  std::string body1, body2;
  auto watch = [&](std::string* body, std::promise<void>* hello) {
    auto c = s.client();
    bool said_hello = false;
    c.Get("/api/events", [&](const char* data, size_t n) {
      body->append(data, n);
      if (!said_hello && body->find("event: hello") != std::string::npos) {
        said_hello = true;
        hello->set_value();
      }
      return body->find("event: done") == std::string::npos &&
             body->find("event: error") == std::string::npos;
    });
  };
  std::thread tab1(watch, &body1, &hello1), tab2(watch, &body2, &hello2);
  ASSERT_EQ(hello1.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(hello2.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);

  auto c = s.client();
  auto first = c.Post("/api/run", R"({"prompt": "hello world", "n_predict": 8})", "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 202) << first->body;
  ASSERT_EQ(gate.entered_.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto second = c.Post("/api/run", R"({"prompt": "again"})", "application/json");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 409);
  EXPECT_NE(second->body.find("in progress"), std::string::npos) << second->body;
  gate.release_.set_value();
  tab1.join();
  tab2.join();
  s.engine->remove_observer(&gate);

  const auto events = parse_events(body1);
  std::vector<int32_t> streamed;
  std::string text;
  json done;
  for (const auto& [name, j] : events) {
    if (name == "step") {
      ASSERT_EQ(j["top5"].size(), 5u);
      EXPECT_EQ(j["top5"][0]["id"], j["token"]["id"]);  // greedy
      double last = 1.0, sum = 0;
      for (const auto& t : j["top5"]) {
        EXPECT_LE(t["p"].get<double>(), last);
        last = t["p"].get<double>();
        sum += last;
      }
      EXPECT_LE(sum, 1.0 + 1e-9);
      EXPECT_GT(j["node_times"].size(), 20u);
      streamed.push_back(j["token"]["id"].get<int32_t>());
      text += j["token"]["text"].get<std::string>();
    } else if (name == "done") {
      done = j;
    }
  }
  ASSERT_TRUE(done.is_object()) << body1;
  EXPECT_EQ(done["n_generated"].get<size_t>(), streamed.size());
  EXPECT_EQ(done["text"].get<std::string>().substr(0, text.size()), text);
  EXPECT_EQ(parse_events(body2).size(), events.size());  // the other tab saw the same run

  // The same tokens as a greedy generate() on an engine without the page.
  auto plain = load();
  engine::GenerateOptions g;
  g.n_predict = 8;
  g.sampling.temp = 0;
  std::vector<int32_t> prompt =
      plain->tokenizer().encode("hello world", /*add_special=*/true, /*parse_special=*/true);
  auto want = engine::generate(*plain, prompt, g);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(streamed, want->generated_ids);

  // Stats for the latest step equal the dump's last step, node by node, and the values in its .npy files.
  s.engine->remove_observer(dump->get());
  const std::string last = fmt::format("{}/step-{:04}", dump_dir, (*dump)->steps_seen() - 1);
  std::ifstream in(last + "/index.json");
  const json index = json::parse(in);
  size_t compared = 0;
  for (const auto& n : index["nodes"]) {
    auto r = c.Get(fmt::format("/api/nodes/{}/stats", n["id"].get<int>()));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << n["name"];
    const json j = json::parse(r->body);
    auto npy = inspect::read_npy(last + "/" + n["file"].get<std::string>());
    ASSERT_TRUE(npy.ok());
    const inspect::TensorStats want_stats = inspect::compute_stats(npy->values);
    for (const char* k : {"min", "max", "mean", "std"}) {
      EXPECT_DOUBLE_EQ(j["stats"][k].get<double>(), n["stats"][k].get<double>()) << n["name"] << " " << k;
    }
    EXPECT_DOUBLE_EQ(j["stats"]["mean"].get<double>(), want_stats.mean) << n["name"];
    EXPECT_EQ(j["stats"]["nan"].get<int64_t>(), want_stats.n_nan);
    EXPECT_EQ(j["shape"], n["shape"]);
    int64_t in_bins = 0;
    for (const auto& b : j["histogram"]["counts"]) in_bins += b.get<int64_t>();
    EXPECT_EQ(in_bins, want_stats.count - want_stats.n_nan - want_stats.n_inf);
    EXPECT_GT(j["heatmap"]["cells"].size(), 0u);
    ++compared;
  }
  EXPECT_GT(compared, 20u);
}

// A run request is parsed as the server parses one: invalid or deeply nested JSON is a 400 with the reason,
// never a stack overflow of the visualizer (100k '[' crashed nlohmann's recursive copy before the bound).
TEST(Viz, ABadRunBodyIsA400WithTheReason) {
  VizServer s;
  auto c = s.client();
  auto deep = c.Post("/api/run", std::string(100000, '[') + std::string(100000, ']'), "application/json");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 400);
  EXPECT_NE(deep->body.find("deeper than"), std::string::npos) << deep->body;
  auto broken = c.Post("/api/run", R"({"prompt": )", "application/json");
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 400);
  EXPECT_NE(broken->body.find("not valid JSON"), std::string::npos) << broken->body;
  auto not_object = c.Post("/api/run", "[1]", "application/json");
  ASSERT_TRUE(not_object);
  EXPECT_EQ(not_object->status, 400);
  EXPECT_NE(not_object->body.find("must be a JSON object"), std::string::npos) << not_object->body;
}

}  // namespace
}  // namespace minfer::viz
