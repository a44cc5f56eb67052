// libFuzzer target: the tokenizer on arbitrary bytes (prompts are user input). The first byte picks
// special-token parsing; encode must give ids inside the vocabulary and decode must give the bytes back.
// Vocabulary: $MINFER_FUZZ_VOCAB, else the fixtures' Qwen2 vocabulary, else the synthetic demo vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "tools/synthetic_model.h"

namespace {

std::unique_ptr<minfer::tokenizer::Tokenizer> load() {
  const char* env = std::getenv("MINFER_FUZZ_VOCAB");
  const std::string path = env != nullptr ? env : MINFER_FUZZ_DEFAULT_VOCAB;
  if (auto file = minfer::gguf::File::open(path); file.ok()) {
    auto tok = minfer::tokenizer::Tokenizer::from_gguf(file->metadata());
    if (!tok.ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s: %s\n", path.c_str(), tok.status().message().c_str());
      std::abort();
    }
    std::fprintf(stderr, "tokenizer_fuzz: vocabulary %s\n", path.c_str());
    return std::make_unique<minfer::tokenizer::Tokenizer>(std::move(tok).value());
  }
  minfer::tools::SyntheticOptions options;
  options.shape = minfer::tools::synthetic_preset("tiny-qwen2").value();
  auto writer = minfer::tools::make_synthetic_model(options);
  auto tok = minfer::tokenizer::Tokenizer::from_gguf(writer->metadata());
  if (!tok.ok()) std::abort();
  std::fprintf(stderr, "tokenizer_fuzz: synthetic vocabulary (%s not found)\n", path.c_str());
  return std::make_unique<minfer::tokenizer::Tokenizer>(std::move(tok).value());
}

const minfer::tokenizer::Tokenizer& tokenizer() {
  static const std::unique_ptr<minfer::tokenizer::Tokenizer> tok = load();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const bool special = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto& tok = tokenizer();
  const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false, special);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
  }
  if (tok.decode(ids) != text) __builtin_trap();
  return 0;
}
