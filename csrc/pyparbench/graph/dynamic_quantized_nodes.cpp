#include "pyparbench/graph/dynamic_quantized_nodes.hpp"

#include "pyparbench/graph/conv_geometry.hpp"
#include "pyparbench/math/int8_product.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

// The file's integer weights (int8 or uint8 values, carried as floats).
bool whole_byte(float v) { return v == std::nearbyint(v) && v >= -128.f && v <= 255.f; }

// The run's grid of its input, as ONNX's DynamicQuantizeLinear computes it
// (float32 throughout). An input of zeros has scale 0: every q is the zero
// point 0, and every product sum 0.
struct RunGrid {
  float scale = 0.f;
  int32_t zero_point = 0;
};

RunGrid run_grid(const float* x, int64_t n, int threads) {
  float lo = 0.f, hi = 0.f;
#pragma omp parallel for simd num_threads(threads) schedule(static) reduction(min : lo) \
    reduction(max : hi) if (n > 16384 && threads > 1)
  for (int64_t i = 0; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  RunGrid g;
  g.scale = (hi - lo) / 255.f;
  if (g.scale > 0.f)
    g.zero_point = static_cast<int32_t>(std::nearbyint(std::clamp(0.f - lo / g.scale, 0.f, 255.f)));
  return g;
}

// q - zero point of every element, q = saturate(round(x / scale) + zero point).
void centred(const float* x, int16_t* d, int64_t n, const RunGrid& g, int threads) {
  const float zp = static_cast<float>(g.zero_point), scale = g.scale;
  if (!(scale > 0.f)) {
    std::fill(d, d + n, int16_t{0});
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 16384 && threads > 1)
  for (int64_t i = 0; i < n; ++i)
    d[i] = static_cast<int16_t>(std::clamp(std::nearbyint(x[i] / scale) + zp, 0.f, 255.f) - zp);
}

// A linear node's integer product on oneDNN's int8 matmul: x's q (u8) times
// its weights as s8 (a uint8 weight w stored as w - 128, its zero point
// likewise, which leaves every difference w - zero point as it was), the
// zero points compensated around the exact int32 sums:
//   sum (q - z)(w - wz) = sum q·w - z·colsum(w) - wz·rowsum(q) + k·z·wz.
struct Int8Path {
  std::unique_ptr<Int8Product> product;
  std::vector<int32_t> colsum, zero_points;  // per output, s8 side
  std::vector<uint8_t> q;                    // (m, k), this run's
  std::vector<int32_t> rowsum, sums;         // (m), (m, outs)
};

// What a node keeps between runs: its weights less their zero points (per
// output) for the int16 loops, or the int8 matmul, and the scales, bias and
// the run's centred input.
struct DynamicState {
  std::vector<int16_t> weights;  // (out, per_out); empty on the int8 path
  std::vector<float> scales, bias;
  std::vector<int16_t> x;
  std::unique_ptr<Int8Path> int8;
  int64_t per_out = 0;
};

std::shared_ptr<DynamicState> prepare(const NodeSpec& s, int64_t x_elems) {
  const ParamArray& w = required_param(s, "weight");
  const ParamArray& zp = required_param(s, "weight_zero_point");
  const ParamArray& ws = required_param(s, "weight_scale");
  const int64_t outs = w.shape.at(0), per_out = Dims(w.shape).elements() / outs;
  if (Dims(zp.shape).elements() != outs || Dims(ws.shape).elements() != outs)
    throw std::invalid_argument(node_where(s) + ": weight_zero_point and weight_scale need " +
                                std::to_string(outs) + " values, one per output");
  auto st = std::make_shared<DynamicState>();
  st->per_out = per_out;
  st->weights.resize(static_cast<size_t>(outs * per_out));
  for (int64_t o = 0; o < outs; ++o) {
    const float z = zp.data[o];
    if (!whole_byte(z))
      throw std::invalid_argument(node_where(s) + ": weight zero point " + std::to_string(z) +
                                  " is not an int8 or uint8");
    for (int64_t i = 0; i < per_out; ++i) {
      const float v = w.data[o * per_out + i];
      if (!whole_byte(v))
        throw std::invalid_argument(node_where(s) + ": weight value " + std::to_string(v) +
                                    " is not an int8 or uint8");
      st->weights[static_cast<size_t>(o * per_out + i)] = static_cast<int16_t>(v - z);
    }
  }
  st->scales.assign(ws.data, ws.data + outs);
  auto b = s.params.find("bias");
  st->bias.assign(static_cast<size_t>(outs), 0.f);
  if (b != s.params.end() && b->second.data) {
    if (Dims(b->second.shape).elements() != outs)
      throw std::invalid_argument(node_where(s) + ": bias needs " + std::to_string(outs) + " values");
    st->bias.assign(b->second.data, b->second.data + outs);
  }
  st->x.resize(static_cast<size_t>(x_elems));
  return st;
}

// Depths up to which the matmul's sum q·w cannot overflow int32: |q·w| <=
// 255 · 128 with s8 weights.
constexpr int64_t kExactDepth = std::numeric_limits<int32_t>::max() / (255 * 128);

// The int8 matmul for linear node `s` (m rows of depth k, `outs` outputs),
// its weights reordered once; null where the int16 loops must stay: weights
// that are neither all int8 nor all uint8, a depth past kExactDepth, or a
// library without int8 dot products (oneDNN's vpmaddubsw pairs saturate in
// int16 on full-range s8 weights, README "Precision: int8").
std::unique_ptr<Int8Path> int8_path(const NodeSpec& s, int64_t m, int64_t outs, int64_t k,
                                    int threads) {
  if (k > kExactDepth) return nullptr;
  const ParamArray& w = required_param(s, "weight");
  const ParamArray& zp = required_param(s, "weight_zero_point");
  const int64_t n = outs * k;
  const auto in = [](const float* v, int64_t len, float lo, float hi) {
    return std::all_of(v, v + len, [=](float e) { return e >= lo && e <= hi; });
  };
  float shift = 0.f;
  if (!(in(w.data, n, -128.f, 127.f) && in(zp.data, outs, -128.f, 127.f))) {
    if (!(in(w.data, n, 0.f, 255.f) && in(zp.data, outs, 0.f, 255.f))) return nullptr;
    shift = 128.f;
  }
  auto path = std::make_unique<Int8Path>();
  path->product = std::make_unique<Int8Product>(m, outs, k, threads);
  if (!path->product->native()) return nullptr;
  std::vector<int8_t> w8(static_cast<size_t>(n));
  path->colsum.assign(static_cast<size_t>(outs), 0);
  path->zero_points.resize(static_cast<size_t>(outs));
  for (int64_t o = 0; o < outs; ++o) {
    int32_t sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      const auto v = static_cast<int8_t>(w.data[o * k + i] - shift);
      w8[static_cast<size_t>(o * k + i)] = v;
      sum += v;
    }
    path->colsum[static_cast<size_t>(o)] = sum;
    path->zero_points[static_cast<size_t>(o)] = static_cast<int32_t>(zp.data[o] - shift);
  }
  path->product->set_weights(w8.data());
  path->q.resize(static_cast<size_t>(m * k));
  path->rowsum.resize(static_cast<size_t>(m));
  path->sums.resize(static_cast<size_t>(m * outs));
  return path;
}

// x (m, k) onto the run's grid as u8, q = saturate(round(x / scale) + zero
// point), and each row's sum of q. The rounding is nearbyint's (half to even)
// by adding and taking away 1.5 · 2^23, exact for |x / scale| < 2^22 (here
// <= 255: |x| <= x_max - x_min), so that the loop vectorises on any ISA.
void quantize_rows(const float* x, Int8Path& p, int64_t m, int64_t k, const RunGrid& g,
                   int threads) {
  if (!(g.scale > 0.f)) {  // every q is the zero point 0
    std::fill(p.q.begin(), p.q.end(), uint8_t{0});
    std::fill(p.rowsum.begin(), p.rowsum.end(), 0);
    return;
  }
  const float zp = static_cast<float>(g.zero_point), scale = g.scale;
  constexpr float kRound = 12582912.f;  // 1.5 · 2^23
#pragma omp parallel for num_threads(threads) schedule(static) if (m * k > 16384 && threads > 1)
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * k;
    uint8_t* qr = p.q.data() + r * k;
    int32_t sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < k; ++i) {
      const float rounded = (xr[i] / scale + kRound) - kRound + zp;
      // 0 < rounded keeps a NaN out (it saturates to 0).
      const float clamped = std::min(0.f < rounded ? rounded : 0.f, 255.f);
      const auto v = static_cast<int32_t>(clamped);
      qr[i] = static_cast<uint8_t>(v);
      sum += v;
    }
    p.rowsum[static_cast<size_t>(r)] = sum;
  }
}

// float(sum) · (x_scale · w_scale[o]) + bias[o], the file's Cast, Mul, Add.
inline float dequantized(int32_t sum, float x_scale, float w_scale, float bias) {
  const float scale = x_scale * w_scale;
  return static_cast<float>(sum) * scale + bias;
}

// y (m, outs) from the matmul's sums q·w, its zero points compensated. The
// compensation runs modulo 2^32 (unsigned): the same int32 as a sum of the
// centred products whenever that fits int32.
void compensated(const Int8Path& p, const DynamicState& st, float* y, int64_t m, int64_t outs,
                 int64_t k, const RunGrid& g, int threads) {
  const auto z = static_cast<uint32_t>(g.zero_point);
#pragma omp parallel for num_threads(threads) schedule(static) if (m * outs > 16384 && threads > 1)
  for (int64_t r = 0; r < m; ++r) {
    const auto rowsum = static_cast<uint32_t>(p.rowsum[static_cast<size_t>(r)]);
    const int32_t* sr = p.sums.data() + r * outs;
    float* yr = y + r * outs;
#pragma omp simd
    for (int64_t o = 0; o < outs; ++o) {
      const auto wz = static_cast<uint32_t>(p.zero_points[static_cast<size_t>(o)]);
      const uint32_t sum = static_cast<uint32_t>(sr[o]) -
                           z * static_cast<uint32_t>(p.colsum[static_cast<size_t>(o)]) -
                           wz * rowsum + static_cast<uint32_t>(k) * z * wz;
      yr[o] = dequantized(static_cast<int32_t>(sum), g.scale, st.scales[static_cast<size_t>(o)],
                          st.bias[static_cast<size_t>(o)]);
    }
  }
}

// y (m, outs) = x (m, k) · wᵀ over the centred values, four rows at a time:
// each weight row loaded serves four sums (the weights are the larger stream).
void linear(const DynamicState& st, float* y, int64_t m, int64_t outs, const RunGrid& g,
            int threads) {
  constexpr int64_t kRows = 4;
  const int64_t k = st.per_out, blocks = (m + kRows - 1) / kRows;
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t o = 0; o < outs; ++o) {
      const int64_t r0 = b * kRows, rows = std::min(kRows, m - r0);
      // Rows past the end read the block's first row again; their sums are dropped.
      const int16_t* x0 = st.x.data() + r0 * k;
      const int16_t* x1 = rows > 1 ? x0 + k : x0;
      const int16_t* x2 = rows > 2 ? x0 + 2 * k : x0;
      const int16_t* x3 = rows > 3 ? x0 + 3 * k : x0;
      const int16_t* wr = st.weights.data() + o * k;
      int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (int64_t i = 0; i < k; ++i) {
        const int32_t w = wr[i];
        s0 += static_cast<int32_t>(x0[i]) * w;
        s1 += static_cast<int32_t>(x1[i]) * w;
        s2 += static_cast<int32_t>(x2[i]) * w;
        s3 += static_cast<int32_t>(x3[i]) * w;
      }
      const int32_t sums[kRows] = {s0, s1, s2, s3};
      for (int64_t r = 0; r < rows; ++r)
        y[(r0 + r) * outs + o] = dequantized(sums[r], g.scale, st.scales[o], st.bias[o]);
    }
}

// y (N, O, OH, OW) of x (N, C, H, W); padding reads the zero point (a
// centred 0), as ConvInteger pads.
void conv(const DynamicState& st, float* y, const Conv2dConfig& c, int64_t oh, int64_t ow,
          const RunGrid& g, int threads) {
  const int64_t per_group = c.c / c.groups, outs_per_group = c.out_channels / c.groups;
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t o = 0; o < c.out_channels; ++o) {
      const int64_t c0 = (o / outs_per_group) * per_group;
      const int16_t* wo = st.weights.data() + o * st.per_out;
      float* yo = y + (n * c.out_channels + o) * oh * ow;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int32_t sum = 0;
          for (int64_t ci = 0; ci < per_group; ++ci) {
            const int16_t* xc = st.x.data() + ((n * c.c) + c0 + ci) * c.h * c.w;
            const int16_t* wc = wo + ci * c.kh * c.kw;
            for (int64_t a = 0; a < c.kh; ++a) {
              const int64_t h = i * c.stride_h - c.pad_top + a * c.dilation_h;
              if (h < 0 || h >= c.h) continue;
              for (int64_t b = 0; b < c.kw; ++b) {
                const int64_t w = j * c.stride_w - c.pad_left + b * c.dilation_w;
                if (w < 0 || w >= c.w) continue;
                sum += static_cast<int32_t>(xc[h * c.w + w]) * wc[a * c.kw + b];
              }
            }
          }
          yo[i * ow + j] = dequantized(sum, g.scale, st.scales[o], st.bias[o]);
        }
    }
}

}  // namespace

bool is_dynamic_quantized_node(OpKind op) {
  return op == OpKind::dynamic_quantized_linear || op == OpKind::dynamic_quantized_conv2d;
}

QuantizedNodeCall make_dynamic_quantized_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                                              const Tensor& out, int threads) {
  if (!is_dynamic_quantized_node(s.op))
    throw std::invalid_argument(node_where(s) + " is not a dynamically quantized node");
  if (ins.size() != 1) throw std::invalid_argument(node_where(s) + " takes one input");
  const Tensor x = ins[0];
  const int64_t x_elems = Dims(x.shape).elements(), y_elems = Dims(out.shape).elements();
  std::shared_ptr<DynamicState> state = prepare(s, x_elems);
  DynamicState* st = state.get();
  const int64_t outs = required_param(s, "weight").shape[0];
  if (s.op == OpKind::dynamic_quantized_linear) {
    const int64_t k = x.shape.back(), m = x_elems / k;
    if (k != st->per_out || m * outs != y_elems)
      throw std::invalid_argument(node_where(s) + ": its input's last axis (" + std::to_string(k) +
                                  ") is not its weight's (" + std::to_string(st->per_out) + ")");
    st->int8 = int8_path(s, m, outs, k, threads);
    if (st->int8) {
      // The int16 copies are the loops' alone.
      std::vector<int16_t>().swap(st->weights);
      std::vector<int16_t>().swap(st->x);
      const std::string impl = st->int8->product->implementation();
      return {state,
              [st, x, out, x_elems, m, outs, k, threads] {
                const float* xv = static_cast<const float*>(x.data);
                const RunGrid g = run_grid(xv, x_elems, threads);
                Int8Path& p = *st->int8;
                quantize_rows(xv, p, m, k, g, threads);
                p.product->run(p.q.data(), p.sums.data());
                compensated(p, *st, static_cast<float*>(out.data), m, outs, k, g, threads);
              },
              impl};
    }
    return {state,
            [st, x, out, x_elems, m, outs, threads] {
              const float* xv = static_cast<const float*>(x.data);
              const RunGrid g = run_grid(xv, x_elems, threads);
              centred(xv, st->x.data(), x_elems, g, threads);
              linear(*st, static_cast<float*>(out.data), m, outs, g, threads);
            },
            "native int16 loops"};
  }
  const ParamArray& w = required_param(s, "weight");
  if (x.shape.size() != 4 || w.shape.size() != 4 || out.shape.size() != 4)
    throw std::invalid_argument(node_where(s) + ": a 2-D convolution takes NCHW input and OIHW "
                                "weights");
  const Conv2dConfig c = conv_geometry(s, x.shape, w.shape, outs);
  if (c.groups < 1 || c.c % c.groups || outs % c.groups || w.shape[1] * c.groups != c.c)
    throw std::invalid_argument(node_where(s) + ": groups " + std::to_string(c.groups) +
                                " do not divide its channels");
  const int64_t oh = out.shape[2], ow = out.shape[3];
  if (out.shape[0] != c.n || out.shape[1] != outs)
    throw std::invalid_argument(node_where(s) + ": its output shape does not match its input's");
  return {state,
          [st, x, out, x_elems, c, oh, ow, threads] {
            const float* xv = static_cast<const float*>(x.data);
            const RunGrid g = run_grid(xv, x_elems, threads);
            centred(xv, st->x.data(), x_elems, g, threads);
            conv(*st, static_cast<float*>(out.data), c, oh, ow, g, threads);
          },
          "native int16 loops"};
}

}  // namespace ppb
