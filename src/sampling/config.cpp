// SamplerConfig validation and the small text formats of its flags (logit bias pairs, breaker escapes).
#include "sampling/config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace minfer::sampling {
namespace {

Status check_finite(const char* name, float v) {
  if (!std::isfinite(v)) return invalid_argument("sampling: {} must be a finite number, got {}", name, v);
  return Status();
}

Status check_range(const char* name, float v, float lo, float hi) {
  MINFER_RETURN_IF_ERROR(check_finite(name, v));
  if (v < lo || v > hi) return invalid_argument("sampling: {} must be in [{}, {}], got {}", name, lo, hi, v);
  return Status();
}

}  // namespace

Status SamplerConfig::validate(int32_t n_vocab) const {
  if (n_vocab <= 0) return invalid_argument("sampling: vocabulary size must be positive, got {}", n_vocab);
  MINFER_RETURN_IF_ERROR(check_finite("--temp", temp));
  if (temp < 0.0f) return invalid_argument("sampling: --temp must be >= 0 (0 = greedy), got {}", temp);
  if (top_k < 0) return invalid_argument("sampling: --top-k must be >= 0 (0 = off), got {}", top_k);
  MINFER_RETURN_IF_ERROR(check_range("--top-p", top_p, 0.0f, 1.0f));
  MINFER_RETURN_IF_ERROR(check_range("--min-p", min_p, 0.0f, 1.0f));
  MINFER_RETURN_IF_ERROR(check_range("--typical", typical_p, 0.0f, 1.0f));
  if (min_keep < 0) return invalid_argument("sampling: min_keep must be >= 0, got {}", min_keep);

  MINFER_RETURN_IF_ERROR(check_finite("--repeat-penalty", repeat_penalty));
  if (repeat_penalty <= 0.0f) {
    return invalid_argument("sampling: --repeat-penalty must be > 0 (1 = off), got {}", repeat_penalty);
  }
  if (repeat_last_n < -1) {
    return invalid_argument("sampling: --repeat-last-n must be >= -1 (-1 = whole history), got {}",
                            repeat_last_n);
  }
  MINFER_RETURN_IF_ERROR(check_finite("--frequency-penalty", frequency_penalty));
  MINFER_RETURN_IF_ERROR(check_finite("--presence-penalty", presence_penalty));

  MINFER_RETURN_IF_ERROR(check_finite("--dry-multiplier", dry_multiplier));
  if (dry_multiplier < 0.0f)
    return invalid_argument("sampling: --dry-multiplier must be >= 0, got {}", dry_multiplier);
  MINFER_RETURN_IF_ERROR(check_finite("--dry-base", dry_base));
  if (dry_base < 1.0f) return invalid_argument("sampling: --dry-base must be >= 1, got {}", dry_base);
  if (dry_allowed_length < 0) {
    return invalid_argument("sampling: --dry-allowed-length must be >= 0, got {}", dry_allowed_length);
  }
  if (dry_penalty_last_n < -1) {
    return invalid_argument("sampling: --dry-penalty-last-n must be >= -1 (-1 = whole history), got {}",
                            dry_penalty_last_n);
  }
  for (const std::string& b : dry_sequence_breakers) {
    if (b.empty()) return invalid_argument("sampling: --dry-sequence-breakers: empty breaker string");
  }

  MINFER_RETURN_IF_ERROR(check_range("--xtc-probability", xtc_probability, 0.0f, 1.0f));
  MINFER_RETURN_IF_ERROR(check_range("--xtc-threshold", xtc_threshold, 0.0f, 0.5f));

  if (mirostat < 0 || mirostat > 2) {
    return invalid_argument("sampling: --mirostat must be 0 (off), 1 or 2, got {}", mirostat);
  }
  MINFER_RETURN_IF_ERROR(check_finite("--mirostat-tau", mirostat_tau));
  if (mirostat_tau <= 0.0f)
    return invalid_argument("sampling: --mirostat-tau must be > 0, got {}", mirostat_tau);
  MINFER_RETURN_IF_ERROR(check_finite("--mirostat-eta", mirostat_eta));
  if (mirostat_eta <= 0.0f)
    return invalid_argument("sampling: --mirostat-eta must be > 0, got {}", mirostat_eta);
  if (mirostat_m < 1) return invalid_argument("sampling: --mirostat-m must be >= 1, got {}", mirostat_m);

  for (const LogitBias& b : logit_bias) {
    if (b.token < 0 || b.token >= n_vocab) {
      return invalid_argument("sampling: --logit-bias: token id {} is outside the vocabulary [0, {})",
                              b.token, n_vocab);
    }
    if (!std::isfinite(b.bias) || b.bias < -100.0f || b.bias > 100.0f) {
      return invalid_argument("sampling: --logit-bias: bias {} for token {} is outside [-100, 100]", b.bias,
                              b.token);
    }
  }
  if (!grammar.empty() && !json_schema.empty()) {
    return invalid_argument("sampling: a grammar and a JSON Schema are mutually exclusive; give one");
  }
  return Status();
}

Status parse_logit_bias(std::string_view text, std::vector<LogitBias>* out) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) {
      if (end == text.size()) break;
      return invalid_argument("--logit-bias '{}': empty item", text);
    }
    // ID:BIAS, or llama.cpp's ID+BIAS / ID-BIAS.
    size_t sep = item.find(':');
    size_t bias_pos = sep == std::string_view::npos ? std::string_view::npos : sep + 1;
    if (sep == std::string_view::npos) {
      sep = item.find_first_of("+-", 1);
      bias_pos = sep;
    }
    if (sep == std::string_view::npos) {
      return invalid_argument("--logit-bias '{}': expected ID:BIAS, got '{}'", text, item);
    }
    int32_t id = 0;
    const std::string_view id_text = item.substr(0, sep);
    auto [p, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (ec != std::errc() || p != id_text.data() + id_text.size()) {
      return invalid_argument("--logit-bias '{}': token id '{}' is not an integer", text, id_text);
    }
    std::string bias_text(item.substr(bias_pos));
    if (!bias_text.empty() && bias_text[0] == '+') bias_text.erase(0, 1);
    char* bias_end = nullptr;
    const float bias = std::strtof(bias_text.c_str(), &bias_end);
    if (bias_text.empty() || bias_end != bias_text.c_str() + bias_text.size()) {
      return invalid_argument("--logit-bias '{}': bias '{}' is not a number", text, item.substr(bias_pos));
    }
    out->push_back(LogitBias{id, bias});
    if (end == text.size()) break;
  }
  return Status();
}

Result<std::string> unescape_breaker(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char c = text[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '"':
        out += '"';
        break;
      case '\'':
        out += '\'';
        break;
      default:
        return invalid_argument("--dry-sequence-breakers '{}': unknown escape '\\{}'", text, c);
    }
  }
  return out;
}

}  // namespace minfer::sampling
