// Request validation: every 400 case of the issue names its field, and valid requests map onto the
// sampler config, chat template inputs and batch fields.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace minfer::server {
namespace {

RequestLimits limits() {
  RequestLimits l;
  l.n_vocab = 1000;
  l.n_slots = 4;
  l.defaults.temp = 0.8f;
  return l;
}

std::optional<ApiError> chat(const std::string& body, OpenAiRequest* out = nullptr) {
  OpenAiRequest tmp;
  return parse_chat_request(body, limits(), out != nullptr ? out : &tmp);
}

// Expects a 400 whose message contains `needle`.
void expect_400(const std::string& body, const std::string& needle, bool completions = false) {
  OpenAiRequest r;
  auto e =
      completions ? parse_completion_request(body, limits(), &r) : parse_chat_request(body, limits(), &r);
  ASSERT_TRUE(e.has_value()) << body;
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->type, "invalid_request_error");
  EXPECT_NE(e->message.find(needle), std::string::npos) << e->message;
  const auto j = e->to_json();
  for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(k)) << k;
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";

TEST(Request, MalformedOrMissing) {
  expect_400("{", "not valid JSON");
  // The reason and position come along (a lone surrogate is what Python's json lets through).
  expect_400(R"({"messages":[{"role":"user","content":"\ud800"}]})", "column");
  expect_400(R"({"messages":[{"role":"user","content":"\ud800"}]})", "surrogate");
  expect_400("[1]", "JSON object");
  expect_400("{}", "'messages' is required");
  expect_400(R"({"messages":"hi"})", "'messages' must be an array");
  expect_400(R"({"messages":[]})", "must not be empty");
  expect_400(R"({"messages":[{"content":"x"}]})", "role' is required");
  expect_400(R"({"messages":[{"role":"user"}]})", "content' is required");
  expect_400(R"({"messages":[{"role":"user","content":5}]})", "content' must be a string or an array");
  expect_400("{" + kMsgs + R"(,"max_tokens":"5"})", "'max_tokens' must be an integer");
  expect_400("{" + kMsgs + R"(,"temperature":"hot"})", "'temperature' must be a number");
  expect_400("{" + kMsgs + R"(,"stream":1})", "'stream' must be a boolean");
  expect_400("{" + kMsgs + R"(,"stop":5})", "'stop' must be a string or an array");
}

// JSON inside a string field (tool call arguments) is parsed too: nested past the limit it stays the
// string it was instead of overflowing the stack when copied.
TEST(Request, DeeplyNestedArgumentsStayAString) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  nlohmann::ordered_json b = {
      {"messages",
       {{{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep}}}}}}},
        {{"role", "user"}, {"content", "go"}}}}};
  OpenAiRequest r;
  ASSERT_FALSE(chat(b.dump(), &r).has_value());
  EXPECT_EQ(r.chat.messages[0]["tool_calls"][0]["function"]["arguments"], deep);
  expect_400(deep, "not valid JSON");
}

TEST(Request, UnknownRole) {
  expect_400(R"({"messages":[{"role":"wizard","content":"x"}]})", "unknown role 'wizard'");
}

TEST(Request, Ranges) {
  expect_400("{" + kMsgs + R"(,"max_tokens":0})", "'max_tokens' must be at least 1");
  expect_400("{" + kMsgs + R"(,"max_completion_tokens":-3})", "at least 1");
  expect_400("{" + kMsgs + R"(,"temperature":2.5})", "'temperature' must be in [0, 2]");
  expect_400("{" + kMsgs + R"(,"temperature":-0.1})", "'temperature'");
  expect_400("{" + kMsgs + R"(,"top_p":0})", "'top_p' must be in (0, 1]");
  expect_400("{" + kMsgs + R"(,"top_p":1.5})", "'top_p'");
  expect_400("{" + kMsgs + R"(,"n":0})", "'n' must be in [1, 4]");
  expect_400("{" + kMsgs + R"(,"n":5})", "'n' must be in [1, 4]");
  expect_400("{" + kMsgs + R"(,"logit_bias":{"1000":1}})",
             "token id 1000 is outside the vocabulary [0, 1000)");
  expect_400("{" + kMsgs + R"(,"logit_bias":{"-1":1}})", "outside the vocabulary");
  expect_400("{" + kMsgs + R"(,"logit_bias":{"abc":1}})", "not a token id");
  expect_400("{" + kMsgs + R"(,"stop":["a","b","c","d","e"]})", "at most 4");
  expect_400("{" + kMsgs + R"(,"presence_penalty":3})", "presence_penalty");
  expect_400("{" + kMsgs + R"(,"top_logprobs":21,"logprobs":true})", "'top_logprobs' must be in [0, 20]");
}

// Range errors of the sampler's own checks name the request's field (message and param), not the CLI
// flag the same check answers for `minfer run`.
TEST(Request, SamplingErrorsNameTheRequestField) {
  for (auto [field, value] :
       {std::pair{"min_p", "5"}, std::pair{"typical_p", "-1"}, std::pair{"repeat_penalty", "0"},
        std::pair{"xtc_threshold", "0.9"}, std::pair{"mirostat_tau", "0"}, std::pair{"mirostat_eta", "-2"},
        std::pair{"dry_base", "0.5"}, std::pair{"dry_multiplier", "-1"}}) {
    auto e = chat("{" + kMsgs + ",\"" + field + "\":" + value + "}");
    ASSERT_TRUE(e.has_value()) << field;
    EXPECT_EQ(e->param, field) << e->message;
    EXPECT_EQ(e->message.rfind(std::string("'") + field + "'", 0), 0u) << e->message;
    EXPECT_EQ(e->message.find("--"), std::string::npos) << e->message;
  }
}

TEST(Request, GrammarAndSchemaErrors) {
  expect_400("{" + kMsgs + R"(,"grammar":"root ::= \"a\"","response_format":{"type":"json_object"}})",
             "'grammar' cannot be combined");
  expect_400(
      "{" + kMsgs +
          R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object",
                 "properties":{"a":{"type":"number","multipleOf":2}}}}}})",
      "#/properties/a");
  expect_400("{" + kMsgs + R"(,"response_format":{"type":"yaml"}})", "'response_format.type'");
  // A grammar that does not parse is refused here, naming the field.
  auto e = chat("{" + kMsgs + R"(,"grammar":"root ::= undefined-rule"})");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "grammar");
  EXPECT_NE(e->message.find("undefined-rule"), std::string::npos) << e->message;
}

TEST(Request, ToolsAndToolChoice) {
  expect_400("{" + kMsgs + R"(,"tool_choice":"required"})", "requires 'tools'");
  expect_400("{" + kMsgs + R"(,"tools":[{"type":"function","function":{}}]})", "function.name");
  expect_400("{" + kMsgs + R"(,"tools":[{"type":"function","function":{"name":"f"}}],
             "tool_choice":{"type":"function","function":{"name":"g"}}})",
             "no tool named 'g'");
  OpenAiRequest r;
  ASSERT_FALSE(
      chat("{" + kMsgs + R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"x":{"type":"integer"}}}}}],"tool_choice":"required"})",
           &r));
  EXPECT_NE(r.sampling.grammar.find("<tool_call>"), std::string::npos);
  EXPECT_FALSE(r.chat.tools.is_null());
  // auto: no grammar, tools still rendered.
  ASSERT_FALSE(chat("{" + kMsgs + R"(,"tools":[{"type":"function","function":{"name":"f"}}]})", &r));
  EXPECT_TRUE(r.sampling.grammar.empty());
  EXPECT_EQ(r.chat.tools.size(), 1u);
  // A user grammar wins over the tool grammar.
  ASSERT_FALSE(
      chat("{" + kMsgs + R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required",
      "grammar":"root ::= \"x\""})",
           &r));
  EXPECT_EQ(r.sampling.grammar, "root ::= \"x\"");
  // none: tools are not given to the template.
  ASSERT_FALSE(chat(
      "{" + kMsgs + R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"})", &r));
  EXPECT_TRUE(r.chat.tools.is_null());
}

TEST(Request, MessagesAreNormalisedForTheTemplate) {
  OpenAiRequest r;
  ASSERT_FALSE(chat(R"({"messages":[
      {"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"f","arguments":"{\"x\": 1}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"42"}],
      "chat_template_kwargs":{"enable_thinking":false}})",
                    &r));
  const auto& m = r.chat.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "a\nb");
  EXPECT_EQ(m[2]["content"], "");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["x"], 1);  // parsed to an object
  EXPECT_EQ(m[3]["tool_call_id"], "call_1");
  EXPECT_EQ(r.chat.extra["enable_thinking"], false);
  EXPECT_TRUE(r.chat.add_generation_prompt);
  expect_400(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
             "content part type 'image_url' is not supported");
}

TEST(Request, FieldsMapOntoSamplingAndBatch) {
  OpenAiRequest r;
  ASSERT_FALSE(
      chat("{" + kMsgs + R"(,"model":"m","max_tokens":7,"temperature":0,"top_p":0.5,"n":2,"stop":"END",
      "seed":42,"presence_penalty":0.5,"frequency_penalty":-0.5,"logit_bias":{"5":-100,"6":2.5},
      "logprobs":true,"top_logprobs":3,"stream":true,"stream_options":{"include_usage":true},
      "top_k":7,"min_p":0.1,"typical_p":0.9,"repeat_penalty":1.1,"dry_multiplier":0.8,"xtc_probability":0.2,
      "mirostat":2,"mirostat_tau":4,"response_format":{"type":"json_object"}})",
           &r));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.n_predict, 7);
  EXPECT_EQ(r.sampling.temp, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.n_top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.sampling.mirostat, 2);
  EXPECT_FALSE(r.sampling.grammar.empty());  // json_object -> a grammar
  // max_completion_tokens wins over max_tokens; defaults come from the server flags.
  ASSERT_FALSE(chat("{" + kMsgs + R"(,"max_tokens":9,"max_completion_tokens":3})", &r));
  EXPECT_EQ(r.n_predict, 3);
  EXPECT_FLOAT_EQ(r.sampling.temp, 0.8f);
  EXPECT_EQ(r.n_top_logprobs, -1);
}

TEST(Request, CompletionsPrompt) {
  OpenAiRequest r;
  ASSERT_FALSE(parse_completion_request(R"({"prompt":"once upon"})", limits(), &r));
  EXPECT_EQ(r.prompt_text, "once upon");
  ASSERT_FALSE(parse_completion_request(R"({"prompt":[1,2,3],"logprobs":2})", limits(), &r));
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.n_top_logprobs, 2);
  expect_400(R"({})", "'prompt' is required", true);
  expect_400(R"({"prompt":[1,5000]})", "token id 5000 is outside", true);
  expect_400(R"({"prompt":[1,"a"]})", "array of token ids", true);
  expect_400(R"({"prompt":""})", "must not be empty", true);
  // Several prompts are refused by name, not read as something else.
  expect_400(R"({"prompt":["a","b"]})", "'prompt' holds 2 prompts", true);
  expect_400(R"({"prompt":[[1,2],[3]]})", "one prompt per request", true);
}

// Every field is read or refused by name (OpenAI: "Unrecognized request argument"); a typo is not ignored.
TEST(Request, UnknownFieldsAreRefusedByName) {
  expect_400("{" + kMsgs + R"(,"temprature":0.5})", "unknown field 'temprature'");
  expect_400("{" + kMsgs + R"(,"echo":true})", "unknown field 'echo'");
  expect_400(R"({"prompt":"x","suffix":"y"})", "unknown field 'suffix'", true);
  expect_400(R"({"prompt":"x","messages":[]})", "unknown field 'messages'", true);
  expect_400("{" + kMsgs + R"(,"prompt":"x"})", "unknown field 'prompt'");
  auto e = chat("{" + kMsgs + R"(,"service_tier":"flex"})");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "service_tier");
  expect_400("{" + kMsgs + R"(,"store":true})", "'store': true is not supported");
  expect_400("{" + kMsgs + R"(,"cache_prompt":"yes"})", "'cache_prompt'");
  // Every field the server reads, and the no-op `user`, `cache_prompt` and `store: false`, still pass.
  EXPECT_FALSE(
      chat("{" + kMsgs +
           R"(,"user":"u1","cache_prompt":false,"store":false,"top_k":5,"min_p":0.1,"n_predict":3,"seed":1,
      "chat_template_kwargs":{},"logprobs":true,"top_logprobs":2,"stop":["x"],"typical_p":1})"));
  OpenAiRequest r;
  EXPECT_FALSE(
      parse_completion_request(R"({"prompt":"x","user":"u","logprobs":1,"mirostat":0})", limits(), &r));
}

// chat_template_kwargs may not replace what the request's own fields give the template.
TEST(Request, TemplateKwargsCannotShadowTheRequest) {
  expect_400("{" + kMsgs + R"(,"chat_template_kwargs":{"messages":[]}})", "'chat_template_kwargs.messages'");
  expect_400("{" + kMsgs + R"(,"chat_template_kwargs":{"tools":[]}})", "'chat_template_kwargs.tools'");
  expect_400("{" + kMsgs + R"(,"chat_template_kwargs":{"add_generation_prompt":false}})",
             "chat_template_kwargs.add_generation_prompt");
  OpenAiRequest r;
  ASSERT_FALSE(chat("{" + kMsgs + R"(,"chat_template_kwargs":{"enable_thinking":false}})", &r));
  EXPECT_EQ(r.chat.extra["enable_thinking"], false);
}

// stream_options belongs to a stream: without 'stream': true it is refused, as OpenAI does.
TEST(Request, StreamOptionsNeedAStream) {
  expect_400("{" + kMsgs + R"(,"stream_options":{"include_usage":true}})",
             "only allowed with 'stream': true");
  expect_400("{" + kMsgs + R"(,"stream":false,"stream_options":{"include_usage":true}})", "'stream': true");
  expect_400("{" + kMsgs + R"(,"stream":true,"stream_options":{"include_obfuscation":true}})",
             "stream_options.include_obfuscation");
  OpenAiRequest r;
  ASSERT_FALSE(chat("{" + kMsgs + R"(,"stream":true,"stream_options":{"include_usage":true}})", &r));
  EXPECT_TRUE(r.include_usage);
}

}  // namespace
}  // namespace minfer::server
