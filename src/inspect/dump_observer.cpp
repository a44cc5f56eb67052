#include "inspect/dump_observer.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "graph/export.h"
#include "inspect/node_tensor.h"
#include "inspect/npy.h"
#include "inspect/tensor_stats.h"
#include "sched/scheduler.h"

namespace minfer::inspect {
namespace {

// Node names become file names: keep [A-Za-z0-9._-], replace the rest.
std::string file_safe(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "node" : out;
}

Status write_json(const std::string& path, const nlohmann::ordered_json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(1) << '\n';
  if (!out) return io_error("dump: cannot write '{}'", path);
  return {};
}

}  // namespace

Result<std::set<int64_t>> parse_step_list(const std::string& text) {
  std::set<int64_t> steps;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || end != item.c_str() + item.size() || v < 0) {
      return invalid_argument("'{}' is not a step number (expected a comma-separated list like 0,1,5)", item);
    }
    steps.insert(v);
    at = comma + 1;
  }
  return steps;
}

Result<std::optional<DumpOptions>> dump_options_from_env() {
  const char* dir = std::getenv("MINFER_DUMP_DIR");
  if (dir == nullptr) {
    for (const char* name : {"MINFER_DUMP_FILTER", "MINFER_DUMP_STEPS"}) {
      if (std::getenv(name) != nullptr) return invalid_argument("{} is set but MINFER_DUMP_DIR is not", name);
    }
    return std::optional<DumpOptions>();
  }
  DumpOptions o;
  o.dir = dir;
  if (o.dir.empty()) return invalid_argument("MINFER_DUMP_DIR is set but empty");
  if (const char* f = std::getenv("MINFER_DUMP_FILTER")) o.filter = f;
  if (const char* s = std::getenv("MINFER_DUMP_STEPS")) {
    auto steps = parse_step_list(s);
    if (!steps.ok()) return steps.status().with_context("MINFER_DUMP_STEPS: ");
    o.steps = std::move(*steps);
  }
  return std::optional<DumpOptions>(std::move(o));
}

DumpObserver::DumpObserver(DumpOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<DumpObserver>> DumpObserver::create(const DumpOptions& options) {
  std::unique_ptr<DumpObserver> d(new DumpObserver(options));
  if (!options.filter.empty()) {
    try {
      d->filter_ = [re = std::regex(options.filter, std::regex::ECMAScript)](const std::string& name) {
        return std::regex_search(name, re);
      };
    } catch (const std::regex_error& e) {
      return invalid_argument("MINFER_DUMP_FILTER: '{}' is not a valid regex: {}", options.filter, e.what());
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return io_error("MINFER_DUMP_DIR: cannot create '{}': {}", options.dir, ec.message());
  return d;
}

void DumpObserver::begin_step(const sched::Plan& plan) {
  writing_ = options_.steps.empty() || options_.steps.count(step_) > 0;
  if (!writing_) return;
  const std::string name = fmt::format("step-{:04}", step_);
  step_dir_ = options_.dir + "/" + name;
  std::error_code ec;
  std::filesystem::create_directories(step_dir_, ec);
  if (ec && status_.ok()) status_ = io_error("dump: cannot create '{}': {}", step_dir_, ec.message());
  step_index_ = {{"format", "minfer-dump-v1"},
                 {"step", step_},
                 {"n_tokens", plan.params.n_tokens},
                 {"n_outputs", plan.params.n_outputs},
                 {"nodes", nlohmann::ordered_json::array()}};
}

void DumpObserver::on_node(const sched::Plan& plan, const sched::NodeEvent& ev) {
  if (!writing_) return;
  const graph::Node& n = plan.graph.node(ev.id);
  if (filter_ && !filter_(n.name)) return;
  const std::span<const float> values = node_values(n, ev.data, &scratch_);
  if (values.empty()) return;  // no output of its own (KvStore) or not host-readable
  const std::string descr = numpy_descr(n.type);
  const std::vector<int64_t> shape = numpy_shape(n.ne);
  const std::string file = fmt::format("{:04}-{}.npy", ev.order, file_safe(n.name));
  Status st =
      write_npy(step_dir_ + "/" + file, descr, shape, ev.data, static_cast<size_t>(n.n_elements()) * 4);
  if (!st.ok() && status_.ok()) status_ = st;
  nlohmann::ordered_json j = {{"order", ev.order},
                              {"id", ev.id},
                              {"name", n.name},
                              {"op", std::string(graph::op_name(n.op))},
                              {"layer", n.layer},
                              {"shape", shape},
                              {"dtype", std::string(dtype_name(n.type))},
                              {"file", file},
                              {"stats", to_json(compute_stats(values))}};
  if (!n.fused_from.empty()) j["fused_from"] = n.fused_from;
  step_index_["nodes"].push_back(std::move(j));
}

void DumpObserver::end_step(const sched::Plan& plan, bool ok) {
  (void)plan;
  if (writing_) {
    step_index_["ok"] = ok;
    Status st = write_json(step_dir_ + "/index.json", step_index_);
    if (!st.ok() && status_.ok()) status_ = st;
    steps_.push_back(
        {{"step", step_}, {"dir", fmt::format("step-{:04}", step_)}, {"n_tokens", step_index_["n_tokens"]}});
    st = write_json(options_.dir + "/index.json", {{"format", "minfer-dump-v1"}, {"steps", steps_}});
    if (!st.ok() && status_.ok()) status_ = st;
  }
  writing_ = false;
  ++step_;
}

}  // namespace minfer::inspect
