// The kernels of a decoder: RMS normalisation, rotary positions, attention,
// gated linear units, and a step's attention of the new tokens against a
// key / value cache (a past read where it is, a present written once, or a
// cache filled in place).
#include "bindings/pybind.hpp"
#include "pyparbench/core/checks.hpp"
#include "pyparbench/ops/attention.hpp"
#include "pyparbench/ops/decode_attention.hpp"
#include "pyparbench/ops/decode_attention_kernel.hpp"
#include "pyparbench/ops/glu.hpp"
#include "pyparbench/ops/position_ids.hpp"
#include "pyparbench/ops/rms_norm.hpp"
#include "pyparbench/ops/rotary.hpp"

#include <limits>
#include <string>

namespace ppb::bind {

namespace {

Shape to_shape(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

// An int64 C-contiguous array of `shape` (TypeError for another dtype or
// layout, ValueError naming a wrong shape or a read-only output).
int64_t* int64_data(py::handle obj, const char* name, const Shape& shape, bool writable) {
  if (obj.is_none()) throw py::type_error(std::string(name) + " must be an int64 numpy array");
  IndexView v = index_view(obj, name);
  if (!v.is64)
    throw py::type_error(std::string(name) +
                         " must be int64, got int32; convert with np.asarray(x, dtype=np.int64)");
  if (writable && !py::reinterpret_borrow<py::array>(obj).writeable())
    throw py::value_error(std::string(name) + " is read-only");
  require_shape(name, v.shape, shape);
  return static_cast<int64_t*>(const_cast<void*>(v.data));
}

py::object int64_output(const Shape& shape, py::object out) {
  if (!out.is_none()) return out;
  return py::array_t<int64_t>(std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

}  // namespace

void register_decoder_ops(py::module_& m) {
  py::class_<RmsNorm, Kernel>(m, "RmsNorm",
                              "RMS normalisation over the last axis, then scale "
                              "(last axis,): x / sqrt(mean(x^2) + eps) * scale. out may be x.")
      .def(py::init([](const std::vector<int64_t>& shape, float eps, std::optional<int> threads) {
             return new RmsNorm(to_shape(shape), eps, threads);
           }),
           py::arg("shape"), py::kw_only(), py::arg("eps") = 1e-6f,
           py::arg("threads") = py::none())
      .def_property_readonly("output_shape",
                             [](const RmsNorm& k) { return shape_tuple(k.shape()); })
      .def("run",
           [](RmsNorm& k, py::handle x, py::handle scale, py::object out) {
             auto xv = in_view(x, "x"), sv = in_view(scale, "scale");
             return run_released(k.shape(), out, [&](FloatView o) { k.run(xv, sv, o); });
           },
           py::arg("x"), py::arg("scale"), py::arg("out") = py::none())
      .def("timeit",
           [](RmsNorm& k, py::handle x, py::handle scale, py::object out, int repeats,
              int warmup) {
             auto xv = in_view(x, "x"), sv = in_view(scale, "scale");
             return time_released(k.shape(), out, [&](FloatView o) {
               return k.timeit(xv, sv, o, repeats, warmup);
             });
           },
           py::arg("x"), py::arg("scale"), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);

  py::class_<Rotary, Kernel>(m, "Rotary",
                             "Rotate-half rotary positions of x (..., S, D), D even, with "
                             "tables cos, sin (S, D): x * cos + rotate_half(x) * sin. out must "
                             "not be x.")
      .def(py::init([](const std::vector<int64_t>& shape, std::optional<int> threads) {
             return new Rotary(to_shape(shape), threads);
           }),
           py::arg("shape"), py::kw_only(), py::arg("threads") = py::none())
      .def_property_readonly("output_shape", [](const Rotary& k) { return shape_tuple(k.shape()); })
      .def("run",
           [](Rotary& k, py::handle x, py::handle cos, py::handle sin, py::object out) {
             auto xv = in_view(x, "x"), cv = in_view(cos, "cos"), sv = in_view(sin, "sin");
             return run_released(k.shape(), out, [&](FloatView o) { k.run(xv, cv, sv, o); });
           },
           py::arg("x"), py::arg("cos"), py::arg("sin"), py::arg("out") = py::none())
      .def("timeit",
           [](Rotary& k, py::handle x, py::handle cos, py::handle sin, py::object out,
              int repeats, int warmup) {
             auto xv = in_view(x, "x"), cv = in_view(cos, "cos"), sv = in_view(sin, "sin");
             return time_released(k.shape(), out, [&](FloatView o) {
               return k.timeit(xv, cv, sv, o, repeats, warmup);
             });
           },
           py::arg("x"), py::arg("cos"), py::arg("sin"), py::arg("out") = py::none(),
           py::kw_only(), py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);

  py::class_<Attention, Kernel>(
      m, "Attention",
      "Scaled dot-product attention softmax(scale * q k^T + mask) v of q (B, H, Sq, D), "
      "k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv), H a multiple of Hkv (grouped-query heads "
      "shared). The mask (optional, additive) broadcasts into (B, H, Sq, Sk); causal: query "
      "i sees keys j <= i + Sk - Sq, a hidden key scoring causal_fill.")
      .def(py::init([](const std::vector<int64_t>& q, const std::vector<int64_t>& k,
                       const std::vector<int64_t>& v, std::optional<std::vector<int64_t>> mask,
                       bool causal, float scale, float causal_fill, std::optional<int> threads) {
             return new Attention(to_shape(q), to_shape(k), to_shape(v),
                                  mask ? to_shape(*mask) : Shape{}, causal, scale, causal_fill,
                                  threads);
           }),
           py::arg("q_shape"), py::arg("k_shape"), py::arg("v_shape"), py::kw_only(),
           py::arg("mask_shape") = py::none(), py::arg("causal") = false, py::arg("scale"),
           py::arg("causal_fill") = std::numeric_limits<float>::lowest(),
           py::arg("threads") = py::none())
      .def_property_readonly("output_shape",
                             [](const Attention& k) { return shape_tuple(k.output_shape()); })
      .def("run",
           [](Attention& k, py::handle q, py::handle kk, py::handle v, py::handle mask,
              py::object out) {
             auto qv = in_view(q, "q"), kv = in_view(kk, "k"), vv = in_view(v, "v");
             auto mv = optional_in_view(mask, "mask");
             return run_released(k.output_shape(), out,
                                 [&](FloatView o) { k.run(qv, kv, vv, mv, o); });
           },
           py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask") = py::none(),
           py::arg("out") = py::none())
      .def("timeit",
           [](Attention& k, py::handle q, py::handle kk, py::handle v, py::handle mask,
              py::object out, int repeats, int warmup) {
             auto qv = in_view(q, "q"), kv = in_view(kk, "k"), vv = in_view(v, "v");
             auto mv = optional_in_view(mask, "mask");
             return time_released(k.output_shape(), out, [&](FloatView o) {
               return k.timeit(qv, kv, vv, mv, o, repeats, warmup);
             });
           },
           py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask") = py::none(),
           py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  py::class_<Glu, Kernel>(m, "Glu",
                          "Gated linear unit act(gate) * up, act swish (SwiGLU), gelu "
                          "(GeGLU, exact) or gelu_tanh. out may be either input.")
      .def(py::init([](const std::string& kind, const std::vector<int64_t>& shape,
                       std::optional<int> threads) {
             return new Glu(kind, to_shape(shape), threads);
           }),
           py::arg("kind"), py::arg("shape"), py::kw_only(), py::arg("threads") = py::none())
      .def_property_readonly("output_shape", [](const Glu& k) { return shape_tuple(k.shape()); })
      .def("run",
           [](Glu& k, py::handle gate, py::handle up, py::object out) {
             auto gv = in_view(gate, "gate"), uv = in_view(up, "up");
             return run_released(k.shape(), out, [&](FloatView o) { k.run(gv, uv, o); });
           },
           py::arg("gate"), py::arg("up"), py::arg("out") = py::none())
      .def("timeit",
           [](Glu& k, py::handle gate, py::handle up, py::object out, int repeats, int warmup) {
             auto gv = in_view(gate, "gate"), uv = in_view(up, "up");
             return time_released(k.shape(), out, [&](FloatView o) {
               return k.timeit(gv, uv, o, repeats, warmup);
             });
           },
           py::arg("gate"), py::arg("up"), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);

  py::class_<PositionIds, Kernel>(
      m, "PositionIds",
      "Padding-aware positions of int64 (batch, seq) ids: offset + the running count of ids "
      "other than pad_id where the id is not pad_id, else offset (int64, the ids' shape).")
      .def(py::init([](const std::vector<int64_t>& shape, int64_t pad_id, int64_t offset,
                       std::optional<int> threads) {
             return new PositionIds(to_shape(shape), pad_id, offset, threads);
           }),
           py::arg("shape"), py::kw_only(), py::arg("pad_id"), py::arg("offset"),
           py::arg("threads") = py::none())
      .def_property_readonly("output_shape",
                             [](const PositionIds& k) { return shape_tuple(k.shape()); })
      .def("run",
           [](PositionIds& k, py::handle ids, py::object out) {
             out = int64_output(k.shape(), out);
             const int64_t* iv = int64_data(ids, "ids", k.shape(), false);
             int64_t* ov = int64_data(out, "out", k.shape(), true);
             {
               py::gil_scoped_release nogil;
               k.run(iv, ov);
             }
             return out;
           },
           py::arg("ids"), py::arg("out") = py::none())
      .def("timeit",
           [](PositionIds& k, py::handle ids, py::object out, int repeats, int warmup) {
             out = int64_output(k.shape(), out);
             const int64_t* iv = int64_data(ids, "ids", k.shape(), false);
             int64_t* ov = int64_data(out, "out", k.shape(), true);
             std::vector<double> ns;
             {
               py::gil_scoped_release nogil;
               ns = k.timeit(iv, ov, repeats, warmup);
             }
             return as_array(std::move(ns));
           },
           py::arg("ids"), py::arg("out") = py::none(), py::kw_only(), py::arg("repeats") = 100,
           py::arg("warmup") = 10, kTimeitDoc);

  m.def(
      "set_decode_attention_isa", [](const std::string& isa) { decode_rows_kernels().set(isa); },
      py::arg("isa"),
      "Make decode attention runs use the kernel built for `isa` ('avx512', 'avx2', "
      "'generic'; 'auto': the widest this CPU runs again). ValueError for an unknown "
      "name or one this CPU does not run.");
  py::class_<DecodeAttention, Kernel>(
      m, "DecodeAttention",
      "Attention of S new queries q (B, H, S, D) against P cached keys / values and the S "
      "new ones (B, Hkv, S, D): query i sees keys j <= P + i; grouped-query heads shared. "
      "keys_shape is the past's (B, Hkv, P, D), or with in_place the cache's (B, Hkv, C, D). "
      "The mask (optional, additive) broadcasts into (B, H, S, P + S), or (B, H, S, C) in "
      "place.")
      .def(py::init([](const std::vector<int64_t>& q, const std::vector<int64_t>& k_new,
                       const std::vector<int64_t>& v_new, const std::vector<int64_t>& keys,
                       std::optional<std::vector<int64_t>> mask, bool in_place, float scale,
                       float causal_fill, std::optional<int> threads) {
             return new DecodeAttention(to_shape(q), to_shape(k_new), to_shape(v_new),
                                        to_shape(keys), mask ? to_shape(*mask) : Shape{},
                                        in_place, scale, causal_fill, threads);
           }),
           py::arg("q_shape"), py::arg("new_k_shape"), py::arg("new_v_shape"),
           py::arg("keys_shape"), py::kw_only(), py::arg("mask_shape") = py::none(),
           py::arg("in_place") = false, py::arg("scale"),
           py::arg("causal_fill") = std::numeric_limits<float>::lowest(),
           py::arg("threads") = py::none())
      .def_property_readonly("output_shape",
                             [](const DecodeAttention& k) { return shape_tuple(k.output_shape()); })
      .def_property_readonly(
          "present_shape", [](const DecodeAttention& k) { return shape_tuple(k.present_shape()); })
      .def("run",
           [](DecodeAttention& k, py::handle q, py::handle k_new, py::handle v_new,
              py::handle past_k, py::handle past_v, py::handle mask, py::object out) {
             auto qv = in_view(q, "q"), kv = in_view(k_new, "k_new"), vv = in_view(v_new, "v_new");
             auto pk = in_view(past_k, "past_k"), pv = in_view(past_v, "past_v");
             auto mv = optional_in_view(mask, "mask");
             return run_released(k.output_shape(), out,
                                 [&](FloatView o) { k.run(qv, kv, vv, pk, pv, mv, o); });
           },
           py::arg("q"), py::arg("k_new"), py::arg("v_new"), py::arg("past_k"), py::arg("past_v"),
           py::arg("mask") = py::none(), py::arg("out") = py::none(),
           "The attention into `out` (allocated when None), the past and new rows read where "
           "they are.")
      .def("timeit",
           [](DecodeAttention& k, py::handle q, py::handle k_new, py::handle v_new,
              py::handle past_k, py::handle past_v, py::handle mask, py::object out, int repeats,
              int warmup) {
             auto qv = in_view(q, "q"), kv = in_view(k_new, "k_new"), vv = in_view(v_new, "v_new");
             auto pk = in_view(past_k, "past_k"), pv = in_view(past_v, "past_v");
             auto mv = optional_in_view(mask, "mask");
             return time_released(k.output_shape(), out, [&](FloatView o) {
               return k.timeit(qv, kv, vv, pk, pv, mv, o, repeats, warmup);
             });
           },
           py::arg("q"), py::arg("k_new"), py::arg("v_new"), py::arg("past_k"), py::arg("past_v"),
           py::arg("mask") = py::none(), py::arg("out") = py::none(), py::kw_only(),
           py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc)
      .def("run_present",
           [](DecodeAttention& k, py::handle q, py::handle k_new, py::handle v_new,
              py::handle past_k, py::handle past_v, py::handle mask, py::object present_k,
              py::object present_v) {
             auto qv = in_view(q, "q"), kv = in_view(k_new, "k_new"), vv = in_view(v_new, "v_new");
             auto pk = in_view(past_k, "past_k"), pv = in_view(past_v, "past_v");
             auto mv = optional_in_view(mask, "mask");
             const Shape pvs{k.present_shape()[0], k.present_shape()[1], k.present_shape()[2],
                             k.output_shape()[3]};
             if (present_k.is_none()) present_k = new_output(k.present_shape());
             if (present_v.is_none()) present_v = new_output(pvs);
             FloatView pko = out_view(present_k, "present_k"), pvo = out_view(present_v, "present_v");
             py::object out = run_released(k.output_shape(), py::none(), [&](FloatView o) {
               k.run_present(qv, kv, vv, pk, pv, mv, o, pko, pvo);
             });
             return py::make_tuple(out, present_k, present_v);
           },
           py::arg("q"), py::arg("k_new"), py::arg("v_new"), py::arg("past_k"), py::arg("past_v"),
           py::arg("mask") = py::none(), py::arg("present_k") = py::none(),
           py::arg("present_v") = py::none(),
           "(attention, present k, present v): the past and the new rows copied once into "
           "the presents (allocated when None), the attention reading them.")
      .def("run_in_place",
           [](DecodeAttention& k, py::handle q, py::handle k_new, py::handle v_new,
              py::handle cache_k, py::handle cache_v, int64_t length, py::handle mask,
              py::object out) {
             auto qv = in_view(q, "q"), kv = in_view(k_new, "k_new"), vv = in_view(v_new, "v_new");
             FloatView ck = out_view(cache_k, "cache_k"), cv = out_view(cache_v, "cache_v");
             auto mv = optional_in_view(mask, "mask");
             return run_released(k.output_shape(), out, [&](FloatView o) {
               k.run_in_place(qv, kv, vv, ck, cv, length, mv, o);
             });
           },
           py::arg("q"), py::arg("k_new"), py::arg("v_new"), py::arg("cache_k"),
           py::arg("cache_v"), py::arg("length"), py::arg("mask") = py::none(),
           py::arg("out") = py::none(),
           "The new rows written at row `length` of the caches, then the attention over "
           "length + S rows into `out` (allocated when None).");
}

}  // namespace ppb::bind
