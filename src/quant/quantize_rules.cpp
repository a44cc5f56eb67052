// llama-quantize's tensor type rules restricted to the architectures minfer runs (dense and mixture-of-experts)
// and the file types minfer writes (no imatrix, no IQ types). See docs/KERNELS.md for the rule table.
#include "quant/quantize_rules.h"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>

namespace minfer::quant {
namespace {

constexpr FileType kFileTypes[] = {
    {"f32", 0, DType::F32, false},     {"f16", 1, DType::F16, false},     {"bf16", 32, DType::BF16, false},
    {"q4_0", 2, DType::Q4_0, false},   {"q4_1", 3, DType::Q4_1, false},   {"q5_0", 8, DType::Q5_0, false},
    {"q5_1", 9, DType::Q5_1, false},   {"q8_0", 7, DType::Q8_0, false},   {"q4_K", 14, DType::Q4_K, true},
    {"q4_K_S", 14, DType::Q4_K, true}, {"q4_K_M", 15, DType::Q4_K, true}, {"q5_K", 16, DType::Q5_K, true},
    {"q5_K_S", 16, DType::Q5_K, true}, {"q5_K_M", 17, DType::Q5_K, true}, {"q6_K", 18, DType::Q6_K, true},
};

constexpr uint32_t kFtypeQ4_K_S = 14;
constexpr uint32_t kFtypeQ4_K_M = 15;
constexpr uint32_t kFtypeQ5_K_M = 17;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool is_quantized(DType t) {
  return t != DType::F32 && t != DType::F16 && t != DType::BF16;
}


// llama.cpp's use_more_bits: first and last eighth of the layers, and every third one in between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// The fallback when a row length is not a multiple of the chosen type's block size.
DType fallback_type(DType t, int64_t ne0) {
  DType f;
  switch (t) {
    case DType::Q4_K:
      f = DType::Q5_0;
      break;
    case DType::Q5_K:
      f = DType::Q5_1;
      break;
    case DType::Q6_K:
      f = DType::Q8_0;
      break;
    default:
      f = DType::F16;
      break;
  }
  if (ne0 % traits(f).block_size != 0) f = DType::F16;
  return f;
}

}  // namespace

int layer_of(std::string_view name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int v = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) v = v * 10 + (name[i++] - '0');
  return v;
}

std::optional<FileType> file_type_from_name(std::string_view name) {
  for (const FileType& f : kFileTypes) {
    if (iequals(f.name, name)) return f;
  }
  return std::nullopt;
}

std::vector<std::string_view> file_type_names() {
  std::vector<std::string_view> out;
  for (const FileType& f : kFileTypes) out.push_back(f.name);
  return out;
}

bool is_llm_type_70b(std::string_view arch, uint32_t n_layer, uint32_t n_head, uint32_t n_head_kv,
                     uint32_t n_expert) {
  if (n_layer != 80) return false;
  if (arch == "llama") return n_expert != 8 && n_head != n_head_kv;
  return arch == "qwen2";
}

bool quantize_rules_cover(std::string_view arch) {
  return arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" || arch == "llama" || arch == "gemma3";
}

std::vector<TensorDecision> choose_tensor_types(const FileType& ft, const std::vector<TensorDesc>& tensors,
                                                bool pure, int n_expert, bool llm_type_70b) {
  bool has_output = false;
  int n_attn_v = 0, n_ffn_down = 0;
  for (const TensorDesc& t : tensors) {
    if (t.name == "output.weight") has_output = true;
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight")) ++n_attn_v;
    if (contains(t.name, "ffn_down")) ++n_ffn_down;
  }
  std::vector<TensorDecision> out;
  out.reserve(tensors.size());
  int i_attn_v = 0, i_ffn_down = 0;
  for (const TensorDesc& t : tensors) {
    TensorDecision d;
    d.type = t.type;
    const std::string_view name = t.name;
    bool quantize = ends_with(name, "weight") && t.n_dims >= 2 && !contains(name, "_norm.weight") &&
                    !contains(name, "ffn_gate_inp.weight");
    if (!quantize) {
      d.reason = t.n_dims < 2 ? "1-D: kept" : "not a quantizable weight: kept";
      out.push_back(std::move(d));
      continue;
    }
    DType nt = ft.base;
    std::string why = "base type";
    const int64_t ne0 = t.ne[0];
    if (!pure && is_quantized(ft.base)) {
      const bool is_output = name == "output.weight" || (!has_output && name == "token_embd.weight");
      if (is_output) {
        if (ne0 % traits(nt).block_size != 0) {
          nt = DType::Q8_0;
          why = "output tensor, row not a multiple of the block";
        } else if (nt != DType::Q8_0) {
          nt = DType::Q6_K;
          why = has_output ? "output tensor" : "tied embedding used as output";
        }
      } else if (contains(name, "attn_v.weight")) {
        const int i = layer_of(name) >= 0 ? layer_of(name) : i_attn_v;
        if ((ft.ftype == kFtypeQ4_K_M || ft.ftype == kFtypeQ5_K_M) && use_more_bits(i, n_attn_v)) {
          nt = DType::Q6_K;
          why = "attn_v in a use_more_bits layer";
        } else if (ft.ftype == kFtypeQ4_K_S && i < 4) {
          nt = DType::Q5_K;
          why = "attn_v in the first 4 layers";
        }
        if (llm_type_70b && nt == DType::Q4_K) {  // llama-quantize: 8 heads share each attn_v in the 70B
          nt = DType::Q5_K;
          why = "attn_v of a 70B-type model";
        }
        if (n_expert == 8) {  // llama-quantize: "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
          nt = DType::Q8_0;
          why = "attn_v of an 8-expert model";
        }
        ++i_attn_v;
      } else if (contains(name, "attn_k.weight")) {
        if (n_expert == 8) {
          nt = DType::Q8_0;
          why = "attn_k of an 8-expert model";
        }
      } else if (contains(name, "attn_output.weight")) {
        if (n_expert == 8 && (ft.ftype == kFtypeQ4_K_S || ft.ftype == kFtypeQ4_K_M)) {
          nt = DType::Q5_K;
          why = "attn_output of an 8-expert model";
        }
      } else if (contains(name, "ffn_down")) {
        const int i = layer_of(name) >= 0 ? layer_of(name) : i_ffn_down;
        if ((ft.ftype == kFtypeQ4_K_M || ft.ftype == kFtypeQ5_K_M) && use_more_bits(i, n_ffn_down)) {
          nt = DType::Q6_K;
          why = "ffn_down in a use_more_bits layer";
        } else if (ft.ftype == kFtypeQ4_K_S && i < n_ffn_down / 8) {
          nt = DType::Q5_K;
          why = "ffn_down in the first eighth of the layers";
        }
        ++i_ffn_down;
      }
      if (ne0 % traits(nt).block_size != 0) {
        const DType f = fallback_type(nt, ne0);
        why = fmt::format("row of {} not a multiple of the {} block: fallback", ne0, dtype_name(nt));
        nt = f;
      }
    } else if (ne0 % traits(nt).block_size != 0) {
      nt = DType::F16;
      why = "row not a multiple of the block: f16";
    }
    d.quantize = nt != t.type;
    d.type = nt;
    d.reason = d.quantize ? why : "already " + std::string(dtype_name(nt)) + ": copied";
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace minfer::quant
