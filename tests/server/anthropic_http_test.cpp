// The Anthropic Messages API (/v1/messages, /v1/messages/count_tokens) on the real server over loopback
// HTTP: the message shape, the named SSE event sequence and stream == non-stream, stop reasons, thinking
// blocks, tool use across two turns (real Qwen3 template), errors in Anthropic's shape with their
// statuses, x-api-key and Bearer auth, count_tokens, and cancellation on disconnect.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <utility>

#include "server/test_server.h"

namespace minfer::server::test {
namespace {

json message_body(const std::string& user, int max_tokens, const json& extra = json::object()) {
  json b = {
      {"model", "tiny"}, {"max_tokens", max_tokens}, {"messages", {{{"role", "user"}, {"content", user}}}}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

Reply post_with(const TestServer& s, const std::string& path, const std::string& body,
                const httplib::Headers& h) {
  auto c = s.client();
  auto r = c.Post(path.c_str(), h, body, "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  for (const auto& [k, v] : r->headers) out.headers.emplace(k, v);
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

// {"type":"error","error":{"type":TYPE,"message":...NEEDLE...}} with STATUS.
void expect_anthropic_error(const Reply& r, int status, const std::string& type, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  EXPECT_EQ(r.body.value("type", ""), "error") << r.raw;
  ASSERT_TRUE(r.body.contains("error") && r.body["error"].is_object()) << r.raw;
  EXPECT_EQ(r.body["error"].value("type", ""), type) << r.raw;
  EXPECT_NE(r.body["error"].value("message", "").find(needle), std::string::npos) << r.raw;
}

// A streamed answer: its events (name == data.type checked) and the content they add up to.
struct Stream {
  std::vector<json> events;
  json content = json::array();
  json message;  // message_start's message, with the message_delta applied
  bool well_formed = true;
};

Stream parse_events(const std::string& body) {
  Stream s;
  size_t pos = 0;
  std::map<int, std::string> partial_json;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string frame = body.substr(pos, end - pos);
    pos = end + 2;
    if (frame.empty()) continue;
    const size_t nl = frame.find('\n');
    if (frame.rfind("event: ", 0) != 0 || nl == std::string::npos ||
        frame.compare(nl + 1, 6, "data: ") != 0) {
      ADD_FAILURE() << "not an event frame: " << frame;
      s.well_formed = false;
      continue;
    }
    const std::string name = frame.substr(7, nl - 7);
    json data = json::parse(frame.substr(nl + 7), nullptr, false);
    EXPECT_FALSE(data.is_discarded()) << frame;
    EXPECT_EQ(data.value("type", ""), name) << frame;
    s.events.push_back(data);
    if (name == "message_start") s.message = data["message"];
    if (name == "content_block_start") {
      EXPECT_EQ(data["index"], s.content.size()) << frame;
      s.content.push_back(data["content_block"]);
    }
    if (name == "content_block_delta") {
      const int i = data["index"].get<int>();
      const json& d = data["delta"];
      if (d["type"] == "text_delta")
        s.content[i]["text"] = s.content[i]["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "thinking_delta")
        s.content[i]["thinking"] =
            s.content[i]["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "input_json_delta") partial_json[i] += d["partial_json"].get<std::string>();
    }
    if (name == "content_block_stop") {
      const int i = data["index"].get<int>();
      if (partial_json.count(i)) s.content[i]["input"] = json::parse(partial_json[i], nullptr, false);
    }
    if (name == "message_delta") {
      s.message["stop_reason"] = data["delta"]["stop_reason"];
      s.message["stop_sequence"] = data["delta"]["stop_sequence"];
      s.message["usage"] = data["usage"];
    }
  }
  return s;
}

std::vector<std::string> names(const Stream& s) {
  std::vector<std::string> out;
  for (const auto& e : s.events) out.push_back(e["type"]);
  return out;
}

json eog_bias(TestServer& s) {
  json bias = json::object();
  for (int32_t id : s.engine().tokenizer().eog_ids()) bias[std::to_string(id)] = -100;
  return bias;
}

class Messages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()); }
  static TestServer* server_;
};
TestServer* Messages::server_ = nullptr;

TEST_F(Messages, NonStreamedMessageShape) {
  json b = message_body("Hello", 6,
                        {{"system", "Be brief."},
                         {"temperature", 0},
                         {"logit_bias", eog_bias(*server_)},
                         {"metadata", {{"user_id", "u1"}}}});
  Reply r = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("msg_", 0), 0u) << r.raw;
  EXPECT_EQ(r.body["type"], "message");
  EXPECT_EQ(r.body["role"], "assistant");
  EXPECT_EQ(r.body["model"], "tiny");
  ASSERT_EQ(r.body["content"].size(), 1u) << r.raw;
  EXPECT_EQ(r.body["content"][0]["type"], "text");
  EXPECT_FALSE(r.body["content"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(r.body["stop_reason"], "max_tokens");
  EXPECT_TRUE(r.body["stop_sequence"].is_null());
  const json& u = r.body["usage"];
  EXPECT_EQ(u["output_tokens"], 6);
  EXPECT_GT(u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>(), 5);
  EXPECT_EQ(u["cache_creation_input_tokens"], 0);
  // System as text blocks renders the same prompt as the string.
  b["system"] =
      json::array({{{"type", "text"}, {"text", "Be brief."}, {"cache_control", {{"type", "ephemeral"}}}}});
  Reply blocks = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(blocks.status, 200) << blocks.raw;
  EXPECT_EQ(blocks.body["content"], r.body["content"]);
  EXPECT_EQ(blocks.body["usage"]["input_tokens"].get<int>() +
                blocks.body["usage"]["cache_read_input_tokens"].get<int>(),
            u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>());
  // The repeat reused the cached prefix, reported as cache_read_input_tokens.
  EXPECT_GT(blocks.body["usage"]["cache_read_input_tokens"].get<int>(), 0) << blocks.raw;
}

// The usage a client reads off a stream (message_start's input counts, message_delta's output) is the
// non-streamed answer's, also when the KV cache supplied part of the prompt.
TEST_F(Messages, StreamedUsageEqualsNonStreamed) {
  json b = message_body("Count the stars above the harbour", 4, {{"temperature", 0}});
  ASSERT_EQ(post(*server_, "/v1/messages", b.dump()).status, 200);  // leaves the prefix cached
  Reply plain = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(plain.status, 200) << plain.raw;
  const json& u = plain.body["usage"];
  ASSERT_GT(u["cache_read_input_tokens"].get<int>(), 0) << plain.raw;
  b["stream"] = true;
  Reply r = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  Stream s = parse_events(r.raw);
  ASSERT_FALSE(s.events.empty());
  const json& start = s.events[0]["message"]["usage"];
  EXPECT_EQ(start["input_tokens"], u["input_tokens"]) << r.raw;
  EXPECT_EQ(start["cache_read_input_tokens"], u["cache_read_input_tokens"]) << r.raw;
  EXPECT_EQ(start["cache_creation_input_tokens"], 0);
  EXPECT_EQ(s.message["usage"], u) << r.raw;
}

TEST_F(Messages, StreamFramingEqualsNonStreamed) {
  json b = message_body("Tell me a story", 12, {{"temperature", 0}, {"logit_bias", eog_bias(*server_)}});
  Reply plain = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(plain.status, 200) << plain.raw;
  b["stream"] = true;
  Reply r = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_NE(r.header("Content-Type").find("text/event-stream"), std::string::npos);
  Stream s = parse_events(r.raw);
  ASSERT_TRUE(s.well_formed);
  const auto n = names(s);
  ASSERT_GE(n.size(), 6u) << r.raw;
  EXPECT_EQ(n.front(), "message_start");
  EXPECT_EQ(n[1], "ping");
  EXPECT_EQ(n[n.size() - 2], "message_delta");
  EXPECT_EQ(n.back(), "message_stop");
  EXPECT_EQ(s.message["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_TRUE(s.message["content"].is_array() && s.message["content"].empty());
  EXPECT_TRUE(s.events[0]["message"]["stop_reason"].is_null());
  EXPECT_EQ(s.content, plain.body["content"]) << r.raw;
  EXPECT_EQ(s.message["stop_reason"], "max_tokens");
  EXPECT_EQ(s.message["usage"]["output_tokens"], 12);
  // Every content_block_start has its stop, in order.
  int open = -1;
  for (const json& e : s.events) {
    if (e["type"] == "content_block_start") {
      EXPECT_EQ(open, -1);
      open = e["index"];
    } else if (e["type"] == "content_block_stop") {
      EXPECT_EQ(e["index"], open);
      open = -1;
    } else if (e["type"] == "content_block_delta") {
      EXPECT_EQ(e["index"], open);
    }
  }
  EXPECT_EQ(open, -1);
}

// A stop sequence ends the text before it and is reported; without it the model ends its turn.
TEST_F(Messages, StopSequenceAndEndTurn) {
  json b = message_body("Count", 24, {{"temperature", 0}, {"logit_bias", eog_bias(*server_)}});
  Reply full = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(full.status, 200) << full.raw;
  const std::string text = full.body["content"][0]["text"];
  // Two ASCII letters from the second half of the greedy text.
  std::string stop;
  for (size_t i = text.size() / 2; i + 1 < text.size() && stop.empty(); ++i)
    if (std::isalpha(static_cast<unsigned char>(text[i])) &&
        std::isalpha(static_cast<unsigned char>(text[i + 1])))
      stop = text.substr(i, 2);
  ASSERT_FALSE(stop.empty()) << "no ASCII pair in " << text;
  b["stop_sequences"] = json::array({"\x01never", stop});
  for (bool stream : {false, true}) {
    b["stream"] = stream;
    Reply r = post(*server_, "/v1/messages", b.dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    json msg = stream ? parse_events(r.raw).message : r.body;
    json content = stream ? parse_events(r.raw).content : r.body["content"];
    EXPECT_EQ(msg["stop_reason"], "stop_sequence") << r.raw;
    EXPECT_EQ(msg["stop_sequence"], stop) << r.raw;
    const std::string got = content.empty() ? "" : content[0]["text"].get<std::string>();
    EXPECT_EQ(got, text.substr(0, text.find(stop))) << r.raw;
  }
  // Without the EOG bias the tiny model may end by itself; either way the reason is one of the two.
  Reply free_run = post(*server_, "/v1/messages", message_body("Hi", 8, {{"temperature", 0}}).dump());
  ASSERT_EQ(free_run.status, 200);
  const std::string reason = free_run.body["stop_reason"];
  EXPECT_TRUE(reason == "end_turn" || reason == "max_tokens") << reason;
  EXPECT_TRUE(free_run.body["stop_sequence"].is_null());
}

// A <think> block (forced by a grammar here) becomes a thinking content block, streamed as thinking_delta.
TEST_F(Messages, ThinkingBlocks) {
  json b = message_body("Think first", 40,
                        {{"grammar", "root ::= \"<think>\" [a-z ]{3,12} \"</think>\" [a-z]{2,6}"},
                         {"temperature", 0},
                         {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
                         {"max_tokens", 2048}});
  Reply r = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& c = r.body["content"];
  ASSERT_EQ(c.size(), 2u) << r.raw;
  EXPECT_EQ(c[0]["type"], "thinking");
  EXPECT_GE(c[0]["thinking"].get<std::string>().size(), 3u);
  EXPECT_TRUE(c[0].contains("signature"));
  EXPECT_EQ(c[1]["type"], "text");
  EXPECT_EQ(c[1]["text"].get<std::string>().find("<think>"), std::string::npos);
  EXPECT_EQ(r.body["stop_reason"], "end_turn");
  b["stream"] = true;
  Stream s = parse_events(post(*server_, "/v1/messages", b.dump()).raw);
  EXPECT_EQ(s.content, c);
  bool saw_thinking_delta = false;
  for (const json& e : s.events)
    saw_thinking_delta =
        saw_thinking_delta || (e["type"] == "content_block_delta" && e["delta"]["type"] == "thinking_delta");
  EXPECT_TRUE(saw_thinking_delta);
  // A thinking block sent back in an assistant turn is accepted (it goes to the template's reasoning).
  json follow = message_body("Again", 4, {{"temperature", 0}});
  follow["messages"] = json::array({{{"role", "user"}, {"content", "Think first"}},
                                    {{"role", "assistant"}, {"content", c}},
                                    {{"role", "user"}, {"content", "Again"}}});
  EXPECT_EQ(post(*server_, "/v1/messages", follow.dump()).status, 200);
}

// thinking.budget_tokens ends the <think> block at the budget: a model whose template opens <think> in the
// prompt (as QwQ's and DeepSeek-R1's do), kept from closing it and from ending (logit_bias), thinks for
// exactly budget_tokens tokens (the chat route's reasoning for max_tokens = budget, same prompt), then
// answers in a text block until max_tokens. Streaming gives the same blocks. (~2 x 1100 tokens of a tiny
// model with Qwen3's 151k vocabulary.)
TEST(MessagesBudget, ThinkingEndsAtBudgetTokens) {
  auto vocab = gguf::File::open(minfer::test::fixture_path("tokenizer/qwen3-vocab.gguf"));
  if (!vocab.ok()) GTEST_SKIP() << "no qwen3 vocabulary fixture";
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3");
  o.seed = 5;
  o.vocab_source = &*vocab;
  auto w = tools::make_synthetic_model(o);
  ASSERT_TRUE(w.ok());
  w->metadata().set(
      "tokenizer.chat_template",
      gguf::Value::string("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n"
                          "{% endif %}"));
  const std::string path = minfer::test::temp_dir() + "/opens-think.gguf";
  ASSERT_TRUE(w->write(path).ok());
  TestServerOptions so;
  so.model_path = path;
  so.n_ctx = 2048;
  TestServer server(so);
  ASSERT_TRUE(server.ok());
  const tokenizer::Tokenizer& tok = server.engine().tokenizer();
  json bias = json::object();
  for (int32_t id : tok.eog_ids()) bias[std::to_string(id)] = -100;
  for (int32_t id : tok.encode("</think>", /*add_special=*/false, /*parse_special=*/true))
    bias[std::to_string(id)] = -100;
  constexpr int kBudget = 1024, kMax = 1100;
  json b = message_body("Think about it", kMax,
                        {{"temperature", 0},
                         {"logit_bias", bias},
                         {"thinking", {{"type", "enabled"}, {"budget_tokens", kBudget}}}});
  Reply r = post(server, "/v1/messages", b.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& c = r.body["content"];
  ASSERT_EQ(c.size(), 2u) << r.raw;
  ASSERT_EQ(c[0]["type"], "thinking");
  ASSERT_EQ(c[1]["type"], "text");
  EXPECT_FALSE(c[1]["text"].get<std::string>().empty());
  EXPECT_EQ(r.body["stop_reason"], "max_tokens");
  EXPECT_EQ(r.body["usage"]["output_tokens"], kMax) << r.raw;
  // The same prompt on the chat route, stopped by max_tokens at the budget: the same reasoning.
  json chat = {{"model", "tiny"},
               {"messages", {{{"role", "user"}, {"content", "Think about it"}}}},
               {"max_tokens", kBudget},
               {"temperature", 0},
               {"logit_bias", bias}};
  Reply cr = post(server, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(cr.status, 200) << cr.raw;
  auto trimmed = [](std::string t) {
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t;
  };
  EXPECT_EQ(trimmed(c[0]["thinking"].get<std::string>()),
            trimmed(cr.body["choices"][0]["message"]["reasoning_content"].get<std::string>()));
  b["stream"] = true;
  Stream s = parse_events(post(server, "/v1/messages", b.dump()).raw);
  EXPECT_TRUE(s.well_formed);
  EXPECT_EQ(s.content, c);
  EXPECT_EQ(s.message["stop_reason"], "max_tokens");
}

TEST_F(Messages, ErrorsInAnthropicShape) {
  auto send = [&](const json& b) { return post(*server_, "/v1/messages", b.dump()); };
  json no_max = message_body("x", 1);
  no_max.erase("max_tokens");
  expect_anthropic_error(send(no_max), 400, "invalid_request_error", "max_tokens");
  expect_anthropic_error(send(message_body("x", 1, {{"frobnicate", 1}})), 400, "invalid_request_error",
                         "frobnicate");
  expect_anthropic_error(send(message_body("x", 1, {{"temperature", 1.5}})), 400, "invalid_request_error",
                         "temperature");
  expect_anthropic_error(send(message_body("x", 0)), 400, "invalid_request_error", "max_tokens");
  json image = message_body("x", 1);
  image["messages"][0]["content"] = json::array({{{"type", "image"}, {"source", json::object()}}});
  expect_anthropic_error(send(image), 400, "invalid_request_error", "'image' is not supported");
  json prefill = message_body("x", 1);
  prefill["messages"].push_back({{"role", "assistant"}, {"content", "Sure"}});
  expect_anthropic_error(send(prefill), 400, "invalid_request_error", "prefill");
  json bad_role = message_body("x", 1);
  bad_role["messages"][0]["role"] = "system";
  expect_anthropic_error(send(bad_role), 400, "invalid_request_error", "top-level 'system'");
  expect_anthropic_error(send(message_body("x", 1, {{"tool_choice", {{"type", "any"}}}})), 400,
                         "invalid_request_error", "tools");
  expect_anthropic_error(
      send(message_body("x", 1, {{"tools", {{{"type", "web_search_20250305"}, {"name", "w"}}}}})), 400,
      "invalid_request_error", "web_search_20250305");
  expect_anthropic_error(
      send(message_body("x", 1, {{"thinking", {{"type", "enabled"}, {"budget_tokens", 10}}}})), 400,
      "invalid_request_error", "budget_tokens");
  json other = message_body("x", 1);
  other["model"] = "claude-nonesuch";
  expect_anthropic_error(send(other), 404, "not_found_error", "claude-nonesuch");
  Reply not_json = post(*server_, "/v1/messages", "{nope");
  expect_anthropic_error(not_json, 400, "invalid_request_error", "JSON");
  std::string long_text;
  for (int i = 0; i < 900; ++i) long_text += "word ";
  expect_anthropic_error(send(message_body(long_text, 1)), 400, "invalid_request_error",
                         "prompt is too long");
  Reply get_it = get(*server_, "/v1/messages");
  expect_anthropic_error(get_it, 405, "invalid_request_error", "POST");
  const std::string huge(2u << 20, 'a');
  expect_anthropic_error(post(*server_, "/v1/messages", message_body(huge, 1).dump()), 413,
                         "request_too_large", "max-body");
}

TEST_F(Messages, CountTokensMatchesUsage) {
  json b = message_body("How many tokens is this?", 2, {{"system", "You count."}, {"temperature", 0}});
  Reply r = post(*server_, "/v1/messages", b.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  json c = b;
  c.erase("max_tokens");
  c.erase("temperature");
  Reply n = post(*server_, "/v1/messages/count_tokens", c.dump());
  ASSERT_EQ(n.status, 200) << n.raw;
  ASSERT_EQ(n.body.size(), 1u) << n.raw;
  EXPECT_EQ(n.body["input_tokens"].get<int>(), r.body["usage"]["input_tokens"].get<int>() +
                                                   r.body["usage"]["cache_read_input_tokens"].get<int>());
  // count_tokens takes no generation fields, and validates like /v1/messages.
  expect_anthropic_error(post(*server_, "/v1/messages/count_tokens", b.dump()), 400, "invalid_request_error",
                         "max_tokens");
  c["messages"] = "nope";
  expect_anthropic_error(post(*server_, "/v1/messages/count_tokens", c.dump()), 400, "invalid_request_error",
                         "messages");
}

// Disconnecting mid-stream cancels the request.
TEST_F(Messages, ClientDisconnectCancels) {
  const std::string body =
      message_body("Go on forever", 900,
                   {{"stream", true}, {"logit_bias", eog_bias(*server_)}, {"temperature", 0}})
          .dump();
  const double cancelled0 = metric(get(*server_, "/metrics").raw, "minfer_requests_cancelled_total");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req =
      "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
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

TEST(MessagesAuth, XApiKeyAndBearerBothWork) {
  TestServerOptions o;
  o.api_key = "sekret";
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const std::string b = message_body("x", 2).dump();
  expect_anthropic_error(post(s, "/v1/messages", b), 401, "authentication_error", "API key");
  expect_anthropic_error(post_with(s, "/v1/messages", b, {{"x-api-key", "wrong"}}), 401,
                         "authentication_error", "API key");
  expect_anthropic_error(post(s, "/v1/messages", b, "wrong"), 401, "authentication_error", "API key");
  EXPECT_EQ(
      post_with(s, "/v1/messages", b, {{"x-api-key", "sekret"}, {"anthropic-version", "2023-06-01"}}).status,
      200);
  EXPECT_EQ(post(s, "/v1/messages", b, "sekret").status, 200);
  json c = message_body("x", 2);
  c.erase("max_tokens");
  EXPECT_EQ(post_with(s, "/v1/messages/count_tokens", c.dump(), {{"x-api-key", "sekret"}}).status, 200);
  // The OpenAI routes keep their Bearer-only rule.
  const std::string chat =
      json{{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 2}}.dump();
  EXPECT_EQ(post_with(s, "/v1/chat/completions", chat, {{"x-api-key", "sekret"}}).status, 401);
}

// A full queue is Anthropic's 529 overloaded_error (Retry-After), and so is a draining server.
TEST(MessagesSaturation, QueueFullAndDrainAre529) {
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
  auto busy = std::async(std::launch::async, [&] {
    return post(s, "/v1/messages",
                message_body("long", 900, {{"logit_bias", eog_bias(s)}, {"temperature", 0}}).dump());
  });
  bool occupied = false;  // bounded, generously: a loaded or sanitized run can take seconds to accept it
  for (int i = 0; i < 3000 && !occupied; ++i) {
    occupied = metric(get(s, "/metrics").raw, "minfer_requests_in_flight") >= 1;
    if (!occupied) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!occupied) hold = false;
  ASSERT_TRUE(occupied) << "the first request was not accepted within 30 s";
  Reply r = post(s, "/v1/messages", message_body("x", 2, {{"stream", true}}).dump());
  expect_anthropic_error(r, 529, "overloaded_error", "no idle slot");
  EXPECT_EQ(r.header("Retry-After"), "1");
  hold = false;  // the busy request may now run
  s.server().begin_drain();
  expect_anthropic_error(post(s, "/v1/messages", message_body("x", 2).dump()), 529, "overloaded_error",
                         "draining");
  EXPECT_EQ(s.batcher().drain(std::chrono::milliseconds(60000)), 0);
  Reply done = busy.get();
  EXPECT_EQ(done.status, 200) << done.raw;
  EXPECT_EQ(done.body["usage"]["output_tokens"], 900);
}

// The real Qwen3 template: tool_choice any forces a tool_use block (id, name, input object); the second
// turn sends it back with a tool_result and renders through the template.
TEST(MessagesTools, ToolUseAcrossTwoTurns) {
  MINFER_REQUIRE_FIXTURES();
  TestServerOptions o;
  o.real_vocab = true;
  o.n_ctx = 2048;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const json tools = json::parse(R"([{"name":"get_weather","description":"Weather in a city",
      "input_schema":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],
      "additionalProperties":false}}])");
  json b = message_body("Weather in Paris?", 80,
                        {{"tools", tools}, {"tool_choice", {{"type", "any"}}}, {"temperature", 0}});
  Reply r = post(s, "/v1/messages", b.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["stop_reason"], "tool_use") << r.raw;
  const json& content = r.body["content"];
  ASSERT_FALSE(content.empty());
  const json& use = content.back();
  ASSERT_EQ(use["type"], "tool_use") << r.raw;
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(use["name"], "get_weather");
  ASSERT_TRUE(use["input"].is_object());
  EXPECT_TRUE(use["input"]["city"].is_string());
  // Streamed: a tool_use block start with an empty input, then input_json_delta adding up to the input.
  b["stream"] = true;
  Reply sr = post(s, "/v1/messages", b.dump());
  Stream st = parse_events(sr.raw);
  ASSERT_FALSE(st.content.empty()) << sr.raw;
  EXPECT_EQ(st.content.back()["input"], use["input"]) << sr.raw;
  EXPECT_EQ(st.content.back()["name"], "get_weather");
  EXPECT_EQ(st.message["stop_reason"], "tool_use");
  // Turn two: the assistant's tool_use and the user's tool_result.
  b.erase("stream");
  b["tool_choice"] = {{"type", "auto"}};
  b["max_tokens"] = 4;
  b["messages"].push_back({{"role", "assistant"}, {"content", content}});
  b["messages"].push_back(
      {{"role", "user"},
       {"content",
        json::array({{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", "21 C, sunny"}},
                     {{"type", "text"}, {"text", "Thanks"}}})}});
  Reply follow = post(s, "/v1/messages", b.dump());
  ASSERT_EQ(follow.status, 200) << follow.raw;
  const auto input_of = [](const Reply& x) {
    return x.body["usage"]["input_tokens"].get<int>() + x.body["usage"]["cache_read_input_tokens"].get<int>();
  };
  EXPECT_GT(input_of(follow), input_of(r));
  // The tool result reached the prompt: count_tokens of the same conversation matches, and differs when
  // the result text changes length.
  json c = b;
  c.erase("max_tokens");
  c.erase("temperature");
  Reply n = post(s, "/v1/messages/count_tokens", c.dump());
  ASSERT_EQ(n.status, 200) << n.raw;
  EXPECT_EQ(n.body["input_tokens"], input_of(follow));
  c["messages"][2]["content"][0]["content"] =
      json::array({{{"type", "text"}, {"text", "21 C, sunny, light wind from the west"}}});
  EXPECT_GT(post(s, "/v1/messages/count_tokens", c.dump()).body["input_tokens"].get<int>(), input_of(follow));
}

}  // namespace
}  // namespace minfer::server::test
