// Direct loops for small glue ops (element-wise activations, add / mul,
// softmax, layer norm, global average pooling) and the fused attention's
// tiles, compiled once per ISA (generic, AVX2, AVX-512) and chosen at run
// time, as the embedding-bag kernel is. They run on the calling thread and never start a team: on a
// tensor of a few hundred floats a oneDNN primitive call costs 10-50x the
// arithmetic (binding its arguments, the stream, the OpenMP region), which
// made a chain of tiny ops several times slower per node than ONNX Runtime.
// Each loop takes plain pointers and sizes bound once when a plan is
// prepared, so a call does no checking and allocates nothing.
//
// Results follow the float64 reference within fp32 rounding (the
// transcendental functions within ~2 ulp), on any length (vector bodies and
// scalar tails), and keep IEEE special values: NaN in, NaN out; the limits
// at +-inf; denormal inputs and outputs are computed, not flushed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppb {

// The element-wise activations, in the order of DirectKernels::eltwise.
enum class DirectEltwise { relu, relu6, sigmoid, tanh, gelu, gelu_tanh, swish, hardswish, count };
// "relu", "relu6", "sigmoid", "tanh", "gelu" (erf form), "gelu_tanh",
// "swish" (x sigmoid x, SiLU), "hardswish" (x relu6(x + 3) / 6);
// std::invalid_argument naming the kind otherwise.
DirectEltwise parse_direct_eltwise(const std::string& kind);

// a (op) b, b broadcast: a's shape collapsed to `rank` dims (at most 8),
// the last of which is `inner`; b_strides gives b's element stride for each
// of the leading rank - 1 dims (0 where b is broadcast), and b_inner is
// whether b varies along the last dim (else one b value per row).
struct BinaryArgs {
  const float* a;
  const float* b;
  float* y;
  int rank;
  int64_t dims[8];
  int64_t b_strides[8];
  bool b_inner;
};

// Softmax over an axis of `axis_len` elements at stride `inner`, for `outer`
// independent groups (inner == 1: contiguous rows).
struct SoftmaxArgs {
  const float* x;
  float* y;
  int64_t outer, axis_len, inner;
};

// Layer norm over contiguous rows of n elements, then scale and shift.
struct LayerNormArgs {
  const float* x;
  const float* scale;
  const float* shift;
  float* y;
  int64_t rows, n;
  float eps;
};

// y[i * lanes + l] = mean over p of x[(i * pixels + p) * lanes + l]: NCHW data
// is lanes 1 and images N * C; channels-last (N, H, W, C) lanes C; blocked
// (N, C/b, H, W, b) lanes b and images N * C / b.
struct MeanPoolArgs {
  const float* x;
  float* y;
  int64_t images, pixels, lanes;
};

// Attention rows of one (batch, head) (the fused attention's inner loop):
// `rows` consecutive queries against `sk` keys. k arrives transposed and
// padded: `kt` holds d rows of ldk floats (ldk a multiple of 16, keys sk and
// up zero). Row r's score of key j is scale * q_r . k_j + mask[r * mask_row
// + j * mask_key]; causal: row r sees the keys j < first_seen + r (clamped
// into [0, sk]), and the hidden ones score `fill` when `filled` (else they
// leave the softmax). A row whose scores are all -inf comes out zero.
// `scratch` holds 4 * ldk floats.
struct AttentionTileArgs {
  const float* q;  // rows x d
  const float* kt;
  const float* v;     // sk x dv
  const float* mask;  // the first row's, or null
  int64_t mask_row, mask_key;
  float* y;  // rows x dv
  float* scratch;
  int64_t rows, d, dv, sk, ldk;
  bool causal, filled;
  int64_t first_seen;
  float scale, fill;
};

struct DirectKernels {
  const char* isa;  // "avx512", "avx2" or "generic"
  // y[i] = f(x[i]), i < n; y may be x.
  void (*eltwise[static_cast<int>(DirectEltwise::count)])(const float* x, float* y, int64_t n);
  // [mul][relu]: a + b or a * b, then ReLU when relu; y may be a.
  void (*binary[2][2])(const BinaryArgs& args);
  void (*softmax)(const SoftmaxArgs& args);
  void (*layer_norm)(const LayerNormArgs& args);
  void (*mean_pool)(const MeanPoolArgs& args);
  void (*attention_tile)(const AttentionTileArgs& args);
};

const DirectKernels& direct_kernels_generic();
// x86 builds only (the per-ISA files are compiled where their ISA exists).
const DirectKernels& direct_kernels_avx2();
const DirectKernels& direct_kernels_avx512();

// ISAs this CPU runs, widest first.
std::vector<std::string> direct_isas();
// The kernels plans bind from now on: the widest this CPU runs, unless
// set_direct_isa chose another.
const DirectKernels& direct_kernels();
// Chooses the ISA of the kernels plans prepared later bind ("" or "auto":
// the widest again); std::invalid_argument naming an ISA this CPU does not
// run. Process-wide; for tests and comparisons of the ISAs.
void set_direct_isa(const std::string& isa);

}  // namespace ppb
