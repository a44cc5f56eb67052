// POST /v1/responses and GET /v1/responses/{id}: the OpenAI Responses API as a thin translation onto the
// chat-completions machinery. A Responses body becomes the equivalent chat-completions body (input items ->
// messages, flat function tools -> chat tools, text.format -> response_format, max_output_tokens ->
// max_tokens) which parse_chat_request validates; the same template, Batcher, grammars, ChoiceAssembler
// (tool-call parsing, <think> split) then run, and the assembled deltas become Responses output items
// (reasoning, message/output_text, function_call) or their streamed events (response.created ...
// response.completed, each with a sequence_number). The Server's route functions live in
// responses_api.cpp; this header holds the pieces they share.
//
//   ResponsesStore store(100);                      // --responses-store 100
//   ResponsesRequest rr;
//   if (auto err = translate_responses_request(body, store, &rr)) return error(*err);
//   parse_chat_request(rr.chat_body.dump(), limits, &chat);   // then generation as for chat completions
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace minfer::server {

// Finished responses kept for `previous_response_id` and GET /v1/responses/{id} (requests with
// store: true). Bounded: at capacity the oldest entry is evicted. capacity 0 keeps nothing (store: true is
// then refused). Thread-safe.
class ResponsesStore {
 public:
  struct Entry {
    nlohmann::ordered_json response;  // the response object as returned
    nlohmann::ordered_json messages;  // the conversation so far as chat messages (no instructions)
  };
  explicit ResponsesStore(int32_t capacity) : capacity_(capacity) {}
  int32_t capacity() const { return capacity_; }
  void put(const std::string& id, Entry entry);
  std::optional<Entry> get(const std::string& id) const;
  size_t size() const;

 private:
  int32_t capacity_;
  mutable std::mutex mu_;
  std::deque<std::string> order_;  // oldest first
  std::unordered_map<std::string, Entry> entries_;
};

struct ResponsesRequest {
  nlohmann::ordered_json chat_body;  // the equivalent chat-completions request
  size_t n_instruction_messages = 0;  // leading messages of chat_body that came from `instructions`
  bool stream = false;
  bool store = false;
  std::string model;
  std::string previous_response_id;
  // Echoed in the response object: instructions, max_output_tokens, tools, tool_choice, text, reasoning,
  // temperature, top_p, parallel_tool_calls, metadata, user (already in the Responses shapes).
  nlohmann::ordered_json echo;
};

// Validates a Responses body (every unknown or unsupported field is a 400 naming it) and translates it.
// previous_response_id is resolved through `store` (unknown or evicted: 404).
std::optional<ApiError> translate_responses_request(std::string_view body, const ResponsesStore& store,
                                                    ResponsesRequest* out);

}  // namespace minfer::server
