// llama: Llama 2, Llama 3.x, Mistral 7B, DeepSeek-R1-Distill-Llama, as llama.cpp's llm_build_llama runs them
// for dense models: GQA without biases, RoPE with normal pairing (LLAMA_ROPE_TYPE_NORM: dimensions 2i and
// 2i + 1 rotate together; the converter permuted Q/K rows for it), llama3 frequency factors from
// rope_freqs.weight, linear scaling from rope.scaling.factor, RMSNorm, SwiGLU, output tied to the embedding
// when output.weight is absent. Mixture-of-experts files (Mixtral, llama.expert_count > 0) are refused.
#include "models/llama/llama.h"

#include "models/common/decoder.h"

namespace minfer::models {
namespace {

class Llama final : public Model {
 public:
  Status load(const gguf::File& file) {
    const gguf::Metadata& m = file.metadata();
    if (m.contains("llama.expert_count")) {
      MINFER_ASSIGN_OR_RETURN(uint32_t n_expert, m.get_u32("llama.expert_count"));
      if (n_expert > 0) {
        return unsupported("model: llama with {} experts (Mixtral-style mixture of experts) is not supported",
                           n_expert);
      }
    }
    for (const char* name : {"blk.0.attn_output.bias", "blk.0.ffn_gate.bias", "blk.0.ffn_up.bias",
                             "blk.0.ffn_down.bias", "blk.0.attn_rot_embd", "rope_freqs.weight.long"}) {
      if (file.find_tensor(name) != nullptr) {
        return unsupported("model: llama tensor '{}' is not supported", name);
      }
    }
    MINFER_ASSIGN_OR_RETURN(hparams_, read_hparams(file, "llama"));
    hparams_.rope_normal = true;
    MINFER_RETURN_IF_ERROR(read_rope_freqs(file, &hparams_));
    // llama.cpp reads q/k/v biases when a llama file has them (some fine-tunes); all three or none.
    options_.qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
    MINFER_ASSIGN_OR_RETURN(weights_, collect_weights(file, hparams_, options_, &tied_output_));
    return {};
  }
  Result<graph::Graph> build_graph(const graph::GraphParams& params) const override {
    return build_decoder_graph(hparams_, options_, tied_output_, weights_, params);
  }

 private:
  DecoderOptions options_;
  bool tied_output_ = false;
};

}  // namespace

Result<std::unique_ptr<Model>> load_llama(const gguf::File& file) {
  auto model = std::make_unique<Llama>();
  MINFER_RETURN_IF_ERROR(model->load(file));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace minfer::models
