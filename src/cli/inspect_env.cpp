#include "cli/inspect_env.h"

#include <cstdlib>

#include <fmt/format.h>

namespace minfer::cli {

Result<std::unique_ptr<InspectEnv>> InspectEnv::attach(engine::Engine& engine) {
  std::unique_ptr<InspectEnv> env(new InspectEnv(engine));
  MINFER_ASSIGN_OR_RETURN(std::optional<inspect::DumpOptions> dump, inspect::dump_options_from_env());
  if (dump) {
    MINFER_ASSIGN_OR_RETURN(env->dump_, inspect::DumpObserver::create(*dump));
    engine.add_observer(env->dump_.get());
  }
  if (const char* trace = std::getenv("MINFER_TRACE")) {
    if (*trace == '\0') return invalid_argument("MINFER_TRACE is set but empty (expected FILE.json)");
    env->trace_ = std::make_unique<inspect::TraceObserver>(trace, &engine.pool());
    MINFER_RETURN_IF_ERROR(env->trace_->write());  // fail now, not after the run, when the path is unwritable
    engine.add_observer(env->trace_.get());
  }
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
