// The `minfer serve` binary as users run it: the startup line, SIGTERM with a request in flight (it
// completes, new connections are refused, exit status 0), and a chat template that cannot render
// refusing to start.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>

#include "server/test_server.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server::test {
namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;  // the child's stdout
  std::string stdout_text;
};

Child spawn(const std::vector<std::string>& args,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(MINFER_BINARY, argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fds[0];
  return c;
}

// Reads the child's stdout until the startup line; returns the port or -1 (child exited / 60 s).
int wait_for_port(Child& c) {
  const std::regex re("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  for (int i = 0; i < 600; ++i) {
    pollfd p{c.out, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buf[512];
      const ssize_t n = read(c.out, buf, sizeof(buf));
      if (n <= 0) return -1;
      c.stdout_text.append(buf, static_cast<size_t>(n));
      std::smatch m;
      if (std::regex_search(c.stdout_text, m, re)) return std::stoi(m[1]);
    }
  }
  return -1;
}

int wait_exit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

TEST(ServeBinary, SigtermDrainsTheRequestInFlightAndExitsZero) {
  const std::string model = tiny_model();
  ASSERT_FALSE(model.empty());
  Child c = spawn({"minfer", "serve", model, "--port", "0", "-t", "1", "--n-slots", "2", "--alias", "tiny"},
                  {{"MINFER_DRAIN_MS", "60000"}});
  const int port = wait_for_port(c);
  ASSERT_GT(port, 0) << c.stdout_text;
  EXPECT_NE(c.stdout_text.find("model=tiny slots=2"), std::string::npos) << c.stdout_text;
  EXPECT_NE(c.stdout_text.find("batching=on"), std::string::npos) << c.stdout_text;
  auto client = [port] {
    httplib::Client cl("127.0.0.1", port);
    cl.set_read_timeout(120, 0);
    return cl;
  };
  // The EOG ids, to keep the request generating until max_tokens.
  auto file = gguf::File::open(model);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(file->metadata());
  ASSERT_TRUE(tok.ok());
  json bias = json::object();
  for (int32_t id : tok->eog_ids()) bias[std::to_string(id)] = -100;
  const std::string body = json({{"messages", {{{"role", "user"}, {"content", "count"}}}},
                                 {"max_tokens", 300},
                                 {"temperature", 0},
                                 {"logit_bias", bias}})
                               .dump();
  auto in_flight = std::async(
      std::launch::async, [&] { return client().Post("/v1/chat/completions", body, "application/json"); });
  for (int i = 0; i < 400; ++i) {
    auto m = client().Get("/metrics");
    if (m && metric(m->body, "minfer_requests_in_flight") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(kill(c.pid, SIGTERM), 0);
  auto r = in_flight.get();
  ASSERT_TRUE(r) << "the in-flight request was dropped";
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 300) << r->body;
  EXPECT_EQ(wait_exit(c.pid, 60), 0);
  EXPECT_FALSE(client().Get("/health")) << "a new connection must be refused after shutdown";
  close(c.out);
}

// `serve --spec-draft` (the model drafting for itself) and `--spec-lookup`: greedy replies equal a plain
// server's, the startup line names the mode, and /metrics counts accepted proposals.
TEST(ServeBinary, SpeculativeServersAnswerAsAPlainOne) {
  const std::string model = tiny_model();
  const std::string body = json({{"messages", {{{"role", "user"}, {"content", "tell me more"}}}},
                                 {"max_tokens", 48},
                                 {"temperature", 0}})
                               .dump();
  struct Reply {
    std::string content;
    double accepted = -1;
  };
  auto serve_and_ask = [&](std::vector<std::string> extra, const std::string& banner) {
    std::vector<std::string> args = {"minfer", "serve", model, "--port", "0", "-t", "1", "--n-slots", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    Child c = spawn(args);
    Reply reply;
    const int port = wait_for_port(c);
    EXPECT_GT(port, 0) << c.stdout_text;
    if (port > 0) {
      EXPECT_NE(c.stdout_text.find(banner), std::string::npos) << c.stdout_text;
      httplib::Client cl("127.0.0.1", port);
      cl.set_read_timeout(120, 0);
      auto r = cl.Post("/v1/chat/completions", body, "application/json");
      EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
      if (r && r->status == 200) reply.content = json::parse(r->body)["choices"][0]["message"]["content"];
      auto m = cl.Get("/metrics");
      if (m) reply.accepted = metric(m->body, "minfer_spec_accepted_tokens_total");
    }
    kill(c.pid, SIGTERM);
    EXPECT_EQ(wait_exit(c.pid, 60), 0);
    close(c.out);
    return reply;
  };
  const Reply plain = serve_and_ask({}, "batching=on");
  const Reply drafted = serve_and_ask({"--spec-draft", model, "--spec-draft-n", "3"},
                                      "speculative=draft:" + model + " depth=3");
  const Reply looked_up = serve_and_ask({"--spec-lookup", "4"}, "speculative=lookup depth=4");
  EXPECT_FALSE(plain.content.empty());
  EXPECT_EQ(drafted.content, plain.content);
  EXPECT_EQ(looked_up.content, plain.content);
  EXPECT_EQ(plain.accepted, 0);
  EXPECT_GT(drafted.accepted, 0);
}

TEST(ServeBinary, RefusesATemplateThatCannotRender) {
  const std::string model = tiny_model();
  const std::string tmpl = minfer::test::temp_dir() + "/bad.jinja";
  std::ofstream(tmpl) << "{{ raise_exception('this template refuses everything') }}";
  Child c = spawn({"minfer", "serve", model, "--port", "0", "--chat-template", tmpl});
  EXPECT_EQ(wait_exit(c.pid, 60), 1);
  close(c.out);
}

// `serve --help` tells how to authenticate: both headers and the environment variable.
TEST(ServeBinary, HelpNamesTheAuthHeadersAndEnvironment) {
  Child c = spawn({"minfer", "serve", "--help"});
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(c.out, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  close(c.out);
  EXPECT_EQ(wait_exit(c.pid, 60), 0);
  EXPECT_NE(text.find("Authorization: Bearer KEY"), std::string::npos) << text;
  EXPECT_NE(text.find("x-api-key"), std::string::npos) << text;
  EXPECT_NE(text.find("MINFER_API_KEY"), std::string::npos) << text;
}

// Several models: --models-dir plus a repeated -m (one given twice is refused by name), the router flags
// on the startup line, models loaded on demand, and the refusals of what serves one model only.
TEST(ServeBinary, SeveralModelsFromAFolderAndRepeatedFlags) {
  const std::string dir = minfer::test::temp_dir() + "/models";
  std::filesystem::create_directories(dir);
  for (auto [name, seed] : {std::pair{"one", 31}, std::pair{"two", 32}}) {
    tools::SyntheticOptions o;
    o.shape = *tools::synthetic_preset("tiny-qwen3");
    o.seed = static_cast<uint64_t>(seed);
    auto w = tools::make_synthetic_model(o);
    ASSERT_TRUE(w.ok() && w->write(dir + "/" + name + ".gguf").ok());
  }
  const std::string third = tiny_model();
  Child c =
      spawn({"minfer", "serve", "--models-dir", dir, "-m", third, "--port", "0", "-t", "1", "--max-loaded",
             "1", "--keep-alive", "5m", "--memory-budget", "8G", "--embeddings", "--pooling", "mean"});
  const int port = wait_for_port(c);
  ASSERT_GT(port, 0) << c.stdout_text;
  EXPECT_NE(c.stdout_text.find("models=tiny-qwen3,one,two (loaded on demand)"), std::string::npos)
      << c.stdout_text;
  EXPECT_NE(c.stdout_text.find("max-loaded=1 memory-budget=8G keep-alive=5m"), std::string::npos)
      << c.stdout_text;
  httplib::Client cl("127.0.0.1", port);
  cl.set_read_timeout(120, 0);
  auto models = cl.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"].size(), 3u) << models->body;
  for (const char* name : {"two", "one"}) {
    auto r = cl.Post(
        "/v1/chat/completions",
        json({{"model", name}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}})
            .dump(),
        "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["model"], name);
  }
  // Each model has its own embeddings engine (--embeddings applies to every model).
  auto e = cl.Post("/v1/embeddings", json({{"model", "two"}, {"input", "hello"}}).dump(), "application/json");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 200) << e->body;
  EXPECT_EQ(json::parse(e->body)["model"], "two");
  auto metrics = cl.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric(metrics->body, "minfer_model_loaded{model=\"two\"}"), 1) << metrics->body;
  EXPECT_EQ(metric(metrics->body, "minfer_model_loaded{model=\"one\"}"), 0) << metrics->body;
  EXPECT_EQ(metric(metrics->body, "minfer_model_unloads_total{model=\"one\"}"), 1) << metrics->body;
  kill(c.pid, SIGTERM);
  EXPECT_EQ(wait_exit(c.pid, 60), 0);
  close(c.out);
  // Refused before listening: the same model twice, --alias or --slots-file with several, a bad duration.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"-m", third, "-m", third},
        std::vector<std::string>{"--models-dir", dir, "--alias", "x"},
        std::vector<std::string>{"--models-dir", dir, "--slots-file", dir + "/slots"},
        std::vector<std::string>{third, "--keep-alive", "5x"},
        std::vector<std::string>{third, "--memory-budget", "lots"},
        std::vector<std::string>{"--models-dir", dir + "/nonesuch"}}) {
    std::vector<std::string> args = {"minfer", "serve", "--port", "0"};
    args.insert(args.end(), bad.begin(), bad.end());
    Child f = spawn(args);
    EXPECT_EQ(wait_exit(f.pid, 60), 1) << bad[1];
    close(f.out);
  }
}

}  // namespace
}  // namespace minfer::server::test
