#include "server/embeddings.h"
#include "server/sse.h"

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace minfer::server {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kEmbeddingFields[] = {"input", "model", "encoding_format", "dimensions", "user"};

HttpResponse json_reply(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

// Text as llama-server tokenizes an embeddings input: special tokens parsed, BOS/EOS added when the
// model's tokenizer asks for them.
std::vector<int32_t> tokenize_input(const tokenizer::Tokenizer& tok, const std::string& text) {
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
}

bool is_token_array(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& x : v) {
    if (!x.is_number_integer()) return false;
  }
  return true;
}

// `input` -> token sequences; an error names what was refused.
std::optional<ApiError> parse_input(const json& input, const tokenizer::Tokenizer& tok, int32_t n_vocab,
                                    std::vector<std::vector<int32_t>>* out) {
  const char* kShape = "'input' must be a string, an array of strings, an array of token ids or an array of "
                       "token-id arrays";
  auto tokens_of = [&](const json& arr, size_t index) -> std::optional<ApiError> {
    std::vector<int32_t> ids;
    for (const json& x : arr) {
      const int64_t id = x.get<int64_t>();
      if (id < 0 || id >= n_vocab)
        return bad_request(fmt::format("input {}: token id {} is outside the vocabulary [0, {})", index, id, n_vocab),
                           "input");
      ids.push_back(static_cast<int32_t>(id));
    }
    out->push_back(std::move(ids));
    return std::nullopt;
  };
  if (input.is_string()) {
    out->push_back(tokenize_input(tok, input.get<std::string>()));
  } else if (is_token_array(input)) {
    if (auto err = tokens_of(input, 0)) return err;
  } else if (input.is_array() && !input.empty()) {
    for (size_t i = 0; i < input.size(); ++i) {
      const json& item = input[i];
      if (item.is_string()) {
        out->push_back(tokenize_input(tok, item.get<std::string>()));
      } else if (is_token_array(item)) {
        if (auto err = tokens_of(item, i)) return err;
      } else {
        return bad_request(fmt::format("{} (input[{}] is neither a string nor a non-empty token-id array)", kShape, i),
                           "input");
      }
    }
  } else {
    return bad_request(input.is_array() ? "'input' must not be empty" : kShape, "input");
  }
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].empty()) return bad_request(fmt::format("input {} is empty (no tokens to embed)", i), "input");
  }
  return std::nullopt;
}

}  // namespace

std::string base64_encode(const void* data, size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < n) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0u);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::unique_ptr<Embedder>> Embedder::create(const std::string& path, const engine::EngineOptions& options,
                                                   std::optional<engine::Pooling> pooling) {
  MINFER_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> engine, engine::Engine::load(path, options));
  if (!pooling) {
    MINFER_ASSIGN_OR_RETURN(pooling, engine::pooling_from_gguf(engine->file()));
    if (!pooling) {
      return invalid_argument(
          "the model declares no pooling ({}.pooling_type is absent: it is a generation model); "
          "choose one with --pooling mean|cls|last",
          engine->hparams().arch);
    }
  }
  return std::unique_ptr<Embedder>(new Embedder(std::move(engine), *pooling));
}

Result<std::vector<std::vector<float>>> Embedder::embed(const std::vector<std::vector<int32_t>>& inputs,
                                                        const std::function<bool()>& keep_going) {
  std::unique_lock<std::timed_mutex> lock(mu_, std::defer_lock);
  while (!lock.try_lock_for(std::chrono::milliseconds(100))) {
    if (keep_going && !keep_going()) return error(StatusCode::kUnavailable, "embeddings: cancelled");
  }
  return engine::embed(*engine_, inputs, pooling_, keep_going);
}

HttpResponse embeddings_response(const HttpRequest& req, Embedder* embedder, const std::string& model_id,
                                 const std::function<bool()>& client_alive) {
  if (embedder == nullptr) {
    return Server::error_response(
        bad_request("this server does not serve embeddings: start `minfer serve` with --embeddings (the model "
                    "is loaded for generation)"));
  }
  const json b = parse_json(req.body);
  if (b.is_discarded()) return Server::error_response(bad_request(invalid_json_message(req.body)));
  if (!b.is_object()) return Server::error_response(bad_request("the request body must be a JSON object"));
  if (auto e = unknown_field(b, {kEmbeddingFields}, "/v1/embeddings")) return Server::error_response(*e);
  if (!b.contains("input")) return Server::error_response(bad_request("'input' is required", "input"));
  if (b["input"].is_array() && !is_token_array(b["input"]) && b["input"].size() > kMaxEmbeddingInputs)
    return Server::error_response(bad_request(fmt::format("'input' holds {} inputs; at most {} per request",
                                                          b["input"].size(), kMaxEmbeddingInputs),
                                              "input"));
  bool base64 = false;
  if (b.contains("encoding_format") && !b["encoding_format"].is_null()) {
    const json& f = b["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      return Server::error_response(
          bad_request(fmt::format("'encoding_format' must be \"float\" or \"base64\" (got {})", f.dump()),
                      "encoding_format"));
    base64 = f == "base64";
  }
  const engine::Engine& engine = embedder->engine();
  const int32_t n_embd = engine.hparams().n_embd;
  int32_t dimensions = n_embd;
  if (b.contains("dimensions") && !b["dimensions"].is_null()) {
    const json& d = b["dimensions"];
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > n_embd)
      return Server::error_response(bad_request(
          fmt::format("'dimensions' must be an integer in [1, {}] (the model's embedding size); got {}", n_embd,
                      d.dump()),
          "dimensions"));
    dimensions = d.get<int32_t>();
  }
  if (embedder->pooling() == engine::Pooling::kNone) {
    return Server::error_response(
        bad_request("pooling 'none' gives one vector per token, which /v1/embeddings cannot return; start the "
                    "server with --pooling mean|cls|last"));
  }
  std::vector<std::vector<int32_t>> inputs;
  if (auto err = parse_input(b["input"], engine.tokenizer(), engine.n_vocab(), &inputs))
    return Server::error_response(*err);
  int64_t n_tokens = 0;
  for (const auto& in : inputs) n_tokens += static_cast<int64_t>(in.size());
  if (n_tokens > kMaxEmbeddingTokens)
    return Server::error_response(bad_request(
        fmt::format("the inputs hold {} tokens; at most {} per request", n_tokens, kMaxEmbeddingTokens),
        "input"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (static_cast<int64_t>(inputs[i].size()) > engine.n_ctx()) {
      return Server::error_response(bad_request(
          fmt::format("input {} has {} tokens, more than the context of {} tokens (-c)", i, inputs[i].size(),
                      engine.n_ctx()),
          "input"));
    }
  }
  auto vectors = embedder->embed(inputs, client_alive);
  if (!vectors.ok()) {
    if (client_alive && !client_alive())
      return Server::error_response({499, "client closed the connection", "invalid_request_error", {}});
    return Server::error_response(api_error_from_status(vectors.status()));
  }
  json data = json::array();
  for (size_t i = 0; i < vectors->size(); ++i) {
    std::vector<float>& v = (*vectors)[i];
    if (dimensions < n_embd) {  // Matryoshka-style: the leading values, made unit length again
      v.resize(static_cast<size_t>(dimensions));
      engine::l2_normalize(&v);
    }
    json item = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32");
      item["embedding"] = base64_encode(v.data(), v.size() * sizeof(float));
    } else {
      item["embedding"] = v;
    }
    data.push_back(std::move(item));
  }
  return json_reply(200, {{"object", "list"},
                          {"data", std::move(data)},
                          {"model", model_id},
                          {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
}

}  // namespace minfer::server
