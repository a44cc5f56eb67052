// A scalar reference forward pass for Qwen2/Qwen3/llama GGUF models, written llama2.c-style (plain loops,
// weights dequantized to f32, attention over the causal prefix). It shares no code with the graph path,
// so the engine's logits can be checked against it.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/reader.h"

namespace minfer::test {

// Logits for every position of `tokens` evaluated as one sequence: [n_tokens][n_vocab].
std::vector<std::vector<float>> reference_forward(const gguf::File& file, const std::vector<int32_t>& tokens);

}  // namespace minfer::test
