// qwen3moe architecture loader (registered in models/registry.cpp).
#pragma once

#include "models/model.h"

namespace minfer::models {
Result<std::unique_ptr<Model>> load_qwen3moe(const gguf::File& file);
}
