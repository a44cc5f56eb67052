// POST /v1/responses and GET /v1/responses/{id} on the real server over loopback (tiny generated model):
// the response object, streamed event framing (event names, sequence numbers, the documented order) equal
// to the non-streamed answer, max_output_tokens -> incomplete, reasoning items, function calls across two
// turns, structured output, the bounded store with previous_response_id, 404s, field errors, auth and a
// failure after the stream started.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "server/test_server.h"

namespace minfer::server::test {
namespace {

// One streamed event: the `event:` name and its JSON payload.
struct Event {
  std::string name;
  json data;
};

std::vector<Event> parse_events(const std::string& body) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string frame = body.substr(pos, end - pos);
    pos = end + 2;
    if (frame.empty()) continue;
    Event e;
    size_t line_start = 0;
    while (line_start < frame.size()) {
      size_t nl = frame.find('\n', line_start);
      if (nl == std::string::npos) nl = frame.size();
      const std::string line = frame.substr(line_start, nl - line_start);
      if (line.rfind("event: ", 0) == 0) e.name = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data = json::parse(line.substr(6), nullptr, false);
      line_start = nl + 1;
    }
    out.push_back(std::move(e));
  }
  return out;
}

// Checks the framing every stream must have and returns the events.
std::vector<Event> checked_events(const Reply& r) {
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_NE(r.header("Content-Type").find("text/event-stream"), std::string::npos);
  std::vector<Event> ev = parse_events(r.raw);
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_FALSE(ev[i].data.is_discarded()) << r.raw;
    EXPECT_EQ(ev[i].data.value("type", ""), ev[i].name) << "frame " << i;
    EXPECT_EQ(ev[i].data.value("sequence_number", -1), static_cast<int64_t>(i)) << "frame " << i;
  }
  EXPECT_EQ(r.raw.find("[DONE]"), std::string::npos);
  return ev;
}

std::string body(json fields) {
  json b = {{"model", "tiny"}, {"temperature", 0}};
  for (auto& [k, v] : fields.items()) b[k] = v;
  return b.dump();
}

// All output_text of a response object.
std::string output_text(const json& response) {
  std::string text;
  for (const auto& item : response["output"])
    if (item["type"] == "message")
      for (const auto& p : item["content"])
        if (p["type"] == "output_text") text += p["text"].get<std::string>();
  return text;
}

json no_eog_bias(TestServer& s) {
  json bias = json::object();
  for (int32_t id : s.engine().tokenizer().eog_ids()) bias[std::to_string(id)] = -100;
  return bias;
}

class Responses : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_ != nullptr && server_->ok()); }
  static TestServer* server_;
};
TestServer* Responses::server_ = nullptr;

TEST_F(Responses, ResponseObjectShape) {
  Reply r = post(*server_, "/v1/responses",
                 body({{"input", "Say something"}, {"max_output_tokens", 6}, {"metadata", {{"k", "v"}}},
                       {"instructions", "Be brief."}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& b = r.body;
  EXPECT_EQ(b["object"], "response");
  EXPECT_EQ(b["id"].get<std::string>().rfind("resp_", 0), 0u) << b["id"];
  EXPECT_TRUE(b["created_at"].is_number_integer());
  EXPECT_EQ(b["model"], "tiny");
  EXPECT_EQ(b["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(b["instructions"], "Be brief.");
  EXPECT_EQ(b["max_output_tokens"], 6);
  EXPECT_EQ(b["store"], false);
  EXPECT_TRUE(b["error"].is_null());
  EXPECT_TRUE(b["status"] == "completed" || b["status"] == "incomplete") << b["status"];
  ASSERT_EQ(b["output"].size(), 1u) << r.raw;
  const json& msg = b["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_TRUE(msg["content"][0]["annotations"].is_array());
  const json& u = b["usage"];
  EXPECT_GT(u["input_tokens"].get<int>(), 0);
  EXPECT_LE(u["output_tokens"].get<int>(), 6);
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int>() + u["output_tokens"].get<int>());
  EXPECT_TRUE(u["input_tokens_details"]["cached_tokens"].is_number_integer());
  EXPECT_TRUE(u["output_tokens_details"]["reasoning_tokens"].is_number_integer());
  // The same answer as the chat route gives for the same conversation.
  json chat = {{"model", "tiny"},
               {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Say something"}}}},
               {"max_tokens", 6},
               {"temperature", 0}};
  Reply c = post(*server_, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(c.status, 200) << c.raw;
  EXPECT_EQ(output_text(b), c.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(u["input_tokens"], c.body["usage"]["prompt_tokens"]);
}

TEST_F(Responses, MaxOutputTokensMakesItIncomplete) {
  Reply r = post(*server_, "/v1/responses",
                 body({{"input", "Go on"}, {"max_output_tokens", 5}, {"logit_bias", no_eog_bias(*server_)}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "incomplete");
  EXPECT_EQ(r.body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r.body["usage"]["output_tokens"], 5);
  EXPECT_EQ(r.body["output"][0]["status"], "incomplete");
  // Streamed: the terminal event is response.incomplete.
  Reply s = post(*server_, "/v1/responses",
                 body({{"input", "Go on"}, {"max_output_tokens", 5}, {"stream", true},
                       {"logit_bias", no_eog_bias(*server_)}}));
  auto ev = checked_events(s);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().name, "response.incomplete");
  EXPECT_EQ(ev.back().data["response"]["incomplete_details"]["reason"], "max_output_tokens");
}

TEST_F(Responses, StreamFramingEqualsNonStreamed) {
  const json fields = {{"input", json::array({{{"role", "user"},
                                               {"content", {{{"type", "input_text"}, {"text", "Tell me"}}}}}})},
                       {"max_output_tokens", 12}};
  Reply plain = post(*server_, "/v1/responses", body(fields));
  ASSERT_EQ(plain.status, 200) << plain.raw;
  json sf = fields;
  sf["stream"] = true;
  auto ev = checked_events(post(*server_, "/v1/responses", body(sf)));
  ASSERT_GE(ev.size(), 8u);
  EXPECT_EQ(ev[0].name, "response.created");
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(ev[1].name, "response.in_progress");
  EXPECT_EQ(ev[2].name, "response.output_item.added");
  EXPECT_EQ(ev[2].data["item"]["type"], "message");
  EXPECT_EQ(ev[3].name, "response.content_part.added");
  std::string deltas;
  size_t i = 4;
  for (; i < ev.size() && ev[i].name == "response.output_text.delta"; ++i) {
    EXPECT_EQ(ev[i].data["item_id"], ev[2].data["item"]["id"]);
    deltas += ev[i].data["delta"].get<std::string>();
  }
  ASSERT_LE(i + 4, ev.size());
  EXPECT_EQ(ev[i].name, "response.output_text.done");
  EXPECT_EQ(ev[i].data["text"], deltas);
  EXPECT_EQ(ev[i + 1].name, "response.content_part.done");
  EXPECT_EQ(ev[i + 2].name, "response.output_item.done");
  const std::string last = plain.body["status"] == "completed" ? "response.completed" : "response.incomplete";
  EXPECT_EQ(ev[i + 3].name, last);
  EXPECT_EQ(i + 4, ev.size());
  EXPECT_EQ(deltas, output_text(plain.body));
  const json& final_response = ev.back().data["response"];
  EXPECT_EQ(output_text(final_response), output_text(plain.body));
  EXPECT_EQ(final_response["usage"]["output_tokens"], plain.body["usage"]["output_tokens"]);
  EXPECT_EQ(final_response["id"], ev[0].data["response"]["id"]);
}

// A forced <think> block (grammar) becomes a reasoning item before the message, streamed and not.
TEST_F(Responses, ThinkBlockIsAReasoningItem) {
  const json fields = {{"input", "Think first"},
                       {"max_output_tokens", 40},
                       {"reasoning", {{"effort", "medium"}}},
                       {"grammar", "root ::= \"<think>\" [a-z ]{3,12} \"</think>\" [a-z]{2,6}"}};
  Reply r = post(*server_, "/v1/responses", body(fields));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& out = r.body["output"];
  ASSERT_EQ(out.size(), 2u) << r.raw;
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["id"].get<std::string>().rfind("rs_", 0), 0u);
  const std::string thought = out[0]["content"][0]["text"].get<std::string>();
  EXPECT_GE(thought.size(), 3u);
  EXPECT_EQ(out[0]["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(out[1]["type"], "message");
  EXPECT_EQ(output_text(r.body).find("<think>"), std::string::npos);
  EXPECT_GT(r.body["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>(), 0);
  EXPECT_EQ(r.body["reasoning"]["effort"], "medium");
  json sf = fields;
  sf["stream"] = true;
  auto ev = checked_events(post(*server_, "/v1/responses", body(sf)));
  std::string reasoning, text;
  for (const auto& e : ev) {
    if (e.name == "response.reasoning_text.delta") reasoning += e.data["delta"].get<std::string>();
    if (e.name == "response.output_text.delta") text += e.data["delta"].get<std::string>();
  }
  EXPECT_EQ(reasoning, thought);
  EXPECT_EQ(text, output_text(r.body));
  ASSERT_FALSE(ev.empty());
  json streamed_out = ev.back().data["response"]["output"];
  json plain_out = out;
  for (auto* o : {&streamed_out, &plain_out})
    for (auto& item : *o) item.erase("id");  // fresh ids per response
  EXPECT_EQ(streamed_out, plain_out);
}

// text.format json_schema / json_object run through the grammar compiler: the text parses and fits.
TEST_F(Responses, StructuredOutput) {
  const json schema = {{"type", "object"},
                       {"properties", {{"color", {{"type", "string"}, {"enum", {"red", "green"}}}}}},
                       {"required", {"color"}},
                       {"additionalProperties", false}};
  Reply r = post(*server_, "/v1/responses",
                 body({{"input", "A colour?"},
                       {"max_output_tokens", 60},
                       {"text", {{"format", {{"type", "json_schema"}, {"name", "c"}, {"schema", schema}}}}}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  json parsed = json::parse(output_text(r.body), nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << r.raw;
  EXPECT_TRUE(parsed["color"] == "red" || parsed["color"] == "green") << parsed;
  EXPECT_EQ(r.body["text"]["format"]["type"], "json_schema");
  Reply o = post(*server_, "/v1/responses",
                 body({{"input", "JSON"}, {"max_output_tokens", 3}, {"text", {{"format", {{"type", "json_object"}}}}}}));
  ASSERT_EQ(o.status, 200) << o.raw;
  EXPECT_EQ(output_text(o.body).rfind("{", 0), 0u) << o.raw;
  Reply bad = post(*server_, "/v1/responses",
                   body({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"schema", 3}}}}}}));
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "text.format.schema");
}

// Store off by default; store: true keeps it for GET and previous_response_id; unknown ids are 404.
TEST_F(Responses, StoreGetAndPreviousResponseId) {
  Reply unstored = post(*server_, "/v1/responses", body({{"input", "Hello"}, {"max_output_tokens", 3}}));
  ASSERT_EQ(unstored.status, 200) << unstored.raw;
  Reply g0 = get(*server_, "/v1/responses/" + unstored.body["id"].get<std::string>());
  EXPECT_EQ(g0.status, 404) << g0.raw;
  EXPECT_EQ(g0.body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(g0.body["error"]["message"].is_string());

  Reply first = post(*server_, "/v1/responses",
                     body({{"input", "My name is Ada."}, {"max_output_tokens", 4}, {"store", true},
                           {"instructions", "Answer briefly."}}));
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(first.body["store"], true);
  const std::string id = first.body["id"].get<std::string>();
  Reply g = get(*server_, "/v1/responses/" + id);
  ASSERT_EQ(g.status, 200) << g.raw;
  EXPECT_EQ(g.body, first.body);

  Reply second = post(*server_, "/v1/responses",
                      body({{"input", "What is my name?"}, {"max_output_tokens", 4}, {"previous_response_id", id},
                            {"instructions", "Answer briefly."}}));
  ASSERT_EQ(second.status, 200) << second.raw;
  EXPECT_EQ(second.body["previous_response_id"], id);
  // The second prompt holds the first exchange, so it is longer than the first prompt plus its answer.
  EXPECT_GT(second.body["usage"]["input_tokens"].get<int>(),
            first.body["usage"]["input_tokens"].get<int>() + first.body["usage"]["output_tokens"].get<int>() - 1);
  // ... and is the same conversation the chat route renders from explicit messages.
  json msgs = {{{"role", "system"}, {"content", "Answer briefly."}},
               {{"role", "user"}, {"content", "My name is Ada."}},
               {{"role", "assistant"}, {"content", output_text(first.body)}},
               {{"role", "user"}, {"content", "What is my name?"}}};
  Reply chat = post(*server_, "/v1/chat/completions",
                    json({{"messages", msgs}, {"max_tokens", 4}, {"temperature", 0}}).dump());
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(second.body["usage"]["input_tokens"], chat.body["usage"]["prompt_tokens"]);
  EXPECT_EQ(output_text(second.body), chat.body["choices"][0]["message"]["content"]);

  Reply missing = post(*server_, "/v1/responses",
                       body({{"input", "x"}, {"previous_response_id", "resp_doesnotexist"}}));
  EXPECT_EQ(missing.status, 404) << missing.raw;
  EXPECT_EQ(missing.body["error"]["param"], "previous_response_id");
  EXPECT_NE(missing.body["error"]["message"].get<std::string>().find("resp_doesnotexist"), std::string::npos);
}

// Disconnecting mid-stream cancels the request (the slot is freed, nothing completes).
TEST_F(Responses, ClientDisconnectCancels) {
  const std::string b = body({{"input", "Go on forever"}, {"max_output_tokens", 900}, {"stream", true},
                              {"logit_bias", no_eog_bias(*server_)}});
  const double cancelled0 = metric(get(*server_, "/metrics").raw, "minfer_requests_cancelled_total");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req =
      "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(b.size()) + "\r\n\r\n" + b;
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

// While draining, both routes answer 503 with Retry-After.
TEST(ResponsesDrain, DrainingRefusesNewResponses) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  Reply stored = post(s, "/v1/responses", body({{"input", "hi"}, {"max_output_tokens", 2}, {"store", true}}));
  ASSERT_EQ(stored.status, 200) << stored.raw;
  s.server().begin_drain();
  Reply r = post(s, "/v1/responses", body({{"input", "hi"}, {"max_output_tokens", 2}}));
  EXPECT_EQ(r.status, 503) << r.raw;
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_EQ(get(s, "/v1/responses/" + stored.body["id"].get<std::string>()).status, 503);
}

TEST(ResponsesStore, TheOldestIsEvictedAndZeroRefusesStore) {
  TestServerOptions o;
  o.responses_store = 1;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  Reply a = post(s, "/v1/responses", body({{"input", "one"}, {"max_output_tokens", 2}, {"store", true}}));
  Reply b = post(s, "/v1/responses", body({{"input", "two"}, {"max_output_tokens", 2}, {"store", true}}));
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_EQ(get(s, "/v1/responses/" + a.body["id"].get<std::string>()).status, 404);
  EXPECT_EQ(get(s, "/v1/responses/" + b.body["id"].get<std::string>()).status, 200);
  Reply evicted = post(s, "/v1/responses",
                       body({{"input", "x"}, {"previous_response_id", a.body["id"]}, {"max_output_tokens", 2}}));
  EXPECT_EQ(evicted.status, 404) << evicted.raw;

  TestServerOptions z;
  z.responses_store = 0;
  TestServer none(z);
  ASSERT_TRUE(none.ok());
  Reply refused = post(none, "/v1/responses", body({{"input", "x"}, {"store", true}}));
  EXPECT_EQ(refused.status, 400) << refused.raw;
  EXPECT_EQ(refused.body["error"]["param"], "store");
  EXPECT_NE(refused.body["error"]["message"].get<std::string>().find("--responses-store"), std::string::npos);
}

TEST_F(Responses, FieldErrorsNameTheField) {
  auto expect_400 = [](const std::string& b, const std::string& param) {
    Reply r = post(*server_, "/v1/responses", b);
    EXPECT_EQ(r.status, 400) << b << " -> " << r.raw;
    EXPECT_EQ(r.body["error"]["type"], "invalid_request_error") << r.raw;
    EXPECT_EQ(r.body["error"]["param"], param) << b << " -> " << r.raw;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(param.substr(0, param.find('['))),
              std::string::npos)
        << r.raw;
  };
  expect_400(body({{"input", "x"}, {"frobnicate", 1}}), "frobnicate");
  expect_400(body({{"input", "x"}, {"stream_options", {{"include_obfuscation", false}}}}), "stream_options");
  expect_400(body({{"input", "x"}, {"temperature", 5}}), "temperature");
  expect_400(body({{"input", "x"}, {"top_p", 0}}), "top_p");
  expect_400(body({{"input", "x"}, {"max_output_tokens", 0}}), "max_output_tokens");
  expect_400(body({{"max_output_tokens", 3}}), "input");
  expect_400(body({{"input", 7}}), "input");
  expect_400(body({{"input", json::array({{{"role", "user"},
                                           {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}})}}),
             "input[0].content[0].type");
  expect_400(body({{"input", json::array({{{"type", "item_reference"}, {"id", "x"}}})}}), "input[0].type");
  expect_400(body({{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}), "tools[0].type");
  expect_400(body({{"input", "x"}, {"tool_choice", "required"}}), "tool_choice");
  expect_400(body({{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}), "text.format.type");
  expect_400(body({{"input", "x"}, {"reasoning", {{"effort", "huge"}}}}), "reasoning.effort");
  expect_400(body({{"input", "x"}, {"metadata", {{"k", 1}}}}), "metadata");
  expect_400(body({{"input", "x"}, {"include", {"reasoning.encrypted_content"}}}), "include");
  Reply bad_json = post(*server_, "/v1/responses", "{not json");
  EXPECT_EQ(bad_json.status, 400);
  Reply model = post(*server_, "/v1/responses", json({{"model", "other"}, {"input", "x"}}).dump());
  EXPECT_EQ(model.status, 404) << model.raw;
  EXPECT_EQ(model.body["error"]["param"], "model");
  Reply wrong_method = get(*server_, "/v1/responses");
  EXPECT_EQ(wrong_method.status, 405);
}

TEST(ResponsesAuth, ApiKeyGuardsBothRoutes) {
  TestServerOptions o;
  o.api_key = "sekret";
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const std::string b = body({{"input", "hi"}, {"max_output_tokens", 2}, {"store", true}});
  Reply no = post(s, "/v1/responses", b);
  EXPECT_EQ(no.status, 401) << no.raw;
  EXPECT_EQ(no.body["error"]["type"], "authentication_error");
  EXPECT_EQ(post(s, "/v1/responses", b, "wrong").status, 401);
  Reply yes = post(s, "/v1/responses", b, "sekret");
  ASSERT_EQ(yes.status, 200) << yes.raw;
  const std::string path = "/v1/responses/" + yes.body["id"].get<std::string>();
  EXPECT_EQ(get(s, path).status, 401);
  EXPECT_EQ(get(s, path, "sekret").status, 200);
}

// tool_choice required forces a function_call item (call_id, name, JSON arguments); its output goes back as
// function_call_output items, in one request and through previous_response_id.
TEST(ResponsesTools, FunctionCallAcrossTwoTurns) {
  MINFER_REQUIRE_FIXTURES();
  TestServerOptions o;
  o.real_vocab = true;
  o.n_ctx = 2048;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const json tools = json::parse(R"([{"type":"function","name":"get_weather","description":"Weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],
      "additionalProperties":false},"strict":true}])");
  const json fields = {{"input", "Weather in Paris?"}, {"tools", tools}, {"tool_choice", "required"},
                       {"max_output_tokens", 80}, {"store", true}};
  Reply r = post(s, "/v1/responses", body(fields));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "completed") << r.raw;
  ASSERT_EQ(r.body["output"].size(), 1u) << r.raw;
  const json& call = r.body["output"][0];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  json args = json::parse(call["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  EXPECT_TRUE(args["city"].is_string());
  EXPECT_EQ(r.body["tools"], tools);

  json sf = fields;
  sf["stream"] = true;
  auto ev = checked_events(post(s, "/v1/responses", body(sf)));
  std::vector<std::string> names;
  std::string arg_deltas;
  for (const auto& e : ev) {
    if (e.name != "response.function_call_arguments.delta") names.push_back(e.name);
    if (e.name == "response.function_call_arguments.delta") arg_deltas += e.data["delta"].get<std::string>();
  }
  const std::vector<std::string> want = {"response.created", "response.in_progress", "response.output_item.added",
                                         "response.function_call_arguments.done", "response.output_item.done",
                                         "response.completed"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(arg_deltas, call["arguments"]);

  // Turn two, by previous_response_id: the function's output.
  json turn2 = {{"previous_response_id", r.body["id"]},
                {"input", json::array({{{"type", "function_call_output"}, {"call_id", call["call_id"]},
                                        {"output", "{\"temp\": 21}"}}})},
                {"tools", tools},
                {"max_output_tokens", 4}};
  Reply two = post(s, "/v1/responses", body(turn2));
  ASSERT_EQ(two.status, 200) << two.raw;
  // Turn two with the whole history as items gives the same prompt.
  json items = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}},
                            {{"type", "function_call"}, {"call_id", call["call_id"]}, {"name", "get_weather"},
                             {"arguments", call["arguments"]}},
                            {{"type", "function_call_output"}, {"call_id", call["call_id"]},
                             {"output", "{\"temp\": 21}"}}});
  Reply explicit_two = post(s, "/v1/responses", body({{"input", items}, {"tools", tools}, {"max_output_tokens", 4}}));
  ASSERT_EQ(explicit_two.status, 200) << explicit_two.raw;
  EXPECT_EQ(two.body["usage"]["input_tokens"], explicit_two.body["usage"]["input_tokens"]);
  EXPECT_EQ(two.body["output"].size(), explicit_two.body["output"].size());
  EXPECT_GT(two.body["usage"]["input_tokens"].get<int>(), r.body["usage"]["input_tokens"].get<int>());
}

// A failed forward: 500 before any byte, or response.failed then error once the stream started.
TEST(ResponsesFault, AFailureAfterTheStreamStartedIsResponseFailed) {
  std::atomic<int> failures{2};
  TestServerOptions o;
  o.fault_injector = [&failures](int64_t) {
    return failures.fetch_sub(1) > 0 ? Status(StatusCode::kInternal, "injected forward failure") : Status();
  };
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  Reply r = post(s, "/v1/responses", body({{"input", "hello"}, {"max_output_tokens", 4}}));
  EXPECT_EQ(r.status, 500) << r.raw;
  EXPECT_EQ(r.body["error"]["type"], "server_error");
  auto ev = checked_events(post(s, "/v1/responses", body({{"input", "hello"}, {"max_output_tokens", 4},
                                                          {"stream", true}})));
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[0].name, "response.created");
  const Event& failed = ev[ev.size() - 2];
  EXPECT_EQ(failed.name, "response.failed");
  EXPECT_EQ(failed.data["response"]["status"], "failed");
  EXPECT_NE(failed.data["response"]["error"]["message"].get<std::string>().find("injected forward failure"),
            std::string::npos);
  EXPECT_EQ(ev.back().name, "error");
  EXPECT_EQ(post(s, "/v1/responses", body({{"input", "hello"}, {"max_output_tokens", 2}})).status, 200);
}

}  // namespace
}  // namespace minfer::server::test
