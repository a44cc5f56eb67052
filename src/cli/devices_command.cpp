// `minfer devices [--json]`: every backend minfer knows and its devices (index, name, type, memory,
// subgroup size, fp16 / int8 / integer-dot / cooperative-matrix support) and whether minfer uses each by
// default. A backend that is not compiled in, or that this machine cannot use, is listed with the reason.
// `--bandwidth` also measures each usable Vulkan device's copy bandwidth (or device --gpu N's only).
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
  bool bandwidth = false;
  int gpu = -1;
  int bandwidth_mib = 256;
  app.add_flag("--json", json, "emit JSON for scripts");
  CLI::Option* bandwidth_flag =
      app.add_flag("--bandwidth", bandwidth,
                   "also measure each usable Vulkan device's copy bandwidth (host->device, "
                   "device->host, device->device; best of 5 copies)");
  // Both only mean something to the measurement: without --bandwidth they are refused, not ignored.
  app.add_option("--gpu", gpu, "with --bandwidth: only Vulkan device N")
      ->check(CLI::Range(0, 1 << 16))
      ->needs(bandwidth_flag);
  app.add_option("--bandwidth-mib", bandwidth_mib, "with --bandwidth: MiB per copy")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096))
      ->needs(bandwidth_flag);
  if (int code = parse_args(app, args); code >= 0) return code;

  const std::vector<backend::BackendListing> backends = backend::list_backends();
  // Measured before printing, so a failure is an error and not half a table.
  std::vector<std::pair<const backend::DeviceListing*, backend::CopyBandwidth>> measured;
  if (bandwidth) {
    constexpr int kReps = 5;
    for (const auto& b : backends) {
      if (b.name != "Vulkan") continue;
      for (const auto& d : b.devices) {
        if (!d.usable || (gpu >= 0 && d.index != gpu)) continue;
        auto bw = backend::measure_copy_bandwidth(d.index, static_cast<size_t>(bandwidth_mib) << 20, kReps);
        if (!bw.ok()) return fail(bw.status().with_context(fmt::format("--bandwidth on device {}: ", d.index)));
        measured.emplace_back(&d, *bw);
      }
    }
    if (measured.empty()) {
      return fail(unavailable("--bandwidth: no usable Vulkan device{} (see `minfer devices`)",
                              gpu >= 0 ? fmt::format(" {}", gpu) : std::string()));
    }
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& b : backends) {
      nlohmann::json jb = {{"backend", b.name}, {"compiled", b.compiled}, {"available", b.available}};
      if (!b.available) jb["reason"] = b.reason;
      jb["devices"] = nlohmann::json::array();
      for (const auto& d : b.devices) {
        nlohmann::json bw;
        for (const auto& [md, m] : measured) {
          if (md == &d) {
            bw = {{"bytes", m.bytes}, {"reps", m.reps}, {"host_to_device_bytes_per_s", m.host_to_device},
                  {"device_to_host_bytes_per_s", m.device_to_host},
                  {"device_to_device_bytes_per_s", m.device_to_device}};
          }
        }
        nlohmann::json jd = {{"index", d.index},
                             {"name", d.name},
                             {"type", d.type},
                             {"memory_bytes", d.memory_bytes},
                             {"subgroup_size", d.subgroup_size},
                             {"fp16", d.fp16},
                             {"int8", d.int8},
                             {"integer_dot", d.integer_dot},
                             {"integer_dot_accelerated", d.integer_dot_fast},
                             {"cooperative_matrix", d.cooperative_matrix},
                             {"usable", d.usable},
                             {"default", d.used_by_default},
                             {"note", d.note}};
        if (!bw.is_null()) jd["bandwidth"] = bw;
        jb["devices"].push_back(jd);
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
                 gpu_api ? (d.integer_dot_fast ? "fast" : yes_no(d.integer_dot)) : "-",
                 gpu_api ? yes_no(d.cooperative_matrix) : "-", use);
    }
  }
  for (const auto& [d, m] : measured) {
    fmt::print("bandwidth: Vulkan {} ({}): host->device {:.2f} GB/s, device->host {:.2f} GB/s, device->device "
               "{:.2f} GB/s (copies of {} MiB, best of {})\n",
               d->index, d->name, m.host_to_device / 1e9, m.device_to_host / 1e9, m.device_to_device / 1e9,
               m.bytes >> 20, m.reps);
  }
  return 0;
}

}  // namespace minfer::cli
