#include "viz/assets.h"

namespace minfer::viz {

const Asset* find_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const Asset& a : assets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace minfer::viz
