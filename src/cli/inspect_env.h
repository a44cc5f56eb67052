// MINFER_DUMP_DIR / MINFER_TRACE for the CLI commands that run a model (run, serve): reads the variables,
// attaches the dump and trace observers to the engine, and at finish() detaches them and writes the trace.
#pragma once

#include <memory>

#include "core/status.h"
#include "engine/engine.h"
#include "inspect/dump_observer.h"
#include "inspect/trace_observer.h"

namespace minfer::cli {

class InspectEnv {
 public:
  // Attaches what the environment asks for (possibly nothing). A bad variable is an error naming it.
  static Result<std::unique_ptr<InspectEnv>> attach(engine::Engine& engine);
  ~InspectEnv();

  // Detaches the observers, writes the trace and prints where the dump and trace went (stderr). Returns the
  // first write error. Call after the last decode; idempotent.
  Status finish();

 private:
  explicit InspectEnv(engine::Engine& engine) : engine_(engine) {}
  engine::Engine& engine_;
  std::unique_ptr<inspect::DumpObserver> dump_;
  std::unique_ptr<inspect::TraceObserver> trace_;
  bool finished_ = false;
};

}  // namespace minfer::cli
