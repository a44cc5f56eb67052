// POST /v1/embeddings (OpenAI's embeddings API, as llama-server answers it): `input` as a string, an
// array of strings, an array of token ids or an array of such arrays; `encoding_format` "float" (default)
// or "base64" (little-endian float32); `dimensions` keeps the first N values and renormalises them.
// Vectors are pooled (the model's <arch>.pooling_type or --pooling) and L2-normalised (engine/embedding.h).
//
// The Embedder holds an Engine of its own, loaded from the same GGUF (the weights are mmapped, so the pages
// are shared; its KV cache is its own), so embeddings never queue behind generation in the batcher nor
// touch its slots. Requests take turns on it; the inputs of one request are batched into shared decodes.
//
//   auto embedder = Embedder::create(model_path, engine_options, std::nullopt);   // pooling from the GGUF
//   server.set_embedder(embedder->get());           // without this the route answers 400 naming --embeddings
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/embedding.h"
#include "engine/engine.h"
#include "server/server.h"

namespace minfer::server {

class Embedder {
 public:
  // Loads the model for embeddings. `pooling` overrides the GGUF's; without either it is an error that
  // names --pooling (a generation model declares none). Pooling none is accepted here and refused per
  // request, as llama-server's OpenAI route does.
  static Result<std::unique_ptr<Embedder>> create(const std::string& path, const engine::EngineOptions& options,
                                                  std::optional<engine::Pooling> pooling);
  engine::Pooling pooling() const { return pooling_; }
  const engine::Engine& engine() const { return *engine_; }
  // Thread-safe: callers take turns. `keep_going` (when set) is polled while waiting for the turn and
  // between decodes; false gives up with kUnavailable "cancelled".
  Result<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int32_t>>& inputs,
                                                const std::function<bool()>& keep_going = {});

 private:
  Embedder(std::unique_ptr<engine::Engine> engine, engine::Pooling pooling)
      : engine_(std::move(engine)), pooling_(pooling) {}
  std::unique_ptr<engine::Engine> engine_;
  engine::Pooling pooling_;
  std::timed_mutex mu_;
};

// At most this many inputs and tokens (all inputs together) per request, as OpenAI bounds its route.
constexpr size_t kMaxEmbeddingInputs = 2048;
constexpr int64_t kMaxEmbeddingTokens = 300000;

// The route: validates the body (unknown fields and the limits above are 400s naming them), tokenizes,
// embeds and answers {"object":"list","data":[...],"model","usage"}. `embedder` null: 400 saying that the
// server was started without --embeddings. `client_alive` false stops the work (499).
HttpResponse embeddings_response(const HttpRequest& request, Embedder* embedder, const std::string& model_id,
                                 const std::function<bool()>& client_alive = {});

// Standard base64 (RFC 4648, with padding) of `n` bytes.
std::string base64_encode(const void* data, size_t n);

}  // namespace minfer::server
