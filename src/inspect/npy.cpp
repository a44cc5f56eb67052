#include "inspect/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

#include <fmt/format.h>

namespace minfer::inspect {
namespace {
constexpr char kMagic[] = "\x93NUMPY";
}

std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += fmt::format("{}, ", d);
  // "(2, 3)"; a 1-tuple keeps its comma: "(5,)"; a 0-d array is "()".
  if (!shape.empty()) dims.resize(dims.size() - (shape.size() > 1 ? 2 : 1));
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const size_t prefix = 6 + 2 + 2;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const void* data, size_t n_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return io_error("npy: cannot create '{}': {}", path, std::strerror(errno));
  const std::string header = npy_header(descr, shape);
  const bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
                  (n_bytes == 0 || std::fwrite(data, 1, n_bytes, f) == n_bytes);
  if (std::fclose(f) != 0 || !ok) return io_error("npy: cannot write '{}'", path);
  return {};
}

Result<NpyArray> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("npy: cannot read '{}'", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    return invalid_argument("npy: '{}' is not a .npy file", path);
  if (bytes[6] != 1)
    return unsupported("npy: '{}' has version {}.{} (only 1.0 is read)", path, int(bytes[6]), int(bytes[7]));
  const size_t hlen =
      static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  if (10 + hlen > bytes.size()) return invalid_argument("npy: '{}': header runs past the end", path);
  const std::string dict = bytes.substr(10, hlen);
  std::smatch m;
  NpyArray a;
  if (!std::regex_search(dict, m, std::regex("'descr': *'([^']*)'")))
    return invalid_argument("npy: '{}': no descr", path);
  a.descr = m[1];
  if (a.descr != "<f4" && a.descr != "<i4")
    return unsupported("npy: '{}': dtype {} (only <f4 and <i4)", path, a.descr);
  if (dict.find("'fortran_order': False") == std::string::npos)
    return unsupported("npy: '{}': Fortran order", path);
  if (!std::regex_search(dict, m, std::regex("'shape': *\\(([^)]*)\\)")))
    return invalid_argument("npy: '{}': no shape", path);
  const std::string dims = m[1];
  int64_t n = 1;
  const std::regex number("[0-9]+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    a.shape.push_back(std::stoll(it->str()));
    n *= a.shape.back();
  }
  const size_t data_at = 10 + hlen;
  if (bytes.size() - data_at != static_cast<size_t>(n) * 4) {
    return invalid_argument("npy: '{}': {} data bytes for {} elements", path, bytes.size() - data_at, n);
  }
  a.values.resize(static_cast<size_t>(n));
  if (a.descr == "<f4") {
    std::memcpy(a.values.data(), bytes.data() + data_at, static_cast<size_t>(n) * 4);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, bytes.data() + data_at + static_cast<size_t>(i) * 4, 4);
      a.values[static_cast<size_t>(i)] = static_cast<float>(v);
    }
  }
  return a;
}

}  // namespace minfer::inspect
