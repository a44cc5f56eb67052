#include "engine/engine.h"

#include <algorithm>
#include <set>
#include <thread>

#include "backend/registry.h"
#include "core/log.h"

namespace minfer::engine {

Result<std::unique_ptr<Engine>> Engine::load(const std::string& path, const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  MINFER_ASSIGN_OR_RETURN(e->file_, gguf::File::open(path));
  MINFER_ASSIGN_OR_RETURN(e->model_, models::load_model(e->file_));
  MINFER_ASSIGN_OR_RETURN(e->tokenizer_, tokenizer::Tokenizer::from_gguf(e->file_.metadata()));
  const models::HParams& hp = e->model_->hparams();
  if (e->tokenizer_->n_vocab() > hp.n_vocab) {
    return invalid_argument("model: tokenizer has {} tokens but token_embd has {} rows",
                            e->tokenizer_->n_vocab(), hp.n_vocab);
  }
  if (options.n_ctx <= 0) return invalid_argument("n_ctx must be positive (got {})", options.n_ctx);
  if (options.n_batch <= 0) return invalid_argument("batch size must be positive (got {})", options.n_batch);
  e->options_.n_ctx = std::min(options.n_ctx, hp.n_ctx_train);
  int32_t threads = options.n_threads;
  if (threads <= 0) threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  e->pool_ = std::make_unique<ThreadPool>(threads);
  MINFER_ASSIGN_OR_RETURN(e->options_.offload, offload_from_env(options.offload));
  const OffloadOptions& off = e->options_.offload;
  MINFER_ASSIGN_OR_RETURN(e->backends_, backend::create_backends(off.backends, off.device));
  OffloadPlan& plan = e->offload_;
  plan.host = e->backends_.back().get();  // the CPU, always last
  for (auto& b : e->backends_) {
    if (!b->host_memory() && plan.device == nullptr) plan.device = b.get();
  }
  // Attention reads each head's K segment in the cache's blocks, so a head must hold whole blocks.
  const int64_t block = traits(options.cache_type).block_size;
  if (hp.head_dim % block != 0) {
    return unsupported(
        "KV cache type {} needs a head dimension that is a multiple of {} (this model's is {})",
        dtype_name(options.cache_type), block, hp.head_dim);
  }
  kv::KvConfig kvc;
  kvc.n_layer = hp.n_layer;
  kvc.n_cells = e->options_.n_ctx;
  kvc.row_elems = hp.n_embd_kv();
  kvc.type = options.cache_type;
  const auto kv_row = kv::row_bytes_of(kvc);
  if (!kv_row) return invalid_argument("KV cache: rows of {} do not fit {} blocks", kvc.row_elems, dtype_name(kvc.type));
  plan.n_layer = hp.n_layer;
  // auto keeps room for a layer's K and V and one micro-batch's activations (a few rows per token).
  const uint64_t kv_layer_bytes = 2 * *kv_row * static_cast<uint64_t>(kvc.n_cells);
  const uint64_t act_bytes = static_cast<uint64_t>(std::min(options.n_batch, e->options_.n_ctx)) * 4 *
                             (4 * static_cast<uint64_t>(hp.n_embd) + 3 * static_cast<uint64_t>(hp.n_ff)) +
                             4 * static_cast<uint64_t>(hp.n_vocab);
  MINFER_ASSIGN_OR_RETURN(plan.n_gpu_layers, resolve_gpu_layers(off, plan.device, hp, e->model_->weights(),
                                                                kv_layer_bytes, act_bytes));
  std::vector<backend::Backend*> backends;
  for (auto& b : e->backends_) backends.push_back(b.get());
  e->scheduler_ = std::make_unique<sched::Scheduler>(std::move(backends), e->pool_.get());
  if (plan.device != nullptr) e->scheduler_->set_placement(offload_placement(plan));
  MINFER_RETURN_IF_ERROR(register_weights(plan, *e->model_, *e->scheduler_));
  // A layer's K and V live where its attention runs (the CPU while the device has no attention shader).
  MINFER_ASSIGN_OR_RETURN(graph::Graph probe, e->model_->build_graph(graph::GraphParams{1, 1, false}));
  MINFER_RETURN_IF_ERROR(e->scheduler_->assign_ops(probe));
  // kv_store writes the cells attention reads: both must run where the layer's cells live.
  std::vector<backend::Backend*> kv_backends(static_cast<size_t>(hp.n_layer), plan.host);
  std::vector<backend::Backend*> store_backends(static_cast<size_t>(hp.n_layer), plan.host);
  for (const graph::Node& n : probe.nodes) {
    if ((n.op != graph::OpKind::kAttention && n.op != graph::OpKind::kKvStore) || n.params.layer < 0 ||
        n.params.layer >= hp.n_layer)
      continue;
    auto& slot = n.op == graph::OpKind::kAttention ? kv_backends : store_backends;
    slot[static_cast<size_t>(n.params.layer)] = e->scheduler_->backends()[static_cast<size_t>(n.backend)];
  }
  for (int32_t l = 0; l < hp.n_layer; ++l) {
    const auto i = static_cast<size_t>(l);
    if (kv_backends[i] != store_backends[i]) {
      return unsupported("layer {}: kv_store runs on {} but attention on {}; a layer's KV cells live on one backend",
                         l, store_backends[i]->name(), kv_backends[i]->name());
    }
  }
  auto kv = kv::KvCache::create(kvc, kv_backends);
  if (!kv.ok()) return offload_failure(plan, kv.status());  // names the layer, K or V, and the bytes
  e->kv_ = std::move(*kv);
  // The decode plan is built now: its splits go into the placement line, and the first step reuses it.
  auto decode = e->plan_for(graph::GraphParams{1, 1, false});
  if (!decode.ok()) return offload_failure(plan, decode.status());  // the activation arenas' bytes
  const sched::Plan* decode_plan = *decode;
  const size_t kv_device = plan.device != nullptr ? e->kv_->bytes_on(*plan.device) : 0;
  const std::string kv_where = kv_device == 0                  ? std::string("CPU")
                               : kv_device == e->kv_->bytes() ? std::string(plan.device->name())
                                                               : fmt::format("{} and CPU", plan.device->name());
  e->placement_ = placement_line(plan, e->kv_->bytes(), kv_where, decode_plan->splits.size());
  if (!options.quiet) e->print_placement();
  return e;
}

void Engine::print_placement() const {
  if ((offload_.device != nullptr || options_.offload.explicit_request) && log_level() <= LogLevel::kWarn)
    fmt::print(stderr, "minfer: {}\n", placement_);
}

std::shared_ptr<const sampling::VocabView> Engine::sampling_vocab() {
  if (!sampling_vocab_) {
    auto view = std::make_shared<sampling::VocabView>();
    const tokenizer::Tokenizer& tok = *tokenizer_;
    view->token_bytes.resize(static_cast<size_t>(n_vocab()));  // rows past the tokenizer stay empty
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (!tok.is_control(id)) view->token_bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
    }
    view->eog_ids = tok.eog_ids();
    const tokenizer::Tokenizer* tp = &tok;
    view->tokenize = [tp](std::string_view text) {
      return tp->encode(text, /*add_special=*/false, /*parse_special=*/false);
    };
    sampling_vocab_ = std::move(view);
  }
  return sampling_vocab_;
}

Result<sched::Plan*> Engine::plan(const graph::GraphParams& params) {
  return scheduler_->plan(params, [&](const graph::GraphParams& p) {
    return p.kv_shift ? model_->build_kv_shift_graph(p) : model_->build_graph(p);
  });
}

Result<const sched::Plan*> Engine::plan_for(const graph::GraphParams& params) {
  MINFER_ASSIGN_OR_RETURN(sched::Plan * p, plan(params));
  return p;
}

Status Engine::seq_add(kv::SeqId seq, int32_t p0, int32_t p1, int32_t delta) {
  MINFER_ASSIGN_OR_RETURN(const std::vector<int32_t> cells, kv_->shift_cells(seq, p0, p1, delta));
  if (cells.empty()) return {};
  const auto n = static_cast<int32_t>(cells.size());
  MINFER_ASSIGN_OR_RETURN(sched::Plan * shift, plan(graph::GraphParams{n, 0, false, true}));
  // The cells are read and written where they live: the placement that put each layer's attention there
  // must have put its kv_rows and kv_store there too.
  for (const graph::Node& node : shift->graph.nodes) {
    if (node.op != graph::OpKind::kKvRows && node.op != graph::OpKind::kKvStore) continue;
    const backend::Backend* runs = scheduler_->backends()[static_cast<size_t>(node.backend)];
    const backend::Backend& holds = kv_->layer_backend(node.params.layer);
    if (runs != &holds) {
      return error(StatusCode::kInternal, "K shift: '{}' runs on {} but layer {}'s cells live on {}", node.name,
                   runs->name(), node.params.layer, holds.name());
    }
  }
  // Each cell's delta is its position input; the plan's token count is the cell count (no token is read).
  const std::vector<int32_t> deltas(cells.size(), delta);
  backend::BatchView batch;
  batch.tokens = deltas;
  batch.positions = deltas;
  batch.store_cells = cells;
  MINFER_RETURN_IF_ERROR(scheduler_->execute(*shift, batch, kv_->views()));
  kv_->add_positions(cells, delta);
  return {};
}

size_t Engine::weights_bytes() const {
  std::set<const void*> seen;
  size_t total = 0;
  for (const backend::WeightSource& w : model_->weights()) {
    if (seen.insert(w.data).second) total += w.n_bytes;
  }
  return total;
}

Status Engine::decode_ubatch(const Batch& batch, size_t begin, size_t end, Output output,
                             std::vector<float>* out) {
  const auto n = static_cast<int32_t>(end - begin);
  std::span<const int32_t> tokens(batch.tokens.data() + begin, end - begin);
  std::span<const int32_t> positions(batch.positions.data() + begin, end - begin);
  std::span<const kv::SeqId> seqs(batch.seqs.data() + begin, end - begin);
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab())
      return invalid_argument("token id {} outside the vocabulary [0, {})", t, n_vocab());
  }
  out_rows_.clear();
  for (int32_t i = 0; i < n; ++i) {
    if (batch.logits[begin + static_cast<size_t>(i)]) out_rows_.push_back(i);
  }
  const bool wanted = !out_rows_.empty();
  if (!wanted) out_rows_.push_back(n - 1);  // the graph always ends in logits; they are dropped

  MINFER_ASSIGN_OR_RETURN(std::vector<int32_t> cells, kv_->allocate(seqs, positions));
  kv_->attention_windows(seqs, positions, &window_offsets_, &window_cells_, &window_positions_);
  graph::GraphParams params{n, static_cast<int32_t>(out_rows_.size()), output == Output::kEmbeddings};
  auto step = plan(params);
  Status st = step.status();
  if (st.ok()) {
    size_t arena = 0;
    for (size_t b : (*step)->arena_bytes) arena += b;
    activations_peak_ = std::max(activations_peak_, arena);
    backend::BatchView view;
    view.tokens = tokens;
    view.positions = positions;
    view.output_rows = out_rows_;
    view.store_cells = cells;
    view.window_offsets = window_offsets_;
    view.window_cells = window_cells_;
    view.window_positions = window_positions_;
    st = scheduler_->execute(**step, view, kv_->views());
  }
  if (!st.ok()) {  // give the cells back: a failed batch leaves the cache as it was
    for (size_t i = 0; i < seqs.size(); ++i) kv_->seq_rm(seqs[i], positions[i], positions[i] + 1);
    return st;
  }
  if (wanted) {
    const float* rows = scheduler_->output_data(**step, 0);
    const auto width = static_cast<size_t>(output == Output::kEmbeddings ? hparams().n_embd : n_vocab());
    out->insert(out->end(), rows, rows + out_rows_.size() * width);
  }
  return {};
}

const std::string& Engine::fingerprint() {
  if (!fingerprint_.empty()) return fingerprint_;
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  };
  for (const gguf::TensorInfo& t : file_.tensors()) {
    mix(t.name.data(), t.name.size());
    mix(&t.type, sizeof(t.type));
    mix(t.ne.data(), sizeof(t.ne));
    if (t.data == nullptr) continue;
    const uint64_t sample = std::min<uint64_t>(t.n_bytes, 256);
    for (uint64_t at : {uint64_t{0}, (t.n_bytes - sample) / 2, t.n_bytes - sample}) mix(t.data + at, sample);
  }
  fingerprint_ = fmt::format("{}-{:016x}", hparams().arch, h);
  return fingerprint_;
}

Result<std::vector<float>> Engine::decode(const Batch& batch, Output output) {
  if (batch.size() == 0) return invalid_argument("decode: empty batch");
  if (batch.positions.size() != batch.size() || batch.seqs.size() != batch.size() ||
      batch.logits.size() != batch.size()) {
    return invalid_argument("decode: batch arrays have different lengths");
  }
  std::vector<float> out;
  const auto step = static_cast<size_t>(options_.n_batch);
  for (size_t begin = 0; begin < batch.size(); begin += step) {
    Status st = decode_ubatch(batch, begin, std::min(batch.size(), begin + step), output, &out);
    if (!st.ok()) {  // undo the micro-batches already stored, so a failed decode changes nothing
      for (size_t i = 0; i < begin; ++i)
        kv_->seq_rm(batch.seqs[i], batch.positions[i], batch.positions[i] + 1);
      return st;
    }
  }
  return out;
}

}  // namespace minfer::engine
