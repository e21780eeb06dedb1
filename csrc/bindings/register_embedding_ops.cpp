// EmbeddingBag: the recommendation models' heavy op.
#include "bindings/pybind.hpp"
#include "pyparbench/core/limits.hpp"
#include "pyparbench/core/threads.hpp"
#include "pyparbench/ops/embedding_bag.hpp"
#include "pyparbench/ops/embedding_bag_kernel.hpp"

namespace ppb::bind {

namespace {

struct BagInputs {
  ConstFloatView table, weights;
  ConstBf16View bf16_table;  // present instead of `table` for a bfloat16 table
  View<const uint8_t> byte_table;  // present instead for an 8-bit rowwise table
  IndexView indices, offsets;
  Shape out_shape;
};


constexpr int kUInt8 = 2;  // NPY_UBYTE

bool is_uint8_array(py::handle obj) {
  return py::isinstance<py::array>(obj) &&
         py::detail::array_descriptor_proxy(py::detail::array_proxy(obj.ptr())->descr)
                 ->type_num == kUInt8;
}

View<const uint8_t> byte_table_view(py::handle obj) {
  auto* a = py::detail::array_proxy(obj.ptr());
  if ((a->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) == 0)
    throw py::type_error("table must be C-contiguous; copy it with np.ascontiguousarray(x)");
  return {static_cast<const uint8_t*>(static_cast<const void*>(a->data)),
          Dims(reinterpret_cast<const int64_t*>(a->dimensions), a->nd)};
}

BagInputs bag_inputs(const EmbeddingBag& e, py::handle table, py::handle indices,
                     py::handle offsets, py::handle weights) {
  // No table: the kernel's own copy (set_table). A bfloat16 table is read
  // as it is.
  // A uint8 table is 8-bit rowwise.
  const bool bf16 = is_bf16_array(table);
  const bool bytes = is_uint8_array(table);
  BagInputs in{bf16 || bytes ? ConstFloatView{} : optional_in_view(table, "table"),
               optional_in_view(weights, "per_sample_weights"),
               bf16 ? bf16_in_view(table, "table") : ConstBf16View{},
               bytes ? byte_table_view(table) : View<const uint8_t>{},
               index_view(indices, "indices"), index_view(offsets, "offsets"), {}};
  if (!in.indices.present()) throw py::type_error("indices must be an int32 or int64 array, not None");
  const int64_t bags = in.indices.shape.size() == 2 ? in.indices.shape[0]
                       : in.offsets.present() && !in.offsets.shape.empty() ? in.offsets.shape[0]
                                                                           : 0;
  in.out_shape = {bags, e.dim()};
  return in;
}

bool is_byte_rowwise_table(py::handle obj) {
  if (!is_uint8_array(obj)) return false;
  auto* a = py::detail::array_proxy(obj.ptr());
  return a->nd == 2 && (a->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) != 0;
}

// pyparbench.ops.embedding_bag's path for arguments already in the
// kernel's form (numpy float32 table, or a uint8 8-bit rowwise one; int32 /
// int64 indices and offsets of one dtype, C-contiguous; mode "sum" /
// "mean"; threads None or a valid int): no conversion, no kernel cache, a
// kernel made on the stack (it holds no prepared state). None when some
// argument is not in that form: the Python function then converts and
// checks it as before.
py::object embedding_bag_direct(py::handle table, py::handle indices, py::handle offsets,
                                py::handle weights, py::object out, py::handle mode,
                                py::handle threads) {
  const bool bytes = is_byte_rowwise_table(table);
  if (!bytes && !is_kernel_float_array(table, 2)) return py::none();
  const int bits = kernel_index_bits(indices);
  if (bits == 0 || (!offsets.is_none() && kernel_index_bits(offsets) != bits))
    return py::none();
  if (!weights.is_none() && !is_kernel_float_array(weights)) return py::none();
  if (!PyUnicode_Check(mode.ptr())) return py::none();
  const std::string m = mode.cast<std::string>();
  if (m != "sum" && m != "mean") return py::none();
  int t;
  if (threads.is_none()) {
    t = default_threads();
  } else {
    if (!PyLong_CheckExact(threads.ptr())) return py::none();
    int overflow = 0;
    const long v = PyLong_AsLongAndOverflow(threads.ptr(), &overflow);
    if (overflow != 0 || v < 1 || v > kMaxThreads) return py::none();
    t = static_cast<int>(v);
  }
  auto* a = py::detail::array_proxy(table.ptr());
  const int64_t rows = a->dimensions[0],
                dim = a->dimensions[1] - (bytes ? EmbeddingBag::kByteRowwiseExtra : 0);
  if (rows < 1 || dim < 1) return py::none();
  EmbeddingBag e(rows, dim, parse_bag_mode(m), t);
  auto in = bag_inputs(e, table, indices, offsets, weights);
  return run_released(in.out_shape, std::move(out), [&](FloatView o) {
    if (bytes)
      e.run_byte_rowwise(in.byte_table, in.indices, in.offsets, in.weights, o);
    else
      e.run(in.table, in.indices, in.offsets, in.weights, o);
  });
}

}  // namespace

void register_embedding_ops(py::module_& m) {
  m.def(
      "set_bag_isa", [](const std::string& isa) { bag_kernels().set(isa); }, py::arg("isa"),
      "Make embedding-bag runs use the kernel built for `isa` ('avx512', 'avx2', "
      "'generic'; 'auto': the widest this CPU runs again). ValueError for an unknown "
      "name or one this CPU does not run.");
  m.def("embedding_bag_direct", &embedding_bag_direct, py::arg("table"), py::arg("indices"),
        py::arg("offsets"), py::arg("per_sample_weights"), py::arg("out"), py::arg("mode"),
        py::arg("threads"),
        "embedding_bag on arguments already in the kernel's form, or None when some "
        "argument needs converting (pyparbench.ops.embedding_bag's fast path).");
  py::class_<EmbeddingBag, Kernel>(m, "EmbeddingBag", R"doc(
Prepared embedding-bag lookup (sum or mean of table rows per bag), an OpenMP
kernel parallel over bags. PyTorch's conventions: 1-D indices with offsets
(offsets[i] is where bag i starts; offsets[0] must be 0), or 2-D indices
(bags, bag_size) with offsets None. Empty bags give zeros. Indices and
offsets are int32 or int64 (the same dtype); an index outside [0, rows)
raises IndexError naming it and its position. ``set_table(table)`` keeps a
copy of the table on whole cache lines (and huge pages): ``run`` and
``timeit`` given ``table=None`` then read that copy.

The table given to ``run`` / ``timeit`` is float32, or ``ml_dtypes.bfloat16``:
bf16 rows are widened to fp32 as they are read (exact) and summed in fp32;
the output is float32 either way. A uint8 table (rows, dim + 8) is 8-bit
rowwise, PyTorch's ``embedding_bag_byte_prepack`` layout: each row's dim
values, then its float32 scale and bias; a value reads as value · scale +
bias, summed in fp32. ``set_table`` keeps float32 tables only.
)doc")
      .def(py::init([](int64_t rows, int64_t dim, const std::string& mode,
                       std::optional<int> threads) {
             return new EmbeddingBag(rows, dim, parse_bag_mode(mode), threads);
           }),
           py::arg("rows"), py::arg("dim"), py::kw_only(), py::arg("mode") = "sum",
           py::arg("threads") = py::none())
      .def_property_readonly("rows", &EmbeddingBag::rows)
      .def_property_readonly("dim", &EmbeddingBag::dim)
      .def_property_readonly("mode", [](const EmbeddingBag& e) {
        return e.mode() == BagMode::sum ? "sum" : "mean";
      })
      .def_property_readonly_static("isa", [](py::object) { return EmbeddingBag::isa(); },
                                    "ISA of the kernel runs use: avx512, avx2 or generic "
                                    "(the widest this CPU runs, unless set_bag_isa chose).")
      .def("set_table",
           [](EmbeddingBag& e, py::handle table) {
             const ConstFloatView t = in_view(table, "table");
             py::gil_scoped_release nogil;
             e.set_table(t);
           },
           py::arg("table"),
           "Keep a copy of `table` (rows, dim) on whole cache lines, read by runs given "
           "table=None; later changes to the array are not seen (call again).")
      .def_property_readonly("has_table", &EmbeddingBag::has_table)
      .def("bytes_moved", &EmbeddingBag::bytes_moved, py::arg("n_indices"), py::arg("bags"),
           py::kw_only(), py::arg("bf16") = false,
           "Bytes one run reads and writes: gathered rows (2-byte elements with bf16), "
           "indices and output.")
      .def("run",
           [](EmbeddingBag& e, py::handle table, py::handle indices, py::handle offsets,
              py::handle weights, py::object out) {
             auto in = bag_inputs(e, table, indices, offsets, weights);
             return run_released(in.out_shape, out, [&](FloatView o) {
               if (in.bf16_table.present())
                 e.run_bf16(in.bf16_table, in.indices, in.offsets, in.weights, o);
               else if (in.byte_table.present())
                 e.run_byte_rowwise(in.byte_table, in.indices, in.offsets, in.weights, o);
               else
                 e.run(in.table, in.indices, in.offsets, in.weights, o);
             });
           },
           py::arg("table"), py::arg("indices"), py::arg("offsets") = py::none(),
           py::arg("per_sample_weights") = py::none(), py::arg("out") = py::none(),
           "Compute into `out` (allocated when None) and return it.")
      .def("timeit",
           [](EmbeddingBag& e, py::handle table, py::handle indices, py::handle offsets,
              py::handle weights, py::object out, int repeats, int warmup) {
             auto in = bag_inputs(e, table, indices, offsets, weights);
             return time_released(in.out_shape, out, [&](FloatView o) {
               if (in.bf16_table.present())
                 return e.timeit_bf16(in.bf16_table, in.indices, in.offsets, in.weights, o,
                                      repeats, warmup);
               if (in.byte_table.present())
                 return e.timeit_byte_rowwise(in.byte_table, in.indices, in.offsets, in.weights,
                                              o, repeats, warmup);
               return e.timeit(in.table, in.indices, in.offsets, in.weights, o, repeats, warmup);
             });
           },
           py::arg("table"), py::arg("indices"), py::arg("offsets") = py::none(),
           py::arg("per_sample_weights") = py::none(), py::arg("out") = py::none(),
           py::kw_only(), py::arg("repeats") = 100, py::arg("warmup") = 10, kTimeitDoc);
}

}  // namespace ppb::bind
