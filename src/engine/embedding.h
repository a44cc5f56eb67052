// Embeddings: an input's final-norm hidden states (Engine::Output::kEmbeddings) pooled into one vector and
// L2-normalised, as llama.cpp's embedding contexts and llama-server's /v1/embeddings produce them.
//
//   MINFER_ASSIGN_OR_RETURN(auto pooling, pooling_for(engine->file(), /*override=*/std::nullopt));
//   MINFER_ASSIGN_OR_RETURN(auto vectors, embed(*engine, {{785, 2062}, {9707}}, pooling));  // n_embd each
//
// Pooling follows llama.cpp's <arch>.pooling_type (1 mean, 2 cls, 3 last); attention stays causal, as
// llama.cpp runs the qwen decoders it embeds with. embed() owns the engine's KV cache while it runs: it
// expects an empty cache and leaves it empty, so the engine must not be shared with a Batcher.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "gguf/reader.h"

namespace minfer::engine {

enum class Pooling { kNone, kMean, kCls, kLast };

std::string_view pooling_name(Pooling pooling);  // "none", "mean", "cls", "last"
// "none" | "mean" | "cls" | "last"; anything else is an error naming the value and the choices.
Result<Pooling> parse_pooling(std::string_view name);
// The model's <arch>.pooling_type: nullopt when the key is absent (a generation model); an error for a
// value minfer does not pool with (rank: 4) or does not know.
Result<std::optional<Pooling>> pooling_from_gguf(const gguf::File& file);

// One L2-normalised vector (n_embd floats) per input, in order. Inputs are batched: as many sequences per
// decode as the cache's cells and kv::kMaxSequences allow. An empty input, a token outside the vocabulary
// or an input longer than the context (kOutOfRange, naming both counts) is refused; kNone is refused (a
// pooled vector is what this returns).
// `keep_going`, when set, is asked before each decode; false stops there with kUnavailable "cancelled"
// (the caller's client went away).
Result<std::vector<std::vector<float>>> embed(Engine& engine, const std::vector<std::vector<int32_t>>& inputs,
                                              Pooling pooling, const std::function<bool()>& keep_going = {});

// Scales `v` to unit Euclidean length (a zero vector stays zero), as llama.cpp's common_embd_normalize(2).
void l2_normalize(std::vector<float>* v);

}  // namespace minfer::engine
