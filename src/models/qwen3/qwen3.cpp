// qwen3: decoupled head dim (attention.key_length), per-head RMSNorm on Q and K before RoPE, no biases.
#include "models/qwen3/qwen3.h"

#include "models/common/decoder.h"

namespace minfer::models {
namespace {

class Qwen3 final : public Model {
 public:
  Status load(const gguf::File& file) {
    MINFER_ASSIGN_OR_RETURN(hparams_, read_hparams(file, "qwen3"));
    MINFER_ASSIGN_OR_RETURN(weights_, collect_weights(file, hparams_, kOptions, &tied_output_));
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

Result<std::unique_ptr<Model>> load_qwen3(const gguf::File& file) {
  auto model = std::make_unique<Qwen3>();
  MINFER_RETURN_IF_ERROR(model->load(file));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace minfer::models
