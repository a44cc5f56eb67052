// convert: small Hugging Face checkpoints written here (safetensors in bf16 and f32, config.json) with the
// real Qwen3 tokenizer files from the fixtures (and the Qwen2.5 variant the fixtures README describes).
// Checks every tensor against its source, the tokenizer keys against the fixture vocab GGUFs, the corpus
// ids, the chat template, that the result loads and matches the scalar reference, and refusals by name.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/reference_forward.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "engine/engine.h"
#include "gguf/reader.h"
#include "tokenizer/inp_out.h"
#include "tokenizer/tokenizer.h"
#include "tools/convert.h"
#include "tools/safetensors.h"
#include "tools/split.h"

namespace minfer::tools {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct SrcTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// safetensors as the Python library writes it: keys sorted, header padded with spaces to 8 bytes.
void write_safetensors(const std::string& path, const std::vector<SrcTensor>& ts, const std::string& lie = "") {
  json h = json::object();
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  h["__metadata__"] = {{"format", "pt"}};
  if (!lie.empty()) h[lie]["data_offsets"][1] = off + 4096;  // claims bytes past the end of the file
  std::string text = h.dump();
  while (text.size() % 8) text.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << text;
  for (const auto& t : ts) out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
}

struct Shape {
  int64_t n_vocab = 151936, n_embd = 64, n_layer = 2, n_head = 4, n_head_kv = 2, head_dim = 16, n_ff = 128;
};

// Random weights of the dense Qwen layout; 2-D weights in `dtype2d`, 1-D tensors in F32.
std::vector<SrcTensor> make_weights(bool qwen3, const std::string& dtype2d, bool tied, uint64_t seed) {
  Shape s;
  Rng rng(seed);
  std::vector<SrcTensor> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset) {
    const bool one_d = shape.size() == 1;
    const std::string dt = one_d ? "F32" : dtype2d;
    int64_t n = 1;
    for (auto d : shape) n *= d;
    SrcTensor t{name, dt, shape, {}};
    t.bytes.resize(static_cast<size_t>(n) * (dt == "F32" ? 4 : 2));
    for (int64_t i = 0; i < n; ++i) {
      const float v = offset + scale * (static_cast<float>(rng.uniform()) * 2.0f - 1.0f);
      if (dt == "F32") std::memcpy(t.bytes.data() + i * 4, &v, 4);
      else {
        const uint16_t h = dt == "BF16" ? fp32_to_bf16(v) : fp32_to_fp16(v);
        std::memcpy(t.bytes.data() + i * 2, &h, 2);
      }
    }
    ts.push_back(std::move(t));
  };
  const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
  add("model.embed_tokens.weight", {s.n_vocab, s.n_embd}, 0.5f, 0.0f);
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {s.n_embd}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {q, s.n_embd}, 0.2f, 0.0f);
    add(p + "self_attn.k_proj.weight", {kv, s.n_embd}, 0.2f, 0.0f);
    add(p + "self_attn.v_proj.weight", {kv, s.n_embd}, 0.2f, 0.0f);
    if (!qwen3) {
      add(p + "self_attn.q_proj.bias", {q}, 0.1f, 0.0f);
      add(p + "self_attn.k_proj.bias", {kv}, 0.1f, 0.0f);
      add(p + "self_attn.v_proj.bias", {kv}, 0.1f, 0.0f);
    } else {
      add(p + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, 1.0f);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, 1.0f);
    }
    add(p + "self_attn.o_proj.weight", {s.n_embd, q}, 0.2f, 0.0f);
    add(p + "post_attention_layernorm.weight", {s.n_embd}, 0.1f, 1.0f);
    add(p + "mlp.gate_proj.weight", {s.n_ff, s.n_embd}, 0.2f, 0.0f);
    add(p + "mlp.up_proj.weight", {s.n_ff, s.n_embd}, 0.2f, 0.0f);
    add(p + "mlp.down_proj.weight", {s.n_embd, s.n_ff}, 0.2f, 0.0f);
  }
  add("model.norm.weight", {s.n_embd}, 0.1f, 1.0f);
  if (!tied) add("lm_head.weight", {s.n_vocab, s.n_embd}, 0.2f, 0.0f);
  return ts;
}

json make_config(bool qwen3, bool tied) {
  Shape s;
  json c = {{"architectures", {qwen3 ? "Qwen3ForCausalLM" : "Qwen2ForCausalLM"}},
            {"model_type", qwen3 ? "qwen3" : "qwen2"},
            {"hidden_size", s.n_embd},
            {"num_hidden_layers", s.n_layer},
            {"num_attention_heads", s.n_head},
            {"num_key_value_heads", s.n_head_kv},
            {"intermediate_size", s.n_ff},
            {"max_position_embeddings", 40960},
            {"rope_theta", 1000000.0},
            {"rms_norm_eps", 1e-6},
            {"vocab_size", s.n_vocab},
            {"bos_token_id", 151643},
            {"eos_token_id", 151645},
            {"tie_word_embeddings", tied},
            {"torch_dtype", "bfloat16"}};
  if (qwen3) c["head_dim"] = s.head_dim;
  return c;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A checkpoint folder: config.json, tokenizer files (Qwen3 as shipped, or the Qwen2.5 variant), weights
// in one file or in two shards with an index.
std::string make_checkpoint(const std::string& dir, bool qwen3, const std::string& dtype2d, bool tied, bool sharded = false,
                            uint64_t seed = 5) {
  fs::create_directories(dir);
  write_text(dir + "/config.json", make_config(qwen3, tied).dump(2));
  const std::string src = test::fixture_path("hf/qwen3-tokenizer");
  if (qwen3) {
    fs::copy_file(src + "/tokenizer.json", dir + "/tokenizer.json", fs::copy_options::overwrite_existing);
    fs::copy_file(src + "/tokenizer_config.json", dir + "/tokenizer_config.json", fs::copy_options::overwrite_existing);
  } else {  // Qwen2.5: without the four added tokens 151665..151668, with the Qwen2.5 chat template
    json tok = json::parse(test::read_file(src + "/tokenizer.json"));
    json kept = json::array();
    for (const auto& a : tok["added_tokens"]) {
      if (a["id"].get<int>() < 151665) kept.push_back(a);
    }
    tok["added_tokens"] = kept;
    write_text(dir + "/tokenizer.json", tok.dump());
    json cfg = json::parse(test::read_file(src + "/tokenizer_config.json"));
    json dec = json::object();
    for (const auto& [k, v] : cfg["added_tokens_decoder"].items()) {
      if (std::stoi(k) < 151665) dec[k] = v;
    }
    cfg["added_tokens_decoder"] = dec;
    cfg["chat_template"] = test::read_file(test::fixture_path("chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    write_text(dir + "/tokenizer_config.json", cfg.dump(2));
  }
  const auto ts = make_weights(qwen3, dtype2d, tied, seed);
  if (!sharded) {
    write_safetensors(dir + "/model.safetensors", ts);
  } else {
    std::vector<SrcTensor> a(ts.begin(), ts.begin() + static_cast<long>(ts.size() / 2)), b(ts.begin() + static_cast<long>(ts.size() / 2), ts.end());
    write_safetensors(dir + "/model-00001-of-00002.safetensors", a);
    write_safetensors(dir + "/model-00002-of-00002.safetensors", b);
    json map = json::object();
    for (const auto& t : a) map[t.name] = "model-00001-of-00002.safetensors";
    for (const auto& t : b) map[t.name] = "model-00002-of-00002.safetensors";
    write_text(dir + "/model.safetensors.index.json", json({{"metadata", {{"total_size", 0}}}, {"weight_map", map}}).dump(2));
  }
  return dir;
}

std::string gguf_name_for(const std::string& hf) {
  static const std::pair<const char*, const char*> kMap[] = {
      {"input_layernorm", "attn_norm"}, {"self_attn.q_proj", "attn_q"},     {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},   {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"}, {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},        {"mlp.down_proj", "ffn_down"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const size_t l0 = std::strlen("model.layers."), dot = hf.find('.', l0);
  const std::string layer = hf.substr(l0, dot - l0), rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kMap) {
    if (rest.rfind(from, 0) == 0) return "blk." + layer + "." + to + rest.substr(std::strlen(from));
  }
  return "?";
}

float elem(const std::string& dtype, const uint8_t* p) {
  if (dtype == "F32") {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == "F16" ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

// Every GGUF tensor against its safetensors source: same shape (reversed), bytes verbatim when the type
// is unchanged, else the cast of each element (f32 -> f16/bf16 round-to-nearest-even).
void expect_tensors_match(const std::string& ckpt_dir, const std::string& gguf_path, DType out2d) {
  auto ckpt = Checkpoint::open(ckpt_dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  auto file = gguf::File::open(gguf_path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  size_t matched = 0;
  for (const auto& [name, st] : ckpt->tensors()) {
    const std::string g = gguf_name_for(name);
    const gguf::TensorInfo* t = file->find_tensor(g);
    ASSERT_NE(t, nullptr) << name << " -> " << g;
    ASSERT_EQ(static_cast<size_t>(t->n_dims), st.shape.size()) << g;
    for (size_t d = 0; d < st.shape.size(); ++d) EXPECT_EQ(t->ne[d], st.shape[st.shape.size() - 1 - d]) << g;
    const DType want = st.shape.size() == 1 ? DType::F32 : out2d;
    ASSERT_EQ(t->type, want) << g;
    const std::string src_name = want == DType::F32 ? "F32" : want == DType::F16 ? "F16" : "BF16";
    if (st.dtype == src_name) {
      ASSERT_EQ(t->n_bytes, st.data.size());
      EXPECT_EQ(0, std::memcmp(t->data, st.data.data(), st.data.size())) << g << " must be copied verbatim";
    } else {
      const size_t in = safetensors_dtype_size(st.dtype), n = st.data.size() / in;
      for (size_t i = 0; i < n; ++i) {
        const float f = elem(st.dtype, st.data.data() + i * in);
        if (want == DType::F32) {
          float got;
          std::memcpy(&got, t->data + i * 4, 4);
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(f)) << g << "[" << i << "]";
        } else {
          uint16_t got;
          std::memcpy(&got, t->data + i * 2, 2);
          ASSERT_EQ(got, want == DType::F16 ? fp32_to_fp16(f) : fp32_to_bf16(f)) << g << "[" << i << "]";
        }
      }
    }
    ++matched;
  }
  EXPECT_EQ(matched, file->tensors().size()) << "no tensor beyond the checkpoint's";
}

void expect_tokenizer_equals_fixture(const std::string& gguf_path, const std::string& vocab, const std::string& out_file,
                                     const std::string& template_file) {
  auto mine = gguf::File::open(gguf_path);
  auto ref = gguf::File::open(test::fixture_path("tokenizer/" + vocab));
  ASSERT_TRUE(mine.ok() && ref.ok());
  size_t compared = 0;
  for (const auto& [key, value] : ref->metadata().entries()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const gguf::Value* got = mine->metadata().find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_TRUE(*got == value) << key << " differs from " << vocab;
    ++compared;
  }
  EXPECT_GE(compared, 9u);
  for (const auto& [key, value] : mine->metadata().entries()) {
    if (key.rfind("tokenizer.", 0) == 0) {
      EXPECT_NE(ref->metadata().find(key), nullptr) << "extra key " << key;
    }
  }
  EXPECT_EQ(*mine->metadata().get_string("tokenizer.chat_template"),
            test::read_file(test::fixture_path("chat/templates/" + template_file)));
  auto tok = tokenizer::Tokenizer::from_gguf(mine->metadata());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const auto texts = tokenizer::tok_test::read_inp(test::fixture_path("tokenizer/corpus.inp"));
  const auto want = tokenizer::tok_test::read_out(test::fixture_path("tokenizer/" + out_file));
  ASSERT_EQ(texts.size(), want.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tok->encode(texts[i], /*add_special=*/false, true), want[i]) << "corpus string " << i;
}

// Loads in the engine and compares all-position logits with the independent scalar reference.
void expect_loads_and_matches_reference(const std::string& path, float tol) {
  engine::EngineOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  auto e = engine::Engine::load(path, o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const std::vector<int32_t> ids = {151644, 872, 198, 9707, 11, 1879, 0, 151645};
  engine::Batch b;
  for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, true);
  auto got = (*e)->decode(b);
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto file = gguf::File::open(path);
  const auto ref = test::reference_forward(*file, ids);
  const size_t n_vocab = ref[0].size();
  float worst = 0;
  for (size_t p = 0; p < ids.size(); ++p) {
    for (size_t v = 0; v < n_vocab; ++v) worst = std::max(worst, std::fabs((*got)[p * n_vocab + v] - ref[p][v]));
  }
  EXPECT_LT(worst, tol);
}

class Convert : public ::testing::Test {
 protected:
  void SetUp() override { MINFER_REQUIRE_FIXTURES(); }
};

TEST_F(Convert, Qwen3Bf16CheckpointToBf16F16AndF32) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_checkpoint(dir + "/Qwen3-tiny", /*qwen3=*/true, "BF16", /*tied=*/true);
  for (const auto& [outtype, type] : {std::pair{"bf16", DType::BF16}, {"f16", DType::F16}, {"f32", DType::F32}}) {
    ConvertOptions o;
    o.input_dir = ckpt;
    o.output = dir + "/out-" + outtype + ".gguf";
    o.outtype = outtype;
    size_t progress_calls = 0;
    o.on_progress = [&](size_t, size_t, uint64_t) { ++progress_calls; };
    auto r = convert_hf(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->arch, "qwen3");
    EXPECT_GT(progress_calls, 0u);
    EXPECT_FALSE(fs::exists(o.output + ".tmp"));
    expect_tensors_match(ckpt, o.output, type);
    auto f = gguf::File::open(o.output);
    EXPECT_EQ(f->find_tensor("output.weight"), nullptr) << "tied: no output tensor";
    EXPECT_EQ(*f->metadata().get_u32("qwen3.attention.key_length"), 16u);
    EXPECT_EQ(*f->metadata().get_u32("qwen3.block_count"), 2u);
    EXPECT_EQ(*f->metadata().get_f32("qwen3.rope.freq_base"), 1e6f);
    EXPECT_EQ(*f->metadata().get_string("general.name"), "Qwen3-tiny");
  }
  expect_tokenizer_equals_fixture(dir + "/out-bf16.gguf", "qwen3-vocab.gguf", "corpus.qwen3.out", "Qwen-Qwen3-0.6B.jinja");
  // Logits here reach |x| ~ 10-20 (random weights, tied 152k-row embedding): f32 kernels vs the double
  // reference differ by ~4e-3; bf16 weights are multiplied with bf16-rounded activations (8-bit mantissa).
  expect_loads_and_matches_reference(dir + "/out-f32.gguf", 1e-2f);
  expect_loads_and_matches_reference(dir + "/out-bf16.gguf", 0.15f);
}

TEST_F(Convert, Qwen25F32ShardedUntiedCheckpoint) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_checkpoint(dir + "/qwen25", /*qwen3=*/false, "F32", /*tied=*/false, /*sharded=*/true);
  for (const auto& [outtype, type] : {std::pair{"f32", DType::F32}, {"f16", DType::F16}, {"bf16", DType::BF16}}) {
    ConvertOptions o;
    o.input_dir = ckpt;
    o.output = dir + "/q25-" + outtype + ".gguf";
    o.outtype = outtype;
    auto r = convert_hf(o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->arch, "qwen2");
    expect_tensors_match(ckpt, o.output, type);
  }
  auto f = gguf::File::open(dir + "/q25-f32.gguf");
  ASSERT_NE(f->find_tensor("output.weight"), nullptr);
  ASSERT_NE(f->find_tensor("blk.1.attn_q.bias"), nullptr);
  EXPECT_FALSE(f->metadata().contains("qwen2.attention.key_length"));
  expect_tokenizer_equals_fixture(dir + "/q25-f32.gguf", "qwen2-vocab.gguf", "corpus.qwen2.out",
                                  "Qwen-Qwen2.5-7B-Instruct.jinja");
  expect_loads_and_matches_reference(dir + "/q25-f32.gguf", 1e-2f);
}

TEST_F(Convert, QuantizedOuttypeGoesThroughQuantize) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_checkpoint(dir + "/q3", true, "BF16", true);
  ConvertOptions o;
  o.input_dir = ckpt;
  o.output = dir + "/q8.gguf";
  o.outtype = "q8_0";
  auto r = convert_hf(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto f = gguf::File::open(o.output);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, DType::Q8_0);
  EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, DType::F32);
  EXPECT_EQ(*f->metadata().get_u32("general.file_type"), 7u);
  EXPECT_FALSE(fs::exists(o.output + ".f32.tmp.gguf"));
  o.outtype = "q9_9";
  o.output = dir + "/bad.gguf";
  EXPECT_FALSE(convert_hf(o).ok());
  EXPECT_FALSE(fs::exists(o.output));
}

TEST_F(Convert, RefusesBadInputsByName) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_checkpoint(dir + "/base", true, "BF16", true);
  ConvertOptions o;
  o.input_dir = ckpt;
  o.output = dir + "/x.gguf";
  auto expect_refused = [&](const std::string& needle) {
    auto r = convert_hf(o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_FALSE(fs::exists(o.output));
  };
  // A header that lies about offsets.
  auto ts = make_weights(true, "BF16", true, 5);
  write_safetensors(ckpt + "/model.safetensors", ts, "model.norm.weight");
  expect_refused("model.norm.weight");
  auto lie = MappedFile::open(ckpt + "/model.safetensors");
  ASSERT_TRUE(lie.ok());
  EXPECT_NE(parse_safetensors(lie->bytes(), "x").status().message().find("data_offsets"), std::string::npos);
  // A header length past the end of the file.
  std::vector<uint8_t> tiny = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
  EXPECT_NE(parse_safetensors(tiny, "t").status().message().find("past the end"), std::string::npos);
  // A missing tensor.
  ts = make_weights(true, "BF16", true, 5);
  ts.erase(std::remove_if(ts.begin(), ts.end(), [](const SrcTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; }),
           ts.end());
  write_safetensors(ckpt + "/model.safetensors", ts);
  expect_refused("missing tensor 'model.layers.1.mlp.up_proj.weight'");
  // An unsupported dtype.
  ts = make_weights(true, "BF16", true, 5);
  for (auto& t : ts) {
    if (t.name == "model.norm.weight") t.dtype = "I32";  // same byte size as F32
  }
  write_safetensors(ckpt + "/model.safetensors", ts);
  expect_refused("dtype I32");
  // An unexpected extra tensor.
  ts = make_weights(true, "BF16", true, 5);
  ts.push_back({"model.layers.0.mlp.experts.0.up_proj.weight", "F32", {1}, std::vector<uint8_t>(4)});
  write_safetensors(ckpt + "/model.safetensors", ts);
  expect_refused("unexpected tensor 'model.layers.0.mlp.experts.0.up_proj.weight'");
  // An unknown architecture.
  write_safetensors(ckpt + "/model.safetensors", make_weights(true, "BF16", true, 5));
  json cfg = make_config(true, true);
  cfg["architectures"] = {"MixtralForCausalLM"};
  write_text(ckpt + "/config.json", cfg.dump());
  expect_refused("architecture 'MixtralForCausalLM' is not supported");
  // A known architecture whose config.json does not fit the weights: dense Qwen3 weights as Llama (q/k
  // norms unexpected) or as Qwen3-MoE (no expert counts).
  cfg["architectures"] = {"LlamaForCausalLM"};
  write_text(ckpt + "/config.json", cfg.dump());
  expect_refused("unexpected tensor 'model.layers.0.self_attn.k_norm.weight' for LlamaForCausalLM");
  cfg["architectures"] = {"Qwen3MoeForCausalLM"};
  write_text(ckpt + "/config.json", cfg.dump());
  expect_refused("config.json has no 'num_experts'");
  // A shape config.json does not imply.
  cfg = make_config(true, true);
  cfg["intermediate_size"] = 96;
  write_text(ckpt + "/config.json", cfg.dump());
  expect_refused("config.json implies");
}

TEST(ConvertMerges, AcceptsStringAndPairMerges) {
  const std::string dir = test::temp_dir() + "/m";
  fs::create_directories(dir);
  json tok = {{"model",
               {{"type", "BPE"},
                {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"c", 3}, {"abc", 4}}},
                {"merges", json::array({"a b", json::array({"ab", "c"})})}}},
              {"added_tokens", json::array({{{"id", 5}, {"content", "<|endoftext|>"}, {"special", true}},
                                            {{"id", 6}, {"content", "<think>"}, {"special", false}}})},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers",
                 json::array({{{"type", "Split"},
                               {"pattern", {{"Regex", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}}},
                              {{"type", "ByteLevel"}}})}}}};
  write_text(dir + "/tokenizer.json", tok.dump());
  write_text(dir + "/tokenizer_config.json", json({{"eos_token", {{"content", "<|endoftext|>"}}}}).dump());
  write_text(dir + "/config.json", json({{"vocab_size", 9}}).dump());
  auto md = hf_tokenizer_metadata(dir);
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_EQ(*md->get_string_array("tokenizer.ggml.merges"), (std::vector<std::string>{"a b", "ab c"}));
  EXPECT_EQ(*md->get_string("tokenizer.ggml.pre"), "qwen35");
  EXPECT_EQ(*md->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 1, 1, 1, 3, 4, 5, 5}));
  EXPECT_EQ(*md->get_u32("tokenizer.ggml.eos_token_id"), 5u);
  EXPECT_EQ((*md->get_string_array("tokenizer.ggml.tokens"))[8], "[PAD8]");
  tok["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}};
  write_text(dir + "/tokenizer.json", tok.dump());
  auto bad = hf_tokenizer_metadata(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\\w+"), std::string::npos);
}


// ---- the llama.cpp peer (../shared/peer): converted and split files load in llama.cpp, logits agree ----

std::string peer_script() {
  const std::string fixtures = test::fixtures_dir();
  if (fixtures.empty()) return "";
  const std::string script = fs::path(fixtures).parent_path().string() + "/peer/llamacpp-peer.mjs";
  return fs::exists(script) ? script : "";
}

bool peer_installed() {
  const char* env = std::getenv("LLAMACPP_PEER_HOME");
  const char* home = std::getenv("HOME");
  const std::string dir = env && *env ? env : std::string(home ? home : "") + "/.cache/llamacpp-peer";
  return fs::exists(dir + "/node_modules/node-llama-cpp") && std::system("node --version > /dev/null 2>&1") == 0;
}

// log_softmax rows from the peer for `ids` (all positions); empty on failure (the test then fails).
std::vector<float> peer_logprobs(const std::string& model, const std::vector<int32_t>& ids, const std::string& out) {
  std::string list;
  for (int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const std::string cmd = "node '" + peer_script() + "' logits '" + model + "' --tokens " + list + " --all -t 2 --out '" +
                          out + "' > '" + out + ".log' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "peer failed: " << cmd << "\n" << test::read_file(out + ".log");
    return {};
  }
  const std::string bytes = test::read_file(out);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::vector<float> minfer_logprobs(const std::string& model, const std::vector<int32_t>& ids) {
  engine::EngineOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  auto e = engine::Engine::load(model, o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return {};
  engine::Batch b;
  for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, true);
  auto r = (*e)->decode(b);
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return {};
  std::vector<float> v = *r;
  const size_t n_vocab = v.size() / ids.size();
  for (size_t p = 0; p < ids.size(); ++p) {
    float* row = v.data() + p * n_vocab;
    const float mx = *std::max_element(row, row + n_vocab);
    double sum = 0;
    for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    for (size_t i = 0; i < n_vocab; ++i) row[i] -= lse;
  }
  return v;
}

TEST_F(Convert, ConvertedAndSplitFilesLoadInTheLlamaCppPeerWithAgreeingLogits) {
  if (peer_script().empty() || !peer_installed()) {
    GTEST_SKIP() << "llama.cpp peer not installed: run ../shared/peer/install.sh (needs node >= 20 and npm once)";
  }
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_checkpoint(dir + "/Qwen3-peer", true, "BF16", true);
  const std::vector<int32_t> ids = {151644, 872, 198, 9707, 11, 1879, 0, 151645, 198};
  for (const char* outtype : {"f32", "bf16"}) {
    ConvertOptions o;
    o.input_dir = ckpt;
    o.output = dir + "/peer-" + outtype + ".gguf";
    o.outtype = outtype;
    ASSERT_TRUE(convert_hf(o).ok());
    const auto ours = minfer_logprobs(o.output, ids);
    const auto theirs = peer_logprobs(o.output, ids, dir + "/peer-" + outtype + ".bin");
    ASSERT_EQ(ours.size(), theirs.size());
    const size_t n_vocab = ours.size() / ids.size();
    float worst = 0;
    for (size_t p = 0; p < ids.size(); ++p) {
      const float* a = ours.data() + p * n_vocab;
      const float* b = theirs.data() + p * n_vocab;
      EXPECT_EQ(std::max_element(a, a + n_vocab) - a, std::max_element(b, b + n_vocab) - b) << outtype << " pos " << p;
      for (size_t i = 0; i < n_vocab; ++i) {
        if (std::isfinite(b[i]) && b[i] > -60.0f) worst = std::max(worst, std::fabs(a[i] - b[i]));
      }
    }
    // Measured: f32 6.5e-3, bf16 5.5e-2 (both engines round activations to bf16 for bf16 weights, differently).
    EXPECT_LT(worst, std::string(outtype) == "f32" ? 2e-2f : 0.1f) << outtype << ": largest log-prob difference vs llama.cpp";
    std::fprintf(stderr, "[peer] %s: max |log p minfer - log p llama.cpp| = %.2e over %zu x %zu\n", outtype, worst,
                 ids.size(), n_vocab);
    if (std::string(outtype) == "f32") {
      SplitOptions so;
      so.input = o.output;
      so.output_prefix = dir + "/peer-split";
      so.max_tensors = 7;
      auto parts = split_model(so);
      ASSERT_TRUE(parts.ok());
      ASSERT_GT(parts->size(), 2u);
      const auto split_theirs = peer_logprobs((*parts)[0], ids, dir + "/peer-split.bin");
      EXPECT_EQ(split_theirs, theirs) << "llama.cpp gives the split model the single file's logits";
    }
  }
}

}  // namespace
}  // namespace minfer::tools
