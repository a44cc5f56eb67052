// convert's tokenizer reading beyond byte-level BPE: a SentencePiece-style tokenizer.json (BPE with
// byte_fallback) becomes tokenizer.ggml.model = llama with scores and types as convert_hf_to_gguf.py's
// sentencepiece path writes them; the Llama 3 regex becomes pre = llama-bpe; --vocab-only writes a GGUF
// that loads. The real vocabularies are checked against llama.cpp in tests/tokenizer/vocab_parity_test.cpp.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "tools/convert.h"

namespace minfer::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

const std::string kSp = "\xe2\x96\x81";  // ▁

// ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then a, b, c, ▁, ▁a, ab, bc, ▁▁, <|im_x|>, ▁x▁ (user)
json spm_tokenizer_json() {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  const std::vector<std::string> pieces = {"a",  "b",  "c",       kSp,        kSp + "a",
                                           "ab", "bc", kSp + kSp, "<|im_x|>", kSp + "x" + kSp};
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = 259 + static_cast<int>(i);
  // Merge order (the SentencePiece score order): ▁a first, then bc, ab; ▁▁ last although its id is lower.
  const json merges = json::array({kSp + " a", "b c", "a b", kSp + " " + kSp});
  return {{"model",
           {{"type", "BPE"},
            {"byte_fallback", true},
            {"unk_token", "<unk>"},
            {"vocab", vocab},
            {"merges", merges}}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             json::array({{{"type", "Prepend"}, {"prepend", kSp}},
                          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSp}}})}}},
          {"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                        {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                        {{"id", 2}, {"content", "</s>"}, {"special", true}}})}};
}

json spm_tokenizer_config() {
  json decoder = json::object();
  decoder["0"] = {{"content", "<unk>"}, {"special", true}};
  decoder["1"] = {{"content", "<s>"}, {"special", true}};
  decoder["2"] = {{"content", "</s>"}, {"special", true}};
  decoder["267"] = {{"content", "<|im_x|>"}, {"special", false}};       // looks special: CONTROL
  decoder["268"] = {{"content", kSp + "x" + kSp}, {"special", false}};  // USER_DEFINED, ▁ -> space
  return {{"added_tokens_decoder", decoder},
          {"bos_token", "<s>"},
          {"eos_token", "</s>"},
          {"unk_token", "<unk>"},
          {"add_bos_token", true},
          {"add_eos_token", false}};
}

TEST(ConvertTokenizer, SentencePieceTokenizerJson) {
  const std::string dir = test::temp_dir() + "/spm";
  fs::create_directories(dir);
  write_text(dir + "/tokenizer.json", spm_tokenizer_json().dump());
  write_text(dir + "/tokenizer_config.json", spm_tokenizer_config().dump());
  write_text(dir + "/config.json",
             json({{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 270}}).dump());
  auto md = hf_tokenizer_metadata(dir);
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_EQ(*md->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*md->get_string("tokenizer.ggml.pre"), "default");
  EXPECT_TRUE(*md->get_bool("tokenizer.ggml.add_space_prefix"));
  const std::vector<std::string> tokens = *md->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 270u);
  EXPECT_EQ(tokens[268], " x ");  // user-defined spaces written as spaces
  EXPECT_EQ(tokens[269], "[PAD269]");
  const std::vector<int64_t> types = *md->get_int_array("tokenizer.ggml.token_type");
  EXPECT_EQ(types[0], 3);  // <unk>: special in added_tokens_decoder -> CONTROL, as convert does
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[3], 6);    // <0x00>: BYTE
  EXPECT_EQ(types[259], 1);  // a
  EXPECT_EQ(types[267], 3);  // <|im_x|>
  EXPECT_EQ(types[268], 4);  // " x "
  EXPECT_EQ(types[269], 5);  // padding: UNUSED
  const std::vector<float> scores = *md->get_f32_array("tokenizer.ggml.scores");
  EXPECT_EQ(scores[263], -0.0f);    // ▁a: merge 0
  EXPECT_EQ(scores[265], -1.0f);    // bc: merge 1
  EXPECT_EQ(scores[264], -2.0f);    // ab: merge 2
  EXPECT_EQ(scores[266], -3.0f);    // ▁▁: merge 3
  EXPECT_EQ(scores[259], -263.0f);  // a: no merge makes it: -(4 merges + id 259)
  EXPECT_EQ(scores[267], -1000.0f);
  EXPECT_EQ(*md->get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*md->get_u32("tokenizer.ggml.eos_token_id"), 2u);

  // --vocab-only: a GGUF that loads, tokenizing by those scores (bc before ab) with the space prefix.
  ConvertOptions o;
  o.input_dir = dir;
  o.output = dir + "/vocab.gguf";
  auto report = convert_vocab_only(o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->arch, "llama");
  auto file = gguf::File::open(o.output);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->tensors().size(), 0u);
  auto tok = tokenizer::Tokenizer::from_gguf(file->metadata());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(tok->encode("abc a", /*add_special=*/false, true),
            (std::vector<int32_t>{263, 265, 263}));  // ▁a bc ▁a: ▁a scores above bc above ab
  EXPECT_EQ(tok->detokenize(tok->encode("abc a", /*add_special=*/false, true)), "abc a");
  EXPECT_EQ(tok->encode("a x b", /*add_special=*/false, true),
            (std::vector<int32_t>{263, 268, 262, 260}));  // " x " user-defined, then ▁ b
}

TEST(ConvertTokenizer, Llama3RegexIsLlamaBpe) {
  const std::string dir = test::temp_dir() + "/l3";
  fs::create_directories(dir);
  const json tok = {
      {"model",
       {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", json::array({"a b"})}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern",
                {{"Regex",
                  R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}}},
              {{"type", "ByteLevel"}}})}}}};
  write_text(dir + "/tokenizer.json", tok.dump());
  auto md = hf_tokenizer_metadata(dir);
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_EQ(*md->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*md->get_string("tokenizer.ggml.pre"), "llama-bpe");
}

TEST(ConvertTokenizer, VocabOnlyRefusesUnknownArchitecture) {
  const std::string dir = test::temp_dir() + "/arch";
  fs::create_directories(dir);
  write_text(dir + "/tokenizer.json", spm_tokenizer_json().dump());
  write_text(dir + "/config.json", json({{"architectures", {"BertModel"}}}).dump());
  ConvertOptions o;
  o.input_dir = dir;
  o.output = dir + "/vocab.gguf";
  auto report = convert_vocab_only(o);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("BertModel"), std::string::npos) << report.status().message();
}

}  // namespace
}  // namespace minfer::tools
