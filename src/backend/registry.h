// The backend registry: every backend this build contains, in priority order. The engine registers
// weights with each and hands them to the scheduler; models never see this list. A device backend
// (CUDA) adds one entry here when compiled in.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace minfer::backend {

// Backends available on this machine, highest priority first. The CPU is always last and always present.
std::vector<std::unique_ptr<Backend>> create_backends();
// Names of the backends compiled into this build ("CPU", later "CUDA").
std::vector<std::string> compiled_backends();

}  // namespace minfer::backend
