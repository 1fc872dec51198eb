#include "kernels/cpu/conv2d_direct.hpp"

#include "kernels/cpu/simd.hpp"

namespace actorps::kernels::cpu {
namespace {

constexpr int kMaxTaps = 32;

// Eight floats as one value (GCC vector extension): accumulators declared
// this way stay in registers, where plain float arrays got spilled to the
// stack at every tap. Unaligned loads and stores go through v8u.
#pragma GCC diagnostic ignored "-Wpsabi"  // v8 helpers are always inlined: no ABI boundary
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));

inline v8 load(const float* p) { return *reinterpret_cast<const v8u*>(p); }
inline void store(float* p, v8 v) { *reinterpret_cast<v8u*>(p) = v; }

// True when the receptive field whose corner is input pixel (top, left)
// lies inside the input. The kernels read the pads once: each pad_*() call
// chooses between explicit and derived padding, too much for an inner loop.
inline bool interior(const conv2d_shape& s, int top, int left) {
  return top >= 0 && left >= 0 && top + s.r <= s.h && left + s.s <= s.w;
}

// One output pixel's K channels accumulate in `acc` (registers for K <= 64).
// Inside the input, each kernel row's s*c taps are contiguous in x and in w.
template <int K>
ACTORPS_SIMD void forward_k(const conv2d_shape& s, const float* __restrict x, const float* __restrict w,
                            const float* __restrict b, float* __restrict y, int first, int last) {
  const int oh = s.out_h(), ow = s.out_w(), row_taps = s.s * s.c, pt = s.pad_top(), pl = s.pad_left();
  for (int n = first; n < last; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        constexpr int V = K / 8;
        v8 acc[V];
        for (int v = 0; v < V; ++v) acc[v] = load(b + 8 * v);
        for (int r = 0; r < s.r; ++r) {
          int hi = i + r - pt;
          if (hi < 0 || hi >= s.h) continue;
          if (interior(s, i - pt, j - pl)) {
            const float* xrow = x + ((int64_t(n) * s.h + hi) * s.w + j - pl) * s.c;
            const float* wrow = w + int64_t(r) * row_taps * K;
            for (int t = 0; t < row_taps; ++t) {
              const float xv = xrow[t];
              for (int v = 0; v < V; ++v) acc[v] += xv * load(wrow + t * K + 8 * v);
            }
            continue;
          }
          for (int q = 0; q < s.s; ++q) {
            int wi = j + q - pl;
            if (wi < 0 || wi >= s.w) continue;
            const float* xin = x + ((int64_t(n) * s.h + hi) * s.w + wi) * s.c;
            const float* wrow = w + (int64_t(r) * s.s + q) * s.c * K;
            for (int c = 0; c < s.c; ++c) {
              const float xv = xin[c];
              for (int v = 0; v < V; ++v) acc[v] += xv * load(wrow + c * K + 8 * v);
            }
          }
        }
        float* out = y + ((int64_t(n) * oh + i) * ow + j) * K;
        for (int v = 0; v < V; ++v) store(out + 8 * v, acc[v]);
      }
}

// dw[tap, k] += x[pixel shifted by tap] * dy[pixel, k]; a group of taps
// keeps its accumulators in registers while streaming over the pixels.
template <int K>
ACTORPS_SIMD void backward_filter_k(const conv2d_shape& s, const float* __restrict x, const float* __restrict dy,
                                    float* __restrict dw, int first, int last) {
  const int oh = s.out_h(), ow = s.out_w(), pt = s.pad_top(), pl = s.pad_left();
  const int taps = s.r * s.s * s.c;
  constexpr int kGroup = K <= 16 ? 6 : (K <= 32 ? 3 : 1);
  for (int t0 = 0; t0 < taps; t0 += kGroup) {
    const int tn = taps - t0 < kGroup ? taps - t0 : kGroup;
    constexpr int V = K / 8;
    v8 acc[kGroup][V] = {};
    int rr[kGroup], qq[kGroup], cc[kGroup];
    int64_t off[kGroup];  // x offset of the tap from the window's corner
    for (int t = 0; t < tn; ++t) {
      int tap = t0 + t;
      cc[t] = tap % s.c;
      qq[t] = (tap / s.c) % s.s;
      rr[t] = tap / (s.c * s.s);
      off[t] = (int64_t(rr[t]) * s.w + qq[t]) * s.c + cc[t];
    }
    for (int n = first; n < last; ++n)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          const float* g = dy + ((int64_t(n) * oh + i) * ow + j) * K;
          if (interior(s, i - pt, j - pl)) {
            const float* corner = x + ((int64_t(n) * s.h + i - pt) * s.w + j - pl) * s.c;
            for (int t = 0; t < tn; ++t) {
              const float xv = corner[off[t]];
              for (int v = 0; v < V; ++v) acc[t][v] += xv * load(g + 8 * v);
            }
            continue;
          }
          for (int t = 0; t < tn; ++t) {
            int hi = i + rr[t] - pt, wi = j + qq[t] - pl;
            if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
            const float xv = x[((int64_t(n) * s.h + hi) * s.w + wi) * s.c + cc[t]];
            for (int v = 0; v < V; ++v) acc[t][v] += xv * load(g + 8 * v);
          }
        }
    for (int t = 0; t < tn; ++t)
      for (int v = 0; v < V; ++v)
        store(dw + int64_t(t0 + t) * K + 8 * v, load(dw + int64_t(t0 + t) * K + 8 * v) + acc[t][v]);
  }
}

}  // namespace

bool direct_conv_fits(const conv2d_shape& s) {
  return s.stride_h == 1 && s.stride_w == 1 && (s.k == 8 || s.k == 16 || s.k == 32 || s.k == 64) &&
         s.r * s.s * s.c <= kMaxTaps;
}

void direct_conv_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, int first,
                         int last) {
  switch (s.k) {
    case 8: return forward_k<8>(s, x, w, b, y, first, last);
    case 16: return forward_k<16>(s, x, w, b, y, first, last);
    case 32: return forward_k<32>(s, x, w, b, y, first, last);
    default: return forward_k<64>(s, x, w, b, y, first, last);
  }
}

void direct_conv_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, int first,
                                 int last) {
  switch (s.k) {
    case 8: return backward_filter_k<8>(s, x, dy, dw, first, last);
    case 16: return backward_filter_k<16>(s, x, dy, dw, first, last);
    case 32: return backward_filter_k<32>(s, x, dy, dw, first, last);
    default: return backward_filter_k<64>(s, x, dy, dw, first, last);
  }
}

}  // namespace actorps::kernels::cpu
