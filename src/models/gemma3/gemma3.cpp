// gemma3 (Gemma 3 text models) as llama.cpp's gemma3 graph runs them (src/models/gemma3.cpp there):
// - token embeddings scaled by sqrt(n_embd) (sqrtf, not Hugging Face's bf16-rounded normaliser);
// - RMSNorm weights as stored (the converter already added Gemma's +1);
// - attn_norm -> Q/K/V -> per-head RMSNorm of Q and K -> NEOX RoPE -> attention -> post_attention_norm, added to
//   the residual; ffn_norm -> GeGLU (ggml's tanh GELU of gate, times up) -> ffn_down -> post_ffw_norm, added;
// - Q scaled by 1/sqrt(head_dim), or 1/sqrt(n_embd / n_head) for the 62-layer (27B) model, as llama.cpp picks
//   it from the layer count; the scores are not scaled again;
// - with gemma3.attention.sliding_window > 0: layer l is local (sliding window of that many positions)
//   unless l % pattern == pattern - 1 (gemma3.attention.sliding_window_pattern, default 6); local layers
//   rotate with gemma3.rope.freq_base_swa (default 10000) and no scaling, global layers with rope.freq_base
//   and the file's linear scaling; without the key every layer is global;
// - final logits soft-capped (cap * tanh(x / cap)) when gemma3.final_logit_softcapping is given and nonzero;
// - output tied to token_embd when output.weight is absent.
#include "models/gemma3/gemma3.h"

#include <cmath>

#include <fmt/format.h>

#include "graph/builder.h"
#include "models/common/decoder.h"

namespace minfer::models {
namespace {

using graph::GraphBuilder;
using graph::NodeId;

class Gemma3 final : public Model {
 public:
  Status load(const gguf::File& file) {
    const gguf::Metadata& m = file.metadata();
    MINFER_ASSIGN_OR_RETURN(hparams_, read_hparams(file, "gemma3"));
    // llama.cpp reads these per-layer variants for other architectures; a gemma3 file with them is not one
    // llama.cpp's gemma3 graph runs as written.
    for (const char* key : {"gemma3.attention.key_length_swa", "gemma3.attention.value_length_swa",
                            "gemma3.rope.dimension_count_swa"}) {
      if (m.contains(key)) return unsupported("model: gemma3 key '{}' is not supported", key);
    }
    for (const char* name : {"dense_2.weight", "dense_3.weight", "blk.0.attn_q.bias"}) {
      if (file.find_tensor(name) != nullptr) return unsupported("model: gemma3 tensor '{}' is not supported", name);
    }
    HParams& hp = hparams_;
    MINFER_ASSIGN_OR_RETURN(uint32_t n_swa, m.get_u32_or("gemma3.attention.sliding_window", 0));
    if (n_swa > (1u << 30)) return invalid_argument("model: gemma3.attention.sliding_window = {} is out of range", n_swa);
    if (n_swa > 0) {
      hp.n_swa = static_cast<int32_t>(n_swa);
      // llama.cpp takes a scalar period here (an array is ignored there: refused here rather than guessed).
      MINFER_ASSIGN_OR_RETURN(uint32_t period, m.get_u32_or("gemma3.attention.sliding_window_pattern", 6));
      hp.swa_layers.resize(static_cast<size_t>(hp.n_layer));
      for (int32_t l = 0; l < hp.n_layer; ++l) {
        hp.swa_layers[static_cast<size_t>(l)] = period == 0 || static_cast<uint32_t>(l) % period < period - 1;
      }
      MINFER_ASSIGN_OR_RETURN(hp.rope_freq_base_swa, m.get_f32_or("gemma3.rope.freq_base_swa", 10000.0f));
      MINFER_RETURN_IF_ERROR(check_rope_freq_base("gemma3.rope.freq_base_swa", hp.rope_freq_base_swa));
      hp.rope_freq_scale_swa = 1.0f;
    }
    MINFER_ASSIGN_OR_RETURN(softcap_, m.get_f32_or("gemma3.final_logit_softcapping", 0.0f));
    if (!std::isfinite(softcap_) || softcap_ < 0.0f) {
      return invalid_argument("model: gemma3.final_logit_softcapping = {} is invalid", softcap_);
    }
    // llama.cpp: 1/sqrt(n_embd / n_head) for the 27B model (62 layers, LLM_TYPE_27B), else 1/sqrt(head_dim).
    const int32_t width = hp.n_layer == 62 ? hp.n_embd / hp.n_head : hp.head_dim;
    attn_scale_ = 1.0f / std::sqrt(static_cast<float>(width));

    DecoderOptions options;
    options.qk_norm = true;
    MINFER_ASSIGN_OR_RETURN(weights_, collect_weights(file, hp, options, &tied_output_));
    for (int32_t l = 0; l < hp.n_layer; ++l) {
      for (const char* norm : {"post_attention_norm", "post_ffw_norm"}) {  // llama-arch.cpp's names
        const std::string name = fmt::format("blk.{}.{}.weight", l, norm);
        const gguf::TensorInfo* t = file.find_tensor(name);
        if (t == nullptr) return not_found("model: missing tensor '{}'", name);
        if (t->ne != graph::Shape{hp.n_embd, 1, 1, 1}) {
          return invalid_argument("model: tensor '{}' has shape [{}], expected [{}, 1, 1, 1]", name,
                                  fmt::join(t->ne, ", "), hp.n_embd);
        }
        weights_.push_back({name, t->type, t->ne, t->data, t->n_bytes});
      }
    }
    return {};
  }

  Result<graph::Graph> build_graph(const graph::GraphParams& params) const override {
    const HParams& hp = hparams_;
    DecoderGraph g(weights_, params);
    GraphBuilder& b = g.b;
    auto W = [&g](const std::string& name) { return g.W(name); };
    const int64_t nt = params.n_tokens;
    const int32_t hd = hp.head_dim;
    const float eps = hp.rms_eps;
    const NodeId positions = g.positions;

    NodeId inp = b.named(b.get_rows(W("token_embd.weight"), g.tokens), "inp_embd");
    inp = b.named(b.scale(inp, std::sqrt(static_cast<float>(hp.n_embd))), "inp_scaled");
    for (int32_t l = 0; l < hp.n_layer; ++l) {
      b.set_layer(l);
      const std::string p = fmt::format("blk.{}.", l);
      const bool local = !hp.swa_layers.empty() && hp.swa_layers[static_cast<size_t>(l)];
      const float base = local ? hp.rope_freq_base_swa : hp.rope_freq_base;
      const float freq_scale = local ? hp.rope_freq_scale_swa : hp.rope_freq_scale;
      NodeId cur = b.named(b.rms_norm(inp, W(p + "attn_norm.weight"), eps), p + "attn_norm");
      NodeId q = b.named(b.matmul(W(p + "attn_q.weight"), cur), p + "q");
      NodeId k = b.named(b.matmul(W(p + "attn_k.weight"), cur), p + "k");
      const NodeId v = b.named(b.matmul(W(p + "attn_v.weight"), cur), p + "v");
      q = b.reshape(q, {hd, hp.n_head, nt, 1});
      k = b.reshape(k, {hd, hp.n_head_kv, nt, 1});
      q = b.named(b.rms_norm(q, W(p + "attn_q_norm.weight"), eps), p + "q_norm");
      k = b.named(b.rms_norm(k, W(p + "attn_k_norm.weight"), eps), p + "k_norm");
      q = b.named(b.rope(q, positions, hp.n_rot, base, graph::RopeMode::kNeox, freq_scale, graph::kNoNode),
                  p + "q_rope");
      k = b.named(b.rope(k, positions, hp.n_rot, base, graph::RopeMode::kNeox, freq_scale, graph::kNoNode),
                  p + "k_rope");
      // llama.cpp scales Q before attention and the scores by 1; the scores here are scaled once, by the
      // same factor: the same numbers for head_dim 256 (1/16, exact), a rounding-level difference otherwise.
      const NodeId store = b.named(b.kv_store(l, k, v), p + "kv_store");
      cur = b.named(b.attention(l, q, store, hp.n_head, hp.n_head_kv, hd, attn_scale_, local ? hp.n_swa : 0),
                    p + "attn");
      if (l == hp.n_layer - 1) g.keep_output_rows(&cur, &inp);
      cur = b.named(b.matmul(W(p + "attn_output.weight"), cur), p + "attn_out");
      cur = b.named(b.rms_norm(cur, W(p + "post_attention_norm.weight"), eps), p + "attn_post_norm");
      const NodeId sa_out = b.named(b.add(cur, inp), p + "sa_out");
      cur = b.named(b.rms_norm(sa_out, W(p + "ffn_norm.weight"), eps), p + "ffn_norm");
      const NodeId gate = b.named(b.matmul(W(p + "ffn_gate.weight"), cur), p + "ffn_gate");
      const NodeId up = b.named(b.matmul(W(p + "ffn_up.weight"), cur), p + "ffn_up");
      cur = b.named(b.mul(b.gelu(gate), up), p + "ffn_geglu");
      cur = b.named(b.matmul(W(p + "ffn_down.weight"), cur), p + "ffn_down");
      cur = b.named(b.rms_norm(cur, W(p + "post_ffw_norm.weight"), eps), p + "ffn_post_norm");
      inp = b.named(b.add(cur, sa_out), p + "l_out");
    }
    return g.finish(inp, eps, tied_output_, softcap_);
  }

 private:
  bool tied_output_ = false;
  float attn_scale_ = 1.0f;
  float softcap_ = 0.0f;
};

}  // namespace

Result<std::unique_ptr<Model>> load_gemma3(const gguf::File& file) {
  auto model = std::make_unique<Gemma3>();
  MINFER_RETURN_IF_ERROR(model->load(file));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace minfer::models
