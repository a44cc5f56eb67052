// MINFER_DUMP_DIR: writes every evaluated node's output of every step as DIR/step-NNNN/<order>-<name>.npy,
// with DIR/step-NNNN/index.json (per node: order, id, name, op, layer, shape, dtype, file, stats) and
// DIR/index.json (the steps written). MINFER_DUMP_FILTER (a regex searched in the node name) and
// MINFER_DUMP_STEPS (comma-separated step numbers, counted from 0 per process) limit what is written.
// Copies nothing it does not write; the engine's numbers are unchanged (it only reads).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "sched/observer.h"

namespace minfer::inspect {

struct DumpOptions {
  std::string dir;
  std::string filter;       // ECMAScript regex; empty: every node
  std::set<int64_t> steps;  // empty: every step
};

// From MINFER_DUMP_DIR / MINFER_DUMP_FILTER / MINFER_DUMP_STEPS; nullopt when MINFER_DUMP_DIR is unset.
// A bad regex or step list is an error naming the variable.
Result<std::optional<DumpOptions>> dump_options_from_env();
// "0,1,5" -> {0, 1, 5}; kInvalidArgument naming the bad item.
Result<std::set<int64_t>> parse_step_list(const std::string& text);

class DumpObserver : public sched::NodeObserver {
 public:
  // Creates options.dir (and checks the filter). kIo / kInvalidArgument on failure.
  static Result<std::unique_ptr<DumpObserver>> create(const DumpOptions& options);

  void begin_step(const sched::Plan& plan) override;
  void on_node(const sched::Plan& plan, const sched::NodeEvent& event) override;
  void end_step(const sched::Plan& plan, bool ok) override;

  int64_t steps_seen() const { return step_; }
  // The first write error, if any (the run goes on; the CLI reports it at the end).
  const Status& status() const { return status_; }

 private:
  explicit DumpObserver(DumpOptions options);

  DumpOptions options_;
  std::function<bool(const std::string&)> filter_;  // MINFER_DUMP_FILTER; empty: every node
  int64_t step_ = 0;                                // the step being executed
  bool writing_ = false;
  std::string step_dir_;
  nlohmann::ordered_json step_index_;
  nlohmann::ordered_json steps_ = nlohmann::ordered_json::array();
  std::vector<float> scratch_;
  Status status_;
};

}  // namespace minfer::inspect
