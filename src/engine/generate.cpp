#include "engine/generate.h"

#include <chrono>

#include "sampling/sampler.h"
#include "tokenizer/stream_decoder.h"

namespace minfer::engine {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string StopMatcher::push(std::string_view text, bool* stopped) {
  *stopped = false;
  pending_.append(text);
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    const size_t at = pending_.find(s);
    if (at != std::string::npos && at < first) first = at;
  }
  if (first != std::string::npos) {
    *stopped = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); len > keep; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string release_held_text(tokenizer::StreamDecoder& detok, StopMatcher& stops, bool* stopped) {
  bool hit = false;
  std::string text = stops.push(detok.finish(), &hit);
  if (!hit) text += stops.flush();
  if (stopped != nullptr) *stopped = hit;
  return text;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

Status check_generation_start(Engine& engine, const std::vector<int32_t>& prompt_ids,
                              const GenerateOptions& options) {
  if (prompt_ids.empty()) return invalid_argument("generate: the prompt is empty");
  const int32_t n_cached = options.n_cached;
  if (n_cached < 0 || n_cached >= static_cast<int32_t>(prompt_ids.size())) {
    return invalid_argument("generate: {} cached tokens for a prompt of {} (at least one must be evaluated)",
                            n_cached, prompt_ids.size());
  }
  if (engine.kv().seq_pos_max(options.seq) != n_cached - 1 ||
      (n_cached > 0 && engine.kv().seq_pos_min(options.seq) != 0)) {
    return invalid_argument("generate: sequence {} does not hold exactly the {} cached prompt tokens",
                            options.seq, n_cached);
  }
  const int32_t n_ctx = engine.n_ctx();
  if (static_cast<int32_t>(prompt_ids.size()) >= n_ctx) {
    return error(StatusCode::kOutOfRange, "the prompt has {} tokens but the context holds {} (raise --n-ctx)",
                 prompt_ids.size(), n_ctx);
  }
  return {};
}

Result<GenerateResult> generate(Engine& engine, const std::vector<int32_t>& prompt_ids,
                                const GenerateOptions& options,
                                const std::function<void(std::string_view)>& on_text) {
  GenerateResult result;
  result.prompt_ids = prompt_ids;
  MINFER_RETURN_IF_ERROR(check_generation_start(engine, prompt_ids, options));
  const int32_t n_cached = options.n_cached;
  const int32_t n_ctx = engine.n_ctx();
  MINFER_ASSIGN_OR_RETURN(sampling::Sampler sampler,
                          sampling::Sampler::create(options.sampling, engine.sampling_vocab()));
  for (int32_t id : prompt_ids) sampler.accept_history(id);

  Batch batch;
  for (size_t i = static_cast<size_t>(n_cached); i < prompt_ids.size(); ++i) {
    batch.add(prompt_ids[i], static_cast<int32_t>(i), options.seq, i + 1 == prompt_ids.size());
  }
  auto t0 = std::chrono::steady_clock::now();
  MINFER_ASSIGN_OR_RETURN(std::vector<float> logits, engine.decode(batch));
  result.timings.n_prompt = static_cast<int32_t>(prompt_ids.size()) - n_cached;
  result.timings.n_cached = n_cached;
  result.timings.prompt_ms = ms_since(t0);
  if (options.keep_first_logits) result.first_logits = logits;

  tokenizer::StreamDecoder detok(engine.tokenizer());
  StopMatcher stops(options.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };
  int32_t pos = static_cast<int32_t>(prompt_ids.size());
  t0 = std::chrono::steady_clock::now();
  result.stop_reason = "length";
  while (options.n_predict < 0 || static_cast<int32_t>(result.generated_ids.size()) < options.n_predict) {
    if (options.should_stop && options.should_stop()) {
      result.stop_reason = "cancelled";
      break;
    }
    auto token = sampler.sample(logits);
    if (!token.ok()) {
      if (sampler.has_grammar()) {
        result.stop_reason = "grammar";
        result.stop_detail = token.status().message();
        emit(stops.flush());
        result.timings.n_generated = static_cast<int32_t>(result.generated_ids.size());
        result.timings.generate_ms = ms_since(t0);
        return result;
      }
      return token.status();
    }
    sampler.accept(*token);
    if (engine.tokenizer().is_eog(*token)) {
      result.stop_reason = "eog";
      break;
    }
    result.generated_ids.push_back(*token);
    bool stopped = false;
    emit(stops.push(detok.push(*token), &stopped));
    if (stopped) {
      result.stop_reason = "stop";
      break;
    }
    if (pos >= n_ctx) {
      result.stop_reason = "context";
      break;
    }
    if (options.n_predict >= 0 && static_cast<int32_t>(result.generated_ids.size()) >= options.n_predict)
      break;
    batch.clear();
    batch.add(*token, pos++, options.seq, true);
    MINFER_ASSIGN_OR_RETURN(logits, engine.decode(batch));
  }
  if (result.stop_reason != "stop") emit(release_held_text(detok, stops));
  result.timings.n_generated = static_cast<int32_t>(result.generated_ids.size());
  result.timings.generate_ms = ms_since(t0);
  return result;
}

}  // namespace minfer::engine
