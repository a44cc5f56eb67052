// The sampler pipeline: one config, one fixed stage order, per-run state (RNG, histories, mu, grammar).
#include "sampling/sampler.h"

#include <chrono>
#include <cmath>

#include "sampling/grammar/matcher.h"
#include "sampling/json_schema/to_grammar.h"
#include "sampling/samplers/samplers.h"

namespace minfer::sampling {

struct Sampler::State {
  State(const SamplerConfig& c, std::shared_ptr<const VocabView> v, uint64_t s)
      : cfg(c),
        vocab(std::move(v)),
        seed(s),
        rng(s),
        penalties(c.repeat_last_n, c.repeat_penalty, c.frequency_penalty, c.presence_penalty),
        dry(c, *vocab),
        mirostat(c.mirostat, c.mirostat_tau, c.mirostat_eta, c.mirostat_m, vocab->n_vocab()) {}

  SamplerConfig cfg;
  std::shared_ptr<const VocabView> vocab;
  uint64_t seed;
  Rng rng;
  Penalties penalties;
  Dry dry;
  Mirostat mirostat;
  std::unique_ptr<grammar::GrammarMatcher> matcher;
  Status grammar_error;  // set when accept() fed a token the grammar refuses
  Candidates cand;
};

Sampler::Sampler(std::unique_ptr<State> state) : state_(std::move(state)) {}
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;
Sampler::~Sampler() = default;

Result<Sampler> Sampler::create(const SamplerConfig& cfg, std::shared_ptr<const VocabView> vocab) {
  if (!vocab) return invalid_argument("sampling: no vocabulary");
  MINFER_RETURN_IF_ERROR(cfg.validate(vocab->n_vocab()));
  std::shared_ptr<const grammar::Grammar> g;
  if (!cfg.json_schema.empty()) {
    MINFER_ASSIGN_OR_RETURN(std::string gbnf, json_schema::to_grammar(cfg.json_schema));
    MINFER_ASSIGN_OR_RETURN(g, grammar::Grammar::parse(gbnf));
  } else if (!cfg.grammar.empty()) {
    MINFER_ASSIGN_OR_RETURN(g, grammar::Grammar::parse(cfg.grammar));
  }
  uint64_t seed = cfg.seed;
  if (seed == SamplerConfig::kRandomSeed) {
    seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  auto state = std::make_unique<State>(cfg, vocab, seed);
  if (g) {
    state->matcher =
        std::make_unique<grammar::GrammarMatcher>(g, grammar::TokenTrie::for_vocab(vocab), vocab);
  }
  return Sampler(std::move(state));
}

Result<int32_t> Sampler::sample(std::span<float> logits) {
  State& s = *state_;
  const SamplerConfig& cfg = s.cfg;
  if (static_cast<int32_t>(logits.size()) != s.vocab->n_vocab()) {
    return invalid_argument("sampling: got {} logits for a vocabulary of {}", logits.size(),
                            s.vocab->n_vocab());
  }
  if (!s.grammar_error.ok()) return s.grammar_error;
  if (s.matcher && s.matcher->finished()) {
    return invalid_argument("sampling: the grammar's output is complete (end of generation was accepted)");
  }

  apply_logit_bias(logits, cfg.logit_bias);
  Candidates& c = s.cand;
  c.assign(logits);
  s.penalties.apply(c);
  s.dry.apply(c);

  if (s.matcher) {
    // Every stage before this only shifts logits and every stage after only removes candidates, so a
    // masked token can never come back; the mask draws no random numbers.
    const grammar::TokenMask& mask = s.matcher->mask();
    size_t w = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      if (mask.test(c.data[i].id)) c.data[w++] = c.data[i];
    }
    c.data.resize(w);
    if (c.data.empty()) {
      const std::string& text = s.matcher->accepted_text();
      return invalid_argument(
          "grammar: no token of the vocabulary is allowed after '{}' (the grammar needs "
          "characters that no token provides)",
          text.size() <= 40 ? text : "..." + text.substr(text.size() - 40));
    }
  }
  // NaN logits would poison every comparison below: drop them; -inf stays (probability 0).
  size_t w = 0;
  bool any_finite = false;
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(c.data[i].logit)) continue;
    any_finite = any_finite || c.data[i].logit > -INFINITY;
    c.data[w++] = c.data[i];
  }
  c.data.resize(w);
  if (!any_finite) return invalid_argument("sampling: every allowed token has a -inf or NaN logit");

  if (cfg.temp <= 0.0f) return c.data[argmax_index(c)].id;
  if (cfg.mirostat != 0) return c.data[s.mirostat.sample(c, s.rng)].id;

  const auto min_keep = static_cast<size_t>(cfg.min_keep);
  top_k(c, cfg.top_k);
  typical(c, cfg.typical_p, min_keep);
  top_p(c, cfg.top_p, min_keep);
  min_p(c, cfg.min_p, min_keep);
  xtc(c, cfg.xtc_probability, cfg.xtc_threshold, min_keep, s.rng);
  temperature(c, cfg.temp);
  return c.data[draw_index(c, s.rng)].id;
}

void Sampler::accept(int32_t token) {
  State& s = *state_;
  s.penalties.accept(token);
  s.dry.accept(token);
  if (s.matcher && s.grammar_error.ok()) {
    Status st = s.matcher->accept_token(token);
    if (!st.ok()) s.grammar_error = st;
  }
}

void Sampler::accept_history(int32_t token) {
  state_->penalties.accept(token);
  state_->dry.accept(token);
}

bool Sampler::grammar_accepting() const {
  return !state_->matcher || state_->matcher->accepting();
}
bool Sampler::has_grammar() const {
  return state_->matcher != nullptr;
}
const SamplerConfig& Sampler::config() const {
  return state_->cfg;
}
uint64_t Sampler::seed() const {
  return state_->seed;
}

}  // namespace minfer::sampling
