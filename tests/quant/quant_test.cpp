// Type tables, dequantize(quantize(x)) error bounds, activation formats, and llama-quantize's type rules.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/quantize_rules.h"
#include "quant/reference.h"
#include "test_util.h"

namespace minfer::quant {
namespace {

using test::random_floats;

TEST(QuantTypes, ComputeTypesAndActivationTypes) {
  for (DType t : test::kComputeTypes) EXPECT_TRUE(is_compute_type(t)) << dtype_name(t);
  EXPECT_FALSE(is_compute_type(DType::Q2_K));
  EXPECT_FALSE(is_compute_type(DType::Q8_K));
  EXPECT_TRUE(can_quantize(DType::Q8_K));
  EXPECT_EQ(vec_dot_type(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(vec_dot_type(DType::Q5_1), DType::Q8_1);
  EXPECT_EQ(vec_dot_type(DType::Q6_K), DType::Q8_K);
  EXPECT_EQ(vec_dot_type(DType::BF16), DType::BF16);
  EXPECT_EQ(vec_dot_type(DType::F32), DType::F32);
  EXPECT_FALSE(check_row(DType::Q4_0, 33).ok());
  EXPECT_FALSE(check_row(DType::IQ2_XS, 256).ok());
}

// Relative RMS error of dequantize(quantize(x)) on N(0,1) rows, bounded by the format's step: a b-bit
// uniform quantizer over a block's range has RMS error step/sqrt(12); bounds carry a 2x margin.
struct Bound {
  DType type;
  double max_rel_rms;
};

TEST(QuantRoundTrip, ErrorWithinTheFormatBound) {
  const Bound bounds[] = {
      {DType::F32, 0.0},   {DType::F16, 6e-4},  {DType::BF16, 5e-3}, {DType::Q8_0, 0.01}, {DType::Q8_1, 0.01},
      {DType::Q8_K, 0.01}, {DType::Q6_K, 0.02}, {DType::Q5_0, 0.05}, {DType::Q5_1, 0.04}, {DType::Q5_K, 0.04},
      {DType::Q4_0, 0.10}, {DType::Q4_1, 0.08}, {DType::Q4_K, 0.08},
  };
  const int64_t n = 4096;
  const std::vector<float> x = random_floats(n, 42);
  for (const Bound& b : bounds) {
    std::vector<uint8_t> q(*row_bytes(b.type, n));
    EXPECT_EQ(quantize_row(b.type, x.data(), q.data(), n), q.size());
    std::vector<float> y(n);
    dequantize_row(b.type, q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (x[i] - y[i]) * (x[i] - y[i]);
      ref += x[i] * x[i];
    }
    EXPECT_LE(std::sqrt(err / ref), b.max_rel_rms) << dtype_name(b.type);
  }
}

TEST(QuantRoundTrip, ZeroBlocksStayZero) {
  const int64_t n = 512;
  std::vector<float> x(n, 0.0f);
  for (DType t : test::kComputeTypes) {
    std::vector<uint8_t> q(*row_bytes(t, n));
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> y(n, 1.0f);
    dequantize_row(t, q.data(), y.data(), n);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

TEST(QuantFormats, Q8_0ReferenceRoundsHalfAwayActivationHalfEven) {
  // 2.5/127*127 style ties: with amax = 127 the scale is 1, so 2.5 -> 3 (roundf) vs 2 (half to even).
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -3.5f;
  BlockQ8_0 file{}, act{};
  ref::quantize_q8_0(x.data(), &file, 32);
  ref::act_q8_0(x.data(), &act, 32);
  EXPECT_EQ(file.qs[1], 3);
  EXPECT_EQ(act.qs[1], 2);
  EXPECT_EQ(file.qs[2], -4);
  EXPECT_EQ(act.qs[2], -4);
}

TEST(QuantFormats, Q8_KBlockSumsMatchQuants) {
  const std::vector<float> x = random_floats(256, 9);
  BlockQ8_K b{};
  ref::quantize_q8_K(x.data(), &b, 256);
  for (int g = 0; g < 16; ++g) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += b.qs[16 * g + i];
    EXPECT_EQ(b.bsums[g], s);
  }
}

TEST(QuantFormats, Bf16KeepsNaNQuietAndRoundsToNearestEven) {
  const float nan = std::nanf("");
  uint16_t h;
  ref::quantize_bf16(&nan, &h, 1);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(h)));
  EXPECT_NE(h & 0x40, 0);
  const float tie = std::bit_cast<float>(0x3f808000u);  // exactly halfway, even below
  ref::quantize_bf16(&tie, &h, 1);
  EXPECT_EQ(h, 0x3f80);
}

// ---------------------------------------------------------------------------- llama-quantize type rules

std::vector<TensorDesc> qwen_tensors(int n_layer, int64_t n_embd, bool tied) {
  std::vector<TensorDesc> out;
  auto add = [&](std::string name, int dims, int64_t ne0, int64_t ne1) {
    TensorDesc d;
    d.name = std::move(name);
    d.n_dims = dims;
    d.ne[0] = ne0;
    d.ne[1] = ne1;
    out.push_back(d);
  };
  add("token_embd.weight", 2, n_embd, 1000);
  add("output_norm.weight", 1, n_embd, 1);
  if (!tied) add("output.weight", 2, n_embd, 1000);
  for (int i = 0; i < n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    add(p + "attn_norm.weight", 1, n_embd, 1);
    add(p + "attn_q.weight", 2, n_embd, n_embd);
    add(p + "attn_q.bias", 1, n_embd, 1);
    add(p + "attn_v.weight", 2, n_embd, 128);
    add(p + "ffn_down.weight", 2, 4864, n_embd);
    add(p + "ffn_up.weight", 2, n_embd, 4864);
  }
  return out;
}

const TensorDecision& find(const std::vector<TensorDesc>& ts, const std::vector<TensorDecision>& ds,
                           const std::string& name) {
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].name == name) return ds[i];
  }
  static TensorDecision none;
  ADD_FAILURE() << "no tensor " << name;
  return none;
}

TEST(QuantizeRules, Q4KMUpgradesUseMoreBitsLayers) {
  const auto ts = qwen_tensors(24, 1024, /*tied=*/false);
  const auto ds = choose_tensor_types(*file_type_from_name("Q4_K_M"), ts);
  // use_more_bits(i, 24): i < 3, i >= 21, or (i - 3) % 3 == 2.
  for (int i = 0; i < 24; ++i) {
    const bool more = i < 3 || i >= 21 || (i - 3) % 3 == 2;
    const std::string p = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(find(ts, ds, p + "attn_v.weight").type, more ? DType::Q6_K : DType::Q4_K) << i;
    EXPECT_EQ(find(ts, ds, p + "ffn_down.weight").type, more ? DType::Q6_K : DType::Q4_K) << i;
    EXPECT_EQ(find(ts, ds, p + "attn_q.weight").type, DType::Q4_K) << i;
    EXPECT_FALSE(find(ts, ds, p + "attn_q.bias").quantize);
  }
  EXPECT_EQ(find(ts, ds, "output.weight").type, DType::Q6_K);
  EXPECT_EQ(find(ts, ds, "token_embd.weight").type, DType::Q4_K);
  EXPECT_FALSE(find(ts, ds, "output_norm.weight").quantize);
}

// llama-quantize's LLM_TYPE_70B rule: attn_v that its Q4_K mixes leave in Q4_K becomes Q5_K (Llama 3.x 70B,
// Qwen2.5-72B: 80 layers); Q6_K layers and the Q5_K mixes are unchanged.
TEST(QuantizeRules, SeventyBTypeAttnVInQ5K) {
  EXPECT_TRUE(is_llm_type_70b("llama", 80, 64, 8, 0));
  EXPECT_FALSE(is_llm_type_70b("llama", 80, 64, 64, 0));  // no GQA: llama.cpp's 65B
  EXPECT_FALSE(is_llm_type_70b("llama", 80, 64, 8, 8));   // 8 experts: its Mixtral types
  EXPECT_TRUE(is_llm_type_70b("qwen2", 80, 64, 8, 0));
  EXPECT_FALSE(is_llm_type_70b("qwen3", 80, 64, 8, 0));
  EXPECT_FALSE(is_llm_type_70b("llama", 32, 32, 8, 0));
  const auto ts = qwen_tensors(80, 1024, /*tied=*/false);
  auto ds = choose_tensor_types(*file_type_from_name("q4_K_M"), ts, false, 0, /*llm_type_70b=*/true);
  EXPECT_EQ(find(ts, ds, "blk.0.attn_v.weight").type, DType::Q6_K);  // use_more_bits(0, 80)
  EXPECT_EQ(find(ts, ds, "blk.11.attn_v.weight").type, DType::Q5_K);
  EXPECT_EQ(find(ts, ds, "blk.11.attn_q.weight").type, DType::Q4_K);
  EXPECT_EQ(find(ts, ds, "blk.11.ffn_down.weight").type, DType::Q4_K);
  ds = choose_tensor_types(*file_type_from_name("q4_K_S"), ts, false, 0, true);
  EXPECT_EQ(find(ts, ds, "blk.0.attn_v.weight").type, DType::Q5_K);
  EXPECT_EQ(find(ts, ds, "blk.40.attn_v.weight").type, DType::Q5_K);
  ds = choose_tensor_types(*file_type_from_name("q4_K_M"), ts);
  EXPECT_EQ(find(ts, ds, "blk.11.attn_v.weight").type, DType::Q4_K);
}

TEST(QuantizeRules, RowsNotMultipleOf256FallBack) {
  // Qwen2.5-0.5B: n_embd 896 = 3.5 x 256. K-quants fall back as llama-quantize does.
  const auto ts = qwen_tensors(24, 896, /*tied=*/true);
  const auto ds = choose_tensor_types(*file_type_from_name("q4_k_m"), ts);
  EXPECT_EQ(find(ts, ds, "token_embd.weight").type, DType::Q8_0);  // tied output, 896 % 256 != 0
  EXPECT_EQ(find(ts, ds, "blk.5.attn_q.weight").type, DType::Q5_0);
  EXPECT_EQ(find(ts, ds, "blk.0.attn_v.weight").type, DType::Q8_0);    // Q6_K -> Q8_0
  EXPECT_EQ(find(ts, ds, "blk.0.ffn_down.weight").type, DType::Q6_K);  // 4864 = 19 x 256
  EXPECT_EQ(find(ts, ds, "blk.4.ffn_down.weight").type, DType::Q4_K);  // (4 - 3) % 3 != 2
}

// Mixture of experts as llama-quantize treats it: expert tensors by their dense names (ffn_down_exps gets the
// ffn_down upgrades), the router kept in f32, and with exactly 8 experts attn_k / attn_v in Q8_0 and
// attn_output in Q5_K for the Q4_K mixes.
TEST(QuantizeRules, ExpertTensorsAndTheEightExpertRules) {
  std::vector<TensorDesc> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> ne) {
    TensorDesc d;
    d.name = name;
    d.n_dims = static_cast<int>(ne.size());
    for (size_t i = 0; i < ne.size(); ++i) d.ne[i] = ne[i];
    ts.push_back(d);
  };
  add("token_embd.weight", {256, 1000});
  add("output.weight", {256, 1000});
  for (int l = 0; l < 8; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output"}) add(p + t + ".weight", {256, 256});
    add(p + "ffn_gate_inp.weight", {256, 8});
    add(p + "ffn_gate_exps.weight", {256, 512, 8});
    add(p + "ffn_up_exps.weight", {256, 512, 8});
    add(p + "ffn_down_exps.weight", {512, 256, 8});
  }
  auto ds = choose_tensor_types(*file_type_from_name("q4_K_M"), ts, false, /*n_expert=*/8);
  EXPECT_FALSE(find(ts, ds, "blk.0.ffn_gate_inp.weight").quantize);
  EXPECT_EQ(find(ts, ds, "blk.3.ffn_gate_exps.weight").type, DType::Q4_K);
  EXPECT_EQ(find(ts, ds, "blk.0.ffn_down_exps.weight").type, DType::Q6_K);  // use_more_bits(0, 8)
  EXPECT_EQ(find(ts, ds, "blk.3.ffn_down_exps.weight").type, DType::Q6_K);  // (3 - 1) % 3 == 2
  EXPECT_EQ(find(ts, ds, "blk.2.ffn_down_exps.weight").type, DType::Q4_K);
  EXPECT_EQ(find(ts, ds, "blk.3.attn_v.weight").type, DType::Q8_0);
  EXPECT_EQ(find(ts, ds, "blk.3.attn_k.weight").type, DType::Q8_0);
  EXPECT_EQ(find(ts, ds, "blk.3.attn_output.weight").type, DType::Q5_K);
  EXPECT_EQ(find(ts, ds, "blk.3.attn_q.weight").type, DType::Q4_K);
  ds = choose_tensor_types(*file_type_from_name("q4_0"), ts, false, 8);
  EXPECT_EQ(find(ts, ds, "blk.3.attn_k.weight").type, DType::Q8_0);
  EXPECT_EQ(find(ts, ds, "blk.3.attn_output.weight").type, DType::Q4_0);
  ds = choose_tensor_types(*file_type_from_name("q4_K_M"), ts, false, /*n_expert=*/128);  // Qwen3-30B-A3B
  EXPECT_EQ(find(ts, ds, "blk.3.attn_k.weight").type, DType::Q4_K);
  EXPECT_EQ(find(ts, ds, "blk.2.attn_v.weight").type, DType::Q4_K);
  EXPECT_EQ(find(ts, ds, "blk.3.attn_output.weight").type, DType::Q4_K);
  EXPECT_EQ(find(ts, ds, "blk.0.attn_v.weight").type, DType::Q6_K);
}

TEST(QuantizeRules, LegacyTypesPutOutputInQ6KAndFloatTypesAreUniform) {
  const auto ts = qwen_tensors(2, 256, /*tied=*/true);
  auto ds = choose_tensor_types(*file_type_from_name("q4_0"), ts);
  EXPECT_EQ(find(ts, ds, "token_embd.weight").type, DType::Q6_K);
  EXPECT_EQ(find(ts, ds, "blk.1.ffn_down.weight").type, DType::Q4_0);
  ds = choose_tensor_types(*file_type_from_name("q8_0"), ts);
  EXPECT_EQ(find(ts, ds, "token_embd.weight").type, DType::Q8_0);
  ds = choose_tensor_types(*file_type_from_name("f16"), ts);
  EXPECT_EQ(find(ts, ds, "token_embd.weight").type, DType::F16);
  EXPECT_EQ(find(ts, ds, "output_norm.weight").type, DType::F32);
  ds = choose_tensor_types(*file_type_from_name("q4_0"), ts, /*pure=*/true);
  EXPECT_EQ(find(ts, ds, "token_embd.weight").type, DType::Q4_0);
  EXPECT_FALSE(file_type_from_name("q3_K").has_value());
}

}  // namespace
}  // namespace minfer::quant
