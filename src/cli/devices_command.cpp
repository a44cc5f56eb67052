// `minfer devices [--json]`: every backend minfer knows and its devices (index, name, type, memory,
// subgroup size, fp16 / int8 / integer-dot / cooperative-matrix support) and whether minfer uses each by
// default. A backend that is not compiled in, or that this machine cannot use, is listed with the reason.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/registry.h"
#include "cli/cli_app.h"

namespace minfer::cli {
namespace {

std::string mib(uint64_t bytes) {
  if (bytes == 0) return "-";
  return bytes >= (uint64_t{1} << 30) ? fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30))
                                      : fmt::format("{} MiB", bytes >> 20);
}
const char* yes_no(bool b) {
  return b ? "yes" : "no";
}

}  // namespace

int devices_command(const Args& args) {
  CLI::App app("List every backend and device minfer can run on, and which it uses by default.",
               "minfer devices");
  bool json = false;
  app.add_flag("--json", json, "emit JSON for scripts");
  if (int code = parse_args(app, args); code >= 0) return code;

  const std::vector<backend::BackendListing> backends = backend::list_backends();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& b : backends) {
      nlohmann::json jb = {{"backend", b.name}, {"compiled", b.compiled}, {"available", b.available}};
      if (!b.available) jb["reason"] = b.reason;
      jb["devices"] = nlohmann::json::array();
      for (const auto& d : b.devices) {
        jb["devices"].push_back({{"index", d.index},
                                 {"name", d.name},
                                 {"type", d.type},
                                 {"memory_bytes", d.memory_bytes},
                                 {"subgroup_size", d.subgroup_size},
                                 {"fp16", d.fp16},
                                 {"int8", d.int8},
                                 {"integer_dot", d.integer_dot},
                                 {"cooperative_matrix", d.cooperative_matrix},
                                 {"usable", d.usable},
                                 {"default", d.used_by_default},
                                 {"note", d.note}});
      }
      out.push_back(jb);
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{:<8} {:>5}  {:<34} {:<10} {:>10} {:>8}  {:<4} {:<4} {:<7} {:<11} {}\n", "backend", "index",
             "name", "type", "memory", "subgroup", "fp16", "int8", "int-dot", "coop-matrix", "default");
  for (const auto& b : backends) {
    if (!b.available && b.devices.empty()) {
      fmt::print("{:<8} {:>5}  unavailable: {}\n", b.name, "-", b.reason);
      continue;
    }
    for (const auto& d : b.devices) {
      const bool gpu_api = d.subgroup_size != 0;
      std::string use = yes_no(d.used_by_default);
      if (!d.note.empty()) use += fmt::format(" ({})", d.note);
      fmt::print("{:<8} {:>5}  {:<34} {:<10} {:>10} {:>8}  {:<4} {:<4} {:<7} {:<11} {}\n", b.name, d.index,
                 d.name, d.type, mib(d.memory_bytes), gpu_api ? std::to_string(d.subgroup_size) : "-",
                 gpu_api ? yes_no(d.fp16) : "-", gpu_api ? yes_no(d.int8) : "-",
                 gpu_api ? yes_no(d.integer_dot) : "-", gpu_api ? yes_no(d.cooperative_matrix) : "-", use);
    }
  }
  return 0;
}

}  // namespace minfer::cli
