// qwen2: Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen. GQA with q/k/v biases, NEOX RoPE, RMSNorm, SwiGLU,
// output tied to the embedding when output.weight is absent.
#include "models/qwen2/qwen2.h"

#include "models/common/decoder.h"

namespace minfer::models {
namespace {

class Qwen2 final : public Model {
 public:
  Status load(const gguf::File& file) {
    MINFER_ASSIGN_OR_RETURN(hparams_, read_hparams(file, "qwen2"));
    MINFER_ASSIGN_OR_RETURN(weights_, collect_weights(file, hparams_, kOptions, &tied_output_));
    return {};
  }
  Result<graph::Graph> build_graph(const graph::GraphParams& params) const override {
    return build_decoder_graph(hparams_, kOptions, tied_output_, weights_, params);
  }

 private:
  static constexpr DecoderOptions kOptions = {.qkv_bias = true, .qk_norm = false};
  bool tied_output_ = false;
};

}  // namespace

Result<std::unique_ptr<Model>> load_qwen2(const gguf::File& file) {
  auto model = std::make_unique<Qwen2>();
  MINFER_RETURN_IF_ERROR(model->load(file));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace minfer::models
