// convert for LlamaForCausalLM / MistralForCausalLM (llama), Qwen3MoeForCausalLM (qwen3moe) and
// Gemma3ForCausalLM (gemma3): tiny checkpoints written here (see hf_checkpoint.h). Every GGUF tensor is
// checked against an in-test computation of what convert_hf_to_gguf.py writes (the q/k permutation as
// transformers' own checkpoint converter defines its inverse, stacked experts, Gemma's +1 in the source
// dtype, llama3 RoPE factors in double precision); the permutation is also checked semantically (HF's
// rotate_half attention scores equal llama.cpp's interleaved ones); converted llama, qwen3moe and gemma3
// files match llama.cpp logits and greedy tokens committed under convert_refs/ (README there says how they
// were made); quantized conversions load and generate.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/reference_forward.h"
#include "engine/engine.h"
#include "gguf/reader.h"
#include "hf_checkpoint.h"
#include "tools/convert.h"
#include "tools/safetensors.h"

namespace minfer::tools {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using test_ckpt::SrcTensor;

constexpr int64_t kVocab = 264, kEmbd = 256, kLayers = 2, kHead = 4, kHeadKv = 2, kHeadDim = 64, kFf = 512;
constexpr int64_t kExperts = 4, kExpertsUsed = 2, kFfExp = 256;
// The prompt of the committed llama.cpp references: BOS, some byte and merge tokens, an eot.
const std::vector<int32_t> kPrompt = {260, 116, 258, 32, 259, 97, 256, 46, 262, 84};

// transformers' convert_llama_weights_to_hf permute: the inverse of convert_hf_to_gguf.py's. Row
// h*hd + j*hd/2 + i of the HF tensor is row h*hd + 2i + j of the llama.cpp-layout tensor.
SrcTensor to_hf_rows(const SrcTensor& llama_layout, int64_t n_head) {
  SrcTensor hf = llama_layout;
  const int64_t rows = llama_layout.shape[0], hd = rows / n_head, half = hd / 2;
  const size_t row_bytes = llama_layout.bytes.size() / static_cast<size_t>(rows);
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        std::memcpy(hf.bytes.data() + (h * hd + j * half + i) * row_bytes,
                    llama_layout.bytes.data() + (h * hd + 2 * i + j) * row_bytes, row_bytes);
      }
    }
  }
  return hf;
}

struct Llama {
  std::vector<SrcTensor> hf;                     // the checkpoint's tensors
  std::map<std::string, SrcTensor> llama_layout;  // attn_q / attn_k as llama.cpp wants them, by GGUF name
};

Llama make_llama_weights(const std::string& dtype, bool tied, uint64_t seed) {
  Rng rng(seed);
  Llama w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    const std::string dt = shape.size() == 1 ? "F32" : dtype;  // before the move below
    w.hf.push_back(test_ckpt::random_tensor(rng, name, std::move(shape), dt, scale, offset));
  };
  add("model.embed_tokens.weight", {kVocab, kEmbd}, 0.5f);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {kEmbd}, 0.1f, 1.0f);
    SrcTensor q = test_ckpt::random_tensor(rng, p + "self_attn.q_proj.weight", {kHead * kHeadDim, kEmbd}, dtype, 0.1f);
    SrcTensor k = test_ckpt::random_tensor(rng, p + "self_attn.k_proj.weight", {kHeadKv * kHeadDim, kEmbd}, dtype, 0.1f);
    w.llama_layout[g + "attn_q.weight"] = q;
    w.llama_layout[g + "attn_k.weight"] = k;
    w.hf.push_back(to_hf_rows(q, kHead));
    w.hf.push_back(to_hf_rows(k, kHeadKv));
    add(p + "self_attn.v_proj.weight", {kHeadKv * kHeadDim, kEmbd}, 0.1f);
    add(p + "self_attn.o_proj.weight", {kEmbd, kHead * kHeadDim}, 0.1f);
    add(p + "post_attention_layernorm.weight", {kEmbd}, 0.1f, 1.0f);
    add(p + "mlp.gate_proj.weight", {kFf, kEmbd}, 0.1f);
    add(p + "mlp.up_proj.weight", {kFf, kEmbd}, 0.1f);
    add(p + "mlp.down_proj.weight", {kEmbd, kFf}, 0.1f);
  }
  add("model.norm.weight", {kEmbd}, 0.1f, 1.0f);
  if (!tied) add("lm_head.weight", {kVocab, kEmbd}, 0.3f);
  return w;
}

json llama3_rope_scaling() {
  return {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 8192}};
}

json llama_config(const std::string& arch, bool tied) {
  return {{"architectures", {arch}}, {"model_type", arch == "LlamaForCausalLM" ? "llama" : "mistral"},
          {"hidden_size", kEmbd}, {"num_hidden_layers", kLayers}, {"num_attention_heads", kHead},
          {"num_key_value_heads", kHeadKv}, {"intermediate_size", kFf}, {"max_position_embeddings", 4096},
          {"rope_theta", 500000.0}, {"rms_norm_eps", 1e-5}, {"vocab_size", kVocab}, {"bos_token_id", 260},
          {"eos_token_id", 261}, {"tie_word_embeddings", tied}, {"attention_bias", false}, {"mlp_bias", false},
          {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"}};
}

std::string write_checkpoint(const std::string& dir, const json& cfg, const std::vector<SrcTensor>& ts, const char* regex) {
  fs::create_directories(dir);
  test_ckpt::write_text(dir + "/config.json", cfg.dump(2));
  test_ckpt::write_tiny_bpe_tokenizer(dir, regex);
  test_ckpt::write_safetensors(dir + "/model.safetensors", ts);
  return dir;
}

// The llama checkpoint of the committed llama.cpp reference: f32, untied, llama3 RoPE scaling, seed 24.
std::string make_reference_llama(const std::string& dir) {
  json cfg = llama_config("LlamaForCausalLM", false);
  cfg["rope_scaling"] = llama3_rope_scaling();
  return write_checkpoint(dir, cfg, make_llama_weights("F32", false, 24).hf, test_ckpt::kLlama3Regex);
}

std::string convert_to(const std::string& ckpt, const std::string& out, const std::string& outtype) {
  ConvertOptions o;
  o.input_dir = ckpt;
  o.output = out;
  o.outtype = outtype;
  auto r = convert_hf(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return out;
}

const gguf::TensorInfo& tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) {
    ADD_FAILURE() << "missing " << name;
    static gguf::TensorInfo none{};
    return none;
  }
  return *t;
}

// GGUF tensor `name` is exactly `src` (same dtype: the bytes verbatim).
void expect_same_bytes(const gguf::File& f, const std::string& name, const SrcTensor& src) {
  const gguf::TensorInfo& t = tensor(f, name);
  ASSERT_EQ(t.n_bytes, src.bytes.size()) << name;
  EXPECT_EQ(0, std::memcmp(t.data, src.bytes.data(), src.bytes.size())) << name;
  ASSERT_EQ(static_cast<size_t>(t.n_dims), src.shape.size()) << name;
  for (size_t d = 0; d < src.shape.size(); ++d) EXPECT_EQ(t.ne[d], src.shape[src.shape.size() - 1 - d]) << name;
}

float f32_at(const gguf::TensorInfo& t, size_t i) {
  float v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}

std::vector<float> log_softmax_rows(std::vector<float> v, size_t n_rows) {
  const size_t n = v.size() / n_rows;
  for (size_t p = 0; p < n_rows; ++p) {
    float* row = v.data() + p * n;
    const float mx = *std::max_element(row, row + n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    for (size_t i = 0; i < n; ++i) row[i] -= lse;
  }
  return v;
}

std::unique_ptr<engine::Engine> load_engine(const std::string& path) {
  engine::EngineOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  auto e = engine::Engine::load(path, o);
  EXPECT_TRUE(e.ok()) << path << ": " << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

// All-position logits of `ids`, and `n_gen` greedy tokens after them.
std::pair<std::vector<float>, std::vector<int32_t>> minfer_run(const std::string& path, const std::vector<int32_t>& ids, int n_gen) {
  auto e = load_engine(path);
  if (!e) return {};
  engine::Batch b;
  for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, true);
  auto r = e->decode(b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  std::vector<float> logits = *r;
  const size_t n_vocab = logits.size() / ids.size();
  std::vector<int32_t> gen;
  const float* last = logits.data() + (ids.size() - 1) * n_vocab;
  int32_t next = static_cast<int32_t>(std::max_element(last, last + n_vocab) - last);
  for (int i = 0; i < n_gen; ++i) {
    gen.push_back(next);
    engine::Batch one;
    one.add(next, static_cast<int32_t>(ids.size() + static_cast<size_t>(i)), 0, true);
    auto step = e->decode(one);
    EXPECT_TRUE(step.ok());
    if (!step.ok()) break;
    for (float v : *step) EXPECT_TRUE(std::isfinite(v));
    next = static_cast<int32_t>(std::max_element(step->begin(), step->end()) - step->begin());
  }
  return {logits, gen};
}

// ---- llama ----

TEST(ConvertLlama, TensorsPermutationRopeFactorsAndMetadata) {
  const std::string dir = test::temp_dir();
  json cfg = llama_config("LlamaForCausalLM", false);
  cfg["rope_scaling"] = llama3_rope_scaling();
  const Llama w = make_llama_weights("BF16", false, 7);
  const std::string ckpt = write_checkpoint(dir + "/Llama-tiny", cfg, w.hf, test_ckpt::kLlama3Regex);
  const std::string out = convert_to(ckpt, dir + "/llama-bf16.gguf", "bf16");
  auto f = gguf::File::open(out);
  ASSERT_TRUE(f.ok()) << f.status().message();
  // q/k: exactly the llama.cpp-layout tensors the HF ones were made from; all else verbatim.
  for (const auto& [name, t] : w.llama_layout) expect_same_bytes(*f, name, t);
  for (const SrcTensor& t : w.hf) {
    if (t.name.find("q_proj") != std::string::npos || t.name.find("k_proj") != std::string::npos) continue;
    std::string g = t.name;
    static const std::pair<const char*, const char*> kMap[] = {
        {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"}, {"input_layernorm", "attn_norm"}, {"self_attn.v_proj", "attn_v"},
        {"self_attn.o_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
        {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"}, {"model.layers.", "blk."}};
    for (const auto& [from, to] : kMap) {
      if (auto at = g.find(from); at != std::string::npos) g.replace(at, std::strlen(from), to);
    }
    expect_same_bytes(*f, g, t);
  }
  // rope_freqs: llama3 factors recomputed here in double (convert computes in float32, as torch does).
  const gguf::TensorInfo& rf = tensor(*f, "rope_freqs.weight");
  ASSERT_EQ(rf.type, DType::F32);
  ASSERT_EQ(rf.ne[0], kHeadDim / 2);
  int n_smooth = 0;
  for (int64_t i = 0; i < kHeadDim / 2; ++i) {
    const double freq = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / kHeadDim);
    const double wavelen = 2 * M_PI / freq, low_wl = 8192.0 / 1.0, high_wl = 8192.0 / 4.0;
    double want;
    if (wavelen < high_wl) want = 1.0;
    else if (wavelen > low_wl) want = 8.0;
    else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = 1.0 / ((1 - smooth) / 8.0 + smooth);
      ++n_smooth;
    }
    EXPECT_NEAR(f32_at(rf, static_cast<size_t>(i)), want, 1e-5 * want) << "rope factor " << i;
  }
  EXPECT_GT(n_smooth, 0) << "the shape exercises the interpolated band";
  const auto& md = f->metadata();
  EXPECT_EQ(*md.get_string("general.architecture"), "llama");
  EXPECT_EQ(*md.get_u32("llama.vocab_size"), 264u);
  EXPECT_EQ(*md.get_u32("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(*md.get_u32("llama.context_length"), 4096u);
  EXPECT_EQ(*md.get_u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(*md.get_u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(*md.get_u32("llama.feed_forward_length"), 512u);
  EXPECT_EQ(*md.get_f32("llama.rope.freq_base"), 500000.0f);
  EXPECT_EQ(*md.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_FALSE(md.contains("llama.attention.key_length")) << "config.json has no head_dim";
  EXPECT_FALSE(md.contains("llama.rope.scaling.type")) << "llama3 scaling is the rope_freqs tensor";
  EXPECT_EQ(*md.get_string("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ(*md.get_u32("tokenizer.ggml.bos_token_id"), 260u);
  EXPECT_EQ(f->tensors().size(), static_cast<size_t>(1 + 1 + kLayers * 9 + 2));
}

// The permutation is the right one: HF's attention (rotate_half RoPE on the checkpoint's q/k) and
// llama.cpp's (adjacent-pair RoPE on the converted q/k) give the same q.k scores for every head.
TEST(ConvertLlama, PermutedWeightsGiveHfAttentionScores) {
  const std::string dir = test::temp_dir();
  const Llama w = make_llama_weights("F32", true, 11);
  const std::string ckpt = write_checkpoint(dir + "/l", llama_config("LlamaForCausalLM", true), w.hf, test_ckpt::kLlama3Regex);
  auto f = gguf::File::open(convert_to(ckpt, dir + "/l.gguf", "f32"));
  ASSERT_TRUE(f.ok());
  auto hf = Checkpoint::open(ckpt);
  ASSERT_TRUE(hf.ok());
  Rng rng(3);
  std::vector<float> x1(kEmbd), x2(kEmbd);
  for (auto& v : x1) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : x2) v = rng.uniform(-1.0f, 1.0f);
  const int pos1 = 5, pos2 = 2;
  auto matvec = [](const uint8_t* wdata, int64_t rows, const std::vector<float>& x) {
    std::vector<double> y(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < kEmbd; ++c) {
        float wv;
        std::memcpy(&wv, wdata + (r * kEmbd + c) * 4, 4);
        s += static_cast<double>(wv) * x[static_cast<size_t>(c)];
      }
      y[static_cast<size_t>(r)] = s;
    }
    return y;
  };
  // Rotates head `h` of `v` at `pos`: pairs (i, i + hd/2) when `half`, else (2i, 2i + 1).
  auto rope = [](std::vector<double>& v, int64_t h, int pos, bool half) {
    for (int64_t i = 0; i < kHeadDim / 2; ++i) {
      const double theta = pos * std::pow(500000.0, -2.0 * static_cast<double>(i) / kHeadDim);
      const size_t a = static_cast<size_t>(h * kHeadDim + (half ? i : 2 * i));
      const size_t b = static_cast<size_t>(h * kHeadDim + (half ? i + kHeadDim / 2 : 2 * i + 1));
      const double u0 = v[a], u1 = v[b];
      v[a] = u0 * std::cos(theta) - u1 * std::sin(theta);
      v[b] = u0 * std::sin(theta) + u1 * std::cos(theta);
    }
  };
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.", g = "blk." + std::to_string(l) + ".";
    auto q_hf = matvec(hf->find(p + "q_proj.weight")->data.data(), kHead * kHeadDim, x1);
    auto k_hf = matvec(hf->find(p + "k_proj.weight")->data.data(), kHeadKv * kHeadDim, x2);
    auto q_ll = matvec(tensor(*f, g + "attn_q.weight").data, kHead * kHeadDim, x1);
    auto k_ll = matvec(tensor(*f, g + "attn_k.weight").data, kHeadKv * kHeadDim, x2);
    for (int64_t h = 0; h < kHead; ++h) rope(q_hf, h, pos1, true), rope(q_ll, h, pos1, false);
    for (int64_t h = 0; h < kHeadKv; ++h) rope(k_hf, h, pos2, true), rope(k_ll, h, pos2, false);
    for (int64_t h = 0; h < kHead; ++h) {
      const int64_t kvh = h / (kHead / kHeadKv);
      double s_hf = 0, s_ll = 0, scale = 0;
      for (int64_t d = 0; d < kHeadDim; ++d) {
        s_hf += q_hf[static_cast<size_t>(h * kHeadDim + d)] * k_hf[static_cast<size_t>(kvh * kHeadDim + d)];
        s_ll += q_ll[static_cast<size_t>(h * kHeadDim + d)] * k_ll[static_cast<size_t>(kvh * kHeadDim + d)];
        scale += std::fabs(q_hf[static_cast<size_t>(h * kHeadDim + d)] * k_hf[static_cast<size_t>(kvh * kHeadDim + d)]);
      }
      // Same products summed in another order, in double: equal to ~1e-15 of their magnitude.
      EXPECT_NEAR(s_hf, s_ll, 1e-12 * scale) << "layer " << l << " head " << h;
    }
  }
  // Without the permutation the scores would differ: the check has teeth.
  auto q_raw = matvec(hf->find("model.layers.0.self_attn.q_proj.weight")->data.data(), kHead * kHeadDim, x1);
  auto k_raw = matvec(hf->find("model.layers.0.self_attn.k_proj.weight")->data.data(), kHeadKv * kHeadDim, x2);
  auto q_ref = q_raw, k_ref = k_raw;
  rope(q_raw, 0, pos1, false), rope(k_raw, 0, pos2, false), rope(q_ref, 0, pos1, true), rope(k_ref, 0, pos2, true);
  double wrong = 0, right = 0;
  for (int64_t d = 0; d < kHeadDim; ++d) wrong += q_raw[static_cast<size_t>(d)] * k_raw[static_cast<size_t>(d)],
                                         right += q_ref[static_cast<size_t>(d)] * k_ref[static_cast<size_t>(d)];
  EXPECT_GT(std::fabs(wrong - right), 1e-3);
  // The converted file runs in the engine like the independent scalar reference.
  const std::vector<int32_t> ids(kPrompt.begin(), kPrompt.end());
  auto [logits, gen] = minfer_run(dir + "/l.gguf", ids, 0);
  const auto ref = test::reference_forward(*f, ids);
  float worst = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t v = 0; v < static_cast<size_t>(kVocab); ++v) worst = std::max(worst, std::fabs(logits[i * kVocab + v] - ref[i][v]));
  }
  // As for the Qwen conversions: f32 kernels vs the double reference on logits of |x| ~ 10.
  EXPECT_LT(worst, 1e-2f);
}

TEST(ConvertLlama, MistralTiedF16WithHeadDimAndLinearRope) {
  const std::string dir = test::temp_dir();
  json cfg = llama_config("MistralForCausalLM", true);
  cfg["head_dim"] = kHeadDim;
  cfg["sliding_window"] = nullptr;
  cfg["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const Llama w = make_llama_weights("F32", true, 9);
  const std::string ckpt = write_checkpoint(dir + "/Mistral-tiny", cfg, w.hf, test_ckpt::kLlama3Regex);
  auto f = gguf::File::open(convert_to(ckpt, dir + "/m.gguf", "f16"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->metadata().get_string("general.architecture"), "llama");
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr) << "tied";
  EXPECT_EQ(f->find_tensor("rope_freqs.weight"), nullptr);
  EXPECT_EQ(*f->metadata().get_u32("llama.attention.key_length"), 64u);
  EXPECT_EQ(*f->metadata().get_string("llama.rope.scaling.type"), "linear");
  EXPECT_EQ(*f->metadata().get_f32("llama.rope.scaling.factor"), 2.0f);
  // f16 of the permuted f32 rows: permuting then casting = casting then permuting (element-wise cast).
  const gguf::TensorInfo& k = tensor(*f, "blk.1.attn_k.weight");
  ASSERT_EQ(k.type, DType::F16);
  const SrcTensor& want = w.llama_layout.at("blk.1.attn_k.weight");
  for (int64_t i = 0; i < want.numel(); ++i) {
    uint16_t got;
    std::memcpy(&got, k.data + i * 2, 2);
    ASSERT_EQ(got, fp32_to_fp16(want.at(i))) << i;
  }
  auto e = load_engine(dir + "/m.gguf");
  EXPECT_NE(e, nullptr);
}

TEST(ConvertLlama, RefusesWhatItCannotConvertByName) {
  const std::string dir = test::temp_dir();
  const Llama w = make_llama_weights("F32", true, 1);
  const std::string ckpt = write_checkpoint(dir + "/r", llama_config("LlamaForCausalLM", true), w.hf, test_ckpt::kLlama3Regex);
  auto refused = [&](json cfg, const std::string& needle) {
    test_ckpt::write_text(ckpt + "/config.json", cfg.dump());
    ConvertOptions o;
    o.input_dir = ckpt;
    o.output = dir + "/x.gguf";
    auto r = convert_hf(o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_FALSE(fs::exists(o.output));
  };
  json cfg = llama_config("LlamaForCausalLM", true);
  cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  refused(cfg, "rope_scaling type 'yarn' is not supported for LlamaForCausalLM");
  cfg["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  refused(cfg, "rope_scaling type 'dynamic'");
  cfg = llama_config("LlamaForCausalLM", true);
  cfg["attention_bias"] = true;
  refused(cfg, "attention_bias");
  cfg = llama_config("LlamaForCausalLM", true);
  cfg["mlp_bias"] = true;
  refused(cfg, "mlp_bias");
  cfg = llama_config("LlamaForCausalLM", true);
  cfg["architectures"] = {"MixtralForCausalLM"};
  refused(cfg, "architecture 'MixtralForCausalLM' is not supported");
  cfg["architectures"] = {"Gemma3ForConditionalGeneration"};
  refused(cfg, "Gemma3ForConditionalGeneration");
  cfg = llama_config("LlamaForCausalLM", true);
  cfg["num_attention_heads"] = 8;  // q_proj rows no longer match
  refused(cfg, "config.json implies");
}

// ---- qwen3moe ----

std::vector<SrcTensor> make_qwen3moe_weights(const std::string& dtype, uint64_t seed) {
  Rng rng(seed);
  std::vector<SrcTensor> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    const std::string dt = shape.size() == 1 ? "F32" : dtype;  // before the move below
    ts.push_back(test_ckpt::random_tensor(rng, name, std::move(shape), dt, scale, offset));
  };
  add("model.embed_tokens.weight", {kVocab, kEmbd}, 0.5f);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {kEmbd}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {kHead * kHeadDim, kEmbd}, 0.1f);
    add(p + "self_attn.k_proj.weight", {kHeadKv * kHeadDim, kEmbd}, 0.1f);
    add(p + "self_attn.v_proj.weight", {kHeadKv * kHeadDim, kEmbd}, 0.1f);
    add(p + "self_attn.o_proj.weight", {kEmbd, kHead * kHeadDim}, 0.1f);
    add(p + "self_attn.q_norm.weight", {kHeadDim}, 0.1f, 1.0f);
    add(p + "self_attn.k_norm.weight", {kHeadDim}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {kEmbd}, 0.1f, 1.0f);
    add(p + "mlp.gate.weight", {kExperts, kEmbd}, 0.5f);
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      add(x + "gate_proj.weight", {kFfExp, kEmbd}, 0.1f);
      add(x + "up_proj.weight", {kFfExp, kEmbd}, 0.1f);
      add(x + "down_proj.weight", {kEmbd, kFfExp}, 0.1f);
    }
  }
  add("model.norm.weight", {kEmbd}, 0.1f, 1.0f);
  add("lm_head.weight", {kVocab, kEmbd}, 0.3f);
  return ts;
}

json qwen3moe_config() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}, {"hidden_size", kEmbd},
          {"num_hidden_layers", kLayers}, {"num_attention_heads", kHead}, {"num_key_value_heads", kHeadKv},
          {"head_dim", kHeadDim}, {"intermediate_size", 768}, {"moe_intermediate_size", kFfExp},
          {"num_experts", kExperts}, {"num_experts_per_tok", kExpertsUsed}, {"norm_topk_prob", true},
          {"decoder_sparse_step", 1}, {"mlp_only_layers", json::array()}, {"max_position_embeddings", 40960},
          {"rope_theta", 1000000.0}, {"rms_norm_eps", 1e-6}, {"vocab_size", kVocab}, {"tie_word_embeddings", false},
          {"bos_token_id", 260}, {"eos_token_id", 261}};
}

std::string make_reference_qwen3moe(const std::string& dir) {
  return write_checkpoint(dir, qwen3moe_config(), make_qwen3moe_weights("F32", 30), test_ckpt::kQwen2Regex);
}

TEST(ConvertQwen3Moe, ExpertsStackedRouterF32AndMetadata) {
  const std::string dir = test::temp_dir();
  const auto ts = make_qwen3moe_weights("BF16", 5);
  const std::string ckpt = write_checkpoint(dir + "/moe", qwen3moe_config(), ts, test_ckpt::kQwen2Regex);
  auto f = gguf::File::open(convert_to(ckpt, dir + "/moe.gguf", "bf16"));
  ASSERT_TRUE(f.ok());
  std::map<std::string, const SrcTensor*> by_name;
  for (const auto& t : ts) by_name[t.name] = &t;
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.", g = "blk." + std::to_string(l) + ".";
    for (const char* w : {"gate", "up", "down"}) {
      const gguf::TensorInfo& t = tensor(*f, g + "ffn_" + w + "_exps.weight");
      ASSERT_EQ(t.type, DType::BF16);
      ASSERT_EQ(t.n_dims, 3);
      const bool down = std::string(w) == "down";
      EXPECT_EQ(t.ne[0], down ? kFfExp : kEmbd);
      EXPECT_EQ(t.ne[1], down ? kEmbd : kFfExp);
      EXPECT_EQ(t.ne[2], kExperts);
      size_t off = 0;
      for (int64_t e = 0; e < kExperts; ++e) {
        const SrcTensor& src = *by_name.at(p + "experts." + std::to_string(e) + "." + w + "_proj.weight");
        ASSERT_LE(off + src.bytes.size(), t.n_bytes);
        EXPECT_EQ(0, std::memcmp(t.data + off, src.bytes.data(), src.bytes.size())) << g << w << " expert " << e;
        off += src.bytes.size();
      }
      EXPECT_EQ(off, t.n_bytes);
    }
    // The router stays f32 (convert_hf_to_gguf.py keeps ffn_gate_inp in float32 whatever the outtype).
    const gguf::TensorInfo& router = tensor(*f, g + "ffn_gate_inp.weight");
    ASSERT_EQ(router.type, DType::F32);
    const SrcTensor& rsrc = *by_name.at(p + "gate.weight");
    EXPECT_EQ(router.ne[0], kEmbd);
    EXPECT_EQ(router.ne[1], kExperts);
    for (int64_t i = 0; i < rsrc.numel(); ++i) ASSERT_EQ(f32_at(router, static_cast<size_t>(i)), rsrc.at(i)) << i;
    EXPECT_EQ(f->find_tensor(g + "ffn_gate.weight"), nullptr);
  }
  const auto& md = f->metadata();
  EXPECT_EQ(*md.get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(*md.get_u32("qwen3moe.expert_count"), 4u);
  EXPECT_EQ(*md.get_u32("qwen3moe.expert_used_count"), 2u);
  EXPECT_EQ(*md.get_u32("qwen3moe.expert_feed_forward_length"), 256u);
  EXPECT_EQ(*md.get_u32("qwen3moe.feed_forward_length"), 768u);
  EXPECT_EQ(*md.get_u32("qwen3moe.attention.key_length"), 64u);
  EXPECT_EQ(*md.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f->tensors().size(), static_cast<size_t>(1 + kLayers * 12 + 2));
  EXPECT_NE(load_engine(dir + "/moe.gguf"), nullptr);
}

TEST(ConvertQwen3Moe, RefusesWhatLlamaCppWouldRunDifferently) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = write_checkpoint(dir + "/moe", qwen3moe_config(), make_qwen3moe_weights("F32", 2), test_ckpt::kQwen2Regex);
  auto refused = [&](json cfg, const std::string& needle) {
    test_ckpt::write_text(ckpt + "/config.json", cfg.dump());
    ConvertOptions o;
    o.input_dir = ckpt;
    o.output = dir + "/x.gguf";
    auto r = convert_hf(o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  json cfg = qwen3moe_config();
  cfg["norm_topk_prob"] = false;
  refused(cfg, "norm_topk_prob = false");
  cfg = qwen3moe_config();
  cfg["mlp_only_layers"] = {1};
  refused(cfg, "mlp_only_layers");
  cfg = qwen3moe_config();
  cfg["num_experts"] = 8;
  refused(cfg, "'model.layers.0.mlp.gate.weight' has shape [4, 256], config.json implies [8, 256]");
  cfg = qwen3moe_config();
  cfg.erase("num_experts_per_tok");
  refused(cfg, "num_experts_per_tok");
}

// ---- the committed llama.cpp references (convert_refs/README.md) ----

std::string refs_dir() { return MINFER_CONVERT_REFS_DIR; }

std::vector<float> read_f32(const std::string& path) {
  const std::string bytes = test::read_file(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

void expect_matches_llama_cpp(const std::string& gguf_path, const std::string& name) {
  // MINFER_CONVERT_KEEP=DIR keeps the converted file, to make the reference again (README).
  if (const char* keep = std::getenv("MINFER_CONVERT_KEEP"); keep && *keep) {
    fs::copy_file(gguf_path, std::string(keep) + "/" + name + ".gguf", fs::copy_options::overwrite_existing);
  }
  const std::vector<float> theirs = read_f32(refs_dir() + "/" + name + ".logprobs.bin");
  const json greedy = json::parse(test::read_file(refs_dir() + "/" + name + ".greedy.json"));
  auto [logits, gen] = minfer_run(gguf_path, kPrompt, 8);
  const std::vector<float> ours = log_softmax_rows(logits, kPrompt.size());
  ASSERT_EQ(ours.size(), theirs.size());
  float worst = 0;
  for (size_t p = 0; p < kPrompt.size(); ++p) {
    const float* a = ours.data() + p * kVocab;
    const float* b = theirs.data() + p * kVocab;
    EXPECT_EQ(std::max_element(a, a + kVocab) - a, std::max_element(b, b + kVocab) - b) << name << " position " << p;
    for (int64_t i = 0; i < kVocab; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  // Both engines compute in f32 with different summation orders and llama.cpp's f16 KV cache: the
  // Qwen fixtures measured llama.cpp's own batch vs token-by-token spread at a few 1e-3.
  EXPECT_LT(worst, 1e-2f) << name << ": largest |log p minfer - log p llama.cpp|";
  std::vector<int32_t> want;
  for (const auto& t : greedy["tokens"]) want.push_back(t.get<int32_t>());
  EXPECT_EQ(gen, want) << name << ": greedy continuation differs from llama.cpp's";
}

TEST(ConvertReference, TinyLlamaMatchesLlamaCpp) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_reference_llama(dir + "/llama-ref");
  expect_matches_llama_cpp(convert_to(ckpt, dir + "/llama-ref.gguf", "f32"), "llama-tiny");
}

TEST(ConvertReference, TinyQwen3MoeMatchesLlamaCpp) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_reference_qwen3moe(dir + "/moe-ref");
  expect_matches_llama_cpp(convert_to(ckpt, dir + "/moe-ref.gguf", "f32"), "qwen3moe-tiny");
}

// ---- convert -> quantize ----

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

TEST(ConvertQuantize, LlamaAndQwen3MoeQ8_0AndQ4_K_MLoadAndGenerate) {
  const std::string dir = test::temp_dir();
  const std::string llama = make_reference_llama(dir + "/llama");
  const std::string moe = make_reference_qwen3moe(dir + "/moe");
  for (const auto& [ckpt, name] : {std::pair{llama, "llama"}, {moe, "moe"}}) {
    auto [f32_logits, f32_gen] = minfer_run(convert_to(ckpt, dir + "/" + name + "-f32.gguf", "f32"), kPrompt, 0);
    for (const char* type : {"q8_0", "q4_K_M"}) {
      const std::string out = convert_to(ckpt, dir + "/" + name + "-" + type + ".gguf", type);
      auto f = gguf::File::open(out);
      ASSERT_TRUE(f.ok()) << out;
      const bool q8 = std::string(type) == "q8_0";
      const std::string probe = std::string(name) == "llama" ? "blk.0.ffn_up.weight" : "blk.0.ffn_up_exps.weight";
      EXPECT_EQ(tensor(*f, probe).type, q8 ? DType::Q8_0 : DType::Q4_K) << name << " " << type;
      if (std::string(name) == "moe") {
        EXPECT_EQ(tensor(*f, "blk.0.ffn_gate_inp.weight").type, DType::F32);
      }
      auto [logits, gen] = minfer_run(out, kPrompt, 8);
      ASSERT_EQ(gen.size(), 8u) << name << " " << type;
      // Quantization error on random weights: q8_0 keeps logits nearly parallel, q4_K_M less so.
      EXPECT_GT(cosine(logits, f32_logits), q8 ? 0.999 : 0.95) << name << " " << type;
    }
  }
}

// ---- gemma3 ----

std::vector<SrcTensor> make_gemma3_weights(const std::string& dtype, uint64_t seed, int64_t rows,
                                           int64_t n_layers = kLayers, float embd_scale = 0.5f) {
  Rng rng(seed);
  std::vector<SrcTensor> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    ts.push_back(test_ckpt::random_tensor(rng, name, std::move(shape), dtype, scale, offset));
  };
  add("model.embed_tokens.weight", {rows, kEmbd}, embd_scale);
  for (int64_t l = 0; l < n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {kEmbd}, 0.5f);
    add(p + "self_attn.q_proj.weight", {kHead * kHeadDim, kEmbd}, 0.1f);
    add(p + "self_attn.k_proj.weight", {kHeadKv * kHeadDim, kEmbd}, 0.1f);
    add(p + "self_attn.v_proj.weight", {kHeadKv * kHeadDim, kEmbd}, 0.1f);
    add(p + "self_attn.o_proj.weight", {kEmbd, kHead * kHeadDim}, 0.1f);
    add(p + "self_attn.q_norm.weight", {kHeadDim}, 0.5f);
    add(p + "self_attn.k_norm.weight", {kHeadDim}, 0.5f);
    add(p + "post_attention_layernorm.weight", {kEmbd}, 0.5f);
    add(p + "pre_feedforward_layernorm.weight", {kEmbd}, 0.5f);
    add(p + "post_feedforward_layernorm.weight", {kEmbd}, 0.5f);
    add(p + "mlp.gate_proj.weight", {kFf, kEmbd}, 0.1f);
    add(p + "mlp.up_proj.weight", {kFf, kEmbd}, 0.1f);
    add(p + "mlp.down_proj.weight", {kEmbd, kFf}, 0.1f);
  }
  add("model.norm.weight", {kEmbd}, 0.5f);
  return ts;
}

json gemma3_config() {
  return {{"architectures", {"Gemma3ForCausalLM"}}, {"model_type", "gemma3_text"}, {"hidden_size", kEmbd},
          {"num_hidden_layers", kLayers}, {"num_attention_heads", kHead}, {"num_key_value_heads", kHeadKv},
          {"head_dim", kHeadDim}, {"intermediate_size", kFf}, {"max_position_embeddings", 32768},
          {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0}, {"rms_norm_eps", 1e-6},
          {"vocab_size", kVocab}, {"sliding_window", 512}, {"sliding_window_pattern", 6},
          {"query_pre_attn_scalar", kHeadDim}, {"hidden_activation", "gelu_pytorch_tanh"},
          {"final_logit_softcapping", nullptr}, {"attn_logit_softcapping", nullptr},
          {"rope_scaling", nullptr}, {"bos_token_id", 260}, {"eos_token_id", 261}};
}

TEST(ConvertGemma3, NormOffsetInSourceDtypeNamesAndKeys) {
  const std::string dir = test::temp_dir();
  const auto ts = make_gemma3_weights("BF16", 4, kVocab);
  json cfg = gemma3_config();
  cfg["final_logit_softcapping"] = 30.0;
  cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  const std::string ckpt = write_checkpoint(dir + "/g", cfg, ts, test_ckpt::kLlama3Regex);
  auto f = gguf::File::open(convert_to(ckpt, dir + "/g.gguf", "bf16"));
  ASSERT_TRUE(f.ok());
  std::map<std::string, std::string> names = {
      {"input_layernorm", "attn_norm"}, {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
      {"post_attention_layernorm", "post_attention_norm"}, {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"}, {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"}};
  size_t norms = 0;
  for (const SrcTensor& src : ts) {
    std::string g;
    if (src.name == "model.embed_tokens.weight") g = "token_embd.weight";
    else if (src.name == "model.norm.weight") g = "output_norm.weight";
    else {
      const size_t l0 = std::strlen("model.layers."), dot = src.name.find('.', l0);
      const std::string rest = src.name.substr(dot + 1, src.name.size() - dot - 1 - std::strlen(".weight"));
      g = "blk." + src.name.substr(l0, dot - l0) + "." + names.at(rest) + ".weight";
    }
    const gguf::TensorInfo& t = tensor(*f, g);
    if (src.shape.size() == 1) {
      // torch adds 1 in bf16 (rounding the sum to bf16); the 1-D result is written f32.
      ASSERT_EQ(t.type, DType::F32) << g;
      for (int64_t i = 0; i < src.numel(); ++i) {
        ASSERT_EQ(f32_at(t, static_cast<size_t>(i)), bf16_to_fp32(fp32_to_bf16(src.at(i) + 1.0f))) << g << "[" << i << "]";
      }
      ++norms;
    } else {
      expect_same_bytes(*f, g, src);
    }
  }
  EXPECT_EQ(norms, static_cast<size_t>(kLayers * 6 + 1));
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr) << "Gemma 3 ties the output to the embedding";
  EXPECT_EQ(f->tensors().size(), ts.size());
  const auto& md = f->metadata();
  EXPECT_EQ(*md.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(*md.get_u32("gemma3.attention.sliding_window"), 512u);
  EXPECT_EQ(*md.get_u32("gemma3.attention.key_length"), 64u);
  EXPECT_EQ(*md.get_u32("gemma3.attention.value_length"), 64u);
  EXPECT_EQ(*md.get_u32("gemma3.attention.head_count_kv"), 2u);
  EXPECT_EQ(*md.get_u32("gemma3.context_length"), 32768u);
  EXPECT_EQ(*md.get_f32("gemma3.rope.freq_base"), 1e6f);
  EXPECT_EQ(*md.get_f32("gemma3.final_logit_softcapping"), 30.0f);
  EXPECT_EQ(*md.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(*md.get_f32("gemma3.rope.scaling.factor"), 8.0f);
  EXPECT_FALSE(md.contains("gemma3.vocab_size"));
}

// The gemma3 checkpoint of the committed llama.cpp reference: f32, tied, 6 layers (5 local with a window of
// 4 positions, so the 10-token prompt and the greedy steps are cut by it, and global layer 5 with linear
// RoPE scaling 8), final logit soft-capping 30, seed 36. Embeddings of scale 0.1: with 0.5 the input token,
// scaled by sqrt(n_embd), outweighs every layer and the tied output just repeats it.
std::string make_reference_gemma3(const std::string& dir) {
  json cfg = gemma3_config();
  cfg["num_hidden_layers"] = 6;
  cfg["sliding_window"] = 4;
  cfg["final_logit_softcapping"] = 30.0;
  cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  return write_checkpoint(dir, cfg, make_gemma3_weights("F32", 36, kVocab, 6, 0.1f), test_ckpt::kLlama3Regex);
}

TEST(ConvertReference, TinyGemma3MatchesLlamaCpp) {
  const std::string dir = test::temp_dir();
  const std::string ckpt = make_reference_gemma3(dir + "/gemma3-ref");
  expect_matches_llama_cpp(convert_to(ckpt, dir + "/gemma3-ref.gguf", "f32"), "gemma3-tiny");
}

TEST(ConvertGemma3, F32SourceOffsetAndRefusals) {
  const std::string dir = test::temp_dir();
  const auto ts = make_gemma3_weights("F32", 6, kVocab);
  const std::string ckpt = write_checkpoint(dir + "/g", gemma3_config(), ts, test_ckpt::kLlama3Regex);
  auto f = gguf::File::open(convert_to(ckpt, dir + "/g.gguf", "f16"));
  ASSERT_TRUE(f.ok());
  const gguf::TensorInfo& n = tensor(*f, "output_norm.weight");
  const SrcTensor& src = ts.back();
  for (int64_t i = 0; i < src.numel(); ++i) ASSERT_EQ(f32_at(n, static_cast<size_t>(i)), src.at(i) + 1.0f);
  EXPECT_FALSE(f->metadata().contains("gemma3.final_logit_softcapping"));
  EXPECT_FALSE(f->metadata().contains("gemma3.rope.scaling.type"));
  auto refused = [&](json cfg, const std::string& needle) {
    test_ckpt::write_text(ckpt + "/config.json", cfg.dump());
    ConvertOptions o;
    o.input_dir = ckpt;
    o.output = dir + "/x.gguf";
    auto r = convert_hf(o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  json cfg = gemma3_config();
  cfg["sliding_window_pattern"] = 4;
  refused(cfg, "sliding_window_pattern 4");
  cfg = gemma3_config();
  cfg["rope_local_base_freq"] = 20000.0;
  refused(cfg, "rope_local_base_freq");
  cfg = gemma3_config();
  cfg["hidden_activation"] = "gelu";
  refused(cfg, "hidden_activation 'gelu'");
  cfg = gemma3_config();
  cfg["attn_logit_softcapping"] = 50.0;
  refused(cfg, "attn_logit_softcapping");
  cfg = gemma3_config();
  cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  refused(cfg, "rope_scaling type 'yarn'");
}

}  // namespace
}  // namespace minfer::tools
