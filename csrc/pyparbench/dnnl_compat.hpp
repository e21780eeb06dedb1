// The only place that knows the differences between the oneDNN v2 and v3 C++
// APIs. v2 builds a primitive in two steps (an operation descriptor, then a
// primitive descriptor); v3 builds the primitive descriptor directly from the
// engine. Everything else in pyparbench calls these helpers.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "pyparbench/errors.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#if DNNL_VERSION_MAJOR >= 3
#define PPB_DNNL_V3 1
#else
#define PPB_DNNL_V3 0
#endif

namespace ppb::compat {

using dnnl::algorithm;
using dnnl::engine;
using dnnl::memory;
using dnnl::primitive_attr;
using dnnl::prop_kind;

inline dnnl::matmul::primitive_desc matmul_pd(const engine& eng, const memory::desc& src,
                                              const memory::desc& weights,
                                              const memory::desc& bias,
                                              const memory::desc& dst,
                                              const primitive_attr& attr) {
#if PPB_DNNL_V3
  return {eng, src, weights, bias, dst, attr};
#else
  return {dnnl::matmul::desc(src, weights, bias, dst), attr, eng};
#endif
}

inline dnnl::convolution_forward::primitive_desc conv_pd(
    const engine& eng, const memory::desc& src, const memory::desc& weights,
    const memory::desc& bias, const memory::desc& dst, const memory::dims& strides,
    const memory::dims& dilates, const memory::dims& pad_l, const memory::dims& pad_r,
    const primitive_attr& attr) {
#if PPB_DNNL_V3
  return {eng,   prop_kind::forward_inference, algorithm::convolution_direct, src, weights, bias, dst,
          strides, dilates, pad_l, pad_r, attr};
#else
  return {dnnl::convolution_forward::desc(prop_kind::forward_inference,
                                          algorithm::convolution_direct, src, weights, bias,
                                          dst, strides, dilates, pad_l, pad_r),
          attr, eng};
#endif
}

inline dnnl::eltwise_forward::primitive_desc eltwise_pd(const engine& eng, algorithm alg,
                                                        const memory::desc& data, float alpha,
                                                        float beta, const primitive_attr& attr) {
#if PPB_DNNL_V3
  return {eng, prop_kind::forward_inference, alg, data, data, alpha, beta, attr};
#else
  return {dnnl::eltwise_forward::desc(prop_kind::forward_inference, alg, data, alpha, beta),
          attr, eng};
#endif
}

inline dnnl::binary::primitive_desc binary_pd(const engine& eng, algorithm alg,
                                              const memory::desc& src0,
                                              const memory::desc& src1,
                                              const memory::desc& dst,
                                              const primitive_attr& attr) {
#if PPB_DNNL_V3
  return {eng, alg, src0, src1, dst, attr};
#else
  return {dnnl::binary::desc(alg, src0, src1, dst), attr, eng};
#endif
}

inline dnnl::concat::primitive_desc concat_pd(const engine& eng, const memory::desc& dst,
                                              int axis, const std::vector<memory::desc>& srcs,
                                              const primitive_attr& attr) {
#if PPB_DNNL_V3
  return {eng, dst, axis, srcs, attr};
#else
  return {dst, axis, srcs, eng, attr};
#endif
}

inline dnnl::pooling_forward::primitive_desc pooling_pd(
    const engine& eng, algorithm alg, const memory::desc& src, const memory::desc& dst,
    const memory::dims& strides, const memory::dims& kernel, const memory::dims& pad_l,
    const memory::dims& pad_r, const primitive_attr& attr) {
  const memory::dims no_dilation(strides.size(), 0);
#if PPB_DNNL_V3
  return {eng,   prop_kind::forward_inference, alg, src, dst, strides, kernel, no_dilation,
          pad_l, pad_r, attr};
#else
  // v2's pooling_forward has no dilation argument; pooling_v2_forward does.
  (void)no_dilation;
  return {dnnl::pooling_forward::desc(prop_kind::forward_inference, alg, src, dst, strides,
                                      kernel, pad_l, pad_r),
          attr, eng};
#endif
}

inline dnnl::batch_normalization_forward::primitive_desc batch_norm_pd(
    const engine& eng, const memory::desc& data, float eps, const primitive_attr& attr) {
  const auto flags = dnnl::normalization_flags::use_global_stats |
                     dnnl::normalization_flags::use_scale |
                     dnnl::normalization_flags::use_shift;
#if PPB_DNNL_V3
  return {eng, prop_kind::forward_inference, data, data, eps, flags, attr};
#else
  return {dnnl::batch_normalization_forward::desc(prop_kind::forward_inference, data, eps,
                                                  flags),
          attr, eng};
#endif
}

inline dnnl::layer_normalization_forward::primitive_desc layer_norm_pd(
    const engine& eng, const memory::desc& data, const memory::desc& stats, float eps,
    const primitive_attr& attr) {
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
#if PPB_DNNL_V3
  return {eng, prop_kind::forward_inference, data, data, stats, eps, flags, attr};
#else
  return {dnnl::layer_normalization_forward::desc(prop_kind::forward_inference, data, stats,
                                                  eps, flags),
          attr, eng};
#endif
}

inline dnnl::softmax_forward::primitive_desc softmax_pd(const engine& eng,
                                                        const memory::desc& data, int axis,
                                                        const primitive_attr& attr) {
#if PPB_DNNL_V3
  return {eng, prop_kind::forward_inference, algorithm::softmax_accurate, data, data, axis,
          attr};
#else
  return {dnnl::softmax_forward::desc(prop_kind::forward_inference, data, axis), attr, eng};
#endif
}

// Post-op eltwise: v2 takes a leading output scale, v3 does not.
inline void append_eltwise(dnnl::post_ops& ops, algorithm alg, float alpha, float beta) {
#if PPB_DNNL_V3
  ops.append_eltwise(alg, alpha, beta);
#else
  ops.append_eltwise(1.0f, alg, alpha, beta);
#endif
}

// Post-op sum (dst = op(src) + dst) with scale 1: v3 added a zero point
// before the data type, so only the scale is passed.
inline void append_sum(dnnl::post_ops& ops) { ops.append_sum(1.0f); }

// Name of the ISA oneDNN dispatches to. The enum grew between versions.
#if defined(__aarch64__)
// On aarch64 oneDNN (2.x and 3.x alike) returns its own ISA values through
// the x86 enum (src/cpu/aarch64/cpu_isa_traits.hpp: asimd 0x1, SVE at
// 128 / 256 / 384 bits 0x3 / 0x7 / 0xf, at 512 bits its mask 0x1f or its
// public value 0x27), so the x86 names would be wrong there.
inline std::string isa_name(dnnl::cpu_isa isa) {
  switch (static_cast<unsigned>(isa)) {
    case 0x1: return "asimd";
    case 0x3: return "sve_128";
    case 0x7: return "sve_256";
    case 0xf: return "sve_384";
    case 0x1f:
    case 0x27: return "sve_512";
    default: return "isa_" + std::to_string(static_cast<unsigned>(isa));
  }
}
#else
inline std::string isa_name(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  switch (isa) {
    case I::sse41: return "sse41";
    case I::avx: return "avx";
    case I::avx2: return "avx2";
    case I::avx2_vnni: return "avx2_vnni";
    case I::avx512_core: return "avx512_core";
    case I::avx512_core_vnni: return "avx512_core_vnni";
    case I::avx512_core_bf16: return "avx512_core_bf16";
    case I::avx512_core_amx: return "avx512_core_amx";
#if PPB_DNNL_V3
    case I::avx2_vnni_2: return "avx2_vnni_2";
    case I::avx512_core_fp16: return "avx512_core_fp16";
    case I::avx512_core_amx_fp16: return "avx512_core_amx_fp16";
#else
    case I::avx512_mic: return "avx512_mic";
    case I::avx512_mic_4ops: return "avx512_mic_4ops";
#endif
    default: return "isa_" + std::to_string(static_cast<int>(isa));
  }
}
#endif

// Whether a primitive that computes bf16 runs it emulated rather than on bf16
// dot-product instructions, decided from the implementation oneDNN picked
// (impl_info_str) for that primitive:
//  * a reference implementation ("ref..."): emulated (C++ loops converting
//    each element);
//  * a name ending in an x86 ISA ("jit:avx512_core", "brg:avx512_core_amx"):
//    native when that ISA has bf16 dot products (avx512_core_bf16, AMX, and
//    in 3.x avx512_core_fp16, a superset), else emulated (2.x and 3.x jit
//    kernels emulate vdpbf16ps with AVX-512 integer shifts and fp32 FMAs);
//  * a name without an ISA ("gemm:jit", "brg", "acl"): the ISA oneDNN
//    dispatches to decides (ONEDNN_MAX_CPU_ISA honoured); on aarch64 a
//    non-reference implementation is native (oneDNN serves bf16 there only
//    through BF16 instructions or its reference code).
inline bool x86_isa_name_has_bf16_dot(const std::string& isa) {
  return isa.find("bf16") != std::string::npos || isa.find("amx") != std::string::npos ||
         isa.find("fp16") != std::string::npos;
}

inline bool dispatch_isa_has_bf16_dot() {
#if defined(__aarch64__)
  return true;
#else
  return x86_isa_name_has_bf16_dot(isa_name(dnnl::get_effective_cpu_isa()));
#endif
}

inline bool bf16_emulated(const std::string& impl) {
  if (impl.rfind("ref", 0) == 0 || impl.find(":ref") != std::string::npos) return true;
  const auto colon = impl.rfind(':');
  const std::string tail = colon == std::string::npos ? impl : impl.substr(colon + 1);
  if (tail.rfind("avx", 0) == 0 || tail.rfind("sse", 0) == 0 || tail.rfind("uni", 0) == 0)
    return !x86_isa_name_has_bf16_dot(tail);
  return !dispatch_isa_has_bf16_dot();
}

// "; capped by ONEDNN_MAX_CPU_ISA=<value>" where the environment caps oneDNN's
// ISA (oneDNN also reads the older DNNL_MAX_CPU_ISA), else "".
inline std::string capped_by() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::string("; capped by ") + name + "=" + v;
  }
  return "";
}

// make() builds a primitive descriptor, bf16 when `bf16`; where oneDNN has no
// implementation of `primitive` in bf16 for the ISA it dispatches to, a
// std::runtime_error says so and what bf16 needs. oneDNN 2.6 serves bf16
// matmul and convolution from avx512_core up only (emulated there, native
// from avx512_core_bf16), with no reference fallback below; 3.x adds
// avx2_vnni_2 (AVX-NE-CONVERT) kernels.
template <class MakePd>
auto bf16_pd(bool bf16, const char* kernel, const char* primitive, MakePd&& make)
    -> decltype(make()) {
  try {
    return make();
  } catch (const dnnl::error& e) {
    if (!bf16 || e.status != dnnl_unimplemented) throw;
#if defined(__aarch64__)
    // Without the Arm Compute Library oneDNN's aarch64 build has no bf16
    // matmul or convolution at all, whatever the CPU's BF16 instructions.
    const std::string needs = "a oneDNN built with the Arm Compute Library (ACL) on an Arm CPU "
                              "with BF16";
#elif PPB_DNNL_V3
    const std::string needs = "avx2_vnni_2 or avx512_core or newer";
#else
    const std::string needs = "avx512_core or newer (oneDNN 2.x has no bf16 " +
                              std::string(primitive) + " below it)";
#endif
    throw PrecisionUnavailable(std::string(kernel) + ": precision 'bf16' is not available: oneDNN " +
                             std::to_string(DNNL_VERSION_MAJOR) + "." +
                             std::to_string(DNNL_VERSION_MINOR) + " has no bf16 " + primitive +
                             " for the ISA it dispatches to (" +
                             isa_name(dnnl::get_effective_cpu_isa()) + capped_by() +
                             "); bf16 needs " + needs);
  }
}

// int8 matmul / convolution: s32 accumulation of u8 / s8 activations times
// s8 weights (symmetric, one scale per output channel), dequantised to fp32
// (acc · src_scale · weight_scale[oc] + bias) or requantised to u8 / s8
// (that value / dst_scale + dst_zero_point, rounded and saturated). The two
// APIs differ in where the scales go:
//  * 2.x: one output scale per output channel (src_scale ·
//    weight_scale[oc] / dst_scale) set at creation; zero points given at run
//    time; the fp32 bias is added to the accumulator *before* the output
//    scale, so it is passed divided by src_scale · weight_scale[oc];
//  * 3.x: a scale per argument (src, weights per channel, dst), given at run
//    time as memories; the bias is added after src and weight scales, as is.
// In both, a fused ReLU acts on the rescaled value before the destination
// zero point is added (ONNX's QLinearConv followed by Relu).
struct Int8Quantization {
  float src_scale = 1.f;
  int32_t src_zero_point = 0;
  std::vector<float> weight_scales;  // one per output channel
  bool requantize = false;           // u8 / s8 output rather than fp32
  float dst_scale = 1.f;
  int32_t dst_zero_point = 0;
};

// A value the primitive reads at run time (a scale or a zero point), keyed
// by its execution argument.
struct Int8RuntimeArg {
  int arg;
  memory::data_type type;
  std::vector<float> f32;
  std::vector<int32_t> s32;
  memory::desc md() const {
    const auto n = static_cast<memory::dim>(type == memory::data_type::f32 ? f32.size()
                                                                           : s32.size());
    return memory::desc({n}, type, memory::format_tag::x);
  }
  const void* data() const {
    return type == memory::data_type::f32 ? static_cast<const void*>(f32.data())
                                          : static_cast<const void*>(s32.data());
  }
};

struct Int8Attr {
  std::vector<Int8RuntimeArg> runtime;  // to bind as owned arguments
  std::vector<float> bias_factor;       // multiply the fp32 bias by these per channel
};

// Sets `attr`'s scales and zero points for `q`. weights_oc_mask /
// dst_oc_mask: the masks selecting the output-channel dimension of the
// weights (3.x) and of the destination (2.x).
inline Int8Attr set_int8_quantization(primitive_attr& attr, const Int8Quantization& q,
                                      int weights_oc_mask, int dst_oc_mask) {
  Int8Attr out;
  const size_t channels = q.weight_scales.size();
  const bool per_channel = channels > 1;
  out.bias_factor.assign(channels, 1.f);
#if PPB_DNNL_V3
  (void)dst_oc_mask;
  attr.set_scales_mask(DNNL_ARG_SRC, 0);
  out.runtime.push_back({DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, memory::data_type::f32,
                         {q.src_scale}, {}});
  attr.set_scales_mask(DNNL_ARG_WEIGHTS, per_channel ? weights_oc_mask : 0);
  out.runtime.push_back({DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, memory::data_type::f32,
                         q.weight_scales, {}});
  if (q.requantize) {
    attr.set_scales_mask(DNNL_ARG_DST, 0);
    out.runtime.push_back({DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, memory::data_type::f32,
                           {q.dst_scale}, {}});
  }
  if (q.src_zero_point != 0) {
    attr.set_zero_points_mask(DNNL_ARG_SRC, 0);
    out.runtime.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory::data_type::s32,
                           {}, {q.src_zero_point}});
  }
  if (q.requantize && q.dst_zero_point != 0) {
    attr.set_zero_points_mask(DNNL_ARG_DST, 0);
    out.runtime.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, memory::data_type::s32,
                           {}, {q.dst_zero_point}});
  }
#else
  (void)weights_oc_mask;
  std::vector<float> scales(channels);
  for (size_t c = 0; c < channels; ++c) {
    const float dequant = q.src_scale * q.weight_scales[c];
    scales[c] = q.requantize ? dequant / q.dst_scale : dequant;
    out.bias_factor[c] = 1.f / dequant;
  }
  attr.set_output_scales(per_channel ? dst_oc_mask : 0, scales);
  if (q.src_zero_point != 0) {
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    out.runtime.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory::data_type::s32,
                           {}, {q.src_zero_point}});
  }
  if (q.requantize && q.dst_zero_point != 0) {
    attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    out.runtime.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, memory::data_type::s32,
                           {}, {q.dst_zero_point}});
  }
#endif
  return out;
}

// Whether an int8 primitive runs on int8 dot-product instructions (VNNI's
// vpdpbusd, AMX's tdpbusd) rather than the vpmaddubsw + vpmaddwd pairs (or
// C++ loops) that stand in for them, decided from impl_info_str as for bf16:
// a reference implementation is not native; an x86 ISA in the name decides
// (avx2_vnni, avx512_core_vnni and every later avx512 tier have VNNI); a
// name without one falls back to the ISA oneDNN dispatches to. On aarch64 a
// non-reference implementation uses SDOT / the int8 matrix instructions.
inline bool x86_isa_name_has_int8_dot(const std::string& isa) {
  return isa.find("vnni") != std::string::npos || isa.find("bf16") != std::string::npos ||
         isa.find("amx") != std::string::npos || isa.find("fp16") != std::string::npos;
}

inline bool int8_native(const std::string& impl) {
  if (impl.rfind("ref", 0) == 0 || impl.find(":ref") != std::string::npos) return false;
  const auto colon = impl.rfind(':');
  const std::string tail = colon == std::string::npos ? impl : impl.substr(colon + 1);
  if (tail.rfind("avx", 0) == 0 || tail.rfind("sse", 0) == 0 || tail.rfind("uni", 0) == 0)
    return x86_isa_name_has_int8_dot(tail);
#if defined(__aarch64__)
  return true;
#else
  return x86_isa_name_has_int8_dot(isa_name(dnnl::get_effective_cpu_isa()));
#endif
}

inline const char* status_name(dnnl_status_t s) {
  switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out_of_memory";
    case dnnl_invalid_arguments: return "invalid_arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_runtime_error: return "runtime_error";
    case dnnl_not_required: return "not_required";
    default: return "unknown";
  }
}

}  // namespace ppb::compat
