#include "cli/inspect_env.h"

#include <cstdlib>

#include <fmt/format.h>

namespace minfer::cli {

Result<std::unique_ptr<InspectEnv>> InspectEnv::attach(engine::Engine& engine) {
  // Everything is checked before anything is attached, so a refused variable leaves the engine as it was.
  std::unique_ptr<inspect::DumpObserver> dump;
  MINFER_ASSIGN_OR_RETURN(std::optional<inspect::DumpOptions> dump_options, inspect::dump_options_from_env());
  if (dump_options) {
    MINFER_ASSIGN_OR_RETURN(dump, inspect::DumpObserver::create(*dump_options));
  }
  std::unique_ptr<inspect::TraceObserver> trace;
  if (const char* path = std::getenv("MINFER_TRACE")) {
    if (*path == '\0') return invalid_argument("MINFER_TRACE is set but empty (expected FILE.json)");
    trace = std::make_unique<inspect::TraceObserver>(path, &engine.pool());
    MINFER_RETURN_IF_ERROR(trace->write());  // fail now, not after the run, when the path is unwritable
  }
  std::unique_ptr<InspectEnv> env(new InspectEnv(engine));
  env->dump_ = std::move(dump);
  env->trace_ = std::move(trace);
  if (env->dump_) engine.add_observer(env->dump_.get());
  if (env->trace_) engine.add_observer(env->trace_.get());
  return env;
}

InspectEnv::~InspectEnv() {
  if (Status st = finish(); !st.ok()) fmt::print(stderr, "minfer: {}\n", st.message());
}

Status InspectEnv::finish() {
  if (finished_) return {};
  finished_ = true;
  Status first;
  if (dump_) {
    engine_.remove_observer(dump_.get());
    first = dump_->status();
    fmt::print(stderr, "minfer: dumped {} step(s) to {}\n", dump_->steps_seen(),
               std::getenv("MINFER_DUMP_DIR"));
  }
  if (trace_) {
    engine_.remove_observer(trace_.get());
    Status st = trace_->write();
    if (first.ok()) first = st;
    if (st.ok()) fmt::print(stderr, "minfer: trace written to {}\n", trace_->path());
    trace_.reset();  // detaches from the pool
  }
  return first;
}

}  // namespace minfer::cli
