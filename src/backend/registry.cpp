#include "backend/registry.h"

#include "backend/cpu/cpu_backend.h"

namespace minfer::backend {

std::vector<std::unique_ptr<Backend>> create_backends() {
  std::vector<std::unique_ptr<Backend>> out;
  out.push_back(std::make_unique<CpuBackend>());
  return out;
}

std::vector<std::string> compiled_backends() { return {"CPU"}; }

}  // namespace minfer::backend
