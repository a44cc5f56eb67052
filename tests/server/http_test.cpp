// The real server over loopback HTTP on a tiny generated model: every route, the error statuses of the
// issue, SSE framing, stream == non-stream, n choices, logprobs, tool calls and reasoning end to end,
// cancellation by disconnect, drain, and batching invariance.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/log.h"
#include "server/test_server.h"

namespace minfer::server::test {
namespace {

std::string chat_body(const std::string& user, int max_tokens, json extra = json::object()) {
  json b = {
      {"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", user}}}}, {"max_tokens", max_tokens}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b.dump();
}

// The text of a streamed chat answer: joined delta.content, plus reasoning and tool calls.
struct Streamed {
  std::string content, reasoning, finish;
  json tool_calls = json::array();
  json usage;
  bool role_first = false, done_last = false;
  int n_chunks = 0;
};

Streamed parse_stream(const std::string& body, int choice = 0) {
  Streamed s;
  auto frames = sse_payloads(body);
  s.done_last = !frames.empty() && frames.back() == "[DONE]";
  bool first = true;
  for (const auto& f : frames) {
    if (f == "[DONE]") continue;
    json j = json::parse(f, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << f;
    if (j.contains("error")) {
      s.finish = "error";
      continue;
    }
    if (j["choices"].empty()) {
      s.usage = j["usage"];
      continue;
    }
    for (const auto& c : j["choices"]) {
      if (c["index"] != choice) continue;
      ++s.n_chunks;
      if (first) {
        s.role_first = c.contains("delta") && c["delta"].value("role", "") == "assistant";
        first = false;
      }
      if (c.contains("text")) s.content += c["text"].get<std::string>();
      if (c.contains("delta")) {
        const json& d = c["delta"];
        if (d.contains("content") && d["content"].is_string()) s.content += d["content"].get<std::string>();
        if (d.contains("reasoning_content")) s.reasoning += d["reasoning_content"].get<std::string>();
        if (d.contains("tool_calls"))
          for (const auto& t : d["tool_calls"]) s.tool_calls.push_back(t);
      }
      if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
    }
  }
  return s;
}

class Http : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()); }
  static TestServer* server_;
};
TestServer* Http::server_ = nullptr;

void expect_error(const Reply& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  ASSERT_TRUE(r.body.contains("error")) << r.raw;
  const json& e = r.body["error"];
  for (const char* k : {"message", "type", "param", "code"})
    EXPECT_TRUE(e.contains(k)) << k << " in " << r.raw;
  EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << r.raw;
}

TEST_F(Http, HealthModelsAndUnknownRoutes) {
  Reply h = get(*server_, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, json({{"status", "ok"}}));
  Reply m = get(*server_, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.body["object"], "list");
  EXPECT_EQ(m.body["data"][0]["id"], "tiny");
  EXPECT_EQ(m.body["data"][0]["object"], "model");
  Reply one = get(*server_, "/v1/models/tiny");
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(one.body["id"], "tiny");
  expect_error(get(*server_, "/v1/models/gpt-4"), 404, "gpt-4");
  expect_error(get(*server_, "/v1/nothing"), 404, "no route");
  expect_error(get(*server_, "/v1/chat/completions"), 405, "not allowed");
  expect_error(post(*server_, "/health", "{}"), 405, "not allowed");
  expect_error(post(*server_, "/v1/chat/completions",
                    R"({"model":"gpt-4","messages":[{"role":"user","content":"x"}]})"),
               404, "gpt-4");
}

TEST_F(Http, TokenizeDetokenize) {
  Reply t = post(*server_, "/tokenize", R"({"content":"hello world"})");
  ASSERT_EQ(t.status, 200) << t.raw;
  ASSERT_TRUE(t.body["tokens"].is_array());
  ASSERT_FALSE(t.body["tokens"].empty());
  Reply d = post(*server_, "/detokenize", json({{"tokens", t.body["tokens"]}}).dump());
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(d.body["content"], "hello world");
  Reply p = post(*server_, "/tokenize", R"({"content":"hi","with_pieces":true})");
  EXPECT_TRUE(p.body["tokens"][0].contains("piece"));
  expect_error(post(*server_, "/detokenize", R"({"tokens":[-1]})"), 400, "outside the vocabulary");
  expect_error(post(*server_, "/tokenize", R"({"content":5})"), 400, "'content'");
  expect_error(post(*server_, "/tokenize", R"({"content":"hi","add_bos":true})"), 400,
               "unknown field 'add_bos'");
  expect_error(post(*server_, "/detokenize", R"({"tokens":[1],"skip_special":true})"), 400,
               "unknown field 'skip_special'");
}

TEST_F(Http, ChatCompletionShape) {
  Reply r = post(*server_, "/v1/chat/completions", chat_body("Hello there", 8));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& b = r.body;
  EXPECT_EQ(b["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_TRUE(b["created"].is_number_integer());
  EXPECT_EQ(b["model"], "tiny");
  ASSERT_EQ(b["choices"].size(), 1u);
  const json& c = b["choices"][0];
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_TRUE(c["message"]["content"].is_string());
  EXPECT_TRUE(c["finish_reason"] == "stop" || c["finish_reason"] == "length");
  const json& u = b["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(u["completion_tokens"].get<int>(), 8);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
  EXPECT_TRUE(u["prompt_tokens_details"]["cached_tokens"].is_number_integer());
  if (c["finish_reason"] == "length") {
    EXPECT_EQ(u["completion_tokens"], 8);
  }
}

TEST_F(Http, StreamFramingAndStreamEqualsNonStream) {
  const json extra = {{"temperature", 0.9}, {"seed", 1234}, {"top_k", 0}};
  Reply plain = post(*server_, "/v1/chat/completions", chat_body("Tell me a story", 24, extra));
  ASSERT_EQ(plain.status, 200) << plain.raw;
  json sx = extra;
  sx["stream"] = true;
  sx["stream_options"] = {{"include_usage", true}};
  Reply streamed = post(*server_, "/v1/chat/completions", chat_body("Tell me a story", 24, sx));
  ASSERT_EQ(streamed.status, 200);
  EXPECT_NE(streamed.header("Content-Type").find("text/event-stream"), std::string::npos);
  // Framing: every frame is "data: <payload>\n\n".
  EXPECT_EQ(streamed.raw.rfind("data: ", 0), 0u);
  EXPECT_EQ(streamed.raw.substr(streamed.raw.size() - 14), "data: [DONE]\n\n");
  Streamed s = parse_stream(streamed.raw);
  EXPECT_TRUE(s.role_first);
  EXPECT_TRUE(s.done_last);
  EXPECT_EQ(s.finish, plain.body["choices"][0]["finish_reason"]);
  EXPECT_EQ(s.content, plain.body["choices"][0]["message"]["content"]);
  ASSERT_TRUE(s.usage.is_object()) << streamed.raw;
  EXPECT_EQ(s.usage["completion_tokens"], plain.body["usage"]["completion_tokens"]);
  // The finish_reason chunk is the last one with choices; the usage chunk comes after it with no choices.
  auto frames = sse_payloads(streamed.raw);
  ASSERT_GE(frames.size(), 3u);
  json usage_chunk = json::parse(frames[frames.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  json last = json::parse(frames[frames.size() - 3]);
  EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null());
  // Without include_usage there is no usage chunk.
  sx.erase("stream_options");
  Streamed s2 =
      parse_stream(post(*server_, "/v1/chat/completions", chat_body("Tell me a story", 24, sx)).raw);
  EXPECT_TRUE(s2.usage.is_null());
  EXPECT_EQ(s2.content, s.content);
}

TEST_F(Http, CompletionsWithTextAndTokenPrompts) {
  Reply r = post(*server_, "/v1/completions", R"({"prompt":"The sky is","max_tokens":6,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "text_completion");
  EXPECT_TRUE(r.body["choices"][0]["text"].is_string());
  Reply ids = post(*server_, "/tokenize", R"({"content":"The sky is"})");
  Reply r2 = post(*server_, "/v1/completions",
                  json({{"prompt", ids.body["tokens"]}, {"max_tokens", 6}, {"temperature", 0}}).dump());
  ASSERT_EQ(r2.status, 200) << r2.raw;
  EXPECT_EQ(r2.body["choices"][0]["text"], r.body["choices"][0]["text"]);
  EXPECT_EQ(r2.body["usage"]["prompt_tokens"], ids.body["tokens"].size());
  Reply st = post(*server_, "/v1/completions",
                  R"({"prompt":"The sky is","max_tokens":6,"temperature":0,"stream":true})");
  Streamed s = parse_stream(st.raw);
  EXPECT_TRUE(s.done_last);
  EXPECT_EQ(s.content, r.body["choices"][0]["text"]);
}

TEST_F(Http, ChoicesAndLogprobs) {
  Reply r =
      post(*server_, "/v1/chat/completions",
           chat_body("Pick", 5,
                     {{"n", 2}, {"temperature", 1.0}, {"seed", 7}, {"logprobs", true}, {"top_logprobs", 2}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["choices"].size(), 2u);
  int total = 0;
  for (int i = 0; i < 2; ++i) {
    const json& c = r.body["choices"][i];
    EXPECT_EQ(c["index"], i);
    const json& lp = c["logprobs"]["content"];
    ASSERT_TRUE(lp.is_array());
    total += static_cast<int>(lp.size());
    for (const auto& e : lp) {
      EXPECT_LE(e["logprob"].get<double>(), 0.0);
      EXPECT_EQ(e["top_logprobs"].size(), 2u);
      EXPECT_TRUE(e["bytes"].is_array());
    }
  }
  EXPECT_EQ(r.body["usage"]["completion_tokens"], total);  // usage counts every choice's tokens
}

TEST_F(Http, ValidationErrors) {
  const std::string path = "/v1/chat/completions";
  expect_error(post(*server_, path, "{not json"), 400, "not valid JSON");
  expect_error(post(*server_, path, R"({"messages":[{"role":"pirate","content":"x"}]})"), 400,
               "unknown role");
  expect_error(post(*server_, path, chat_body("x", 0)), 400, "max_tokens");
  expect_error(post(*server_, path, chat_body("x", 4, {{"temperature", 3}})), 400, "temperature");
  expect_error(post(*server_, path, chat_body("x", 4, {{"top_p", 0}})), 400, "top_p");
  expect_error(post(*server_, path, chat_body("x", 4, {{"n", 50}})), 400, "'n'");
  expect_error(post(*server_, path, chat_body("x", 4, {{"logit_bias", {{"99999999", 1}}}})), 400,
               "outside the vocabulary");
  expect_error(post(*server_, path, chat_body("x", 4, {{"messages", "x"}})), 400, "messages");
  expect_error(
      post(
          *server_, path,
          chat_body("x", 4, {{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}})),
      400, "grammar");
  expect_error(post(*server_, path,
                    chat_body("x", 4,
                              {{"response_format",
                                {{"type", "json_schema"},
                                 {"json_schema", {{"schema", {{"type", "string"}, {"format", "ipv9"}}}}}}}})),
               400, "#");
  expect_error(post(*server_, path, chat_body("x", 4, {{"grammar", "root ::= undefined-rule"}})), 400,
               "undefined-rule");
  // A prompt longer than the context names both counts.
  std::string big;
  for (int i = 0; i < 1500; ++i) big += "word ";
  Reply r = post(*server_, path, chat_body(big, 4));
  expect_error(r, 400, "context holds 1024");
  EXPECT_NE(r.raw.find("the prompt has "), std::string::npos);
  expect_error(post(*server_, "/v1/completions", R"({"prompt":[1,2],"max_tokens":-1})"), 400, "max_tokens");
}

TEST_F(Http, BodyOverMaxBodyIs413) {
  std::string big(2u << 20, 'x');
  Reply r = post(*server_, "/v1/chat/completions", big);
  expect_error(r, 413, "max-body");
}

// One request written as raw bytes on a new connection; the reply up to its Content-Length. A reply that
// does not come within 20 s (the server waiting for more input) comes back empty.
std::string raw_exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return out;
  }
  char buf[4096];
  for (;;) {
    const size_t head = out.find("\r\n\r\n");
    if (head != std::string::npos) {
      const size_t cl = out.find("Content-Length: ");
      const size_t len = cl == std::string::npos || cl > head ? 0 : std::stoul(out.substr(cl + 16));
      if (out.size() >= head + 4 + len) break;
    }
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// Bodies are bounded however they are framed: chunked and compressed bodies by --max-body too (the
// decompressed size), and the connection stays usable after the refusal.
TEST_F(Http, ChunkedAndCompressedBodiesHonourMaxBody) {
  const std::string ok_body = chat_body("hi", 2);
  auto c = server_->client();
  auto chunked = [&](const std::string& body) {
    return c.Post(
        "/v1/chat/completions", httplib::Headers{},
        [body](size_t offset, httplib::DataSink& sink) {
          const size_t n = std::min<size_t>(64 << 10, body.size() - offset);
          if (n > 0) sink.write(body.data() + offset, n);
          if (offset + n >= body.size()) sink.done();
          return true;
        },
        "application/json");
  };
  auto small = chunked(ok_body);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200) << small->body;
  const std::string big = chat_body(std::string(3u << 20, 'x'), 2);  // 3 MiB, the limit is 1 MiB
  auto over = chunked(big);
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 413);
  EXPECT_NE(over->body.find("max-body"), std::string::npos) << over->body;
  auto after = c.Post("/v1/chat/completions", ok_body, "application/json");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);

  // gzip: a few kilobytes on the wire, 3 MiB inflated.
  const double errors0 = metric(get(*server_, "/metrics").raw, "minfer_http_client_errors_total");
  auto z = server_->client();
  z.set_compress(true);
  auto zsmall = z.Post("/v1/chat/completions", ok_body, "application/json");
  ASSERT_TRUE(zsmall);
  EXPECT_EQ(zsmall->status, 200) << zsmall->body;
  auto bomb = z.Post("/v1/chat/completions", big, "application/json");
  ASSERT_TRUE(bomb);
  EXPECT_EQ(bomb->status, 413);
  EXPECT_NE(bomb->body.find("once decompressed"), std::string::npos) << bomb->body;
  // Refusals of the transport count in /metrics like the routes' own.
  EXPECT_EQ(metric(get(*server_, "/metrics").raw, "minfer_http_client_errors_total"), errors0 + 1);
  // Past the discard bound (64 MiB beyond the limit) inflating stops: still a 413, on a closed connection.
  auto huge = server_->client();
  huge.set_compress(true);
  auto far = huge.Post("/v1/chat/completions", std::string(80u << 20, 'x'), "application/json");
  ASSERT_TRUE(far);
  EXPECT_EQ(far->status, 413) << far->body;
  EXPECT_EQ(far->get_header_value("Connection"), "close");
}

TEST_F(Http, BodilessMultipartAndDeepBodiesAreRefusedByName) {
  // No Content-Length and not chunked: no body (RFC 9112), answered at once instead of waiting for EOF.
  const std::string reply =
      raw_exchange(server_->port(), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Length"), std::string::npos) << reply;
  // A transfer coding other than chunked cannot be framed (501), an unknown content coding cannot be read
  // (415): both by name.
  const std::string te = raw_exchange(
      server_->port(),
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
  EXPECT_EQ(te.rfind("HTTP/1.1 501", 0), 0u) << te;
  EXPECT_NE(te.find("Transfer-Encoding 'gzip, chunked'"), std::string::npos) << te;
  const std::string ce =
      raw_exchange(server_->port(),
                   "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: zstd\r\n"
                   "Content-Length: 2\r\n\r\n{}");
  EXPECT_EQ(ce.rfind("HTTP/1.1 415", 0), 0u) << ce;
  EXPECT_NE(ce.find("Content-Encoding 'zstd'"), std::string::npos) << ce;
  expect_error(post(*server_, "/v1/chat/completions", ""), 400, "body is empty");
  expect_error(post(*server_, "/v1/completions", ""), 400, "body is empty");

  auto c = server_->client();
  auto mp = c.Post("/v1/chat/completions", httplib::MultipartFormDataItems{{"messages", "hi", "", ""}});
  ASSERT_TRUE(mp);
  EXPECT_EQ(mp->status, 415);
  EXPECT_NE(mp->body.find("multipart"), std::string::npos) << mp->body;

  // 100000 levels of '[' (200 kB, under --max-body) used to overflow the stack in the JSON copy.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_error(post(*server_, "/v1/chat/completions", deep), 400, "deeper than 256");
  json nested = json::parse(chat_body("hi", 2));
  const std::string body = nested.dump();
  expect_error(post(*server_, "/v1/chat/completions",
                    body.substr(0, body.size() - 1) + ",\"chat_template_kwargs\":{\"x\":" + deep + "}}"),
               400, "deeper than 256");
  const Reply anthropic = post(*server_, "/v1/messages", deep);  // in Anthropic's error shape
  EXPECT_EQ(anthropic.status, 400);
  EXPECT_EQ(anthropic.body.value("type", ""), "error") << anthropic.raw;
  EXPECT_NE(anthropic.raw.find("deeper than 256"), std::string::npos) << anthropic.raw;
  EXPECT_EQ(get(*server_, "/health").status, 200);
  EXPECT_EQ(post(*server_, "/v1/chat/completions", chat_body("hi", 2)).status, 200);
}

// A grammar that keeps 2^n parses open after n 'a's, with 'a' forced: after about 14 tokens the grammar
// is past its parse bound and allows nothing. Every API reports that dead end as an error, never as a
// successful answer cut short.
TEST_F(Http, GrammarDeadEndIsAnErrorInEveryApi) {
  Reply ids = post(*server_, "/tokenize", R"({"content":"a"})");
  ASSERT_EQ(ids.status, 200) << ids.raw;
  ASSERT_EQ(ids.body["tokens"].size(), 1u) << ids.raw;
  const json fields = {{"grammar", "root ::= r\nr ::= \"a\" r \"b\" | \"a\" r \"c\" | \"\""},
                       {"logit_bias", {{std::to_string(ids.body["tokens"][0].get<int>()), 100}}},
                       {"temperature", 0}};
  const std::string needle = "dead end of the grammar";
  expect_error(post(*server_, "/v1/chat/completions", chat_body("a", 40, fields)), 400, needle);
  json completion = fields;
  completion["prompt"] = "a";
  completion["max_tokens"] = 40;
  expect_error(post(*server_, "/v1/completions", completion.dump()), 400, needle);
  json streamed = fields;
  streamed["stream"] = true;
  Streamed s = parse_stream(post(*server_, "/v1/chat/completions", chat_body("a", 40, streamed)).raw);
  EXPECT_EQ(s.finish, "error");

  json message = fields;
  message["model"] = "tiny";
  message["messages"] = {{{"role", "user"}, {"content", "a"}}};
  message["max_tokens"] = 40;
  Reply m = post(*server_, "/v1/messages", message.dump());
  EXPECT_EQ(m.status, 400) << m.raw;
  EXPECT_NE(m.raw.find(needle), std::string::npos) << m.raw;
  message["stream"] = true;
  Reply ms = post(*server_, "/v1/messages", message.dump());
  EXPECT_NE(ms.raw.find("event: error"), std::string::npos) << ms.raw;
  EXPECT_EQ(ms.raw.find("message_stop"), std::string::npos) << ms.raw;

  json response = fields;
  response["input"] = "a";
  response["max_output_tokens"] = 40;
  expect_error(post(*server_, "/v1/responses", response.dump()), 400, needle);
  response["stream"] = true;
  Reply rs = post(*server_, "/v1/responses", response.dump());
  EXPECT_NE(rs.raw.find("event: response.failed"), std::string::npos) << rs.raw;
  EXPECT_NE(rs.raw.find(needle), std::string::npos) << rs.raw;
  EXPECT_EQ(rs.raw.find("response.completed"), std::string::npos) << rs.raw;
}

TEST_F(Http, MetricsAreProometheusText) {
  Reply m = get(*server_, "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.header("Content-Type").find("text/plain; version=0.0.4"), std::string::npos);
  for (const char* name : {"minfer_requests_total", "minfer_queue_depth", "minfer_requests_running",
                           "minfer_completion_tokens_total", "minfer_completion_tokens_per_second",
                           "minfer_draining", "minfer_kv_used_cells"}) {
    EXPECT_GE(metric(m.raw, name), 0) << name;
  }
}

// Greedy answers do not depend on what else is in the batch.
TEST_F(Http, BatchingInvariance) {
  const std::vector<std::string> prompts = {"alpha beta", "the quick brown fox jumps", "one",
                                            "lorem ipsum dolor sit amet"};
  std::vector<std::string> alone;
  for (const auto& p : prompts) {
    Reply r = post(*server_, "/v1/chat/completions", chat_body(p, 16, {{"temperature", 0}}));
    ASSERT_EQ(r.status, 200) << r.raw;
    alone.push_back(r.body["choices"][0]["message"]["content"]);
  }
  std::vector<std::future<Reply>> futures;
  for (const auto& p : prompts)
    futures.push_back(std::async(std::launch::async, [p] {
      return post(*server_, "/v1/chat/completions", chat_body(p, 16, {{"temperature", 0}}));
    }));
  for (size_t i = 0; i < prompts.size(); ++i) {
    Reply r = futures[i].get();
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["choices"][0]["message"]["content"], alone[i]) << prompts[i];
  }
}

// A forced <think> shape (grammar) ends up in reasoning_content, streamed and not.
TEST_F(Http, ReasoningSplitEndToEnd) {
  const json extra = {{"grammar", "root ::= \"<think>\" [a-z ]{3,12} \"</think>\" [a-z]{2,6}"},
                      {"temperature", 0}};
  Reply r = post(*server_, "/v1/chat/completions", chat_body("Think first", 40, extra));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& msg = r.body["choices"][0]["message"];
  ASSERT_TRUE(msg.contains("reasoning_content")) << r.raw;
  EXPECT_GE(msg["reasoning_content"].get<std::string>().size(), 3u);
  EXPECT_EQ(msg["content"].get<std::string>().find("<think>"), std::string::npos);
  json sx = extra;
  sx["stream"] = true;
  Streamed s = parse_stream(post(*server_, "/v1/chat/completions", chat_body("Think first", 40, sx)).raw);
  EXPECT_EQ(s.reasoning, msg["reasoning_content"]);
  EXPECT_EQ(s.content, msg["content"]);
}

// Disconnecting mid-stream frees the slot: the request is cancelled, not completed.
TEST_F(Http, ClientDisconnectCancels) {
  const auto& tok = server_->engine().tokenizer();
  json bias = json::object();
  for (int32_t id : tok.eog_ids()) bias[std::to_string(id)] = -100;  // never ends by itself
  const std::string body =
      chat_body("Go on forever", 900, {{"stream", true}, {"logit_bias", bias}, {"temperature", 0}});
  const double cancelled0 = metric(get(*server_, "/metrics").raw, "minfer_requests_cancelled_total");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  char buf[512];
  ASSERT_GT(read(fd, buf, sizeof(buf)), 0);  // the stream has started
  close(fd);
  double cancelled = cancelled0, running = 1;
  for (int i = 0; i < 1200 && (cancelled <= cancelled0 || running > 0); ++i) {  // 30 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    const std::string m = get(*server_, "/metrics").raw;
    cancelled = metric(m, "minfer_requests_cancelled_total");
    running = metric(m, "minfer_requests_running");
  }
  EXPECT_EQ(cancelled, cancelled0 + 1);
  EXPECT_EQ(running, 0);
}

TEST(HttpAuth, ApiKeyGuardsV1AndMetricsButNotHealth) {
  TestServerOptions o;
  o.api_key = "sekret";
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(get(s, "/health").status, 200);
  expect_error(get(s, "/v1/models"), 401, "API key");
  expect_error(get(s, "/v1/models", "wrong"), 401, "API key");
  expect_error(get(s, "/metrics"), 401, "API key");
  expect_error(post(s, "/v1/chat/completions", chat_body("x", 2)), 401, "API key");
  EXPECT_EQ(get(s, "/v1/models", "sekret").status, 200);
  EXPECT_EQ(get(s, "/metrics", "sekret").status, 200);
  EXPECT_EQ(post(s, "/v1/chat/completions", chat_body("x", 2), "sekret").status, 200);
  // The scheme is case-insensitive (RFC 7235); the key is not.
  auto c = s.client();
  for (const char* auth : {"bearer sekret", "BEARER sekret", "Bearer  sekret"}) {
    auto r = c.Get("/v1/models", {{"Authorization", auth}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << auth;
  }
  for (const char* auth : {"Bearer SEKRET", "Bearersekret", "Basic sekret", "bearer"}) {
    auto r = c.Get("/v1/models", {{"Authorization", auth}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << auth;
  }
}

// --queue-depth 0: a request that finds no idle slot gets 503 "no idle slot" with Retry-After, before any
// stream starts; and draining answers 503 while the accepted request still completes.
TEST(HttpSaturation, NoIdleSlotThenDrain) {
  // The worker is held before its first step (the slot stays busy) until the refusal is seen, so the test
  // never depends on a short generation outlasting two HTTP round trips. Bounded: 30 s at most.
  std::atomic<bool> hold{true};
  TestServerOptions o;
  o.stall_injector = [&hold] {
    for (int i = 0; i < 3000 && hold.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return false;
  };
  o.n_slots = 1;
  o.queue_depth = 0;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  json bias = json::object();
  for (int32_t id : s.engine().tokenizer().eog_ids()) bias[std::to_string(id)] = -100;
  auto busy = std::async(std::launch::async, [&] {
    return post(s, "/v1/chat/completions",
                chat_body("long", 400, {{"logit_bias", bias}, {"temperature", 0}}));
  });
  // Wait until it occupies the slot (in flight counts it after the batcher accepted it). Bounded, but
  // generously: on a loaded machine or under a sanitizer the first request can take seconds to arrive.
  bool occupied = false;
  for (int i = 0; i < 3000 && !occupied; ++i) {
    occupied = metric(get(s, "/metrics").raw, "minfer_requests_in_flight") >= 1;
    if (!occupied) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!occupied) hold = false;
  ASSERT_TRUE(occupied) << "the first request was not accepted within 30 s";
  Reply r = post(s, "/v1/chat/completions", chat_body("x", 2, {{"stream", true}}));
  expect_error(r, 503, "no idle slot");
  EXPECT_EQ(r.body["error"]["type"], "unavailable_error");
  EXPECT_EQ(r.body["error"]["code"], 503);
  EXPECT_EQ(r.header("Retry-After"), "1");
  hold = false;  // the busy request may now run
  // Drain: new requests 503, /health 503, the accepted one finishes normally.
  s.server().begin_drain();
  expect_error(post(s, "/v1/chat/completions", chat_body("x", 2)), 503, "draining");
  EXPECT_EQ(get(s, "/health").status, 503);
  const int64_t abandoned = s.batcher().drain(std::chrono::milliseconds(60000));
  EXPECT_EQ(abandoned, 0);
  Reply done = busy.get();
  EXPECT_EQ(done.status, 200) << done.raw;
  EXPECT_EQ(done.body["usage"]["completion_tokens"], 400);
  EXPECT_EQ(metric(get(s, "/metrics").raw, "minfer_draining"), 1);
}

// The real Qwen3 chat template renders the tools; tool_choice "required" forces a well-formed call that
// comes back as message.tool_calls (and delta.tool_calls when streaming).
TEST(HttpTools, RequiredToolChoiceGivesAParsedCall) {
  MINFER_REQUIRE_FIXTURES();
  TestServerOptions o;
  o.real_vocab = true;
  o.n_ctx = 2048;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const json tools =
      json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],
      "additionalProperties":false}}}])");
  json body = {{"model", "tiny"},  {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
               {"tools", tools},   {"tool_choice", "required"},
               {"max_tokens", 80}, {"temperature", 0}};
  Reply r = post(s, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& c = r.body["choices"][0];
  ASSERT_EQ(c["finish_reason"], "tool_calls") << r.raw;
  const json& call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  EXPECT_TRUE(args["city"].is_string());
  EXPECT_TRUE(c["message"]["content"].is_null());
  body["stream"] = true;
  Streamed st = parse_stream(post(s, "/v1/chat/completions", body.dump()).raw);
  EXPECT_EQ(st.finish, "tool_calls");
  ASSERT_EQ(st.tool_calls.size(), 1u);
  EXPECT_EQ(st.tool_calls[0]["index"], 0);
  EXPECT_EQ(st.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(st.tool_calls[0]["function"]["arguments"], call["function"]["arguments"]);
  // A conversation with an assistant tool call and its result renders through the template.
  body["stream"] = false;
  body["tool_choice"] = "auto";
  body["max_tokens"] = 4;
  body["messages"].push_back(
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "{\"temp\": 21}"}});
  Reply follow = post(s, "/v1/chat/completions", body.dump());
  EXPECT_EQ(follow.status, 200) << follow.raw;
  EXPECT_GT(follow.body["usage"]["prompt_tokens"].get<int>(), r.body["usage"]["prompt_tokens"].get<int>());
}

}  // namespace
}  // namespace minfer::server::test

namespace minfer::server::test {
namespace {

// A repeated prompt reuses the cached prefix, and the reuse is reported as OpenAI's cached_tokens.
TEST(HttpPrefix, ARepeatedPromptReportsCachedTokens) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  const std::string body = R"({"messages":[{"role":"system","content":"You answer briefly and precisely."},)"
                           R"({"role":"user","content":"Name a colour."}],"max_tokens":4,"temperature":0})";
  Reply a = post(server, "/v1/chat/completions", body);
  Reply b = post(server, "/v1/chat/completions", body);
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_EQ(a.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(b.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            b.body["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(a.body["choices"][0]["message"], b.body["choices"][0]["message"]);
}

// --slots-file: a restarted server restores the finished conversation's KV rows and prefills only the rest.
TEST(HttpSlots, ARestartRestoresTheSlotsFile) {
  const std::string file = ::minfer::test::temp_dir() + "/http-slots.bin";
  std::remove(file.c_str());
  const std::string body =
      R"({"prompt":"Once upon a time there was a small engine","max_tokens":5,"temperature":0})";
  json first;
  {
    TestServerOptions o;
    o.slots_file = file;
    TestServer server(o);
    ASSERT_TRUE(server.ok());
    Reply r = post(server, "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    first = r.body;
  }
  TestServerOptions o;
  o.slots_file = file;
  TestServer server(o);
  ASSERT_TRUE(server.ok());
  Reply r = post(server, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            first["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(r.body["choices"][0]["text"], first["choices"][0]["text"]);
}

// A failed forward answers 500 (server_error), or an error frame then [DONE] once a stream has started;
// the server keeps serving.
TEST(HttpFault, AFailedForwardIs500AndTheServerGoesOn) {
  std::atomic<int> failures{2};
  TestServerOptions o;
  o.fault_injector = [&failures](int64_t) {
    return failures.fetch_sub(1) > 0 ? Status(StatusCode::kInternal, "injected forward failure") : Status();
  };
  TestServer server(o);
  ASSERT_TRUE(server.ok());
  Reply r = post(server, "/v1/completions", R"({"prompt":"hello","max_tokens":4,"temperature":0})");
  EXPECT_EQ(r.status, 500) << r.raw;
  EXPECT_EQ(r.body["error"]["type"], "server_error");
  Reply st =
      post(server, "/v1/completions", R"({"prompt":"hello","max_tokens":4,"temperature":0,"stream":true})");
  const auto frames = sse_payloads(st.raw);
  ASSERT_GE(frames.size(), 2u) << st.raw;
  EXPECT_NE(frames[frames.size() - 2].find("injected forward failure"), std::string::npos) << st.raw;
  EXPECT_EQ(frames.back(), "[DONE]");
  Reply ok = post(server, "/v1/completions", R"({"prompt":"hello","max_tokens":4,"temperature":0})");
  EXPECT_EQ(ok.status, 200) << ok.raw;
  Reply m = get(server, "/metrics");
  EXPECT_EQ(metric(m.raw, "minfer_requests_failed_total"), 2) << m.raw;
}

// Issue 27, server health: the stall guard, memory metrics, the per-request log line and the slots-file
// refusal, each through the real server over loopback.

// A worker wedged in its step answers every live and queued request once with 500 after kStallStepLimit
// steps without progress, frees their slots, counts it, and then serves new requests.
TEST(HttpHealth, AStalledWorkerAnswersEveryOpenRequestWith500AndGoesOn) {
  std::atomic<bool> wedged{true};
  TestServerOptions o;
  o.n_slots = 1;  // one request runs, the others wait in the queue
  o.stall_injector = [&wedged] { return wedged.load(); };
  TestServer server(o);
  ASSERT_TRUE(server.ok());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Reply> replies(3);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < replies.size(); ++i) {
    clients.emplace_back([&, i] {
      const bool stream = i == 2;
      replies[i] = post(server, "/v1/completions",
                        fmt::format(R"({{"prompt":"hello {}","max_tokens":4,"temperature":0,"stream":{}}})",
                                    i, stream ? "true" : "false"));
    });
  }
  for (auto& c : clients) c.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 30.0) << "a stalled worker must not leave requests hanging";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(replies[i].status, 500) << replies[i].raw;
    EXPECT_EQ(replies[i].body["error"]["type"], "server_error") << replies[i].raw;
    EXPECT_NE(replies[i].raw.find("the worker stalled: 64 steps in a row made no progress"),
              std::string::npos)
        << replies[i].raw;
  }
  const auto frames = sse_payloads(replies[2].raw);
  ASSERT_GE(frames.size(), 2u) << replies[2].raw;
  EXPECT_NE(frames[frames.size() - 2].find("the worker stalled"), std::string::npos) << replies[2].raw;
  EXPECT_EQ(frames.back(), "[DONE]");

  Reply m = get(server, "/metrics");
  EXPECT_GE(metric(m.raw, "minfer_worker_stalled_total"), 1) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_requests_failed_total"), 3) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_slots_busy"), 0) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_worker_pending_jobs"), 0) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_kv_used_cells"), 0) << "the stalled requests' rows are dropped";

  wedged.store(false);
  Reply ok = post(server, "/v1/completions", R"({"prompt":"hello","max_tokens":4,"temperature":0})");
  EXPECT_EQ(ok.status, 200) << ok.raw;
  m = get(server, "/metrics");
  EXPECT_EQ(metric(m.raw, "minfer_requests_completed_total"), 1) << m.raw;
}

// The memory families report real quantities: the weights are the GGUF's tensor bytes, the KV cache is
// n_layer x (K, V) x n_ctx rows of f16, activations and RSS are measured; two choices of one prompt share
// its cells, which minfer_kv_shared_cells shows.
TEST(HttpHealth, MemoryAndSharingMetricsAreReal) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  auto file = gguf::File::open(tiny_model());
  ASSERT_TRUE(file.ok());
  uint64_t tensor_bytes = 0;
  for (const gguf::TensorInfo& t : file->tensors()) tensor_bytes += t.n_bytes;
  const models::HParams& hp = server.engine().hparams();
  const double kv_bytes =  // K and V, every layer, n_ctx rows of f16
      2.0 * hp.n_layer * server.engine().n_ctx() * static_cast<double>(hp.n_embd_kv()) * 2;

  Reply m = get(server, "/metrics");
  EXPECT_EQ(metric(m.raw, "minfer_memory_weights_bytes"), static_cast<double>(tensor_bytes)) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_memory_kv_bytes"), kv_bytes) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_memory_activations_bytes"), 0) << "no forward has run yet";
  EXPECT_GT(metric(m.raw, "minfer_memory_rss_bytes"), 1 << 20) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_kv_sequences"), 0) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_worker_pending_jobs"), 0) << m.raw;

  Reply r = post(server, "/v1/completions",
                 R"({"prompt":"The same prefix for both choices","max_tokens":3,"temperature":0,"n":2})");
  ASSERT_EQ(r.status, 200) << r.raw;
  const int prompt_tokens = r.body["usage"]["prompt_tokens"].get<int>();
  m = get(server, "/metrics");
  EXPECT_GT(metric(m.raw, "minfer_memory_activations_bytes"), 0) << m.raw;
  EXPECT_EQ(metric(m.raw, "minfer_kv_sequences"), 2) << "both slots keep their cached tokens";
  EXPECT_EQ(metric(m.raw, "minfer_kv_shared_cells"), prompt_tokens) << "the prompt's cells are shared";
  EXPECT_GE(metric(m.raw, "minfer_memory_rss_bytes"), static_cast<double>(tensor_bytes)) << m.raw;
}

// Each request logs one info line: prompt tokens, cached tokens reused, its slot and time to first token.
TEST(HttpHealth, EachRequestLogsOneInfoLine) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  const LogLevel before = log_level();
  set_log_level(LogLevel::kInfo);
  const std::string body = R"({"prompt":"A line per request, please","max_tokens":3,"temperature":0})";
  testing::internal::CaptureStderr();
  Reply a = post(server, "/v1/completions", body);
  Reply b = post(server, "/v1/completions", body);
  const std::string err = testing::internal::GetCapturedStderr();
  set_log_level(before);
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(b.status, 200) << b.raw;
  const int n = a.body["usage"]["prompt_tokens"].get<int>();
  const int generated = a.body["usage"]["completion_tokens"].get<int>();
  for (const auto& [id, cached] : {std::pair{1, 0}, std::pair{2, n - 1}}) {
    const std::string head = fmt::format(
        "batcher: request {} completed: prompt {} tokens, {} cached tokens reused, slot 0, "
        "time to first token ",
        id, n, cached);
    const size_t at = err.find(head);
    ASSERT_NE(at, std::string::npos) << head << "\n" << err;
    EXPECT_EQ(err.find(head, at + 1), std::string::npos) << "one line per request\n" << err;
    const std::string rest = err.substr(at + head.size(), err.find('\n', at) - at - head.size());
    EXPECT_GT(std::stod(rest), 0.0) << rest;
    EXPECT_NE(rest.find(fmt::format(" ms, {} completion tokens", generated)), std::string::npos) << rest;
  }
}

// A slots file written with another --n-slots is refused loudly and the server starts empty.
TEST(HttpHealth, ASlotsFileFromAnotherSlotCountIsRefused) {
  const std::string file = ::minfer::test::temp_dir() + "/http-slots-n.bin";
  std::remove(file.c_str());
  const std::string body =
      R"({"prompt":"Slots are numbered, so their count matters","max_tokens":3,"temperature":0})";
  {
    TestServerOptions o;
    o.slots_file = file;
    o.n_slots = 2;
    TestServer server(o);
    ASSERT_TRUE(server.ok());
    ASSERT_EQ(post(server, "/v1/completions", body).status, 200);
  }
  TestServerOptions o;
  o.slots_file = file;
  o.n_slots = 4;
  testing::internal::CaptureStderr();
  TestServer server(o);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(server.ok());
  EXPECT_NE(err.find("error: "), std::string::npos) << err;
  EXPECT_NE(err.find("slots file refused: KV file '" + file +
                     "': saved with 2 sequences (--n-slots), this run uses 4; starting with empty slots"),
            std::string::npos)
      << err;
  Reply m = get(server, "/metrics");
  EXPECT_EQ(metric(m.raw, "minfer_kv_used_cells"), 0) << m.raw;
  Reply r = post(server, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << r.raw;
}

}  // namespace
}  // namespace minfer::server::test
