#include "pyparbench/graph/direct_runner.hpp"

#include "pyparbench/ops/activation_layout.hpp"
#include "pyparbench/ops/direct_kernels.hpp"
#include "pyparbench/ops/pool_nhwc.hpp"

#include <chrono>
#include <string>
#include <utility>

namespace ppb {

namespace {

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

// One direct call, `F` holding the kernel and its bound arguments.
template <class F>
class DirectRunner : public NodeRunner {
 public:
  DirectRunner(F f, const char* isa) : f_(std::move(f)), name_(std::string("direct:") + isa) {}
  void run(ThreadPool*) override { f_(); }
  int blocks() const override { return 1; }
  std::string implementation() const override { return name_; }
  std::vector<double> time_alone(int repeats, int warmup, int inner) override {
    for (int i = 0; i < warmup * inner; ++i) f_();
    std::vector<double> ns(static_cast<size_t>(repeats));
    for (auto& v : ns) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < inner; ++i) f_();
      v = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
              .count() / inner;
    }
    return ns;
  }

 private:
  F f_;
  std::string name_;
};

template <class F>
std::unique_ptr<NodeRunner> direct(F f, const char* isa) {
  return std::make_unique<DirectRunner<F>>(std::move(f), isa);
}

// a (op) b with b broadcast, as BinaryArgs: a's size-1 axes dropped, then
// neighbouring axes where b is alike (whole, or broadcast) merged. False
// when more than 8 axes remain.
bool binary_args(const Shape& a, const Shape& b, BinaryArgs& p) {
  std::vector<int64_t> dims;
  std::vector<bool> whole;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 1) continue;
    const bool w = b[i] == a[i];
    if (!dims.empty() && whole.back() == w) {
      dims.back() *= a[i];
    } else {
      dims.push_back(a[i]);
      whole.push_back(w);
    }
  }
  if (dims.empty()) {  // one element
    dims.push_back(1);
    whole.push_back(true);
  }
  if (dims.size() > 8) return false;
  p.rank = static_cast<int>(dims.size());
  int64_t stride = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    p.dims[i] = dims[static_cast<size_t>(i)];
    p.b_strides[i] = whole[static_cast<size_t>(i)] ? stride : 0;
    if (whole[static_cast<size_t>(i)]) stride *= p.dims[i];
  }
  p.b_inner = whole.back();
  return true;
}

const ParamArray* find_param(const NodeSpec& s, const char* name) {
  auto it = s.params.find(name);
  return it == s.params.end() || !it->second.data ? nullptr : &it->second;
}

}  // namespace

std::unique_ptr<NodeRunner> make_direct_runner(const NodeSpec& s, const std::vector<Tensor>& ins,
                                               const Tensor& out) {
  if (s.int8) return nullptr;  // grid bytes (a max pool of them): float32 kernels only here
  const DirectKernels& k = direct_kernels();
  float* y = static_cast<float*>(out.data);
  switch (s.op) {
    case OpKind::eltwise: {
      // Element by element: the same in every layout.
      const auto fn = k.eltwise[static_cast<int>(parse_direct_eltwise(s.kind))];
      const float* x = static_cast<const float*>(ins[0].data);
      const int64_t n = product(out.shape, 0, out.shape.size());
      return direct([fn, x, y, n] { fn(x, y, n); }, k.isa);
    }
    case OpKind::add:
    case OpKind::mul: {
      // Both inputs are stored in the node's layout, so broadcasting runs
      // over the stored shapes (a squeeze-excite gate (N, C, 1, 1) stored
      // channels-last is (N, 1, 1, C)).
      const ActLayout l = ins[0].shape.size() == 4 ? s.layout : ActLayout::nchw;
      const Shape a = stored_shape(ins[0].shape, l), b = stored_shape(ins[1].shape, l);
      BinaryArgs p{};
      if (!binary_args(a, b, p)) return nullptr;
      p.a = static_cast<const float*>(ins[0].data);
      p.b = static_cast<const float*>(ins[1].data);
      p.y = y;
      const auto fn = k.binary[s.op == OpKind::mul][s.relu];
      return direct([fn, p] { fn(p); }, k.isa);
    }
    case OpKind::softmax: {
      const Shape& x = ins[0].shape;
      const int rank = static_cast<int>(x.size());
      const int axis = s.axis < 0 ? s.axis + rank : s.axis;
      const size_t ax = static_cast<size_t>(axis);
      const SoftmaxArgs p{static_cast<const float*>(ins[0].data), y, product(x, 0, ax), x[ax],
                          product(x, ax + 1, x.size())};
      const auto fn = k.softmax;
      return direct([fn, p] { fn(p); }, k.isa);
    }
    case OpKind::layer_norm: {
      const ParamArray *scale = find_param(s, "scale"), *shift = find_param(s, "shift");
      if (!scale || !shift) return nullptr;
      const Shape& x = ins[0].shape;
      const LayerNormArgs p{static_cast<const float*>(ins[0].data), scale->data, shift->data, y,
                            product(x, 0, x.size() - 1), x.back(), s.eps};
      const auto fn = k.layer_norm;
      return direct([fn, p] { fn(p); }, k.isa);
    }
    case OpKind::global_avg_pool: {
      const Shape& x = ins[0].shape;  // logical NCHW
      if (x.size() != 4) return nullptr;
      const int64_t b = channel_block(s.layout);
      MeanPoolArgs p{static_cast<const float*>(ins[0].data), y, x[0] * x[1], x[2] * x[3], 1};
      if (s.layout == ActLayout::nhwc) {
        p.images = x[0];
        p.lanes = x[1];
      } else if (b > 1) {
        p.images = x[0] * x[1] / b;
        p.lanes = b;
      }
      const auto fn = k.mean_pool;
      return direct([fn, p] { fn(p); }, k.isa);
    }
    case OpKind::pool2d: {
      const Shape& x = ins[0].shape;  // logical NCHW
      const Shape& o = out.shape;
      if (x.size() != 4 || o.size() != 4) return nullptr;
      Pool2dConfig c{s.kind,         s.kernel[0],  s.kernel[1],  s.stride[0],
                     s.stride[1],    s.padding[0], s.padding[1], s.padding[2],
                     s.padding[3],   s.ceil_mode,  s.count_include_pad};
      // Plain data is N * C single-channel images; blocked, N * C / b images
      // of b channels.
      const int64_t b = channel_block(s.layout);
      const PoolNhwcShape shape =
          s.layout == ActLayout::nhwc ? PoolNhwcShape{x[0], x[2], x[3], x[1], o[2], o[3]}
          : b > 1 ? PoolNhwcShape{x[0] * x[1] / b, x[2], x[3], b, o[2], o[3]}
                  : PoolNhwcShape{x[0] * x[1], x[2], x[3], 1, o[2], o[3]};
      const float* xp = static_cast<const float*>(ins[0].data);
      std::vector<float> cols(static_cast<size_t>(shape.w * shape.c));
      return direct(
          [c, shape, xp, y, cols]() mutable { pool_nhwc_serial(c, shape, xp, y, cols.data()); },
          "pool_nhwc");
    }
    default:
      return nullptr;
  }
}

}  // namespace ppb
