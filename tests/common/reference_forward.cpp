#include "common/reference_forward.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "quant/quant.h"

namespace minfer::test {
namespace {

struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;  // [rows][cols]
};

Mat load(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  Mat m;
  if (t == nullptr) return m;
  m.cols = t->ne[0];
  m.rows = t->n_elements() / t->ne[0];
  m.w.resize(static_cast<size_t>(m.rows * m.cols));
  const size_t rb = t->n_bytes / static_cast<size_t>(m.rows);
  for (int64_t r = 0; r < m.rows; ++r) quant::dequantize_row(t->type, t->data + r * rb, m.w.data() + r * m.cols, m.cols);
  return m;
}

std::vector<float> matvec(const Mat& m, const std::vector<float>& x) {
  std::vector<float> y(static_cast<size_t>(m.rows));
  for (int64_t r = 0; r < m.rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < m.cols; ++c) s += static_cast<double>(m.w[r * m.cols + c]) * x[c];
    y[r] = static_cast<float>(s);
  }
  return y;
}

void rmsnorm(std::vector<float>& x, const Mat& w, int64_t off, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[off + i]) * x[off + i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) x[off + i] = static_cast<float>(x[off + i] * scale) * w.w[i];
}

// NEOX pairs (i, i + hd/2) for Qwen; llama pairs (2i, 2i + 1), each angle divided by its rope_freqs factor
// and multiplied by the linear scale.
struct RopeRef {
  float base = 10000.0f;
  bool normal = false;
  double scale = 1.0;
  std::vector<float> factors;  // empty: all 1
};

void rope(std::vector<float>& x, int64_t n_heads, int64_t hd, int pos, const RopeRef& r) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double ff = r.factors.empty() ? 1.0 : r.factors[static_cast<size_t>(i)];
      const double theta = r.scale * pos *
                           std::pow(static_cast<double>(r.base), -2.0 * static_cast<double>(i) / static_cast<double>(hd)) /
                           ff;
      const double c = std::cos(theta), s = std::sin(theta);
      float& a = x[h * hd + (r.normal ? 2 * i : i)];
      float& b = x[h * hd + (r.normal ? 2 * i + 1 : i + hd / 2)];
      const double a0 = a, b0 = b;
      a = static_cast<float>(a0 * c - b0 * s);
      b = static_cast<float>(a0 * s + b0 * c);
    }
  }
}

}  // namespace

std::vector<std::vector<float>> reference_forward(const gguf::File& f, const std::vector<int32_t>& tokens) {
  const gguf::Metadata& m = f.metadata();
  const std::string arch = *m.get_string("general.architecture");
  const int64_t E = *m.get_u32(arch + ".embedding_length");
  const int64_t L = *m.get_u32(arch + ".block_count");
  const int64_t H = *m.get_u32(arch + ".attention.head_count");
  const int64_t HKV = *m.get_u32(arch + ".attention.head_count_kv");
  const int64_t D = m.contains(arch + ".attention.key_length") ? *m.get_u32(arch + ".attention.key_length") : E / H;
  const float eps = *m.get_f32(arch + ".attention.layer_norm_rms_epsilon");
  RopeRef rr;
  rr.base = *m.get_f32_or(arch + ".rope.freq_base", 10000.0f);
  rr.normal = arch == "llama";
  if (m.contains(arch + ".rope.scaling.factor")) rr.scale = 1.0 / *m.get_f32(arch + ".rope.scaling.factor");
  if (rr.normal) rr.factors = load(f, "rope_freqs.weight").w;
  const Mat embd = load(f, "token_embd.weight");
  Mat out = load(f, "output.weight");
  if (out.rows == 0) out = embd;
  const Mat out_norm = load(f, "output_norm.weight");
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<std::vector<float>> kcache(static_cast<size_t>(L)), vcache(static_cast<size_t>(L));
  std::vector<std::vector<float>> logits;

  struct Layer {
    Mat attn_norm, wq, wk, wv, bq, bk, bv, qn, kn, wo, ffn_norm, gate, up, down;
  };
  std::vector<Layer> layers(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    Layer& ly = layers[l];
    ly.attn_norm = load(f, p + "attn_norm.weight");
    ly.wq = load(f, p + "attn_q.weight");
    ly.wk = load(f, p + "attn_k.weight");
    ly.wv = load(f, p + "attn_v.weight");
    ly.bq = load(f, p + "attn_q.bias");
    ly.bk = load(f, p + "attn_k.bias");
    ly.bv = load(f, p + "attn_v.bias");
    ly.qn = load(f, p + "attn_q_norm.weight");
    ly.kn = load(f, p + "attn_k_norm.weight");
    ly.wo = load(f, p + "attn_output.weight");
    ly.ffn_norm = load(f, p + "ffn_norm.weight");
    ly.gate = load(f, p + "ffn_gate.weight");
    ly.up = load(f, p + "ffn_up.weight");
    ly.down = load(f, p + "ffn_down.weight");
  }

  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> x(embd.w.begin() + tokens[t] * E, embd.w.begin() + (tokens[t] + 1) * E);
    for (int64_t l = 0; l < L; ++l) {
      const Layer& ly = layers[l];
      std::vector<float> h = x;
      rmsnorm(h, ly.attn_norm, 0, E, eps);
      std::vector<float> q = matvec(ly.wq, h), k = matvec(ly.wk, h), v = matvec(ly.wv, h);
      if (ly.bq.rows) {
        for (size_t i = 0; i < q.size(); ++i) q[i] += ly.bq.w[i];
        for (size_t i = 0; i < k.size(); ++i) k[i] += ly.bk.w[i];
        for (size_t i = 0; i < v.size(); ++i) v[i] += ly.bv.w[i];
      }
      if (ly.qn.rows) {
        for (int64_t hh = 0; hh < H; ++hh) rmsnorm(q, ly.qn, hh * D, D, eps);
        for (int64_t hh = 0; hh < HKV; ++hh) rmsnorm(k, ly.kn, hh * D, D, eps);
      }
      rope(q, H, D, static_cast<int>(t), rr);
      rope(k, HKV, D, static_cast<int>(t), rr);
      kcache[l].insert(kcache[l].end(), k.begin(), k.end());
      vcache[l].insert(vcache[l].end(), v.begin(), v.end());
      std::vector<float> att(static_cast<size_t>(H * D), 0.0f);
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t hk = hh / (H / HKV);
        std::vector<double> s(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += static_cast<double>(q[hh * D + i]) * kcache[l][(j * HKV + hk) * D + i];
          s[j] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int64_t i = 0; i < D; ++i) {
          double acc = 0;
          for (int64_t j = 0; j <= t; ++j) acc += s[j] / sum * vcache[l][(j * HKV + hk) * D + i];
          att[hh * D + i] = static_cast<float>(acc);
        }
      }
      std::vector<float> o = matvec(ly.wo, att);
      for (int64_t i = 0; i < E; ++i) x[i] += o[i];
      h = x;
      rmsnorm(h, ly.ffn_norm, 0, E, eps);
      std::vector<float> g = matvec(ly.gate, h), u = matvec(ly.up, h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i])))) * u[i];
      std::vector<float> dn = matvec(ly.down, g);
      for (int64_t i = 0; i < E; ++i) x[i] += dn[i];
    }
    rmsnorm(x, out_norm, 0, E, eps);
    logits.push_back(matvec(out, x));
  }
  return logits;
}

}  // namespace minfer::test
