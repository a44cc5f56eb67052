// The model interface and registry. A model is hyperparameters, the tensors it needs (registered with
// the backends by the engine), and a pure function from GraphParams to a compute graph.
// Adding an architecture = one folder under src/models/ plus one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "gguf/reader.h"
#include "graph/ir.h"
#include "graph/params.h"

namespace minfer::models {

struct HParams {
  std::string arch;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;  // per-head width of Q and K (and V for Qwen)
  int32_t n_ff = 0;
  int32_t n_rot = 0;     // rotated dims per head
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;            // 1 / rope.scaling.factor (linear scaling), as llama.cpp applies it
  bool rope_normal = false;                // llama's pairing (2i, 2i + 1); false: NEOX (Qwen)
  std::vector<float> rope_freq_factors;    // llama3 scaling: rope_freqs.weight (n_rot/2 divisors), or empty
  float rms_eps = 1e-6f;
  // Mixture of experts (0 experts: a dense FFN of n_ff). Each token's FFN is the weighted sum of the SwiGLU
  // FFNs (n_ff_exp wide) of the n_expert_used experts its router ranks first.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  bool expert_weights_norm = false;  // divide the chosen experts' probabilities by their sum
  // Sliding-window attention (gemma3): layer l with swa_layers[l] attends only the n_swa latest positions and
  // is rotated with rope_freq_base_swa / rope_freq_scale_swa; empty: no such layers.
  int32_t n_swa = 0;
  std::vector<bool> swa_layers;
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;

  int64_t n_embd_q() const { return static_cast<int64_t>(n_head) * head_dim; }
  int64_t n_embd_kv() const { return static_cast<int64_t>(n_head_kv) * head_dim; }
};

class Model {
 public:
  virtual ~Model() = default;
  const HParams& hparams() const { return hparams_; }
  // The GGUF tensors the graph reads, as views into the file.
  const std::vector<backend::WeightSource>& weights() const { return weights_; }
  // Deterministic in `params` (the reuse invariant). Pure: no computation, no I/O.
  virtual Result<graph::Graph> build_graph(const graph::GraphParams& params) const = 0;
  // The K-shift graph for params.kv_shift (llama.cpp's build_graph_shift): every layer's K rows of the batch's
  // store cells, rotated by each cell's position delta (the batch's positions) as the forward graph rotated
  // them, and stored back. The default (models/common/decoder.cpp) rotates as the shared decoder does: the
  // rope pairing and scale, llama3 frequency factors, the sliding layers' own base and scale.
  virtual Result<graph::Graph> build_kv_shift_graph(const graph::GraphParams& params) const;

 protected:
  HParams hparams_;
  std::vector<backend::WeightSource> weights_;
};

// Dispatches on general.architecture; anything unregistered is refused by name
// ("Unsupported architecture: 'gpt2'").
Result<std::unique_ptr<Model>> load_model(const gguf::File& file);
std::vector<std::string> supported_architectures();

}  // namespace minfer::models
