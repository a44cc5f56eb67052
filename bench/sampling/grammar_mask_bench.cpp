// Grammar mask cost over the real 151,936-token Qwen2 vocabulary (fixture GGUF): a new automaton state's
// mask with a cold automaton (every transition computed) and a warm one (transitions memoised, the
// usual case during generation), the trie build, and one full Sampler::sample step under a grammar.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/byte_unicode.h"
#include "core/utf8.h"
#include "gguf/reader.h"
#include "sampling/grammar/matcher.h"
#include "sampling/json_schema/to_grammar.h"
#include "sampling/sampler.h"

namespace {

using namespace minfer;
using namespace minfer::sampling;

std::shared_ptr<const VocabView> qwen2_vocab() {
  static std::shared_ptr<const VocabView> vocab = [] {
    const char* dir = std::getenv("MINFER_FIXTURES_DIR");
    const std::string path = std::string(dir ? dir : MINFER_FIXTURES_DEFAULT) + "/tokenizer/qwen2-vocab.gguf";
    auto file = gguf::File::open(path);
    if (!file.ok()) {
      std::fprintf(stderr, "bench_sampling: %s\n", file.status().message().c_str());
      std::exit(1);
    }
    auto tokens = file->metadata().get_string_array("tokenizer.ggml.tokens");
    auto types = file->metadata().get_int_array("tokenizer.ggml.token_type");
    auto v = std::make_shared<VocabView>();
    for (size_t id = 0; id < tokens->size(); ++id) {
      std::string bytes;
      const std::string& text = (*tokens)[id];
      if ((*types)[id] == 1) {  // NORMAL tokens: undo GPT-2 byte-unicode
        for (size_t pos = 0; pos < text.size();) {
          size_t len = 0;
          const int32_t cp = utf8_decode(text, pos, &len);
          const int b = cp < 0 ? -1 : codepoint_to_byte(static_cast<uint32_t>(cp));
          if (b >= 0) bytes += static_cast<char>(b);
          pos += len;
        }
      }
      v->token_bytes.push_back(std::move(bytes));
    }
    v->eog_ids = {151643, 151645};
    return v;
  }();
  return vocab;
}

std::string read_data(const std::string& name) {
  std::ifstream in(std::string(MINFER_SAMPLING_TEST_DATA) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Scenario {
  const char* name;
  std::string gbnf;
  std::string prefix;  // text accepted before the measured state
};

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> kScenarios = [] {
    const std::string json = read_data("json.gbnf");
    const std::string schema = *json_schema::to_grammar(
        R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"]})");
    return std::vector<Scenario>{
        {"json_in_string", json, "{\"key\": \"some te"},  // nearly every token allowed: the worst case
        {"json_value_start", json, "{\"key\": "},
        {"json_key_start", json, "{"},
        {"schema_in_name", schema, "{\"name\": \"Jo"},
        {"schema_age", schema, "{\"name\": \"Jo\", \"age\": "},
        {"chess_move", read_data("chess.gbnf"), "1. e4 "},
        {"japanese", read_data("japanese.gbnf"), "\xE3\x81\x93"},
    };
  }();
  return kScenarios;
}

void BM_TrieBuild(benchmark::State& state) {
  auto vocab = qwen2_vocab();
  for (auto _ : state) {
    grammar::TokenTrie trie(*vocab);
    benchmark::DoNotOptimize(trie.n_nodes());
  }
}
BENCHMARK(BM_TrieBuild)->Unit(benchmark::kMillisecond);

// A state never seen by this automaton: every transition on the walk is computed.
void BM_MaskNewStateCold(benchmark::State& state) {
  const Scenario& sc = scenarios()[static_cast<size_t>(state.range(0))];
  state.SetLabel(sc.name);
  auto vocab = qwen2_vocab();
  auto trie = grammar::TokenTrie::for_vocab(vocab);
  auto g = *grammar::Grammar::parse(sc.gbnf);
  grammar::TokenMask mask;
  size_t allowed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    grammar::Automaton a(g);
    const int32_t s = a.step_bytes(a.initial(), sc.prefix);
    state.ResumeTiming();
    grammar::compute_mask(*trie, a, s, &mask);
    allowed = mask.count();
  }
  state.counters["allowed"] = static_cast<double>(allowed);
}
BENCHMARK(BM_MaskNewStateCold)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);

// A new state for the mask cache on an automaton whose byte transitions are already memoised (the
// steady state of a generation: most states share their sub-states).
void BM_MaskNewStateWarm(benchmark::State& state) {
  const Scenario& sc = scenarios()[static_cast<size_t>(state.range(0))];
  state.SetLabel(sc.name);
  auto vocab = qwen2_vocab();
  auto trie = grammar::TokenTrie::for_vocab(vocab);
  auto g = *grammar::Grammar::parse(sc.gbnf);
  grammar::Automaton a(g);
  const int32_t s = a.step_bytes(a.initial(), sc.prefix);
  grammar::TokenMask mask;
  grammar::compute_mask(*trie, a, s, &mask);
  for (auto _ : state) {
    grammar::compute_mask(*trie, a, s, &mask);
    benchmark::DoNotOptimize(mask.words.data());
  }
  state.counters["allowed"] = static_cast<double>(mask.count());
}
BENCHMARK(BM_MaskNewStateWarm)->DenseRange(0, 6)->Unit(benchmark::kMillisecond);

// One default-pipeline sample under the JSON grammar with the state's mask cached (the per-token cost).
void BM_SampleWithGrammar(benchmark::State& state) {
  auto vocab = qwen2_vocab();
  SamplerConfig cfg;
  cfg.grammar = read_data("json.gbnf");
  cfg.seed = 1;
  auto sampler = Sampler::create(cfg, vocab);
  std::vector<float> base(static_cast<size_t>(vocab->n_vocab()));
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>((i * 2654435761u) % 1000) / 100.0f;
  std::vector<float> logits;
  for (auto _ : state) {
    logits = base;
    benchmark::DoNotOptimize(sampler->sample(logits));
  }
}
BENCHMARK(BM_SampleWithGrammar)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// The default pipeline (top-k 40, top-p 0.95, temp 0.8) and the full-sort path (top-k off) on 152k logits.
void BM_SampleNoGrammar(benchmark::State& state) {
  auto vocab = minfer::sampling::VocabView();
  vocab.token_bytes.assign(151936, "x");
  auto shared = std::make_shared<const minfer::sampling::VocabView>(std::move(vocab));
  minfer::sampling::SamplerConfig cfg;
  cfg.seed = 1;
  cfg.top_k = static_cast<int32_t>(state.range(0));
  auto sampler = minfer::sampling::Sampler::create(cfg, shared);
  std::vector<float> base(151936);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>((i * 2654435761u) % 1000) / 100.0f;
  std::vector<float> logits;
  for (auto _ : state) {
    logits = base;
    benchmark::DoNotOptimize(sampler->sample(logits));
  }
  state.SetLabel(state.range(0) == 0 ? "top-k off" : "default");
}
BENCHMARK(BM_SampleNoGrammar)->Arg(40)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace
