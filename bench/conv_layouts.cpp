// Which activation layout makes oneDNN's fp32 inference convolutions fastest
// on this machine: channels-last (nhwc), oneDNN's blocked layout (nChw16c, or
// nChw8c with block 8), or whatever format_tag::any picks (printed, with the
// implementation each layout gets). Times ResNet-50's convolutions as
// pyparbench builds it (pyparbench/models/resnet.py: Keras v1, the stride on
// the block's first 1x1), each with a bias and a fused ReLU, weights in the
// layout the primitive asks for (reordered once, outside the timing). The
// three layouts run in turn on each repeat, so drift hits them alike; prints
// each shape's median and minimum (us) and the totals weighted by how often
// each shape occurs in ResNet-50 (53 convolutions).
//
// Builds against oneDNN 2.x or 3.x, standalone (not part of the package):
//   g++ -O2 -std=c++17 bench/conv_layouts.cpp -o /tmp/conv_layouts -ldnnl
//   OMP_NUM_THREADS=2 taskset -c 0,1 /tmp/conv_layouts [batch=1] [repeats=201] [block]
// block: 16 on a CPU with AVX-512, else 8 (the widest oneDNN has JIT kernels
// for: on AVX2 nChw16c falls to the reference implementation, ref:any,
// thousands of times slower).
//
// On a 2-core AVX-512 Zen 4 VM (oneDNN 2.6 and 3.2, 2 threads) format_tag::any
// picks nhwc for every shape (brgconv / brgconv_1x1); nChw16c gets the older
// jit:avx512_core / jit_1x1 kernels and its weighted total is 7-8% slower at
// batch 1 (3x3 convolutions 3-35% slower, 1x1 about even) and 2% slower at
// batch 8, so the graph passes keep NHWC. On a 2-core AVX2 Zen 3 with oneDNN
// 2.6, format_tag::any picks nChw8c (jit:avx2), and oneDNN's channels-last
// kernel with the fused bias and ReLU is the slow one: 3x3 convolutions
// 1.1-1.8x slower than nChw8c, 1x1 about even. The `blocked` graph pass
// follows what any picks (preferred_conv_layout in the C++ core).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

struct Shape {
  int c, hw, k, kernel, stride, count;
};

// ResNet-50's convolutions: (C, HxW, K, kernel, stride, occurrences).
const std::vector<Shape> kResNet50 = {
    {3, 224, 64, 7, 2, 1},     {64, 56, 64, 1, 1, 1},      {64, 56, 64, 3, 1, 3},
    {64, 56, 256, 1, 1, 4},    {256, 56, 64, 1, 1, 2},     {256, 56, 128, 1, 2, 1},
    {256, 56, 512, 1, 2, 1},   {128, 28, 128, 3, 1, 4},    {128, 28, 512, 1, 1, 4},
    {512, 28, 128, 1, 1, 3},   {512, 28, 256, 1, 2, 1},    {512, 28, 1024, 1, 2, 1},
    {256, 14, 256, 3, 1, 6},   {256, 14, 1024, 1, 1, 6},   {1024, 14, 256, 1, 1, 5},
    {1024, 14, 512, 1, 2, 1},  {1024, 14, 2048, 1, 2, 1},  {512, 7, 512, 3, 1, 3},
    {512, 7, 2048, 1, 1, 3},   {2048, 7, 512, 1, 1, 2},
};

std::string layout_of(const memory::desc& md) {
#if DNNL_VERSION_MAJOR >= 3
  const auto strides = md.get_strides();
  const auto blks = md.get_inner_blks();
  const auto idxs = md.get_inner_idxs();
#else
  const auto& b = md.data.format_desc.blocking;
  const std::vector<int64_t> strides(b.strides, b.strides + md.data.ndims);
  const std::vector<int64_t> blks(b.inner_blks, b.inner_blks + b.inner_nblks);
  const std::vector<int64_t> idxs(b.inner_idxs, b.inner_idxs + b.inner_nblks);
#endif
  // The dimensions from outermost to innermost stride, then the inner blocks.
  std::vector<int> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int c) { return strides[a] > strides[c]; });
  std::string s;
  for (int d : order) s += "nchw"[d];
  for (size_t i = 0; i < blks.size(); ++i) s += std::to_string(blks[i]) + "nchw"[idxs[i]];
  return s;
}

struct Conv {
  primitive prim;
  std::unordered_map<int, memory> args;
  std::string impl, src, dst;
};

Conv make(engine& eng, stream& st, const Shape& sh, tag layout, int batch) {
  const int pad = sh.kernel / 2;
  const int out = (sh.hw + 2 * pad - sh.kernel) / sh.stride + 1;
  // Channels that are not a multiple of the block stay plain (the stem's 3).
  tag src_tag = layout;
  if ((layout == tag::nChw16c && sh.c % 16) || (layout == tag::nChw8c && sh.c % 8))
    src_tag = tag::nchw;
  const memory::desc src_md({batch, sh.c, sh.hw, sh.hw}, dt::f32, src_tag);
  const memory::desc dst_md({batch, sh.k, out, out}, dt::f32, layout);
  const memory::desc wei_md({sh.k, sh.c, sh.kernel, sh.kernel}, dt::f32, tag::any);
  const memory::desc bia_md({sh.k}, dt::f32, tag::x);
  post_ops ops;
  primitive_attr attr;
#if DNNL_VERSION_MAJOR >= 3
  ops.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
  attr.set_post_ops(ops);
  convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference,
                                         algorithm::convolution_direct, src_md, wei_md, bia_md,
                                         dst_md, {sh.stride, sh.stride}, {pad, pad}, {pad, pad},
                                         attr);
#else
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  attr.set_post_ops(ops);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                              src_md, wei_md, bia_md, dst_md, {sh.stride, sh.stride},
                              {pad, pad}, {pad, pad});
  convolution_forward::primitive_desc pd(d, attr, eng);
#endif
  Conv c{convolution_forward(pd), {}, pd.impl_info_str(), layout_of(pd.src_desc()),
         layout_of(pd.dst_desc())};
  c.args = {{DNNL_ARG_SRC, memory(pd.src_desc(), eng)},
            {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), eng)},
            {DNNL_ARG_BIAS, memory(bia_md, eng)},
            {DNNL_ARG_DST, memory(pd.dst_desc(), eng)}};
  for (auto& [key, m] : c.args) {  // small non-zero values
    auto* p = static_cast<float*>(m.get_data_handle());
    const size_t n = m.get_desc().get_size() / sizeof(float);
    for (size_t i = 0; i < n; ++i) p[i] = float((i * 2654435761u) % 1000) / 1000.f - 0.5f;
  }
  for (int i = 0; i < 5; ++i) c.prim.execute(st, c.args);
  st.wait();
  return c;
}

// The blocked layout's channel block oneDNN's kernels use here: 16 with
// AVX-512, else 8 (AVX2; aarch64's NEON and 256-bit SVE). This program links
// oneDNN only, not pyparbench's core, so it asks the compiler's builtin.
int default_block() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f") ? 16 : 8;
#else
  return 8;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 1;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 201;
  const int block = argc > 3 ? std::atoi(argv[3]) : default_block();
  if (batch < 1 || repeats < 1 || (block != 8 && block != 16)) {
    std::fprintf(stderr, "usage: %s [batch>=1] [repeats>=1] [block=8|16]\n", argv[0]);
    return 2;
  }
  const tag blocked = block == 16 ? tag::nChw16c : tag::nChw8c;
  const std::vector<std::pair<const char*, tag>> layouts = {
      {"nhwc", tag::nhwc}, {block == 16 ? "nChw16c" : "nChw8c", blocked}, {"any", tag::any}};
  const size_t nl = layouts.size();
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  std::vector<double> med_total(nl), min_total(nl);
  std::printf("batch %d, %d repeats; median (min) us per convolution\n", batch, repeats);
  std::printf("%-20s %3s", "C,HxW,K,kernel,s", "n");
  for (auto& l : layouts) std::printf(" %20s", l.first);
  std::printf("  implementations; any's src -> dst\n");
  for (const Shape& sh : kResNet50) {
    std::vector<Conv> convs;
    for (auto& l : layouts) convs.push_back(make(eng, st, sh, l.second, batch));
    std::vector<std::vector<double>> us(nl);
    for (int r = 0; r < repeats; ++r)
      for (size_t i = 0; i < nl; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        convs[i].prim.execute(st, convs[i].args);
        st.wait();
        us[i].push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
    char name[64];
    std::snprintf(name, sizeof name, "%d,%d,%d,%dx%d,s%d", sh.c, sh.hw, sh.k, sh.kernel,
                  sh.kernel, sh.stride);
    std::printf("%-20s %3d", name, sh.count);
    for (size_t i = 0; i < nl; ++i) {
      std::sort(us[i].begin(), us[i].end());
      const double med = us[i][us[i].size() / 2], mn = us[i].front();
      med_total[i] += med * sh.count;
      min_total[i] += mn * sh.count;
      std::printf(" %10.1f (%7.1f)", med, mn);
    }
    std::printf("  %s / %s / %s; %s -> %s\n", convs[0].impl.c_str(), convs[1].impl.c_str(),
                convs[2].impl.c_str(), convs[2].src.c_str(), convs[2].dst.c_str());
  }
  std::printf("%-24s", "weighted total");
  for (size_t i = 0; i < nl; ++i) std::printf(" %10.1f (%7.1f)", med_total[i], min_total[i]);
  std::printf("\nrelative to nhwc (median, min):");
  for (size_t i = 1; i < nl; ++i)
    std::printf("  %s %.3f, %.3f", layouts[i].first, med_total[i] / med_total[0],
                min_total[i] / min_total[0]);
  std::printf("\n");
}
