// The sampler pipeline: one config, one fixed stage order, per-run state (RNG, histories, mu, grammar).
#include "sampling/sampler.h"

#include <algorithm>

#include <chrono>
#include <cmath>
#include <optional>

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
  struct Mark {
    Penalties penalties;
    Dry dry;
    grammar::GrammarMatcher::Position grammar;
    Status grammar_error;
  };
  std::optional<Mark> mark;
};

namespace {

// The stages after the greedy shortcut, in pipeline order: top-k, typical, top-p, min-p, XTC, temperature.
void truncate_and_temper(Candidates& c, const SamplerConfig& cfg, Rng& rng) {
  const auto min_keep = static_cast<size_t>(cfg.min_keep);
  top_k(c, cfg.top_k);
  typical(c, cfg.typical_p, min_keep);
  top_p(c, cfg.top_p, min_keep);
  min_p(c, cfg.min_p, min_keep);
  xtc(c, cfg.xtc_probability, cfg.xtc_threshold, min_keep, rng);
  temperature(c, cfg.temp);
}

}  // namespace

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

// Runs the stages up to the greedy shortcut (bias, penalties, DRY, grammar mask, NaN filter) into s.cand.
Status Sampler::prepare(std::span<float> logits) {
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
    MINFER_RETURN_IF_ERROR(s.matcher->health());
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

  return {};
}

Result<int32_t> Sampler::sample(std::span<float> logits) {
  MINFER_RETURN_IF_ERROR(prepare(logits));
  State& s = *state_;
  const SamplerConfig& cfg = s.cfg;
  Candidates& c = s.cand;
  if (cfg.temp <= 0.0f) return c.data[argmax_index(c)].id;
  if (cfg.mirostat != 0) return c.data[s.mirostat.sample(c, s.rng)].id;

  truncate_and_temper(c, cfg, s.rng);
  return c.data[draw_index(c, s.rng)].id;
}

Result<std::vector<TokenData>> Sampler::distribution(std::span<float> logits) {
  State& s = *state_;
  const SamplerConfig& cfg = s.cfg;
  if (cfg.mirostat != 0) {
    return unsupported(
        "speculative decoding cannot be combined with mirostat (its state moves with every draw)");
  }
  MINFER_RETURN_IF_ERROR(prepare(logits));
  Candidates& c = s.cand;
  if (cfg.temp <= 0.0f) {
    const TokenData best = c.data[argmax_index(c)];
    return std::vector<TokenData>{{best.id, best.logit, 1.0f}};
  }
  truncate_and_temper(c, cfg, s.rng);
  softmax(c, false);
  std::vector<TokenData> out;
  out.reserve(c.size());
  for (const TokenData& t : c.data) {
    if (t.p > 0.0f) out.push_back(t);
  }
  return out;
}

int32_t Sampler::draw(std::span<const TokenData> dist) {
  double sum = 0.0;
  for (const TokenData& t : dist) sum += t.p;
  const double target = sum * state_->rng.uniform();
  double run = 0.0;
  for (const TokenData& t : dist) {
    run += t.p;
    if (run >= target && t.p > 0.0f) return t.id;
  }
  for (size_t i = dist.size(); i-- > 0;) {
    if (dist[i].p > 0.0f) return dist[i].id;
  }
  return dist.empty() ? 0 : dist.front().id;
}

Result<int32_t> Sampler::verify(std::span<float> logits, int32_t draft, std::span<const TokenData> q,
                                bool* accepted) {
  MINFER_ASSIGN_OR_RETURN(std::vector<TokenData> p, distribution(logits));
  *accepted = false;
  if (state_->cfg.temp <= 0.0f) {
    *accepted = p.front().id == draft;
    return p.front().id;
  }
  // q sorted by id, so each lookup is a binary search (q may cover the whole vocabulary).
  std::vector<TokenData> q_by_id(q.begin(), q.end());
  std::sort(q_by_id.begin(), q_by_id.end(),
            [](const TokenData& a, const TokenData& b) { return a.id < b.id; });
  auto q_of = [&](int32_t id) {
    if (q.empty()) return id == draft ? 1.0 : 0.0;
    auto it = std::lower_bound(q_by_id.begin(), q_by_id.end(), id,
                               [](const TokenData& t, int32_t v) { return t.id < v; });
    return it != q_by_id.end() && it->id == id ? static_cast<double>(it->p) : 0.0;
  };
  double p_draft = 0.0;
  for (const TokenData& t : p) {
    if (t.id == draft) p_draft = t.p;
  }
  const double q_draft = q_of(draft);
  if (q_draft > 0.0 && state_->rng.uniform() < std::min(1.0, p_draft / q_draft)) {
    *accepted = true;
    return draft;
  }
  // Rejected: the residual max(0, p - q), renormalised by draw().
  std::vector<TokenData> residual;
  residual.reserve(p.size());
  for (TokenData t : p) {
    const double r = static_cast<double>(t.p) - q_of(t.id);
    if (r > 0.0) {
      t.p = static_cast<float>(r);
      residual.push_back(t);
    }
  }
  if (residual.empty()) return draw(p);  // p == q: any draw from p is exact
  return draw(residual);
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

void Sampler::mark() {
  State& s = *state_;
  s.mark.reset();
  grammar::GrammarMatcher::Position at;
  if (s.matcher) at = s.matcher->hold();
  s.mark.emplace(State::Mark{s.penalties, s.dry, at, s.grammar_error});
}

void Sampler::rewind() {
  State& s = *state_;
  if (!s.mark) return;
  s.penalties = s.mark->penalties;
  s.dry = s.mark->dry;
  if (s.matcher) s.matcher->restore(s.mark->grammar);
  s.grammar_error = s.mark->grammar_error;
  s.mark.reset();
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
