#include "pyparbench/graph/node_runner.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/graph/conv_geometry.hpp"
#include "pyparbench/graph/direct_runner.hpp"
#include "pyparbench/graph/dynamic_quantized_nodes.hpp"
#include "pyparbench/graph/quantized_nodes.hpp"
#include "pyparbench/math/library.hpp"
#include "pyparbench/math/linear.hpp"
#include "pyparbench/math/streamed_linear.hpp"
#include "pyparbench/ops/attention.hpp"
#include "pyparbench/ops/binary.hpp"
#include "pyparbench/ops/concat.hpp"
#include "pyparbench/ops/decode_attention.hpp"
#include "pyparbench/ops/eltwise.hpp"
#include "pyparbench/ops/glu.hpp"
#include "pyparbench/ops/embedding_bag.hpp"
#include "pyparbench/ops/normalization.hpp"
#include "pyparbench/ops/pooling.hpp"
#include "pyparbench/ops/position_ids.hpp"
#include "pyparbench/ops/reorder.hpp"
#include "pyparbench/ops/rms_norm.hpp"
#include "pyparbench/ops/rotary.hpp"
#include "pyparbench/ops/softmax.hpp"
#include "pyparbench/ops/transpose.hpp"
#include "pyparbench/ops/tril_flatten.hpp"
#include "pyparbench/threading/pool.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace ppb {

namespace {

int64_t inner_size(const Shape& s) {
  int64_t n = 1;
  for (size_t i = 1; i < s.size(); ++i) n *= s[i];
  return n;
}

// Rows [r0, r1) of a tensor along its leading axis.
Tensor rows(const Tensor& t, int64_t r0, int64_t r1, size_t elem) {
  Tensor s{static_cast<char*>(t.data) + r0 * inner_size(t.shape) * static_cast<int64_t>(elem),
           t.shape};
  s.shape[0] = r1 - r0;
  return s;
}

// A prepared kernel and the call that runs it on fixed buffers. The
// closure owns copies of every shape its views point at.
struct Call {
  std::shared_ptr<void> kernel;  // owns the kernel (any op's type)
  std::function<void()> fn;
  std::string implementation;  // a convolution's or a bf16 node's (oneDNN's name)
  bool emulated = false;       // a bf16 kernel without bf16 dot products
};

template <class K>
Call make_call(std::unique_ptr<K> k, std::function<void(K&)> body) {
  K* raw = k.get();
  return {std::shared_ptr<void>(std::move(k)), [raw, body = std::move(body)] { body(*raw); }, {}};
}

// The call of a one-input kernel: k.run(x, y).
template <class K>
Call unary_call(std::unique_ptr<K> k, const Tensor& x, const Tensor& y) {
  return make_call<K>(std::move(k), [x, y](K& k) { k.run(x.input_view(), y.output_view()); });
}

const ParamArray& param(const NodeSpec& s, const char* name) {
  auto it = s.params.find(name);
  if (it == s.params.end() || !it->second.data)
    throw std::invalid_argument("node '" + s.name + "' (" + op_name(s.op) + ") has no '" +
                                name + "' parameter");
  return it->second;
}

const ParamArray* optional_param(const NodeSpec& s, const char* name) {
  auto it = s.params.find(name);
  return it == s.params.end() || !it->second.data ? nullptr : &it->second;
}

// The tensor as stored: 4-D data gets the shape of its layout.
Tensor stored(const Tensor& t, ActLayout layout) {
  return {t.data, stored_shape(t.shape, layout)};
}

// A bf16 buffer's view (a bf16 matrix node's activations).
ConstBf16View bf16_view(const Tensor& t) { return {static_cast<const uint16_t*>(t.data), t.shape}; }

// The call's implementation and emulation, from a prepared bf16 kernel.
template <class K>
Call with_bf16_info(Call call, const K& k) {
  call.implementation = k.implementation();
  call.emulated = k.emulated();
  return call;
}

// One kernel for the node on these (possibly sliced) tensors. `in_place`: a
// linear node's kernel reads the weights where they are when it gives the
// same results so (make_node_runner).
Call make_kernel_call(const NodeSpec& s, const std::vector<Tensor>& ins, const Tensor& out,
                      int threads, const ExecSettings& st, const std::vector<float>& ones,
                      bool in_place) {
  switch (s.op) {
    case OpKind::conv2d: {
      const ParamArray& w = param(s, "weight");
      Conv2dConfig c = conv_geometry(s, ins[0].shape, w.shape, out.shape[1]);
      const ParamArray* b = optional_param(s, "bias");
      c.bias = b != nullptr;
      c.relu = s.relu;
      c.activation = s.activation;
      c.layout = s.layout;
      c.plain_src = s.input_layout == ActLayout::nchw && s.layout != ActLayout::nchw;
      c.sum = ins.size() == 2;
      c.precision = s.precision;
      // A bf16 node writes bf16 itself (read only by bf16 matrix nodes).
      c.bf16_dst = s.bf16;
      const bool bf16 = s.precision == Precision::bf16, bf16_out = s.bf16;
      // The gathered-patches kernel is fp32 only: a bf16 conv is oneDNN's.
      auto k = make_conv2d(st.library, c, threads, s.im2col && !bf16);
      // bf16: the fp32 weights are converted here, once per prepared kernel.
      k->set_weights(w.view(), b ? b->view() : ConstFloatView{});
      const std::string impl = k->implementation();
      const bool emulated = k->emulated();
      const Tensor xs = stored(ins[0], s.input_layout), ys = stored(out, s.layout);
      // The sum post-op adds what the output holds: the residual, unless the
      // output already is the residual's buffer, is copied there first.
      const Tensor r = c.sum ? ins[1] : Tensor{};
      const size_t bytes = static_cast<size_t>(Dims(out.shape).elements()) * sizeof(float);
      Call call = make_call<Conv2dOp>(std::move(k), [xs, ys, r, bytes, bf16,
                                                      bf16_out](Conv2dOp& k) {
        if (r.data && r.data != ys.data) std::memcpy(ys.data, r.data, bytes);
        if (bf16_out)
          k.run_bf16(bf16_view(xs), Bf16View{static_cast<uint16_t*>(ys.data), ys.shape});
        else if (bf16)
          k.run_bf16(bf16_view(xs), ys.output_view());
        else
          k.run(xs.input_view(), ys.output_view());
      });
      call.implementation = impl;
      call.emulated = emulated;
      return call;
    }
    case OpKind::linear: {
      const ParamArray& w = param(s, "weight");
      const ParamArray* b = optional_param(s, "bias");
      const int64_t k_dim = ins[0].shape.back(), n = w.shape[0];
      const int64_t m = ins[0].shape.size() == 3 ? ins[0].shape[0] * ins[0].shape[1]
                                                 : ins[0].shape[0];
      const Tensor a{ins[0].data, {m, k_dim}}, y{out.data, {m, n}};
      if (st.library == MathLibrary::onednn && s.precision == Precision::fp32 &&
          m <= kStreamedMaxRows && fused_activation(s.relu, s.activation).empty()) {
        // A decode step's product: the weights streamed once from memory.
        auto k = std::make_unique<StreamedLinear>(m, n, k_dim, b != nullptr, threads);
        if (in_place)
          k->borrow_weights(w.view(), b ? b->view() : ConstFloatView{});
        else
          k->set_weights(w.view(), b ? b->view() : ConstFloatView{});
        Call call = unary_call(std::move(k), a, y);
        call.implementation = StreamedLinear::implementation();
        return call;
      }
      if (st.library == MathLibrary::onednn) {
        // Constant weights, packed once into the matmul's own layout (and
        // type: bf16 weights are converted here, once).
        auto k = std::make_unique<Linear>(
            LinearConfig{m, n, k_dim, b != nullptr, fused_activation(s.relu, s.activation),
                         s.precision, in_place},
            threads);
        k->set_weights(w.view(), b ? b->view() : ConstFloatView{});
        if (s.precision == Precision::fp32) return unary_call(std::move(k), a, y);
        const Linear& info = *k;
        return with_bf16_info(make_call<Linear>(std::move(k), [a, y](Linear& k) {
                                k.run_bf16(bf16_view(a), y.output_view());
                              }),
                              info);
      }
      require_fp32("linear", s.precision);
      GemmConfig g{0, m, n, k_dim, false, true, b != nullptr, s.relu, s.activation};
      auto k = make_gemm(st.library, g, threads);
      const ParamArray wp = w, bp = b ? *b : ParamArray{};
      return make_call<GemmOp>(std::move(k), [a, y, wp, bp](GemmOp& k) {
        k.run(a.input_view(), wp.view(), bp.view(), y.output_view());
      });
    }
    case OpKind::matmul: {
      const Shape &a = ins[0].shape, &b = ins[1].shape;
      const bool batched = a.size() == 3;
      const int64_t m = a[a.size() - 2], k_dim = a.back();
      const int64_t n = s.trans_b ? b[b.size() - 2] : b.back();
      GemmConfig g{batched ? a[0] : 0, m, n, k_dim, false, s.trans_b, false, false,
                   s.activation, s.precision};
      auto k = make_gemm(st.library, g, threads);
      if (s.precision == Precision::fp32)
        return make_call<GemmOp>(std::move(k), [x = ins[0], w = ins[1], y = out](GemmOp& k) {
          k.run(x.input_view(), w.input_view(), {}, y.output_view());
        });
      const GemmOp& info = *k;
      return with_bf16_info(
          make_call<GemmOp>(std::move(k), [x = ins[0], w = ins[1], y = out](GemmOp& k) {
            k.run_bf16(bf16_view(x), bf16_view(w), {}, y.output_view());
          }),
          info);
    }
    case OpKind::embedding_bag: {
      const ParamArray& t = param(s, "table");
      if (s.kind == "byte_rowwise") {
        // An 8-bit rowwise table (rows, dim + 8 bytes: values, fp32 scale
        // and bias), its bytes held in a float32 parameter (rows, (dim + 8) / 4)
        // as every parameter of the plan is.
        const Shape bytes{t.shape[0], t.shape[1] * 4};
        auto k = std::make_unique<EmbeddingBag>(
            bytes[0], bytes[1] - EmbeddingBag::kByteRowwiseExtra, parse_bag_mode(s.mode),
            threads);
        const auto* data = reinterpret_cast<const uint8_t*>(t.data);
        return make_call<EmbeddingBag>(
            std::move(k), [data, bytes, idx = ins[0], y = out](EmbeddingBag& k) {
              IndexView iv{idx.data, idx.shape, true};
              k.run_byte_rowwise(View<const uint8_t>{data, bytes}, iv, {}, {}, y.output_view());
            });
      }
      auto k = std::make_unique<EmbeddingBag>(t.shape[0], t.shape[1], parse_bag_mode(s.mode),
                                              threads);
      const ParamArray tp = t;
      return make_call<EmbeddingBag>(std::move(k), [tp, idx = ins[0], y = out](EmbeddingBag& k) {
        IndexView iv{idx.data, idx.shape, true};
        k.run(tp.view(), iv, {}, {}, y.output_view());
      });
    }
    case OpKind::eltwise:
      return unary_call(std::make_unique<Eltwise>(s.kind, out.shape, threads), ins[0], out);
    case OpKind::add:
    case OpKind::mul: {
      // Both inputs stored in the node's layout: broadcast over the stored
      // shapes (a squeeze-excite gate (N, C, 1, 1) channels-last is (N, 1, 1, C)).
      const ActLayout l = ins[0].shape.size() == 4 ? s.layout : ActLayout::nchw;
      const Tensor a = stored(ins[0], l), b = stored(ins[1], l);
      auto k = std::make_unique<Binary>(op_name(s.op), a.shape, b.shape, s.relu, threads);
      return make_call<Binary>(std::move(k), [a, b, y = stored(out, l)](Binary& k) {
        k.run(a.input_view(), b.input_view(), y.output_view());
      });
    }
    case OpKind::concat: {
      // Channels-last: the channel axis (1) is stored last. Blocked data
      // whose inputs fill whole blocks joins along its axis 1 (C / b) and
      // keeps the others (H, W at 2, 3). A batch (axis 0) joins whole rows,
      // the same bytes in every layout.
      const ActLayout l = out.shape.size() == 4 && s.axis != 0 ? s.layout : ActLayout::nchw;
      const int axis = l == ActLayout::nhwc ? (s.axis == 1 ? 3 : s.axis == 0 ? 0 : s.axis - 1)
                                             : s.axis;
      std::vector<Tensor> xs;
      std::vector<Shape> shapes;
      for (const auto& t : ins) {
        xs.push_back(stored(t, l));
        shapes.push_back(xs.back().shape);
      }
      auto k = std::make_unique<Concat>(shapes, axis, threads);
      return make_call<Concat>(std::move(k), [xs, y = stored(out, l)](Concat& k) {
        std::vector<ConstFloatView> views;
        views.reserve(xs.size());
        for (const auto& t : xs) views.push_back(t.input_view());
        k.run(views, y.output_view());
      });
    }
    case OpKind::pool2d: {
      if (s.int8) {  // a max pool of grid bytes (graph/passes/int8_values.py)
        QuantizedNodeCall q = make_int8_max_pool_call(s, ins, out, threads);
        return {std::move(q.state), std::move(q.fn), std::move(q.implementation)};
      }
      Pool2dConfig c{s.kind,         s.kernel[0],  s.kernel[1],  s.stride[0],
                     s.stride[1],    s.padding[0], s.padding[1], s.padding[2],
                     s.padding[3],   s.ceil_mode,  s.count_include_pad};
      return unary_call(std::make_unique<Pool2d>(c, ins[0].shape, threads, s.layout),
                        stored(ins[0], s.layout), stored(out, s.layout));
    }
    case OpKind::global_avg_pool:
      return unary_call(std::make_unique<GlobalAvgPool>(ins[0].shape, threads, s.layout),
                        stored(ins[0], s.layout), out);
    case OpKind::batch_norm: {
      // The kernel takes (N, C) or (N, C, H, W): other ranks fold into H.
      Shape s4 = ins[0].shape;
      if (s4.size() != 2 && s4.size() != 4) s4 = {s4[0], s4[1], inner_size(s4) / s4[1], 1};
      const ActLayout l = ins[0].shape.size() == 4 ? s.layout : ActLayout::nchw;
      auto k = std::make_unique<BatchNorm>(s4, s.eps, threads, l);
      const ParamArray mean = param(s, "mean"), var = param(s, "var"), shift = param(s, "shift");
      const ParamArray* sc = optional_param(s, "scale");
      const ParamArray scale = sc ? *sc : ParamArray{ones.data(), {s4[1]}};
      s4 = stored_shape(s4, l);
      const Tensor x{ins[0].data, s4}, y{out.data, s4};
      return make_call<BatchNorm>(std::move(k), [=](BatchNorm& k) {
        k.run(x.input_view(), mean.view(), var.view(), scale.view(), shift.view(),
              y.output_view());
      });
    }
    case OpKind::layer_norm: {
      auto k = std::make_unique<LayerNorm>(ins[0].shape, s.eps, threads);
      const ParamArray scale = param(s, "scale"), shift = param(s, "shift");
      return make_call<LayerNorm>(std::move(k), [=, x = ins[0], y = out](LayerNorm& k) {
        k.run(x.input_view(), scale.view(), shift.view(), y.output_view());
      });
    }
    case OpKind::softmax:
      return unary_call(std::make_unique<Softmax>(ins[0].shape, s.axis, threads), ins[0], out);
    case OpKind::transpose:
      return unary_call(std::make_unique<Transpose>(ins[0].shape, s.perm, threads), ins[0], out);
    case OpKind::reorder: {
      const Shape& l = ins[0].shape;
      // A conversion to bf16 keeps any rank; a change of layout is 4-D.
      if (l.size() != 4 && !(s.bf16 && s.layout == ActLayout::nchw &&
                             s.input_layout == ActLayout::nchw))
        throw std::invalid_argument("reorder node '" + s.name + "' needs a 4-D input");
      const ActLayout from = s.input_layout, to = s.layout;
      if (from == to && !s.bf16)
        throw std::invalid_argument("reorder node '" + s.name + "' has the same layout (" +
                                    act_layout_name(to) + ") on both sides");
      if (!s.bf16)
        return unary_call(std::make_unique<Reorder>(l, from, to, threads), stored(ins[0], from),
                          stored(out, to));
      auto k = std::make_unique<Reorder>(l, from, to, threads, Precision::bf16);
      return make_call<Reorder>(std::move(k), [x = stored(ins[0], from),
                                               y = stored(out, to)](Reorder& k) {
        k.run_to_bf16(x.input_view(), {static_cast<uint16_t*>(y.data), y.shape});
      });
    }
    case OpKind::tril_flatten:
      return unary_call(std::make_unique<TrilFlatten>(ins[0].shape, threads), ins[0], out);
    case OpKind::rms_norm: {
      auto k = std::make_unique<RmsNorm>(ins[0].shape, s.eps, threads);
      const ParamArray scale = param(s, "scale");
      return make_call<RmsNorm>(std::move(k), [=, x = ins[0], y = out](RmsNorm& k) {
        k.run(x.input_view(), scale.view(), y.output_view());
      });
    }
    case OpKind::rotary: {
      auto k = std::make_unique<Rotary>(ins[0].shape, threads);
      if (s.positions_input >= 0 && s.params.count("cos")) {
        // The rows of tables (C, D) at the rows' positions.
        const ParamArray c = param(s, "cos"), sn = param(s, "sin");
        if (ins[s.positions_input].shape !=
            Shape{ins[0].shape[0], ins[0].shape[ins[0].shape.size() - 2]})
          throw std::invalid_argument("rotary node '" + s.name + "' needs (B, S) positions "
                                      "for its input " + shape_str(ins[0].shape));
        return make_call<Rotary>(std::move(k), [=, x = ins[0], p = ins[s.positions_input],
                                                y = out](Rotary& k) {
          k.run_indexed(x.input_view(), static_cast<const int64_t*>(p.data), c.view(), sn.view(),
                        y.output_view());
        });
      }
      if (s.positions_input >= 0) {
        // Tables computed from the rows' positions as the node runs.
        const ParamArray f = param(s, "inv_freq"), scaling = param(s, "scaling");
        const Shape want{ins[0].shape.back() / 2};
        if (f.shape != want || Dims(scaling.shape).elements() != 1 ||
            ins[s.positions_input].shape !=
                Shape{ins[0].shape[0], ins[0].shape[ins[0].shape.size() - 2]})
          throw std::invalid_argument("rotary node '" + s.name + "' needs inv_freq (D / 2), "
                                      "one scaling and (B, S) positions for its input " +
                                      shape_str(ins[0].shape));
        const float factor = scaling.data[0];
        return make_call<Rotary>(std::move(k), [=, x = ins[0], p = ins[s.positions_input],
                                                y = out](Rotary& k) {
          k.run_positions(x.input_view(), static_cast<const int64_t*>(p.data), f.view(), factor,
                          y.output_view());
        });
      }
      const ParamArray c = param(s, "cos"), sn = param(s, "sin");
      if (s.length_input >= 0) {
        // Tables of the cache's context: the rows of positions length ..
        // length + S - 1, the length read when the node runs.
        const int64_t seq = ins[0].shape[ins[0].shape.size() - 2];
        const int64_t width = c.shape.size() == 2 ? c.shape[1] : 0;
        if (c.shape.size() != 2 || sn.shape != c.shape || c.shape[0] < seq)
          throw std::invalid_argument("rotary node '" + s.name + "' needs cos / sin tables of "
                                      "the context (C, D), C >= its " + std::to_string(seq) +
                                      " rows");
        const int64_t context = c.shape[0];
        const auto* length = static_cast<const int64_t*>(ins[s.length_input].data);
        const std::string name = s.name;
        return make_call<Rotary>(std::move(k), [=, x = ins[0], y = out](Rotary& k) {
          const int64_t at = *length;
          if (at < 0 || at + seq > context)
            throw std::invalid_argument("rotary node '" + name + "': length " +
                                        std::to_string(at) + " plus " + std::to_string(seq) +
                                        " rows is past the context of " +
                                        std::to_string(context));
          const Shape rows{seq, width};
          k.run(x.input_view(), {c.data + at * width, rows}, {sn.data + at * width, rows},
                y.output_view());
        });
      }
      return make_call<Rotary>(std::move(k), [=, x = ins[0], y = out](Rotary& k) {
        k.run(x.input_view(), c.view(), sn.view(), y.output_view());
      });
    }
    case OpKind::attention: {
      const bool masked = ins.size() > 3;
      auto k = std::make_unique<Attention>(ins[0].shape, ins[1].shape, ins[2].shape,
                                           masked ? ins[3].shape : Shape{}, s.causal, s.scale,
                                           s.causal_fill, threads);
      const Tensor mask = masked ? ins[3] : Tensor{};
      return make_call<Attention>(std::move(k), [=, q = ins[0], kk = ins[1], v = ins[2],
                                                 y = out](Attention& k) {
        k.run(q.input_view(), kk.input_view(), v.input_view(),
              masked ? mask.input_view() : ConstFloatView{}, y.output_view());
      });
    }
    case OpKind::decode_attention: {
      if (s.length_input >= 0) {
        // q, new k, new v and the cache's keys / values (B, Hkv, C, D),
        // written at the length its int64 input holds when the node runs.
        auto k = std::make_unique<DecodeAttention>(ins[0].shape, ins[1].shape, ins[2].shape,
                                                   ins[3].shape, Shape{}, true, s.scale,
                                                   s.causal_fill, threads);
        const auto* length = static_cast<const int64_t*>(ins[s.length_input].data);
        return make_call<DecodeAttention>(
            std::move(k), [=, q = ins[0], kn = ins[1], vn = ins[2], ck = ins[3], cv = ins[4],
                           y = out](DecodeAttention& k) {
              k.run_in_place(q.input_view(), kn.input_view(), vn.input_view(), ck.output_view(),
                             cv.output_view(), *length, ConstFloatView{}, y.output_view());
            });
      }
      // q, new k, new v, past k, past v and an optional mask.
      const bool masked = ins.size() > 5;
      auto k = std::make_unique<DecodeAttention>(
          ins[0].shape, ins[1].shape, ins[2].shape, ins[3].shape,
          masked ? ins[5].shape : Shape{}, false, s.scale, s.causal_fill, threads);
      const Tensor mask = masked ? ins[5] : Tensor{};
      return make_call<DecodeAttention>(
          std::move(k), [=, q = ins[0], kn = ins[1], vn = ins[2], pk = ins[3], pv = ins[4],
                         y = out](DecodeAttention& k) {
            k.run(q.input_view(), kn.input_view(), vn.input_view(), pk.input_view(),
                  pv.input_view(), masked ? mask.input_view() : ConstFloatView{},
                  y.output_view());
          });
    }
    case OpKind::glu: {
      auto k = std::make_unique<Glu>(s.kind, out.shape, threads);
      return make_call<Glu>(std::move(k), [g = ins[0], u = ins[1], y = out](Glu& k) {
        k.run(g.input_view(), u.input_view(), y.output_view());
      });
    }
    case OpKind::position_ids: {
      if (!s.int64) throw std::invalid_argument("position_ids node '" + s.name + "' must be int64");
      auto k = std::make_unique<PositionIds>(ins[0].shape, s.pad_id, s.offset, threads);
      return make_call<PositionIds>(std::move(k), [x = ins[0], y = out](PositionIds& k) {
        k.run(static_cast<const int64_t*>(x.data), static_cast<int64_t*>(y.data));
      });
    }
    case OpKind::quantized_linear:
    case OpKind::quantized_conv2d:
    case OpKind::fake_quantize: {
      QuantizedNodeCall q = make_quantized_node_call(s, ins, out, threads);
      return {std::move(q.state), std::move(q.fn), std::move(q.implementation)};
    }
    case OpKind::dynamic_quantized_linear:
    case OpKind::dynamic_quantized_conv2d: {
      QuantizedNodeCall q = make_dynamic_quantized_call(s, ins, out, threads);
      return {std::move(q.state), std::move(q.fn), std::move(q.implementation)};
    }
    case OpKind::input:
    case OpKind::reshape:
    case OpKind::slice:
      break;
  }
  throw std::invalid_argument("node '" + s.name + "' (" + op_name(s.op) + ") has no kernel");
}

// Which inputs are cut along with the output's leading axis in framework
// mode; false for an op that cannot be cut there.
bool split_inputs(const NodeSpec& s, const std::vector<Tensor>& ins, std::vector<bool>& cut) {
  cut.assign(ins.size(), true);
  switch (s.op) {
    case OpKind::softmax:
    case OpKind::concat:
      return s.axis != 0;
    case OpKind::transpose:
      return !s.perm.empty() && s.perm[0] == 0;
    case OpKind::position_ids:
      return false;  // int64 rows: one block
    case OpKind::dynamic_quantized_linear:
    case OpKind::dynamic_quantized_conv2d:
      return false;  // the grid is the whole input's range: one block
    case OpKind::attention:
      // q, k, v by batch rows; a mask whose batch axis broadcasts is whole.
      if (ins.size() > 3) cut[3] = ins[3].shape[0] == ins[0].shape[0];
      return true;
    case OpKind::decode_attention:
      // A cache's length is one value for every block.
      if (ins.size() > 5) cut[5] = s.length_input < 0 && ins[5].shape[0] == ins[0].shape[0];
      return true;
    case OpKind::rotary:
      // Rows of the table follow the sequence axis: only a leading axis
      // before it is cut (a cache's length whole, positions by batch rows).
      if (ins.size() > 1) cut[1] = s.positions_input == 1;
      return ins[0].shape.size() > 2;
    case OpKind::matmul:
      cut[1] = ins[0].shape.size() == 3;  // 2-D: b is the same for every row block
      return true;
    case OpKind::add:
    case OpKind::mul:
      cut[1] = ins[1].shape[0] == ins[0].shape[0] && ins[0].shape[0] > 1;
      return true;
    default:
      return true;
  }
}

// Channels [c0, c1) of a batch-1 tensor (N, C, ...) of `elem`-byte
// elements: contiguous.
Tensor channels(const Tensor& t, int64_t c0, int64_t c1, size_t elem = sizeof(float)) {
  const int64_t inner = inner_size(t.shape) / t.shape[1];
  Tensor s{static_cast<char*>(t.data) + c0 * inner * static_cast<int64_t>(elem), t.shape};
  s.shape[1] = c1 - c0;
  return s;
}

// Rows [r0, r1) of a parameter array along its first axis.
ParamArray param_rows(const ParamArray& p, int64_t r0, int64_t r1) {
  int64_t inner = 1;
  for (size_t i = 1; i < p.shape.size(); ++i) inner *= p.shape[i];
  ParamArray s{p.data + r0 * inner, p.shape};
  s.shape[0] = r1 - r0;
  return s;
}

// Framework mode when the batch is too short to cut: a batch-1 conv is cut
// along its output channels (whole groups when grouped), a one-row linear
// along its output features, and the batch-1 channel-wise glue ops (eltwise,
// batch norm, pooling, same-shape add / mul) along their channels, as
// frameworks shard such ops; a (1, S, F) row op (linear, layer norm,
// softmax) is cut along S. Empty when the node is none of those.
std::vector<Call> feature_blocks(const NodeSpec& s, const std::vector<Tensor>& ins,
                                 const Tensor& out, const ExecSettings& st,
                                 const std::vector<float>& ones, bool in_place) {
  std::vector<Call> calls;
  if (out.shape.size() < 2 || out.shape[0] != 1) return calls;
  // Channels of channels-last or blocked data are not one run, and a fused residual
  // would need its channels cut too: such nodes stay whole.
  if (s.layout != ActLayout::nchw || s.op == OpKind::reorder ||
      (s.op == OpKind::conv2d && ins.size() == 2))
    return calls;
  const OpKind op = s.op;
  const bool conv = op == OpKind::conv2d;
  const bool linear = op == OpKind::linear && inner_size(out.shape) == out.shape.back();
  const bool channelwise =
      op == OpKind::eltwise || op == OpKind::batch_norm || op == OpKind::pool2d ||
      op == OpKind::global_avg_pool ||
      ((op == OpKind::add || op == OpKind::mul) && ins[1].shape == ins[0].shape);
  // (1, S, F) row ops (a Transformer's at batch 1): cut along S, whole
  // parameters for every block.
  const bool rowwise = out.shape.size() >= 3 && !channelwise &&
                       ((op == OpKind::linear && !linear) || op == OpKind::layer_norm ||
                        (op == OpKind::softmax && s.axis != 1));
  if (!conv && !linear && !channelwise && !rowwise) return calls;
  const int64_t features = linear && !rowwise ? out.shape.back() : out.shape[1];
  const int64_t per_unit = conv && s.groups > 1 ? features / s.groups : 1;
  const int64_t units = features / per_unit;
  const int64_t blocks = std::min<int64_t>(st.intra_op, units);
  if (blocks < 2) return calls;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t u0 = units * b / blocks, u1 = units * (b + 1) / blocks;
    const int64_t f0 = u0 * per_unit, f1 = u1 * per_unit;
    NodeSpec part = s;
    std::vector<Tensor> bins = ins;
    Tensor bout;
    if (channelwise || rowwise) {
      // Per-channel parameters (batch norm's) follow the channels.
      if (channelwise)
        for (auto& [name, p] : part.params) p = param_rows(p, f0, f1);
      for (size_t i = 0; i < bins.size(); ++i)
        bins[i] = channels(bins[i], f0, f1, reads_bf16(s, i) ? sizeof(uint16_t) : sizeof(float));
      bout = channels(out, f0, f1);
    } else {
      part.params["weight"] = param_rows(param(s, "weight"), f0, f1);
      if (const ParamArray* bias = optional_param(s, "bias"))
        part.params["bias"] = param_rows(*bias, f0, f1);
      if (conv) {
        if (s.groups > 1) {
          const int64_t in_per_group = ins[0].shape[1] / s.groups;
          bins[0] = channels(ins[0], u0 * in_per_group, u1 * in_per_group,
                             reads_bf16(s, 0) ? sizeof(uint16_t) : sizeof(float));
          part.groups = u1 - u0;
        }
        bout = channels(out, f0, f1, element_bytes(s));
      } else {
        bout = Tensor{static_cast<float*>(out.data) + f0, out.shape};
        bout.shape.back() = f1 - f0;
      }
    }
    part.shape = bout.shape;
    calls.push_back(make_kernel_call(part, bins, bout, 1, st, ones, in_place));
  }
  return calls;
}

class LibraryRunner : public NodeRunner {
 public:
  explicit LibraryRunner(Call c) : call_(std::move(c)) {}
  void run(ThreadPool*) override { call_.fn(); }
  int blocks() const override { return 1; }
  std::string implementation() const override { return call_.implementation; }
  bool emulated() const override { return call_.emulated; }

 private:
  Call call_;
};

class SplitRunner : public NodeRunner {
 public:
  explicit SplitRunner(std::vector<Call> blocks) : blocks_(std::move(blocks)) {}
  void run(ThreadPool* pool) override {
    if (blocks_.size() == 1 || !pool) {
      for (auto& b : blocks_) b.fn();
      return;
    }
    pool->parallel_for(static_cast<int64_t>(blocks_.size()),
                       [this](int64_t i) { blocks_[static_cast<size_t>(i)].fn(); });
  }
  int blocks() const override { return static_cast<int>(blocks_.size()); }
  std::string implementation() const override {
    return blocks_.empty() ? std::string() : blocks_.front().implementation;
  }
  bool emulated() const override { return !blocks_.empty() && blocks_.front().emulated; }

 private:
  std::vector<Call> blocks_;
};

}  // namespace

std::vector<double> NodeRunner::time_alone(int repeats, int warmup, int inner) {
  for (int i = 0; i < warmup * inner; ++i) run(nullptr);
  std::vector<double> ns(static_cast<size_t>(repeats));
  for (auto& v : ns) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) run(nullptr);
    v = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
        inner;
  }
  return ns;
}

std::unique_ptr<NodeRunner> make_node_runner(const NodeSpec& spec, const std::vector<Tensor>& ins,
                                             const Tensor& out, const ExecSettings& settings,
                                             const std::vector<float>& ones, int threads,
                                             bool direct, bool weights_in_place) {
  if (is_alias(spec.op)) return nullptr;
  if (threads == 1 || settings.op_mode == OperatorMode::library) {
    // The library kernel first, also when a direct one runs the node: its
    // constructor checks the node (shapes, axis, eps, window).
    Call call = make_kernel_call(spec, ins, out, threads, settings, ones, weights_in_place);
    if (threads == 1 && direct)
      if (auto d = make_direct_runner(spec, ins, out)) return d;
    return std::make_unique<LibraryRunner>(std::move(call));
  }

  // Framework mode: intra_op blocks of the leading axis (fewer when it is
  // shorter), each single-threaded.
  std::vector<Call> by_feature =
      feature_blocks(spec, ins, out, settings, ones, weights_in_place);
  if (!by_feature.empty()) return std::make_unique<SplitRunner>(std::move(by_feature));
  std::vector<bool> cut;
  const int64_t lead = out.shape.empty() ? 1 : out.shape[0];
  const bool splittable = split_inputs(spec, ins, cut);
  const int64_t blocks = splittable ? std::min<int64_t>(settings.intra_op, lead) : 1;
  std::vector<Call> calls;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = lead * b / blocks, r1 = lead * (b + 1) / blocks;
    std::vector<Tensor> bins;
    for (size_t i = 0; i < ins.size(); ++i) {
      const bool int64 = spec.op == OpKind::embedding_bag ||
                         static_cast<int>(i) == spec.positions_input;
      const size_t elem = int64                            ? sizeof(int64_t)
                          : reads_bf16(spec, i)            ? sizeof(uint16_t)
                                                           : sizeof(float);
      bins.push_back(blocks > 1 && cut[i] ? rows(ins[i], r0, r1, elem) : ins[i]);
    }
    const Tensor bout = blocks > 1 ? rows(out, r0, r1, element_bytes(spec)) : out;
    calls.push_back(make_kernel_call(spec, bins, bout, 1, settings, ones, weights_in_place));
  }
  return std::make_unique<SplitRunner>(std::move(calls));
}

}  // namespace ppb
