#include "core/text_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace minfer {

Result<std::string> read_regular_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) return not_found("'{}': no such file", path);
  if (!std::filesystem::is_regular_file(status)) return invalid_argument("'{}': not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot read '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error("cannot read '{}'", path);
  return ss.str();
}

}  // namespace minfer
