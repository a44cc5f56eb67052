// `minfer convert`: a Hugging Face checkpoint folder (config.json, safetensors, tokenizer.json,
// tokenizer_config.json) to a GGUF file with the metadata, tensor names and tensor bytes llama.cpp's
// convert_hf_to_gguf.py writes for Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM,
// LlamaForCausalLM / MistralForCausalLM and Gemma3ForCausalLM (tools/convert_plan.h says what each
// becomes). Other architectures are refused by name. Output: f32 / f16 / bf16 (2-D weights cast round-to-nearest-even, 1-D tensors
// kept f32), or any `minfer quantize` type through its encoders and rules.
//
//   tools::ConvertOptions o{.input_dir = "Qwen3-0.6B", .output = "qwen3-0.6b-f16.gguf", .outtype = "f16"};
//   MINFER_ASSIGN_OR_RETURN(tools::ConvertReport r, tools::convert_hf(o));
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "gguf/metadata.h"

namespace minfer::tools {

struct ConvertOptions {
  std::string input_dir;
  std::string output;             // written via a temp file + rename
  std::string outtype = "f16";    // f32 | f16 | bf16 | any quantize type (q8_0, q4_0, q4_K_M, ...)
  std::string name;               // general.name; default: the folder's name
  int n_threads = 1;              // quantized outtypes only
  // Called after each tensor is written: (index, count, bytes written so far).
  std::function<void(size_t, size_t, uint64_t)> on_progress;
};

struct ConvertReport {
  std::string arch;  // the GGUF architecture: "qwen2" | "qwen3" | "qwen3moe" | "llama" | "gemma3"
  size_t n_tensors = 0;
  uint64_t bytes_out = 0;
  size_t n_vocab = 0;
};

// Fails, writing nothing, naming the cause: an unknown architecture, a missing or unexpected tensor, a
// wrong shape, an unsupported source dtype, a lying safetensors header, an unreadable tokenizer, an
// unknown pre-tokenizer regex, or an unknown outtype.
Result<ConvertReport> convert_hf(const ConvertOptions& options);

// `convert --vocab-only`: a GGUF with no tensors holding the tokenizer.* keys, general.architecture and
// the hyper-parameters config.json gives (llama.cpp reads them even for a vocabulary-only load), as
// convert_hf_to_gguf.py --vocab-only writes. Needs tokenizer.json and config.json `architectures`; no weights.
Result<ConvertReport> convert_vocab_only(const ConvertOptions& options);

// The tokenizer.* keys (and nothing else) that convert writes, from tokenizer.json, tokenizer_config.json
// and config.json in `dir`: tokens, token types, merges, special ids, add_bos, chat template.
Result<gguf::Metadata> hf_tokenizer_metadata(const std::string& dir);

}  // namespace minfer::tools
