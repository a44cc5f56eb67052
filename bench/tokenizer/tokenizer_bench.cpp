// Tokenizer micro-benchmarks on the real Qwen2.5 vocabulary: load, encode (bytes/s), decode, streaming.
//   MINFER_TOKENIZER_CORPUS=/tmp/corpus.txt build/release/bench/tokenizer/bench_tokenizer
// The corpus comes from bench/tokenizer/make_corpus.py; without it the fixture corpus is repeated to 1 MB.
// MINFER_FIXTURES_DIR overrides ../shared/fixtures.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gguf/reader.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {
namespace {

std::string fixtures_dir() {
  const char* env = std::getenv("MINFER_FIXTURES_DIR");
  return env != nullptr ? env : std::string(MINFER_SOURCE_DIR) + "/../shared/fixtures";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const gguf::File* vocab_file() {
  static auto file = gguf::File::open(fixtures_dir() + "/tokenizer/qwen2-vocab.gguf");
  return file.ok() ? &*file : nullptr;
}

const Tokenizer* tokenizer() {
  static const Tokenizer* tok = []() -> const Tokenizer* {
    if (vocab_file() == nullptr) return nullptr;
    auto t = Tokenizer::from_gguf(vocab_file()->metadata());
    return t.ok() ? new Tokenizer(std::move(t).value()) : nullptr;
  }();
  return tok;
}

const std::string& corpus() {
  static const std::string text = [] {
    if (const char* path = std::getenv("MINFER_TOKENIZER_CORPUS")) return slurp(path);
    const std::string base = slurp(fixtures_dir() + "/tokenizer/corpus.inp");
    std::string out;
    while (!base.empty() && out.size() < 1000000) out += base;
    return out;
  }();
  return text;
}

void BM_Load(benchmark::State& state) {
  if (vocab_file() == nullptr) return state.SkipWithError("qwen2-vocab.gguf not found (MINFER_FIXTURES_DIR)");
  for (auto _ : state) {
    auto tok = Tokenizer::from_gguf(vocab_file()->metadata());
    benchmark::DoNotOptimize(tok);
  }
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond);

void BM_Encode(benchmark::State& state) {
  const Tokenizer* tok = tokenizer();
  if (tok == nullptr || corpus().empty()) return state.SkipWithError("vocabulary or corpus not found");
  const bool special = state.range(0) != 0;
  size_t n_tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tok->encode(corpus(), /*add_special=*/false, special);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus().size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
}
BENCHMARK(BM_Encode)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Every call starts with an empty word cache: two vocabularies take turns on this thread.
void BM_EncodeColdCache(benchmark::State& state) {
  const Tokenizer* tok = tokenizer();
  if (tok == nullptr || corpus().empty()) return state.SkipWithError("vocabulary or corpus not found");
  auto other = Tokenizer::from_gguf(vocab_file()->metadata());
  const std::string one = "x";
  for (auto _ : state) {
    benchmark::DoNotOptimize(other->encode(one, /*add_special=*/false, false));
    benchmark::DoNotOptimize(tok->encode(corpus(), /*add_special=*/false, false));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus().size()));
}
BENCHMARK(BM_EncodeColdCache)->Unit(benchmark::kMillisecond);

void BM_EncodeChatPrompt(benchmark::State& state) {
  const Tokenizer* tok = tokenizer();
  if (tok == nullptr) return state.SkipWithError("vocabulary not found");
  const std::string prompt =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWrite a haiku about the "
      "sea, then translate it to 日本語.<|im_end|>\n<|im_start|>assistant\n";
  for (auto _ : state) benchmark::DoNotOptimize(tok->encode(prompt, /*add_special=*/false, true));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * prompt.size()));
}
BENCHMARK(BM_EncodeChatPrompt);

void BM_Decode(benchmark::State& state) {
  const Tokenizer* tok = tokenizer();
  if (tok == nullptr || corpus().empty()) return state.SkipWithError("vocabulary or corpus not found");
  const std::vector<int32_t> ids = tok->encode(corpus(), /*add_special=*/false, false);
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus().size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

void BM_StreamDecode(benchmark::State& state) {
  const Tokenizer* tok = tokenizer();
  if (tok == nullptr || corpus().empty()) return state.SkipWithError("vocabulary or corpus not found");
  const std::vector<int32_t> ids = tok->encode(corpus(), /*add_special=*/false, false);
  for (auto _ : state) {
    StreamDecoder dec(*tok);
    size_t n = 0;
    for (const int32_t id : ids) n += dec.push(id).size();
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}
BENCHMARK(BM_StreamDecode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace minfer::tokenizer
