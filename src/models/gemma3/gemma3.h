// gemma3 (text) architecture loader (registered in models/registry.cpp).
#pragma once

#include "models/model.h"

namespace minfer::models {
Result<std::unique_ptr<Model>> load_gemma3(const gguf::File& file);
}
