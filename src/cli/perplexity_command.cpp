// `minfer perplexity MODEL -f TEXT [-c 512] [--chunks N] [-b 2048] [-t N] [--kl-divergence-base FILE]
// [--kl-divergence] [-o text|json]`: llama-perplexity's perplexity and KL divergence (apps/perplexity.h
// has the definitions). Results go to stdout, progress to stderr.
//   - no KLD flag: PPL per chunk (running, "[1]x,[2]y,...") and overall with its +/- estimate;
//   - --kl-divergence-base FILE: the same, and the model's distributions are saved to FILE (the base);
//   - --kl-divergence --kl-divergence-base FILE: another model on the base's text and chunks: PPL(Q),
//     PPL(base), their ratio, KLD (mean, percentiles, max), Δp and top-token agreement.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/perplexity.h"
#include "apps/perplexity_base_file.h"
#include "cli/cli_app.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"

namespace minfer::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

Result<std::string> read_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return not_found("-f '{}': {}", path,
                     std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("-f '{}': cannot read", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();  // one trailing newline, as llama.cpp's -f
  if (text.empty()) return invalid_argument("-f '{}': the text is empty", path);
  return text;
}

// The text as llama-perplexity tokenizes it: special tokens are plain text, BOS first when the vocabulary
// adds one.
Result<std::vector<int32_t>> tokenize(const tokenizer::Tokenizer& tok, const std::string& text) {
  if (tok.add_eos()) {
    return unsupported(
        "the vocabulary appends EOS to every text (tokenizer.ggml.add_eos_token), which "
        "perplexity does not support (nor does llama-perplexity)");
  }
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
}

std::string eta(double seconds) {
  auto total = static_cast<int>(seconds);
  std::string out;
  if (total >= 3600) {
    out = fmt::format("{} hours ", total / 3600);
    total %= 3600;
  }
  return out + fmt::format("{:.2f} minutes", total / 60.0);
}

ordered_json mean_unc(const apps::MeanUnc& m) {
  return {{"value", m.mean}, {"uncertainty", m.unc}};
}

// Perplexity, and the base file when one is being written.
class PplSink : public apps::RowSink {
 public:
  PplSink(const apps::ChunkPlan& plan, int32_t n_vocab, apps::KldBaseWriter* writer, bool text)
      : plan_(plan), n_vocab_(n_vocab), writer_(writer), text_(text) {
    if (writer_ != nullptr) rows_.resize(static_cast<size_t>(plan.n_scored) * apps::base_row_bytes(n_vocab));
  }
  Status on_row(int32_t, int32_t j, const float* logits, int32_t target) override {
    double nll;
    if (writer_ != nullptr) {  // the same NLL, from the encoding pass, as llama-perplexity when it saves
      nll = apps::encode_base_row(logits, n_vocab_, target,
                                  rows_.data() + static_cast<size_t>(j) * apps::base_row_bytes(n_vocab_));
    } else {
      nll = apps::token_nll(logits, n_vocab_, target);
    }
    sums_.add(nll);
    chunk_.add(nll);
    return {};
  }
  Status on_chunk_end(int32_t chunk) override {
    if (writer_ != nullptr) MINFER_RETURN_IF_ERROR(writer_->write_chunk(rows_));
    chunks_.push_back({{"chunk", chunk + 1}, {"ppl", sums_.ppl()}, {"chunk_ppl", chunk_.ppl()}});
    chunk_ = {};
    if (text_) {
      fmt::print("[{}]{:.4f},", chunk + 1, sums_.ppl());
      std::fflush(stdout);
    } else {
      fmt::print(stderr, "perplexity: chunk {}/{}: PPL {:.4f}\n", chunk + 1, plan_.n_chunk, sums_.ppl());
    }
    return {};
  }
  const apps::NllSums& sums() const { return sums_; }
  const ordered_json& chunks() const { return chunks_; }

 private:
  apps::ChunkPlan plan_;
  int32_t n_vocab_;
  apps::KldBaseWriter* writer_;
  bool text_;
  apps::NllSums sums_, chunk_;
  std::vector<uint8_t> rows_;
  ordered_json chunks_ = ordered_json::array();
};

// KL divergence against the rows of a base file.
class KldSink : public apps::RowSink {
 public:
  KldSink(const apps::ChunkPlan& plan, int32_t n_vocab, apps::KldBaseReader* reader, bool text)
      : plan_(plan), n_vocab_(n_vocab), reader_(reader), text_(text) {}
  Status on_row(int32_t, int32_t j, const float* logits, int32_t target) override {
    if (j == 0) {
      MINFER_ASSIGN_OR_RETURN(rows_, reader_->read_chunk());
    }
    sums_.add(logits, n_vocab_, rows_.data() + static_cast<size_t>(j) * apps::base_row_bytes(n_vocab_),
              target);
    return {};
  }
  Status on_chunk_end(int32_t chunk) override {
    const apps::KldRunning r = apps::kld_running(sums_);
    chunks_.push_back({{"chunk", chunk + 1},
                       {"ppl", mean_unc(r.ppl)},
                       {"ln_ppl_ratio", mean_unc(r.ln_ppl_ratio)},
                       {"kld", mean_unc(r.kld)},
                       {"rms_p_diff", mean_unc(r.rms_p_diff)},
                       {"same_top_p", mean_unc(r.same_top)}});
    if (text_) {
      if (chunk == 0) {
        fmt::print(
            "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
            "Δp RMS            Same top p\n");
      }
      fmt::print(
          "{:4d}    {:9.4f} ± {:9.4f}    {:10.5f} ± {:10.5f}    {:10.5f} ± {:10.5f}    {:6.3f} ± {:6.3f} %"
          "    {:6.3f} ± {:6.3f} %\n",
          chunk + 1, r.ppl.mean, r.ppl.unc, r.ln_ppl_ratio.mean, r.ln_ppl_ratio.unc, r.kld.mean, r.kld.unc,
          100.0 * r.rms_p_diff.mean, 100.0 * r.rms_p_diff.unc, 100.0 * r.same_top.mean,
          100.0 * r.same_top.unc);
      std::fflush(stdout);
    } else {
      fmt::print(stderr, "perplexity: chunk {}/{}: PPL {:.4f}, KLD {:.6f}\n", chunk + 1, plan_.n_chunk,
                 r.ppl.mean, r.kld.mean);
    }
    return {};
  }
  const apps::KldSums& sums() const { return sums_; }
  const ordered_json& chunks() const { return chunks_; }

 private:
  apps::ChunkPlan plan_;
  int32_t n_vocab_;
  apps::KldBaseReader* reader_;
  bool text_;
  apps::KldSums sums_;
  std::span<const uint8_t> rows_;
  ordered_json chunks_ = ordered_json::array();
};

void print_kld_stats(const apps::KldStats& s) {
  fmt::print("\n====== Perplexity statistics ======\n");
  fmt::print("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}\n", s.ppl.mean, s.ppl.unc);
  fmt::print("Mean PPL(base)                : {:10.6f} ± {:10.6f}\n", s.ppl_base.mean, s.ppl_base.unc);
  fmt::print("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%\n", 100.0 * s.ln_ppl_correlation);
  fmt::print("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}\n", s.ln_ppl_ratio.mean,
             s.ln_ppl_ratio.unc);
  fmt::print("Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}\n", s.ppl_ratio.mean, s.ppl_ratio.unc);
  fmt::print("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}\n", s.ppl_diff.mean, s.ppl_diff.unc);
  fmt::print("\n====== KL divergence statistics ======\n");
  fmt::print("Mean    KLD: {:10.6f} ± {:10.6f}\n", s.kld.mean, s.kld.unc);
  fmt::print("Maximum KLD: {:10.6f}\n", s.kld_max);
  fmt::print("99.9%   KLD: {:10.6f}\n", s.kld_p999);
  fmt::print("99.0%   KLD: {:10.6f}\n", s.kld_p99);
  fmt::print("95.0%   KLD: {:10.6f}\n", s.kld_p95);
  fmt::print("90.0%   KLD: {:10.6f}\n", s.kld_p90);
  fmt::print("Median  KLD: {:10.6f}\n", s.kld_median);
  fmt::print("10.0%   KLD: {:10.6f}\n", s.kld_p10);
  fmt::print(" 5.0%   KLD: {:10.6f}\n", s.kld_p05);
  fmt::print(" 1.0%   KLD: {:10.6f}\n", s.kld_p01);
  fmt::print(" 0.1%   KLD: {:10.6f}\n", s.kld_p001);
  fmt::print("Minimum KLD: {:10.6f}\n", s.kld_min);
  fmt::print("\n====== Token probability statistics ======\n");
  fmt::print("Mean    Δp: {:6.3f} ± {:5.3f} %\n", 100.0 * s.p_diff.mean, 100.0 * s.p_diff.unc);
  const std::pair<const char*, float> rows[] = {
      {"Maximum Δp", s.p_diff_max},    {"99.9%   Δp", s.p_diff_p999}, {"99.0%   Δp", s.p_diff_p99},
      {"95.0%   Δp", s.p_diff_p95},    {"90.0%   Δp", s.p_diff_p90},  {"75.0%   Δp", s.p_diff_p75},
      {"Median  Δp", s.p_diff_median}, {"25.0%   Δp", s.p_diff_p25},  {"10.0%   Δp", s.p_diff_p10},
      {" 5.0%   Δp", s.p_diff_p05},    {" 1.0%   Δp", s.p_diff_p01},  {" 0.1%   Δp", s.p_diff_p001},
      {"Minimum Δp", s.p_diff_min}};
  for (const auto& [name, v] : rows) fmt::print("{}: {:6.3f}%\n", name, 100.0 * v);
  fmt::print("RMS Δp    : {:6.3f} ± {:5.3f} %\n", 100.0 * s.rms_p_diff.mean, 100.0 * s.rms_p_diff.unc);
  fmt::print("Same top p: {:6.3f} ± {:5.3f} %\n", 100.0 * s.same_top.mean, 100.0 * s.same_top.unc);
}

ordered_json kld_stats_json(const apps::KldStats& s) {
  return {{"count", s.count},
          {"ppl", mean_unc(s.ppl)},
          {"ppl_base", mean_unc(s.ppl_base)},
          {"ln_ppl_correlation", s.ln_ppl_correlation},
          {"ln_ppl_ratio", mean_unc(s.ln_ppl_ratio)},
          {"ppl_ratio", mean_unc(s.ppl_ratio)},
          {"ppl_diff", mean_unc(s.ppl_diff)},
          {"kld",
           {{"mean", s.kld.mean},
            {"uncertainty", s.kld.unc},
            {"max", s.kld_max},
            {"p99_9", s.kld_p999},
            {"p99", s.kld_p99},
            {"p95", s.kld_p95},
            {"p90", s.kld_p90},
            {"median", s.kld_median},
            {"p10", s.kld_p10},
            {"p5", s.kld_p05},
            {"p1", s.kld_p01},
            {"p0_1", s.kld_p001},
            {"min", s.kld_min}}},
          {"p_diff",
           {{"mean", s.p_diff.mean},
            {"uncertainty", s.p_diff.unc},
            {"max", s.p_diff_max},
            {"p99_9", s.p_diff_p999},
            {"p99", s.p_diff_p99},
            {"p95", s.p_diff_p95},
            {"p90", s.p_diff_p90},
            {"p75", s.p_diff_p75},
            {"median", s.p_diff_median},
            {"p25", s.p_diff_p25},
            {"p10", s.p_diff_p10},
            {"p5", s.p_diff_p05},
            {"p1", s.p_diff_p01},
            {"p0_1", s.p_diff_p001},
            {"min", s.p_diff_min}}},
          {"rms_p_diff", mean_unc(s.rms_p_diff)},
          {"same_top_p", mean_unc(s.same_top)}};
}

}  // namespace

int perplexity_command(const Args& argv) {
  CLI::App app(
      "Perplexity of a model on a text, and KL divergence against a base model, as llama-perplexity "
      "computes them.",
      "minfer perplexity");
  ModelArg model_arg;
  std::string text_file, base_file, output = "text", cache;
  int32_t n_ctx = 512, chunks = -1, batch = 2048, threads = 0;
  DeviceArgs device;
  bool kld = false;
  std::string flash_attn = "auto";
  add_model_arg(app, &model_arg);
  app.add_option("-f,--file", text_file, "the text to evaluate (UTF-8)");
  auto* ctx_opt =
      app.add_option("-c,--ctx-size", n_ctx, "tokens per chunk; the second half of each is scored")
          ->capture_default_str()
          ->check(CLI::Range(4, 1 << 24));
  app.add_option("--chunks", chunks, "evaluate at most N chunks (-1: all)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 30));
  app.add_option("-b,--batch-size", batch,
                 "tokens per evaluation: batch / n_ctx chunks are evaluated together (micro-batches of 512)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-t,--threads", threads, "threads (0: one per core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--kl-divergence-base", base_file,
                 "without --kl-divergence: save this model's distributions to FILE; with it: read them");
  app.add_flag("--kl-divergence", kld,
               "compare this model with the base distributions in --kl-divergence-base");
  app.add_option("--cache-type", cache, "KV cache type: f32, f16 (default) or q8_0 (env MINFER_CACHE_TYPE)");
  app.add_option("-o,--output", output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  add_device_options(app, &device);
  add_flash_attn_option(app, &flash_attn);
  if (int code = parse_args(app, argv); code >= 0) return code;
  auto offload = offload_options(app, device);
  if (!offload.ok()) return fail(offload.status());
  if (kld && base_file.empty()) {
    return fail(
        invalid_argument("--kl-divergence needs --kl-divergence-base FILE (the base model's "
                         "distributions, written by a run without --kl-divergence)"));
  }
  if (!kld && text_file.empty()) return fail(invalid_argument("give the text to evaluate with -f FILE"));
  if (chunks == 0) return fail(invalid_argument("--chunks 0: give a positive count, or -1 for all chunks"));
  const bool text_out = output == "text";
  auto taken = take_model(model_arg);
  if (!taken.ok()) return fail(taken.status());
  auto model = resolve_model_arg(*taken);
  if (!model.ok()) return fail(model.status());
  auto kv_type = kv_cache_type(cache);
  if (!kv_type.ok()) return fail(kv_type.status());

  std::string text;
  if (!text_file.empty()) {
    auto read = read_text(text_file);
    if (!read.ok()) return fail(read.status());
    text = std::move(*read);
  }
  // KL divergence: the base file decides n_ctx and the chunks (checked against -c and -f when given).
  std::optional<apps::KldBaseReader> reader;
  if (kld) {
    auto opened = apps::KldBaseReader::open(base_file);
    if (!opened.ok()) return fail(opened.status());
    reader.emplace(std::move(*opened));
    if (ctx_opt->count() == 0) n_ctx = reader->info().n_ctx;
  }

  // llama-perplexity evaluates batch / n_ctx chunks together in perplexity mode, one in KLD mode.
  int32_t n_seq = kld ? 1 : std::max(1, batch / n_ctx);
  engine::EngineOptions options;
  options.n_threads = threads;
  options.n_batch = std::min({512, batch, n_ctx});
  options.cache_type = *kv_type;
  options.offload = *offload;
  options.n_ctx = static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(n_seq) * n_ctx, 1 << 30));
  auto loaded = engine::Engine::load(*model, options);
  if (!loaded.ok()) return fail(loaded.status());
  engine::Engine& e = **loaded;
  if (e.n_ctx() < n_ctx) {  // the engine's cache never exceeds the training context
    return fail(invalid_argument("-c {} exceeds the model's training context ({} tokens)", n_ctx,
                                 e.hparams().n_ctx_train));
  }
  n_seq = std::min(n_seq, e.n_ctx() / n_ctx);  // more cells than training allows: fewer chunks at once
  const int32_t n_vocab = e.n_vocab();
  const uint64_t vocab_id = apps::vocab_hash(e.tokenizer());

  std::vector<int32_t> tokens;
  if (!text.empty()) {
    if (text_out) fmt::print(stderr, "perplexity: tokenizing the input ..\n");
    auto ids = tokenize(e.tokenizer(), text);
    if (!ids.ok()) return fail(ids.status());
    tokens = std::move(*ids);
  }

  apps::ChunkPlan plan;
  if (kld) {
    apps::KldBaseExpect expect{.n_vocab = n_vocab, .vocab_hash = vocab_id, .n_ctx = {}, .text_hash = {}};
    if (ctx_opt->count() > 0) expect.n_ctx = n_ctx;
    if (!text.empty()) expect.text_hash = apps::tokens_hash(tokens);
    if (Status st = reader->check(expect); !st.ok()) return fail(st);
    const apps::KldBaseInfo& info = reader->info();
    tokens = info.tokens;
    plan.n_ctx = info.n_ctx;
    plan.first = info.n_ctx / 2;
    plan.n_scored = info.n_scored;
    plan.n_chunk = chunks > 0 ? std::min(chunks, info.n_chunk) : info.n_chunk;
    plan.n_tokens = info.n_text_tokens;
  } else {
    auto planned = apps::plan_chunks(static_cast<int64_t>(tokens.size()), n_ctx, chunks);
    if (!planned.ok()) return fail(invalid_argument("-f '{}': {}", text_file, planned.status().message()));
    plan = *planned;
  }
  n_seq = std::min(n_seq, plan.n_chunk);

  std::optional<apps::KldBaseWriter> writer;
  if (!kld && !base_file.empty()) {
    apps::KldBaseInfo info;
    info.n_ctx = plan.n_ctx;
    info.n_vocab = n_vocab;
    info.n_chunk = plan.n_chunk;
    info.n_scored = plan.n_scored;
    info.vocab_hash = vocab_id;
    info.text_hash = apps::tokens_hash(tokens);
    info.n_text_tokens = static_cast<int64_t>(tokens.size());
    info.tokens.assign(tokens.begin(),
                       tokens.begin() + static_cast<std::ptrdiff_t>(plan.n_chunk) * plan.n_ctx);
    auto created = apps::KldBaseWriter::create(base_file, info);
    if (!created.ok()) return fail(created.status());
    writer.emplace(std::move(*created));
    fmt::print(stderr, "perplexity: saving the base distributions to {}\n", base_file);
  }

  fmt::print(stderr,
             "perplexity: {} tokens, {} chunks of n_ctx={} ({} scored tokens each), batch_size={}, n_seq={}, "
             "{} threads\n",
             plan.n_tokens, plan.n_chunk, plan.n_ctx, plan.n_scored, options.n_batch, n_seq, e.n_threads());
  apps::EvalOptions eval;
  eval.n_seq = n_seq;
  eval.bos = e.tokenizer().added_bos();
  eval.n_batch = options.n_batch;

  // Wraps a sink to report the time of the first pass and an ETA, as llama-perplexity does.
  struct Timed : apps::RowSink {
    apps::RowSink* inner;
    int32_t n_chunk, n_seq;
    Clock::time_point start = Clock::now();
    bool reported = false;
    Status on_row(int32_t c, int32_t j, const float* l, int32_t t) override {
      return inner->on_row(c, j, l, t);
    }
    Status on_chunk_end(int32_t c) override {
      if (!reported && c == n_seq - 1) {  // the first group of chunks is evaluated
        reported = true;
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        fmt::print(stderr, "perplexity: {:.2f} seconds per pass - ETA {}\n", s,
                   eta(s * n_chunk / std::max(1, n_seq)));
      }
      return inner->on_chunk_end(c);
    }
  };

  ordered_json j = {{"model", *model},
                    {"n_ctx", plan.n_ctx},
                    {"n_batch", options.n_batch},
                    {"n_seq", n_seq},
                    {"n_tokens", plan.n_tokens},
                    {"n_chunk", plan.n_chunk},
                    {"n_scored", static_cast<int64_t>(plan.n_chunk) * plan.n_scored}};
  if (!kld) {
    PplSink sink(plan, n_vocab, writer ? &*writer : nullptr, text_out);
    Timed timed;
    timed.inner = &sink;
    timed.n_chunk = plan.n_chunk;
    timed.n_seq = n_seq;
    if (Status st = apps::evaluate_chunks(e, tokens, plan, eval, timed); !st.ok()) return fail(st);
    if (writer) {
      if (Status st = writer->finish(); !st.ok()) return fail(st);
    }
    const apps::NllSums& s = sink.sums();
    if (text_out) {
      fmt::print("\nFinal estimate: PPL = {:.4f} +/- {:.5f}\n", s.ppl(), s.ppl_uncertainty());
    } else {
      j["ppl"] = s.ppl();
      j["ppl_uncertainty"] = s.ppl_uncertainty();
      j["kl_divergence_base"] = base_file.empty() ? ordered_json(nullptr) : ordered_json(base_file);
      j["chunks"] = sink.chunks();
      fmt::print("{}\n", j.dump(2));
    }
    return 0;
  }

  KldSink sink(plan, n_vocab, &*reader, text_out);
  Timed timed;
  timed.inner = &sink;
  timed.n_chunk = plan.n_chunk;
  timed.n_seq = 1;
  if (Status st = apps::evaluate_chunks(e, tokens, plan, eval, timed); !st.ok()) return fail(st);
  const apps::KldStats stats = apps::kld_stats(sink.sums());
  if (stats.count < 100) {
    fmt::print(
        stderr,
        "perplexity: warning: statistics over only {} tokens (llama-perplexity prints none under 100)\n",
        stats.count);
  }
  if (text_out) {
    print_kld_stats(stats);
  } else {
    j["kl_divergence_base"] = base_file;
    j["chunks"] = sink.chunks();
    j["statistics"] = kld_stats_json(stats);
    fmt::print("{}\n", j.dump(2));
  }
  return 0;
}

}  // namespace minfer::cli
