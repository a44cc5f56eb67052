#include "engine/speculative.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/depth_planner.h"
#include "tokenizer/stream_decoder.h"

namespace minfer::engine {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

void SpecStats::record(int32_t k, int32_t n_accepted) {
  ++rounds;
  drafted += k;
  accepted += n_accepted;
  for (int32_t i = 0; i < std::min(k, kMaxDraftDepth); ++i) {
    if (i > n_accepted) break;  // an earlier token was refused: this one was never judged
    ++reached_at[static_cast<size_t>(i)];
    if (i < n_accepted) ++accepted_at[static_cast<size_t>(i)];
  }
}

void SpecStats::add(const SpecStats& other) {
  rounds += other.rounds;
  drafted += other.drafted;
  accepted += other.accepted;
  for (size_t i = 0; i < reached_at.size(); ++i) {
    reached_at[i] += other.reached_at[i];
    accepted_at[i] += other.accepted_at[i];
  }
}

std::string SpecStats::by_position() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < reached_at.size() && reached_at[i] > 0; ++i) {
    parts.push_back(fmt::format("{}: {:.0f}% ({})", i + 1,
                                100.0 * static_cast<double>(accepted_at[i]) / static_cast<double>(reached_at[i]),
                                reached_at[i]));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string SpecStats::summary() const {
  std::string out = fmt::format("speculative: {} rounds, {} drafted, {} accepted ({:.1f}%), {:.2f} accepted per round",
                                rounds, drafted, accepted, 100.0 * acceptance_rate(), mean_accepted());
  if (rounds > 0) out += "; by position " + by_position();
  return out;
}

Status check_same_vocabulary(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab()) {
    return invalid_argument("the draft model's vocabulary has {} tokens, the target's {}", draft.n_vocab(),
                            target.n_vocab());
  }
  for (int32_t id = 0; id < target.n_vocab(); ++id) {
    if (target.token_text(id) != draft.token_text(id)) {
      return invalid_argument(
          "the draft model's vocabulary differs from the target's at token {} ('{}' vs '{}')", id,
          draft.token_text(id), target.token_text(id));
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------

Result<Draft> LookupDrafter::propose(std::span<const int32_t> history, int32_t n) {
  Draft d;
  const auto len = static_cast<int64_t>(history.size());
  for (int32_t g = std::min<int32_t>(max_ngram_, static_cast<int32_t>(len) - 1); g >= min_ngram_; --g) {
    const std::span<const int32_t> tail = history.subspan(static_cast<size_t>(len - g));
    // The most recent earlier occurrence that has a continuation.
    for (int64_t start = len - g - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), history.begin() + start)) continue;
      for (int64_t i = start + g; i < len && static_cast<int32_t>(d.tokens.size()) < n; ++i) {
        d.tokens.push_back(history[static_cast<size_t>(i)]);
      }
      d.q.resize(d.tokens.size());
      return d;
    }
  }
  return d;
}

Result<std::unique_ptr<ModelDrafter>> ModelDrafter::create(std::unique_ptr<Engine> draft,
                                                           const Engine& target) {
  MINFER_RETURN_IF_ERROR(check_same_vocabulary(target.tokenizer(), draft->tokenizer()));
  draft->kv().clear();
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(std::move(draft)));
}

Status ModelDrafter::begin(std::span<const int32_t> prompt, const sampling::SamplerConfig& sampling) {
  if (sampling.mirostat != 0) {
    return unsupported(
        "speculative decoding cannot be combined with mirostat (its state moves with every draw)");
  }
  // The generation's own pipeline with another seed per sequence, independent of the target's draws.
  sampling::SamplerConfig cfg = sampling;
  if (cfg.seed != sampling::SamplerConfig::kRandomSeed) cfg.seed ^= 0x5eedd4afULL + n_sequences_;
  ++n_sequences_;
  MINFER_ASSIGN_OR_RETURN(sampler_, sampling::Sampler::create(cfg, engine_->sampling_vocab()));
  for (int32_t id : prompt) sampler_->accept_history(id);
  synced_ = prompt.size();
  return {};
}

Result<Draft> ModelDrafter::propose(std::span<const int32_t> history, int32_t n) {
  Draft d;
  if (history.empty() || n <= 0) return d;
  if (!sampler_) return invalid_argument("ModelDrafter: propose() before begin()");
  // The sampler follows the sequence: last round's proposals out, the tokens taken since in.
  sampler_->rewind();
  for (size_t i = std::min(synced_, history.size()); i < history.size(); ++i) sampler_->accept(history[i]);
  synced_ = history.size();
  sampler_->mark();
  // Keep the cache in step: drop what the target rejected, evaluate what it has not seen (always at least
  // the last token, whose logits start the draft).
  const size_t keep = std::min(common_prefix(cached_, history), history.size() - 1);
  engine_->kv().seq_rm(0, static_cast<int32_t>(keep), -1);
  cached_.resize(keep);
  const int32_t room = engine_->n_ctx() - static_cast<int32_t>(history.size());
  n = std::min(n, room);
  if (n <= 0) return d;
  Batch batch;
  for (size_t i = keep; i < history.size(); ++i)
    batch.add(history[i], static_cast<int32_t>(i), 0, i + 1 == history.size());
  MINFER_ASSIGN_OR_RETURN(std::vector<float> logits, engine_->decode(batch));
  cached_.assign(history.begin(), history.end());
  for (int32_t i = 0; i < n; ++i) {
    MINFER_ASSIGN_OR_RETURN(std::vector<sampling::TokenData> q, sampler_->distribution(logits));
    const int32_t token = sampler_->draw(q);
    sampler_->accept(token);
    d.tokens.push_back(token);
    d.q.push_back(q.size() == 1 ? std::vector<sampling::TokenData>() : std::move(q));
    if (engine_->tokenizer().is_eog(token) || i + 1 == n) break;
    batch.clear();
    batch.add(token, static_cast<int32_t>(cached_.size()), 0, true);
    MINFER_ASSIGN_OR_RETURN(logits, engine_->decode(batch));
    cached_.push_back(token);
  }
  return d;
}

// ---------------------------------------------------------------------------------------------------------

Result<GenerateResult> generate_speculative(Engine& target, Drafter& drafter,
                                            const std::vector<int32_t>& prompt_ids,
                                            const GenerateOptions& options, const SpecOptions& spec,
                                            SpecStats* stats,
                                            const std::function<void(std::string_view)>& on_text) {
  GenerateResult result;
  result.prompt_ids = prompt_ids;
  SpecStats local;
  SpecStats& st = stats != nullptr ? *stats : local;
  MINFER_RETURN_IF_ERROR(check_generation_start(target, prompt_ids, options));
  const int32_t n_cached = options.n_cached;
  if (spec.draft_n < 1 || spec.draft_n > kMaxDraftDepth) {
    return invalid_argument("--spec-draft-n {} is outside [1, {}]", spec.draft_n, kMaxDraftDepth);
  }
  const int32_t n_ctx = target.n_ctx();
  if (options.sampling.mirostat != 0) {
    return unsupported(
        "speculative decoding cannot be combined with mirostat (its state moves with every draw)");
  }
  MINFER_ASSIGN_OR_RETURN(sampling::Sampler sampler,
                          sampling::Sampler::create(options.sampling, target.sampling_vocab()));
  for (int32_t id : prompt_ids) sampler.accept_history(id);
  MINFER_RETURN_IF_ERROR(drafter.begin(prompt_ids, options.sampling));

  Batch batch;
  for (size_t i = static_cast<size_t>(n_cached); i < prompt_ids.size(); ++i) {
    batch.add(prompt_ids[i], static_cast<int32_t>(i), options.seq, i + 1 == prompt_ids.size());
  }
  auto t0 = Clock::now();
  MINFER_ASSIGN_OR_RETURN(std::vector<float> logits, target.decode(batch));
  result.timings.n_prompt = static_cast<int32_t>(prompt_ids.size()) - n_cached;
  result.timings.n_cached = n_cached;
  if (options.keep_first_logits) result.first_logits = logits;
  result.timings.prompt_ms = ms_since(t0);

  tokenizer::StreamDecoder detok(target.tokenizer());
  StopMatcher stops(options.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };
  const int32_t n_vocab = target.n_vocab();
  std::vector<int32_t> history = prompt_ids;  // tokens in the target's cache, positions 0..n-1
  DepthPlanner planner(spec.draft_n);
  t0 = Clock::now();
  result.stop_reason = "length";

  // Takes the target's choice `token`; false when generation ends with it.
  auto take = [&](int32_t token) {
    sampler.accept(token);
    if (target.tokenizer().is_eog(token)) {
      result.stop_reason = "eog";
      return false;
    }
    result.generated_ids.push_back(token);
    bool stopped = false;
    emit(stops.push(detok.push(token), &stopped));
    if (stopped) {
      result.stop_reason = "stop";
      return false;
    }
    if (options.n_predict >= 0 && static_cast<int32_t>(result.generated_ids.size()) >= options.n_predict)
      return false;
    return true;
  };
  auto grammar_stop = [&](const Status& s) -> Result<GenerateResult> {
    if (!sampler.has_grammar()) return s;
    result.stop_reason = "grammar";
    result.stop_detail = s.message();
    emit(stops.flush());
    result.timings.n_generated = static_cast<int32_t>(result.generated_ids.size());
    result.timings.generate_ms = ms_since(t0);
    return result;
  };

  // The first token comes from the prompt's logits, as without speculation.
  auto first = sampler.sample(logits);
  if (!first.ok()) return grammar_stop(first.status());
  int32_t last = *first;
  bool going = take(last);
  while (going) {
    if (options.should_stop && options.should_stop()) {
      result.stop_reason = "cancelled";
      break;
    }
    const auto pos = static_cast<int32_t>(history.size());  // where `last` goes
    if (pos >= n_ctx) {
      result.stop_reason = "context";
      break;
    }
    int32_t depth = spec.adaptive ? planner.choose() : spec.draft_n;
    if (options.n_predict >= 0) {
      depth = std::min(depth, options.n_predict - static_cast<int32_t>(result.generated_ids.size()) - 1);
    }
    depth = std::min(depth, n_ctx - pos - 1);
    Draft draft;
    double draft_ms = 0.0;
    if (depth > 0) {
      history.push_back(last);
      const auto td = Clock::now();
      auto proposed = drafter.propose(history, depth);
      draft_ms = ms_since(td);
      history.pop_back();
      if (!proposed.ok()) return proposed.status().with_context("draft: ");
      draft = std::move(*proposed);
      if (static_cast<int32_t>(draft.tokens.size()) > depth) draft.tokens.resize(static_cast<size_t>(depth));
      draft.q.resize(draft.tokens.size());
    }
    const auto k = static_cast<int32_t>(draft.tokens.size());
    batch.clear();
    batch.add(last, pos, options.seq, true);
    for (int32_t i = 0; i < k; ++i)
      batch.add(draft.tokens[static_cast<size_t>(i)], pos + 1 + i, options.seq, true);
    const auto tv = Clock::now();
    MINFER_ASSIGN_OR_RETURN(logits, target.decode(batch));
    const double verify_ms = ms_since(tv);
    history.push_back(last);

    int32_t n_accepted = 0;
    for (int32_t i = 0; i <= k && going; ++i) {
      std::span<float> row(logits.data() + static_cast<size_t>(i) * static_cast<size_t>(n_vocab),
                           static_cast<size_t>(n_vocab));
      bool accepted = false;
      Result<int32_t> token = i < k ? sampler.verify(row, draft.tokens[static_cast<size_t>(i)],
                                                     draft.q[static_cast<size_t>(i)], &accepted)
                                    : sampler.sample(row);
      if (!token.ok()) {
        target.kv().seq_rm(options.seq, static_cast<int32_t>(history.size()), -1);
        return grammar_stop(token.status());
      }
      going = take(*token);
      // An accepted draft's row is in the cache; a correction (or the bonus token after the last draft)
      // is not: it is the next round's `last`.
      if (accepted) {
        ++n_accepted;
        if (going) history.push_back(*token);
        continue;
      }
      last = *token;
      break;
    }
    // Rows past the accepted tokens leave the cache.
    target.kv().seq_rm(options.seq, static_cast<int32_t>(history.size()), -1);
    st.record(k, n_accepted);
    planner.record(k, n_accepted, draft_ms, verify_ms);
  }
  if (result.stop_reason != "stop") emit(release_held_text(detok, stops));
  result.timings.n_generated = static_cast<int32_t>(result.generated_ids.size());
  result.timings.generate_ms = ms_since(t0);
  return result;
}

}  // namespace minfer::engine
