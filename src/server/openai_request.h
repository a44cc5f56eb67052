// OpenAI request bodies (chat completions, legacy completions) -> one validated OpenAiRequest: every
// field is type-checked and range-checked here, before anything touches the model, and a refusal is an
// ApiError naming the field. Messages are normalised for the chat template (content parts joined, tool
// call arguments as objects); the template itself is applied by the routes, not here.
//
//   RequestLimits limits{.n_vocab = 151936, .n_slots = 4, .defaults = cli_sampling};
//   OpenAiRequest req;
//   if (auto err = parse_chat_request(body, limits, &req)) return error_response(*err);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "sampling/config.h"
#include "server/api_error.h"
#include "server/tool_calls.h"

namespace minfer::server {

enum class Endpoint { kChat, kCompletion };

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed: the function that must be called
};

struct RequestLimits {
  int32_t n_vocab = 0;
  int32_t n_slots = 1;               // `n` may be at most this (each choice takes a slot)
  sampling::SamplerConfig defaults;  // the server's sampling flags; request fields override them
  // The model's tool-call syntax (detect_tool_call_format of its chat template): the forced-call grammar
  // of tool_choice "required"/named is written in it.
  ToolCallFormat tool_format = ToolCallFormat::kHermes;
};

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;  // "" when the client sent none

  // Chat: messages (normalised), tools and chat_template_kwargs, ready for ChatTemplate::render.
  chat::ChatInputs chat;
  // Completions: the prompt as text, or as token ids (no template either way).
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;

  int32_t n_predict = -1;  // max_tokens / max_completion_tokens / n_predict; -1: until EOG or context full
  int32_t n = 1;
  std::vector<std::string> stop;
  sampling::SamplerConfig sampling;  // defaults + request fields; grammar holds any schema/tool grammar
  int32_t n_top_logprobs = -1;       // -1: no logprobs
  bool stream = false;
  bool include_usage = false;

  nlohmann::ordered_json tools;  // the request's tools array (null when none)
  ToolChoice tool_choice;
  bool parallel_tool_calls = false;
  bool has_user_grammar = false;  // `grammar` given: it wins over the tool grammar
  ToolCallFormat tool_format = ToolCallFormat::kHermes;  // from RequestLimits: how the answer's calls are parsed
};

// Parse and validate; nullopt on success. Errors are 400 invalid_request_error naming the field.
std::optional<ApiError> parse_chat_request(std::string_view body, const RequestLimits& limits,
                                           OpenAiRequest* out);
std::optional<ApiError> parse_completion_request(std::string_view body, const RequestLimits& limits,
                                                 OpenAiRequest* out);

}  // namespace minfer::server
