// The Anthropic Messages API: POST /v1/messages and POST /v1/messages/count_tokens, as Claude Code and the
// Anthropic SDKs speak it. A thin translation onto the chat-completions machinery: the request becomes an
// OpenAI chat request (validated by parse_chat_request: samplers, tool grammar, template inputs), runs on
// the same Batcher, and the same ChoiceAssembler (reasoning split, tool-call parser) turns the output into
// Anthropic content blocks (thinking, text, tool_use), streamed as Anthropic's named SSE events or
// returned as one message. Errors take Anthropic's shape ({"type":"error","error":{type,message}}), with
// 529 overloaded_error where the OpenAI routes answer 503.
//
//   if (path == "/v1/messages") return anthropic_messages(server, request, client_alive);
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/server.h"

namespace minfer::server {

struct AnthropicRequest {
  OpenAiRequest chat;                       // the translated request (stop holds stop_sequences)
  std::vector<std::string> stop_sequences;  // as sent, for stop_sequence in the answer
  bool thinking = false;                    // thinking: {type: enabled}
  int32_t budget_tokens = 0;                // its budget_tokens: the <think> block is closed there
};

// Validates an Anthropic request body and translates it; nullopt on success. Unknown fields are a 400
// naming the field. count_tokens: the count_tokens body (no max_tokens, no sampling fields).
std::optional<ApiError> parse_anthropic_request(std::string_view body, const RequestLimits& limits,
                                                bool count_tokens, AnthropicRequest* out);

// Serves both routes (method, auth with x-api-key or Bearer, drain/loading, errors in Anthropic's shape).
HttpResponse anthropic_messages(Server& server, const HttpRequest& request,
                                const std::function<bool()>& client_alive);

// Anthropic's error type for an HTTP status (400 invalid_request_error, 401 authentication_error,
// 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 529 overloaded_error, 5xx api_error).
std::string anthropic_error_type(int status);
// {"type":"error","error":{"type":...,"message":...}}
nlohmann::ordered_json anthropic_error_json(int status, const std::string& message);

}  // namespace minfer::server
