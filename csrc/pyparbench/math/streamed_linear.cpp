#include "pyparbench/math/streamed_linear.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/math/streamed_linear_kernel.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace ppb {

namespace {

int64_t chunks_of(int64_t k) { return (k + kStreamedChunk - 1) / kStreamedChunk; }

// Runs of panels per thread a product is cut into: enough for the balance,
// few enough that taking one (an atomic add) is nothing beside streaming it
// (a panel is 32 KiB of weights at k = 1024).
constexpr int64_t kRunsPerThread = 16;

// Packed weights of 1 MiB and more sit on transparent huge pages (whole
// 2 MiB pages, advised), below aligned_bytes' 4 MiB: a decoder's key and
// value products (1 MiB at 256 x 1024) read up to 15 % faster there than
// on 4 KiB pages, where every page is a TLB miss and a prefetch stream's
// end (llama-bandwidth's whole decode step: 3 %, 11.8 against 12.1 ms).
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeFrom = size_t{1} << 20;

AlignedArray<float> packed_array(int64_t floats) {
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  if (bytes < kHugeFrom) return aligned_array<float>(floats);
  const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, size);
  if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, size, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return AlignedArray<float>(static_cast<float*>(p));
}

// Panels [begin, end) of thread t of `threads`: equal contiguous runs.
void share(int64_t panels, int t, int threads, int64_t& begin, int64_t& end) {
  begin = panels * t / threads;
  end = panels * (t + 1) / threads;
}

}  // namespace

TieredKernel<StreamedKernel>& streamed_kernels() {
  static TieredKernel<StreamedKernel> k("streamed linear kernel", &streamed_kernel_generic,
                                        PPB_X86_BUILD(streamed_kernel_avx2),
                                        PPB_X86_BUILD(streamed_kernel_avx512));
  return k;
}

StreamedLinear::StreamedLinear(int64_t m, int64_t n, int64_t k, bool bias,
                               std::optional<int> threads)
    : Kernel(threads),
      m_(m),
      n_(n),
      k_(k),
      bias_(bias),
      x_shape_{m, k},
      out_shape_{m, n},
      weight_shape_{n, k},
      bias_shape_{n} {
  require_at_least("m", m, 1);
  require_at_least("n", n, 1);
  require_at_least("k", k, 1);
}

int64_t StreamedLinear::panels() const {
  return (n_ + kStreamedPanelRows - 1) / kStreamedPanelRows;
}

int64_t StreamedLinear::packed_bytes() const {
  if (plain_) return 0;
  return panels() * chunks_of(k_) * kStreamedPanelRows * kStreamedChunk *
         static_cast<int64_t>(sizeof(float));
}

std::string StreamedLinear::implementation() {
  return std::string("streamed:") + streamed_kernels().isa();
}

std::vector<float> StreamedLinear::checked_bias(ConstFloatView weight,
                                                ConstFloatView bias) const {
  require_shape("weight", weight.shape, weight_shape_);
  require_bias_presence("StreamedLinear", bias_, bias.present());
  if (!bias.present()) return {};
  require_shape("bias", bias.shape, bias_shape_);
  return std::vector<float>(bias.data, bias.data + n_);
}

void StreamedLinear::borrow_weights(ConstFloatView weight, ConstFloatView bias) {
  std::vector<float> b = checked_bias(weight, bias);
  locked([&] {
    packed_.reset();
    plain_ = weight.data;
    bias_values_ = std::move(b);
  });
}

void StreamedLinear::set_weights(ConstFloatView weight, ConstFloatView bias) {
  std::vector<float> b = checked_bias(weight, bias);
  const int64_t chunks = chunks_of(k_), all = panels();
  const int64_t panel_floats = chunks * kStreamedPanelRows * kStreamedChunk;
  AlignedArray<float> packed = packed_array(all * panel_floats);
  const float* w = weight.data;
  const int64_t n = n_, k = k_;
  // Packed by the team in equal contiguous shares, so each share's pages
  // are first touched by one of the threads that will stream them.
  ThreadsScope scope(threads_);
#pragma omp parallel num_threads(threads_)
  {
    int64_t begin, end;
    share(all, omp_get_thread_num(), omp_get_num_threads(), begin, end);
    for (int64_t p = begin; p < end; ++p)
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t i = 0; i < kStreamedPanelRows; ++i) {
          float* dst = packed.get() + p * panel_floats + (c * kStreamedPanelRows + i) * kStreamedChunk;
          const int64_t row = p * kStreamedPanelRows + i, col = c * kStreamedChunk;
          const int64_t cols = row < n ? std::min(kStreamedChunk, k - col) : 0;
          if (cols > 0)
            std::memcpy(dst, w + row * k + col, static_cast<size_t>(cols) * sizeof(float));
          std::fill(dst + cols, dst + kStreamedChunk, 0.0f);
        }
  }
  locked([&] {
    packed_ = std::move(packed);
    plain_ = nullptr;
    bias_values_ = std::move(b);
  });
}

void StreamedLinear::bind(ConstFloatView x, FloatView out) {
  if (!has_weights())
    throw std::invalid_argument(
        "StreamedLinear has no weights yet: call set_weights(weight, bias) first");
  require_shape("x", x.shape, x_shape_);
  require_shape("out", out.shape, out_shape_);
  require_no_partial_overlap("out", out, "x", x, false);
  x_ = x;
  y_ = out;
}

void StreamedLinear::run(ConstFloatView x, FloatView out) {
  run_with([&] { bind(x, out); });
}

std::vector<double> StreamedLinear::timeit(ConstFloatView x, FloatView out, int repeats,
                                           int warmup) {
  return timed_with([&] { bind(x, out); }, repeats, warmup);
}

void StreamedLinear::execute() {
  const StreamedKernel kernel = streamed_kernels().get();
  const StreamedArgs a{plain_ ? plain_ : packed_.get(),
                       bias_ ? bias_values_.data() : nullptr,
                       x_.data,
                       y_.data,
                       m_,
                       n_,
                       k_,
                       plain_ != nullptr};
  const int64_t all = panels();
  const int team = static_cast<int>(std::min<int64_t>(threads_, all));
  if (team == 1) {
    kernel(a, 0, all);
    return;
  }
  // Runs of panels taken in turn: a thread slowed by another process on its
  // core takes fewer, where equal shares would make the team wait for it.
  const int64_t runs = std::min<int64_t>(all, team * kRunsPerThread);
  std::atomic<int64_t> next{0};
  ThreadsScope scope(team);
#pragma omp parallel num_threads(team)
  for (int64_t r = next.fetch_add(1, std::memory_order_relaxed); r < runs;
       r = next.fetch_add(1, std::memory_order_relaxed))
    kernel(a, all * r / runs, all * (r + 1) / runs);
}

}  // namespace ppb
