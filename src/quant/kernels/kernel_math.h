// Float arithmetic the kernels share, written once as scalar code: exp, SiLU and attention's reductions.
// The SIMD kernels perform exactly these operations lane by lane (explicit FMAs, no contraction), so a
// result is bitwise the same whatever kernel, tile or batch computed it — the engine's batch invariance
// rests on that. Attention, per query row:
//   score(q, k) = scale * (fma chain over d = 0..D-1, from 0)
//   e_j        = exp_approx(score_j - max_j score_j)
//   sum        = 16 lanes, lane j % 16 accumulating e_j in order, then the tree (i, i + 8), (i, i + 4), ...
//   out[d]     = fma chain over the window's cells j of (e_j / sum) * v_j[d], from 0
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace minfer::kernels::math {

inline constexpr int kLanes = 16;

// exp(x) for x <= 0 (Cody-Waite reduction by ln 2, Cephes' degree-6 polynomial; ~1 ulp). Below -87 the
// result is 0 (it would be subnormal): softmax terms that small vanish against the maximum's 1.
inline constexpr float kExpMin = -87.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpC[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

inline float exp_approx(float x) {
  if (!(x >= kExpMin)) return 0.0f;
  const float n = std::fma(x, kLog2e, kRoundMagic) - kRoundMagic;
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kExpC[0];
  for (int i = 1; i < 6; ++i) p = std::fma(p, r, kExpC[i]);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

// SiLU as x * sigmoid(x), with exp taken of -|x| only (never overflows).
inline float silu(float x) {
  const float e = exp_approx(-std::fabs(x));
  return x * ((x >= 0.0f ? 1.0f : e) / (1.0f + e));
}

// The fixed reduction tree over kLanes partial sums.
inline float lane_tree(float* lanes) {
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int i = 0; i < w; ++i) lanes[i] += lanes[i + w];
  }
  return lanes[0];
}

}  // namespace minfer::kernels::math
