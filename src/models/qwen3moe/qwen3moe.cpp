// qwen3moe: Qwen3-30B-A3B / Qwen3-235B-A22B and family, as llama.cpp's qwen3moe graph runs them: the qwen3
// attention block (per-head Q/K RMSNorm, NEOX RoPE, no biases) and, in every layer, a mixture of SwiGLU
// experts instead of the dense FFN: a router (ffn_gate_inp) with softmax gating chooses expert_used_count
// of expert_count experts per token, their probabilities are always renormalised to sum to 1 (llama.cpp
// passes norm_w = true for this architecture, which is the checkpoints' norm_topk_prob), and the experts
// (ffn_{gate,up,down}_exps, 3-D) run through the expert matmul. No shared experts (that is qwen2moe).
#include "models/qwen3moe/qwen3moe.h"

#include "models/common/decoder.h"

namespace minfer::models {
namespace {

constexpr const char* kArch = "qwen3moe";

class Qwen3Moe final : public Model {
 public:
  Status load(const gguf::File& file) {
    const gguf::Metadata& m = file.metadata();
    MINFER_ASSIGN_OR_RETURN(hparams_, read_hparams(file, kArch));
    HParams& hp = hparams_;
    if (!m.contains("qwen3moe.expert_count")) return not_found("model: missing key 'qwen3moe.expert_count'");
    if (!m.contains("qwen3moe.expert_used_count")) {
      return not_found("model: missing key 'qwen3moe.expert_used_count'");
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t n_expert, m.get_u32("qwen3moe.expert_count"));
    MINFER_ASSIGN_OR_RETURN(uint32_t n_used, m.get_u32("qwen3moe.expert_used_count"));
    if (n_expert == 0 || n_expert > 4096) return invalid_argument("model: qwen3moe.expert_count = {}", n_expert);
    if (n_used == 0 || n_used > n_expert) {
      return invalid_argument("model: qwen3moe.expert_used_count = {} for {} experts", n_used, n_expert);
    }
    hp.n_expert = static_cast<int32_t>(n_expert);
    hp.n_expert_used = static_cast<int32_t>(n_used);
    // llama.cpp: expert_feed_forward_length, else feed_forward_length / expert_used_count.
    if (m.contains("qwen3moe.expert_feed_forward_length")) {
      MINFER_ASSIGN_OR_RETURN(uint32_t f, m.get_u32("qwen3moe.expert_feed_forward_length"));
      hp.n_ff_exp = static_cast<int32_t>(f);
    } else {
      hp.n_ff_exp = hp.n_ff / hp.n_expert_used;
    }
    if (hp.n_ff_exp <= 0 || hp.n_ff_exp > (1 << 30)) {
      return invalid_argument("model: qwen3moe expert width {} (expert_feed_forward_length) is invalid", hp.n_ff_exp);
    }
    hp.expert_weights_norm = true;
    // Keys of other MoE variants that this graph does not apply are refused rather than ignored.
    if (m.contains("qwen3moe.expert_shared_count")) {
      MINFER_ASSIGN_OR_RETURN(uint32_t shared, m.get_u32("qwen3moe.expert_shared_count"));
      if (shared > 0) return unsupported("model: qwen3moe with {} shared experts is not supported", shared);
    }
    if (m.contains("qwen3moe.expert_gating_func")) {
      MINFER_ASSIGN_OR_RETURN(uint32_t gating, m.get_u32("qwen3moe.expert_gating_func"));
      if (gating != 1) return unsupported("model: qwen3moe expert_gating_func {} (only 1, softmax)", gating);
    }
    if (m.contains("qwen3moe.expert_weights_scale")) {
      MINFER_ASSIGN_OR_RETURN(float scale, m.get_f32("qwen3moe.expert_weights_scale"));
      if (scale != 0.0f && scale != 1.0f) {
        return unsupported("model: qwen3moe expert_weights_scale {} is not supported", scale);
      }
    }
    if (hp.n_rot != hp.head_dim) {
      return unsupported("model: qwen3moe rotates {} of {} head dims (llama.cpp requires all)", hp.n_rot,
                         hp.head_dim);
    }
    MINFER_ASSIGN_OR_RETURN(weights_, collect_weights(file, hp, kOptions, &tied_output_));
    return {};
  }
  Result<graph::Graph> build_graph(const graph::GraphParams& params) const override {
    return build_decoder_graph(hparams_, kOptions, tied_output_, weights_, params);
  }

 private:
  static constexpr DecoderOptions kOptions = {.qkv_bias = false, .qk_norm = true};
  bool tied_output_ = false;
};

}  // namespace

Result<std::unique_ptr<Model>> load_qwen3moe(const gguf::File& file) {
  auto model = std::make_unique<Qwen3Moe>();
  MINFER_RETURN_IF_ERROR(model->load(file));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace minfer::models
