#include "pyparbench/graph/quantized_nodes.hpp"

#include "pyparbench/core/cpu_features.hpp"
#include "pyparbench/graph/conv_geometry.hpp"
#include "pyparbench/math/quantized.hpp"
#include "pyparbench/ops/byte_lookup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace ppb {

namespace {

#define PPB_INLINE inline __attribute__((always_inline))

// A node's scale and zero point (a (2,) parameter: scale, zero point).
struct Grid {
  QuantType type = QuantType::u8;
  float scale = 1.f;
  int32_t zero_point = 0;
  int32_t lo() const { return type == QuantType::u8 ? 0 : -128; }
  int32_t hi() const { return type == QuantType::u8 ? 255 : 127; }
};

// A scalar parameter (a (1,) array).
float scalar(const NodeSpec& s, const std::string& name) {
  const ParamArray& p = required_param(s, name.c_str());
  if (Dims(p.shape).elements() != 1)
    throw std::invalid_argument(node_where(s) + ": '" + name + "' must hold one value");
  return p.data[0];
}

// The grid of `prefix`_scale and `prefix`_zero_point of integer type `dtype`.
Grid grid(const NodeSpec& s, const std::string& prefix, const std::string& dtype) {
  Grid g;
  g.type = parse_quant_type(dtype, (prefix + "_dtype").c_str());
  if (g.type == QuantType::f32)
    throw std::invalid_argument(node_where(s) + ": " + prefix + " needs an int8 or uint8 type");
  g.scale = scalar(s, prefix + "_scale");
  if (!(g.scale > 0.f) || !std::isfinite(g.scale))
    throw std::invalid_argument(node_where(s) + ": " + prefix + "_scale must be finite and > 0, got " +
                                std::to_string(g.scale));
  const float zp = scalar(s, prefix + "_zero_point");
  g.zero_point = static_cast<int32_t>(zp);
  if (static_cast<float>(g.zero_point) != zp || g.zero_point < g.lo() || g.zero_point > g.hi())
    throw std::invalid_argument(node_where(s) + ": " + prefix + "_zero_point " + std::to_string(zp) +
                                " is not an integer of " + quant_type_name(g.type));
  return g;
}

// How a node's buffers map between the graph's NCHW and the kernel's
// layout: element (n, c, i) of (N, C, I) sits at ((n · I) + i) · C + c in the
// kernel's channels-last buffer (C = 1: the same order). oneDNN's int8
// convolution is fast channels-last only (its NCHW one is a reference
// loop), so the conversion rides on the quantisation's own pass.
struct Order {
  int64_t rows = 1, channels = 1, inner = 1;  // N, C, H · W
  int64_t at(int64_t nc, int64_t i) const {
    return ((nc / channels) * inner + i) * channels + nc % channels;
  }
};

// out[order.at(nc, i)] = f(in[nc · inner + i]) (to the kernel's layout), or
// out[nc · inner + i] = f(in[order.at(nc, i)]) (back from it). Each thread
// writes a contiguous run of the output (the reads stride): threads writing
// interleaved channels into one cache line would pass it back and forth.
template <class In, class Out, class F>
void mapped(const In* in, Out* out, const Order& o, bool to_kernel, int threads, F f) {
  const bool parallel = threads > 1 && o.rows * o.channels * o.inner > 16384;
  if (o.channels == 1) {  // the same order both sides: one vectorisable stream
    const int64_t n = o.rows * o.inner;
#pragma omp parallel for simd num_threads(threads) schedule(static) if (parallel)
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
    return;
  }
  if (to_kernel) {
    const int64_t pixels = o.rows * o.inner;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel)
    for (int64_t p = 0; p < pixels; ++p) {
      const int64_t n = p / o.inner, i = p % o.inner;
      const In* src = in + n * o.channels * o.inner + i;
      Out* dst = out + p * o.channels;
      for (int64_t c = 0; c < o.channels; ++c) dst[c] = f(src[c * o.inner]);
    }
    return;
  }
  const int64_t rows = o.rows * o.channels;
#pragma omp parallel for num_threads(threads) schedule(static) if (parallel)
  for (int64_t nc = 0; nc < rows; ++nc)
    for (int64_t i = 0; i < o.inner; ++i) out[nc * o.inner + i] = f(in[o.at(nc, i)]);
}

// v rounded half to even, as std::nearbyint in the default rounding mode,
// for a value that is then saturated to a byte's range: adding and taking
// away 1.5 · 2^23 leaves no fraction bits, and the addition rounds half to
// even. Beyond ±2^22 the sum's ulp is 2 or more, so the result may be off by
// a unit or two, but such values saturate either way (infinities and NaN
// pass through), so none is clamped first. Unlike nearbyint (a library call
// without SSE4.1), this vectorises.
PPB_INLINE float round_half_even(float v) {
  constexpr float magic = 12582912.f;
  return (v + magic) - magic;
}

// v saturated to [lo, hi], by value (std::clamp's references keep loops
// from vectorising).
PPB_INLINE float saturate(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

// One input of a fake_quantize: float32 values, or bytes on grid `g`.
struct Source {
  const void* data = nullptr;
  bool bytes = false;
  Grid g;
};

// v[0, m) = the values of `src` from element i0 on (bytes dequantised:
// (q - zero point) · scale in float32, as DequantizeLinear), or += them.
PPB_INLINE void load(const Source& src, int64_t i0, int64_t m, float* v, bool add) {
  if (!src.bytes) {
    const float* x = static_cast<const float*>(src.data) + i0;
#pragma omp simd
    for (int64_t k = 0; k < m; ++k) v[k] = add ? v[k] + x[k] : x[k];
    return;
  }
  const int32_t zp = src.g.zero_point;
  const float scale = src.g.scale;
  auto from = [&](auto* q) {
#pragma omp simd
    for (int64_t k = 0; k < m; ++k) {
      const float d = static_cast<float>(static_cast<int32_t>(q[i0 + k]) - zp) * scale;
      v[k] = add ? v[k] + d : d;
    }
  };
  if (src.g.type == QuantType::u8)
    from(static_cast<const uint8_t*>(src.data));
  else
    from(static_cast<const int8_t*>(src.data));
}

// The values v[0, m) rounded onto grid g, written from element i0 on as
// bytes or as the float32 values they stand for.
PPB_INLINE void store(const float* v, int64_t i0, int64_t m, const Grid& g, void* out,
                      bool bytes) {
  const float lo = static_cast<float>(g.lo()), hi = static_cast<float>(g.hi());
  const float zp = static_cast<float>(g.zero_point), scale = g.scale;
  auto to = [&](auto* q) {
    using T = std::remove_pointer_t<decltype(q)>;
#pragma omp simd
    for (int64_t k = 0; k < m; ++k)
      q[i0 + k] = static_cast<T>(saturate(round_half_even(v[k] / scale) + zp, lo, hi));
  };
  if (!bytes) {
    float* y = static_cast<float*>(out) + i0;
#pragma omp simd
    for (int64_t k = 0; k < m; ++k)
      y[k] = (saturate(round_half_even(v[k] / scale) + zp, lo, hi) - zp) * scale;
  } else if (g.type == QuantType::u8) {
    to(static_cast<uint8_t*>(out));
  } else {
    to(static_cast<int8_t*>(out));
  }
}

constexpr int64_t kSumBlock = 1024;  // values summed on the stack, a block at a time

// One block of a fake_quantize: its sources summed, rounded, stored. One
// build per kernel tier, chosen once from the CPU's features
// (core/cpu_features.hpp), as pool_nhwc's rows; the file is built with
// -ffp-contract=off, so no tier fuses a product into a sum (the float32
// values are DequantizeLinear's and Add's, rounded after each step).
#define PPB_SUM_ROUND_BLOCK(name)                                                      \
  void name(const Source* src, size_t sources, int64_t i0, int64_t m, const Grid& g,   \
            void* y, bool bytes_out) {                                                  \
    alignas(64) float v[kSumBlock];                                                     \
    for (size_t j = 0; j < sources; ++j) load(src[j], i0, m, v, j > 0);                 \
    store(v, i0, m, g, y, bytes_out);                                                   \
  }

PPB_SUM_ROUND_BLOCK(sum_round_generic)
#if PPB_ARCH_X86
__attribute__((target("avx512f"))) PPB_SUM_ROUND_BLOCK(sum_round_avx512)
__attribute__((target("avx2"))) PPB_SUM_ROUND_BLOCK(sum_round_avx2)
#endif

using SumRoundBlock = void (*)(const Source*, size_t, int64_t, int64_t, const Grid&, void*, bool);

// The build of block `name` for this CPU's kernel tier, chosen once
// (core/cpu_features.hpp), as pool_nhwc's rows.
#if PPB_ARCH_X86
#define PPB_FOR_THIS_CPU(name) for_this_cpu(&name##_generic, &name##_avx2, &name##_avx512)
template <class Block>
Block for_this_cpu(Block generic, Block avx2, Block avx512) {
  const std::string tier = x86_kernel_tiers().front();
  return tier == "avx512" ? avx512 : tier == "avx2" ? avx2 : generic;
}
#else
#define PPB_FOR_THIS_CPU(name) (&name##_generic)
#endif

// One block of an int8 node's input quantised to bytes, or of its output
// bytes dequantised to float32, in the same order (the stream a
// channels-last node reads and writes): load and store above, so the same
// arithmetic as a fake_quantize's, one build per kernel tier (the scalar
// loop the compiler leaves the generic build is most of a depthwise
// convolution's time).
#define PPB_QUANTIZE_BLOCK(name)                                                       \
  void name(const float* x, int64_t i0, int64_t m, const Grid& g, uint8_t* q) {        \
    store(x + i0, i0, m, g, q, true);                                                   \
  }
#define PPB_DEQUANTIZE_BLOCK(name)                                                     \
  void name(const uint8_t* q, int64_t i0, int64_t m, const Grid& g, float* y) {        \
    load(Source{q, true, g}, i0, m, y + i0, false);                                     \
  }

PPB_QUANTIZE_BLOCK(quantize_generic)
PPB_DEQUANTIZE_BLOCK(dequantize_generic)
#if PPB_ARCH_X86
__attribute__((target("avx512f"))) PPB_QUANTIZE_BLOCK(quantize_avx512)
__attribute__((target("avx512f"))) PPB_DEQUANTIZE_BLOCK(dequantize_avx512)
__attribute__((target("avx2"))) PPB_QUANTIZE_BLOCK(quantize_avx2)
__attribute__((target("avx2"))) PPB_DEQUANTIZE_BLOCK(dequantize_avx2)
#endif

using QuantizeBlock = void (*)(const float*, int64_t, int64_t, const Grid&, uint8_t*);
using DequantizeBlock = void (*)(const uint8_t*, int64_t, int64_t, const Grid&, float*);

// f(i0, m) over [0, n) a block at a time, the blocks split between threads.
template <class F>
void blockwise(int64_t n, int threads, F f) {
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 16384 && threads > 1)
  for (int64_t b = 0; b < blocks; ++b) f(b * kSumBlock, std::min(kSumBlock, n - b * kSumBlock));
}

// ONNX QuantizeLinear: x / scale rounded half to even (the default rounding
// mode), plus the zero point, saturated.
template <class T>
void quantize(const float* x, T* q, const Order& o, const Grid& g, int threads) {
  const float lo = static_cast<float>(g.lo()), hi = static_cast<float>(g.hi());
  const float zp = static_cast<float>(g.zero_point), scale = g.scale;
  mapped(x, q, o, true, threads, [=](float v) {
    return static_cast<T>(saturate(round_half_even(v / scale) + zp, lo, hi));
  });
}

template <class T>
void dequantize(const T* q, float* y, const Order& o, const Grid& g, int threads) {
  const int32_t zp = g.zero_point;
  const float scale = g.scale;
  mapped(q, y, o, false, threads, [=](T v) {
    return static_cast<float>(static_cast<int32_t>(v) - zp) * scale;
  });
}

void quantize_bytes(const float* x, uint8_t* q, const Order& o, const Grid& g, int threads) {
  if (o.channels == 1) {  // one stream: the CPU's tier
    static const QuantizeBlock block = PPB_FOR_THIS_CPU(quantize);
    blockwise(o.rows * o.inner, threads, [&](int64_t i0, int64_t m) { block(x, i0, m, g, q); });
  } else if (g.type == QuantType::u8) {
    quantize(x, q, o, g, threads);
  } else {
    quantize(x, reinterpret_cast<int8_t*>(q), o, g, threads);
  }
}

void dequantize_bytes(const uint8_t* q, float* y, const Order& o, const Grid& g, int threads) {
  if (o.channels == 1) {
    static const DequantizeBlock block = PPB_FOR_THIS_CPU(dequantize);
    blockwise(o.rows * o.inner, threads, [&](int64_t i0, int64_t m) { block(q, i0, m, g, y); });
  } else if (g.type == QuantType::u8) {
    dequantize(q, y, o, g, threads);
  } else {
    dequantize(reinterpret_cast<const int8_t*>(q), y, o, g, threads);
  }
}

// A fake_quantize of one element-wise function of grid bytes
// (graph/passes/int8_gates.py: a SiLU gate, x times its rounded sigmoid):
// param `table` holds the function's float32 value for each byte of the
// input's grid, lowest first, so the node rounds table[byte] onto its grid,
// one lookup an element. The input takes only those 256 values, so this is
// the rounding of the values the float ops would have made. The rows are
// rounded by `store`, the same arithmetic as every fake_quantize's, once when
// the plan is made; ops/byte_lookup.hpp looks them up.
QuantizedNodeCall lookup_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                              const Tensor& out, int threads) {
  const std::string& type = s.int8_inputs.empty() ? std::string() : s.int8_inputs[0];
  if (ins.size() != 1 || type.empty())
    throw std::invalid_argument(node_where(s) + ": a 'table' is read by the bytes of one input");
  const ParamArray& t = required_param(s, "table");
  if (Dims(t.shape).elements() != 256)
    throw std::invalid_argument(node_where(s) + ": 'table' holds " +
                                std::to_string(Dims(t.shape).elements()) +
                                " values, not one for each of 256 bytes");
  const int64_t n = Dims(out.shape).elements();
  if (Dims(ins[0].shape).elements() != n)
    throw std::invalid_argument(node_where(s) + ": input 0 and the output differ in size");
  const Grid g = grid(s, "x", s.kind);
  const bool int8_input = parse_quant_type(type, "input bytes") == QuantType::s8;
  auto lut = std::make_shared<LookupTable>();
  if (s.int8) {
    uint8_t rows[256];
    store(t.data, 0, 256, g, rows, true);
    *lut = byte_lookup_table(rows, int8_input);
  } else {
    // The grid's values: the wide tiers look up bytes and scale them.
    float rows[256];
    store(t.data, 0, 256, g, rows, false);
    *lut = float_lookup_table(rows, int8_input, g.scale);
  }
  const uint8_t* x = static_cast<const uint8_t*>(ins[0].data);
  void* y = out.data;
  const LookupTable* l = lut.get();
  return {lut, [l, x, y, n, threads] { run_byte_lookup(*l, x, n, y, threads); }, {}};
}

// fake_quantize: its input, or the sum of its two (a residual Add whose
// output only this node reads, fused by graph/passes/int8_values.py), each
// float32 or grid bytes, rounded onto its grid: the output as bytes or as
// the float32 values they stand for. Every sum is float32, as the Add's.
QuantizedNodeCall fake_quantize_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                                     const Tensor& out, int threads) {
  if (s.params.count("table")) return lookup_call(s, ins, out, threads);
  if (ins.empty() || ins.size() > 2)
    throw std::invalid_argument(node_where(s) + " takes one input, or two that it sums");
  const Grid g = grid(s, "x", s.kind);
  const int64_t n = Dims(out.shape).elements();
  std::vector<Source> sources;
  for (size_t j = 0; j < ins.size(); ++j) {
    if (Dims(ins[j].shape).elements() != n)
      throw std::invalid_argument(node_where(s) + ": input " + std::to_string(j) + " and the output "
                                  "differ in size");
    Source src{ins[j].data, false, {}};
    const std::string& bytes = j < s.int8_inputs.size() ? s.int8_inputs[j] : std::string();
    if (!bytes.empty()) {
      src.bytes = true;
      src.g = grid(s, "in" + std::to_string(j), bytes);
    }
    sources.push_back(src);
  }
  void* y = out.data;
  const bool bytes_out = s.int8;
  static const SumRoundBlock block = PPB_FOR_THIS_CPU(sum_round);
  return {nullptr,
          [sources, y, bytes_out, g, n, threads] {
            blockwise(n, threads, [&](int64_t i0, int64_t m) {
              block(sources.data(), sources.size(), i0, m, g, y, bytes_out);
            });
          },
          {}};
}

// The node's weights as s8: the file's int8 values, carried as floats.
std::vector<int8_t> int8_weights(const NodeSpec& s, const ParamArray& w) {
  const int64_t n = Dims(w.shape).elements();
  std::vector<int8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float v = w.data[i];
    if (v != std::nearbyint(v) || v < -128.f || v > 127.f)
      throw std::invalid_argument(node_where(s) + ": weight value " + std::to_string(v) +
                                  " is not an int8");
    out[static_cast<size_t>(i)] = static_cast<int8_t>(v);
  }
  return out;
}

// What an int8 matrix node keeps between runs.
struct QuantizedState {
  std::unique_ptr<QuantizedKernel> kernel;
  std::vector<uint8_t> x_bytes, out_bytes;
  std::vector<float> out_floats;  // a convolution's float32 output, channels-last
};

QuantizedConfig config(const NodeSpec& s, const Grid& x, const Grid* out, int64_t channels) {
  QuantizedConfig q;
  q.x_type = x.type;
  q.x_scale = x.scale;
  q.x_zero_point = x.zero_point;
  const ParamArray& ws = required_param(s, "weight_scale");
  if (Dims(ws.shape).elements() != channels)
    throw std::invalid_argument(node_where(s) + ": weight_scale holds " +
                                std::to_string(Dims(ws.shape).elements()) + " scales for " +
                                std::to_string(channels) + " output channels");
  q.weight_scales.assign(ws.data, ws.data + channels);
  if (out) {
    q.out_type = out->type;
    q.out_scale = out->scale;
    q.out_zero_point = out->zero_point;
  }
  auto b = s.params.find("bias");
  q.bias = b != s.params.end() && b->second.data;
  q.relu = s.relu;
  return q;
}

}  // namespace

bool is_quantized_node(OpKind op) {
  return op == OpKind::quantized_linear || op == OpKind::quantized_conv2d ||
         op == OpKind::fake_quantize;
}

QuantizedNodeCall make_quantized_node_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                                           const Tensor& out, int threads) {
  if (s.op == OpKind::fake_quantize) return fake_quantize_call(s, ins, out, threads);
  if (!is_quantized_node(s.op)) throw std::invalid_argument(node_where(s) + " is not an int8 node");
  if (ins.size() != 1) throw std::invalid_argument(node_where(s) + " takes one input");
  const Tensor x = ins[0];
  const int64_t x_elems = Dims(x.shape).elements(), y_elems = Dims(out.shape).elements();
  const Grid xg = grid(s, "x", s.kind);
  const bool requantized = s.mode != "float32";
  const Grid og = requantized ? grid(s, "out", s.mode) : Grid{};
  const ParamArray& w = required_param(s, "weight");
  const int64_t channels = w.shape[0];
  const QuantizedConfig q = config(s, xg, requantized ? &og : nullptr, channels);
  auto state = std::make_shared<QuantizedState>();
  Shape x_shape, y_shape;
  Order x_order, y_order;  // linear: the same order (one row each)
  if (s.op == OpKind::quantized_linear) {
    // x (..., k): every leading axis is a row of the matrix product.
    const int64_t k = x.shape.back(), m = x_elems / k;
    state->kernel = std::make_unique<QuantizedLinear>(m, channels, k, q, threads);
    x_shape = {m, k};
    y_shape = {m, channels};
  } else {
    Conv2dConfig c = conv_geometry(s, x.shape, w.shape, channels);
    c.layout = ActLayout::nhwc;
    state->kernel = std::make_unique<QuantizedConv2d>(c, q, threads);
    x_shape = state->kernel->input_shape();
    y_shape = state->kernel->output_shape();
    // Data the layout pass stores channels-last is the kernel's order already.
    if (s.layout == ActLayout::nhwc && s.input_layout == ActLayout::nhwc) {
      x_order = {1, 1, x_elems};
      y_order = {1, 1, y_elems};
    } else if (s.layout != ActLayout::nchw || s.input_layout != ActLayout::nchw) {
      throw std::invalid_argument(node_where(s) + ": activations stored " +
                                  act_layout_name(s.input_layout) + " -> " +
                                  act_layout_name(s.layout) + " (nchw or nhwc only)");
    } else {
      x_order = {c.n, c.c, c.h * c.w};
      y_order = {out.shape[0], out.shape[1], out.shape[2] * out.shape[3]};
    }
  }
  if (s.op == OpKind::quantized_linear) {  // rows of the product, in their order
    x_order = {x_shape[0], 1, x_shape[1]};
    y_order = {y_shape[0], 1, y_shape[1]};
  }
  if (Dims(y_shape).elements() != y_elems)
    throw std::invalid_argument(node_where(s) + ": its output shape does not match its input's");
  // Grid bytes in or out are the kernel's own, in its order.
  const std::string& x_bytes = s.int8_inputs.empty() ? std::string() : s.int8_inputs[0];
  const bool bytes_in = !x_bytes.empty(), bytes_out = s.int8;
  if (bytes_in && parse_quant_type(x_bytes, "input bytes") != xg.type)
    throw std::invalid_argument(node_where(s) + " reads " + x_bytes + " bytes on a " +
                                quant_type_name(xg.type) + " grid");
  if ((bytes_in && x_order.channels > 1) || (bytes_out && y_order.channels > 1))
    throw std::invalid_argument(node_where(s) + ": int8 bytes in or out need channels-last data");
  if (bytes_out && !requantized)
    throw std::invalid_argument(node_where(s) + " writes int8 bytes with no output grid");
  // The weights once, as s8 (the bias stays float32, added after
  // dequantisation).
  const std::vector<int8_t> w8 = int8_weights(s, w);
  auto b = s.params.find("bias");
  state->kernel->set_weights({w8.data(), w.shape},
                             q.bias ? b->second.view() : ConstFloatView{});
  if (!bytes_in) state->x_bytes.resize(static_cast<size_t>(x_elems));
  const bool reordered = y_order.channels > 1;
  if (requantized && !bytes_out)
    state->out_bytes.resize(static_cast<size_t>(y_elems));
  else if (!requantized && reordered)
    state->out_floats.resize(static_cast<size_t>(y_elems));
  QuantizedState* st = state.get();
  const std::string impl = st->kernel->implementation();
  return {state,
          [st, x, out, xg, og, requantized, reordered, bytes_in, bytes_out, x_shape, y_shape,
           x_order, y_order, threads] {
            if (!bytes_in)
              quantize_bytes(static_cast<const float*>(x.data), st->x_bytes.data(), x_order, xg,
                             threads);
            const ConstByteView xv{bytes_in ? static_cast<const uint8_t*>(x.data)
                                            : st->x_bytes.data(),
                                   x_shape};
            if (bytes_out) {
              st->kernel->run(xv, {static_cast<uint8_t*>(out.data), y_shape});
              return;
            }
            float* y = static_cast<float*>(out.data);
            if (requantized) {
              st->kernel->run(xv, {st->out_bytes.data(), y_shape});
              dequantize_bytes(st->out_bytes.data(), y, y_order, og, threads);
            } else if (reordered) {
              st->kernel->run(xv, {reinterpret_cast<uint8_t*>(st->out_floats.data()), y_shape});
              mapped(st->out_floats.data(), y, y_order, false, threads, [](float v) { return v; });
            } else {
              st->kernel->run(xv, {reinterpret_cast<uint8_t*>(y), y_shape});
            }
          },
          impl};
}

namespace {

template <class T>
void max_pool_bytes(const T* x, T* y, const NodeSpec& s, const Shape& in, const Shape& out,
                    int threads) {
  const int64_t c = in[1], h = in[2], w = in[3], oh = out[2], ow = out[3];
  const int64_t kh = s.kernel[0], kw = s.kernel[1], sh = s.stride[0], sw = s.stride[1];
  const int64_t top = s.padding[0], left = s.padding[2];
  const int64_t pixels = out[0] * oh * ow;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && pixels * c > 16384)
  for (int64_t p = 0; p < pixels; ++p) {
    const int64_t b = p / (oh * ow), i = (p / ow) % oh, j = p % ow;
    T* o = y + p * c;
    for (int64_t k = 0; k < c; ++k) o[k] = std::numeric_limits<T>::lowest();
    const int64_t h0 = i * sh - top, w0 = j * sw - left;
    for (int64_t r = std::max<int64_t>(h0, 0); r < std::min(h0 + kh, h); ++r)
      for (int64_t q = std::max<int64_t>(w0, 0); q < std::min(w0 + kw, w); ++q) {
        const T* v = x + ((b * h + r) * w + q) * c;
        for (int64_t k = 0; k < c; ++k) o[k] = o[k] < v[k] ? v[k] : o[k];
      }
  }
}

}  // namespace

QuantizedNodeCall make_int8_max_pool_call(const NodeSpec& s, const std::vector<Tensor>& ins,
                                          const Tensor& out, int threads) {
  const std::string& type = s.int8_inputs.empty() ? std::string() : s.int8_inputs[0];
  if (ins.size() != 1 || type.empty() || !s.int8 || s.kind != "max" ||
      s.layout != ActLayout::nhwc || ins[0].shape.size() != 4 || out.shape.size() != 4)
    throw std::invalid_argument(node_where(s) + ": pooling of int8 bytes is a channels-last max "
                                "pool of 4-D bytes into bytes");
  const bool u8 = parse_quant_type(type, "pooled bytes") == QuantType::u8;
  const Shape in_shape = ins[0].shape, out_shape = out.shape;
  const void* x = ins[0].data;
  void* y = out.data;
  return {nullptr,
          [s, x, y, u8, in_shape, out_shape, threads] {
            if (u8)
              max_pool_bytes(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), s,
                             in_shape, out_shape, threads);
            else
              max_pool_bytes(static_cast<const int8_t*>(x), static_cast<int8_t*>(y), s,
                             in_shape, out_shape, threads);
          },
          {}};
}

}  // namespace ppb
