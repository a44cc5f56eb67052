// The architecture registry: general.architecture -> loader. One line per architecture.
#include "models/model.h"
#include "models/gemma3/gemma3.h"
#include "models/llama/llama.h"
#include "models/qwen2/qwen2.h"
#include "models/qwen3/qwen3.h"
#include "models/qwen3moe/qwen3moe.h"

namespace minfer::models {
namespace {

struct Entry {
  const char* arch;
  Result<std::unique_ptr<Model>> (*load)(const gguf::File&);
};

constexpr Entry kArchitectures[] = {
    {"gemma3", load_gemma3},
    {"llama", load_llama},
    {"qwen2", load_qwen2},
    {"qwen3", load_qwen3},
    {"qwen3moe", load_qwen3moe},
};

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> out;
  for (const Entry& e : kArchitectures) out.emplace_back(e.arch);
  return out;
}

Result<std::unique_ptr<Model>> load_model(const gguf::File& file) {
  MINFER_ASSIGN_OR_RETURN(std::string arch, file.metadata().get_string("general.architecture"));
  for (const Entry& e : kArchitectures) {
    if (arch == e.arch) return e.load(file);
  }
  return unsupported("Unsupported architecture: '{}'", arch);
}

}  // namespace minfer::models
