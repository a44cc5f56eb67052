// The engine: a loaded model (mmap'd GGUF, tokenizer, architecture), its backends, the scheduler with
// cached plans, and the multi-sequence KV cache. decode() evaluates a batch of tokens of any sequences,
// split into micro-batches of at most n_batch tokens, and returns the logits of the rows asked for.
//
//   auto engine = Engine::load("model.gguf", {.n_ctx = 4096});
//   Batch batch;
//   for (int i = 0; i < n; ++i) batch.add(ids[i], /*pos=*/i, /*seq=*/0, /*logits=*/i == n - 1);
//   MINFER_ASSIGN_OR_RETURN(auto logits, (*engine)->decode(batch));   // [n_out][n_vocab]
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "engine/offload.h"
#include "gguf/reader.h"
#include "kv/kv_cache.h"
#include "models/model.h"
#include "sampling/vocab_view.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::engine {

struct EngineOptions {
  int32_t n_ctx = 4096;   // KV cells; clamped to the model's training context
  int32_t n_threads = 0;  // 0: one per available core
  int32_t n_batch = 512;  // largest micro-batch
  DType cache_type = DType::F16;
  OffloadOptions offload;  // backends, device and --gpu-layers (engine/offload.h)
  bool quiet = false;      // no placement line on stderr
};

// Tokens to evaluate: each with its position, sequence and whether its logits are wanted.
struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<kv::SeqId> seqs;
  std::vector<uint8_t> logits;

  void add(int32_t token, int32_t pos, kv::SeqId seq, bool want_logits) {
    tokens.push_back(token);
    positions.push_back(pos);
    seqs.push_back(seq);
    logits.push_back(want_logits ? 1 : 0);
  }
  size_t size() const { return tokens.size(); }
  void clear() { *this = Batch(); }
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const std::string& path, const EngineOptions& options);

  const models::HParams& hparams() const { return model_->hparams(); }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  // The tokenizer as the sampler sees it (token bytes, EOG ids); built once, shared by every run.
  std::shared_ptr<const sampling::VocabView> sampling_vocab();
  const gguf::File& file() const { return file_; }
  // A stable id of the weights: a hash of the tensor table (names, types, shapes) and of samples of every
  // tensor's bytes (start, middle, end). Identifies saved KV state; computed once, ~1 ms.
  const std::string& fingerprint();
  const models::Model& model() const { return *model_; }
  kv::KvCache& kv() { return *kv_; }
  // A context shift, as llama.cpp's llama_memory_seq_add with its K-shift graph: adds `delta` to positions
  // [p0, p1) of `seq` (p1 < 0: to the end) and re-rotates their keys, by the model's K-shift graph
  // (Model::build_kv_shift_graph) run by the scheduler on whichever backend holds each layer's cells: a
  // device-resident cache is shifted on the device. Cells shared with another sequence are refused. On an
  // error the positions are unchanged and the keys of layers already rotated are stale: drop the sequence.
  Status seq_add(kv::SeqId seq, int32_t p0, int32_t p1, int32_t delta);
  const EngineOptions& options() const { return options_; }
  int32_t n_ctx() const { return options_.n_ctx; }
  int32_t n_vocab() const { return model_->hparams().n_vocab; }
  int32_t n_threads() const { return pool_->n_threads(); }

  // What decode() returns for each flagged token: its logits (n_vocab floats), or its final-norm hidden
  // state (n_embd floats: what embeddings pool). The two kinds use separate cached plans.
  enum class Output { kLogits, kEmbeddings };
  // Evaluates `batch`; returns the output rows of the tokens flagged for logits, in batch order. On error
  // the KV cells the failed batch reserved are released again.
  Result<std::vector<float>> decode(const Batch& batch, Output output = Output::kLogits);

  // The plan for `params` (built, assigned, fused, allocated) — for --dump-graph and tests.
  Result<const sched::Plan*> plan_for(const graph::GraphParams& params);
  std::vector<std::string> backend_names() const { return scheduler_->backend_names(); }
  // The backends, highest priority first (tests read a device backend's counters through it).
  const std::vector<backend::Backend*>& backends() const { return scheduler_->backends(); }
  // The load's placement: blocks per backend, device weight and KV MiB, device, splits per step.
  const std::string& placement() const { return placement_; }
  // Prints it to stderr ("minfer: placement: ...") when a device backend is in use or the options asked
  // for backends or layers; load() does unless EngineOptions::quiet.
  void print_placement() const;
  int32_t n_gpu_layers() const { return offload_.n_gpu_layers; }
  int64_t n_graph_builds() const { return scheduler_->n_builds(); }
  // Observers of every executed node (dumps, traces, the visualizer; sched/observer.h). Not owned; add and
  // remove between decode() calls, on the thread that calls decode().
  void add_observer(sched::NodeObserver* observer) { scheduler_->add_observer(observer); }
  void remove_observer(sched::NodeObserver* observer) { scheduler_->remove_observer(observer); }
  ThreadPool& pool() { return *pool_; }
  // Memory, for monitoring: bytes of the weights the model reads (each tensor once, even when two roles
  // share it), and the largest activation arena a forward has used so far (read on the decode thread).
  size_t weights_bytes() const;
  size_t activations_peak_bytes() const { return activations_peak_; }
  // Per-op wall time (MINFER_OP_TIMING=1), on the thread that calls decode().
  const std::map<std::string, sched::Scheduler::OpTime>& op_times() const { return scheduler_->op_times(); }

 private:
  // The scheduler's plan for `params` (built on a miss): the forward graph, or with params.kv_shift the model's
  // K-shift graph.
  Result<sched::Plan*> plan(const graph::GraphParams& params);
  Engine() = default;
  Status decode_ubatch(const Batch& batch, size_t begin, size_t end, Output output, std::vector<float>* out);

  EngineOptions options_;
  gguf::File file_;
  std::unique_ptr<models::Model> model_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::shared_ptr<const sampling::VocabView> sampling_vocab_;
  std::string fingerprint_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<std::unique_ptr<backend::Backend>> backends_;  // from the registry, highest priority first
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unique_ptr<kv::KvCache> kv_;
  OffloadPlan offload_;
  std::string placement_;
  // Reused per micro-batch so a decode step allocates nothing.
  std::vector<int32_t> out_rows_, window_offsets_, window_cells_, window_positions_;
  size_t activations_peak_ = 0;
};

}  // namespace minfer::engine
