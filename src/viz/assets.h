// The page's files (web/), embedded into the binary at build time by cmake/EmbedFiles.cmake: the page
// needs no Node.js, no build step and no network at run time.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace minfer::viz {

struct Asset {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view data;
};

std::span<const Asset> assets();
// The asset served at `path` ("/" is /index.html), or nullptr.
const Asset* find_asset(std::string_view path);

}  // namespace minfer::viz
