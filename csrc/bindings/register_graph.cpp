// The native plan of a graph: node specs and settings filled in from Python
// (pyparbench/executor.py), then compiled and run with no Python in the loop.
#include "bindings/pybind.hpp"
#include "pyparbench/core/checks.hpp"
#include "pyparbench/core/limits.hpp"
#include "pyparbench/core/knobs.hpp"
#include "pyparbench/graph/exec_settings.hpp"
#include "pyparbench/graph/instances.hpp"
#include "pyparbench/graph/plan.hpp"
#include "pyparbench/graph/thread_rule.hpp"
#include "pyparbench/threading/audit.hpp"

#include <cstring>

namespace ppb::bind {

namespace {

// ExecSettings as Python fills it in. library and pool are kept as given and
// parsed when the plan runs or cuts its nodes, so a bad name is reported
// there; scheduler and operator are parsed when set.
struct SettingsArg : ExecSettings {
  std::string library_name = knob_name(ExecSettings{}.library);
  std::string pool_name = knob_name(ExecSettings{}.pool);

  // std::invalid_argument naming a bad library or pool.
  ExecSettings parsed() const {
    ExecSettings s = *this;
    s.library = parse_library(library_name);
    s.pool = parse_pool_kind(pool_name);
    return s;
  }
};

py::dict run_result(RunResult&& r) {
  py::dict d;
  d["ns"] = as_array(std::move(r.ns));
  py::list trace;
  for (const auto& e : r.trace)
    trace.append(py::make_tuple(e.node, e.worker, e.cpu, e.start_ns, e.end_ns, e.threads));
  d["trace"] = trace;
  return d;
}

py::dict node_threads_dict(const NodeThreads& t) {
  py::dict d;
  d["threads"] = t.threads;
  d["requested"] = t.requested;
  d["work_ns"] = t.work_ns;
  d["team_ns"] = t.team_ns;
  d["threshold_ns"] = t.threshold_ns;
  d["reason"] = t.reason;
  return d;
}

}  // namespace

void register_graph(py::module_& m) {
  py::class_<NodeSpec>(m, "NodeSpec", "One node of a plan (see pyparbench/graph.py for the ops).")
      .def(py::init<>())
      .def_property(
          "op", [](const NodeSpec& s) { return op_name(s.op); },
          [](NodeSpec& s, const std::string& name) { s.op = parse_op(name); })
      .def_readwrite("name", &NodeSpec::name)
      .def_readwrite("inputs", &NodeSpec::inputs)
      .def_readwrite("shape", &NodeSpec::shape)
      .def_readwrite("int64", &NodeSpec::int64)
      .def_readwrite("bf16", &NodeSpec::bf16)
      .def_readwrite("int8", &NodeSpec::int8)
      .def_property(
          "precision", [](const NodeSpec& s) { return knob_name(s.precision); },
          [](NodeSpec& s, const std::string& v) { s.precision = parse_precision(v); })
      .def_readwrite("pad_id", &NodeSpec::pad_id)
      .def_readwrite("offset", &NodeSpec::offset)
      .def_readwrite("causal", &NodeSpec::causal)
      .def_readwrite("scale", &NodeSpec::scale)
      .def_readwrite("causal_fill", &NodeSpec::causal_fill)
      .def_readwrite("kind", &NodeSpec::kind)
      .def_readwrite("mode", &NodeSpec::mode)
      .def_readwrite("kernel", &NodeSpec::kernel)
      .def_readwrite("stride", &NodeSpec::stride)
      .def_readwrite("dilation", &NodeSpec::dilation)
      .def_readwrite("padding", &NodeSpec::padding)
      .def_readwrite("groups", &NodeSpec::groups)
      .def_readwrite("axis", &NodeSpec::axis)
      .def_readwrite("start", &NodeSpec::start)
      .def_readwrite("eps", &NodeSpec::eps)
      .def_readwrite("relu", &NodeSpec::relu)
      .def_readwrite("trans_b", &NodeSpec::trans_b)
      .def_readwrite("ceil_mode", &NodeSpec::ceil_mode)
      .def_readwrite("count_include_pad", &NodeSpec::count_include_pad)
      .def_readwrite("perm", &NodeSpec::perm)
      .def_readwrite("activation", &NodeSpec::activation)
      .def_property(
          "layout", [](const NodeSpec& s) { return act_layout_name(s.layout); },
          [](NodeSpec& s, const std::string& v) { s.layout = parse_act_layout(v); })
      .def_property(
          "input_layout", [](const NodeSpec& s) { return act_layout_name(s.input_layout); },
          [](NodeSpec& s, const std::string& v) { s.input_layout = parse_act_layout(v); })
      .def_readwrite("im2col", &NodeSpec::im2col)
      .def_readwrite("inplace", &NodeSpec::inplace)
      .def("set_param",
           [](NodeSpec& s, const std::string& name, py::handle array) {
             ConstFloatView v = in_view(array, name.c_str());
             s.params[name] = ParamArray{v.data, v.shape.to_shape()};
           },
           py::arg("name"), py::arg("array"),
           "Borrow a float32 C-contiguous parameter array: the caller keeps it alive.");

  py::class_<SettingsArg>(m, "ExecSettings", "Resolved execution settings of one plan run.")
      .def(py::init<>())
      .def_property(
          "scheduler", [](const SettingsArg& s) { return knob_name(s.scheduler); },
          [](SettingsArg& s, const std::string& v) { s.scheduler = parse_scheduler(v); })
      .def_property(
          "operator", [](const SettingsArg& s) { return knob_name(s.op_mode); },
          [](SettingsArg& s, const std::string& v) { s.op_mode = parse_operator_mode(v); })
      .def_readwrite("inter_op", &ExecSettings::inter_op)
      .def_readwrite("intra_op", &ExecSettings::intra_op)
      .def_readwrite("library", &SettingsArg::library_name)
      .def_readwrite("pool", &SettingsArg::pool_name)
      .def_readwrite("worker_cpus", &ExecSettings::worker_cpus)
      .def_readwrite("node_group", &ExecSettings::node_group)
      .def_readwrite("groups", &ExecSettings::groups)
      .def_readwrite("alone_below_ns", &ExecSettings::alone_below_ns);

  py::class_<Plan>(m, "Plan", "A compiled graph: prepared kernels, buffers, dependencies.")
      .def(py::init([](std::vector<NodeSpec> nodes, std::vector<int> outputs,
                       bool reuse_buffers, bool weights_in_place) {
             return new Plan(std::move(nodes), std::move(outputs), reuse_buffers,
                             weights_in_place);
           }),
           py::arg("nodes"), py::arg("outputs"), py::kw_only(), py::arg("reuse_buffers") = false,
           py::arg("weights_in_place") = false)
      .def_property_readonly("weights_in_place", &Plan::weights_in_place,
                             "Whether the linear nodes' kernels read the parameters where they "
                             "are (the same results) rather than packing copies.")
      .def("set_input",
           [](Plan& p, int node, py::handle array) {
             const NodeSpec& s = p.nodes().at(static_cast<size_t>(node));
             const void* data;
             size_t bytes;
             if (s.int64) {
               IndexView v = index_view(array, s.name.c_str());
               if (!v.is64) throw py::type_error("input '" + s.name + "' must be int64");
               require_shape(s.name, v.shape, s.shape);
               data = v.data;
               bytes = static_cast<size_t>(v.size()) * 8;
             } else {
               ConstFloatView v = in_view(array, s.name.c_str());
               require_shape(s.name, v.shape, s.shape);
               data = v.data;
               bytes = static_cast<size_t>(v.size()) * 4;
             }
             p.set_input(node, data, bytes);
           },
           py::arg("node"), py::arg("array"))
      .def("bind_input",
           [](Plan& p, int node, py::handle array) {
             const NodeSpec& s = p.nodes().at(static_cast<size_t>(node));
             FloatView v = out_view(array, s.name.c_str());
             require_shape(s.name, v.shape, s.shape);
             p.bind_input(node, v.data, static_cast<size_t>(v.size()) * 4);
           },
           py::arg("node"), py::arg("array"),
           "Points float32 input `node` at `array` (writable, C-contiguous, the input's "
           "shape) without a copy: the caller keeps it alive as long as the plan.")
      .def("outputs",
           [](const Plan& p, const std::vector<int>& nodes) {
             std::vector<py::array> arrays;
             std::vector<void*> dst;
             for (int node : nodes) {
               const NodeSpec& s = p.nodes().at(static_cast<size_t>(node));
               const std::vector<py::ssize_t> shape(s.shape.begin(), s.shape.end());
               // An int64 node (embedding indices) holds 8 bytes per element,
               // a bf16 one 2 (bfloat16 bits: widened to float32 below).
               arrays.push_back(s.int64  ? py::array(py::array_t<int64_t>(shape))
                                : s.bf16 ? py::array(py::array_t<uint16_t>(shape))
                                : s.int8 ? py::array(py::array_t<uint8_t>(shape))
                                         : py::array(py::array_t<float>(shape)));
               dst.push_back(arrays.back().mutable_data());
             }
             {
               // Waits for a run of another thread to end, without the GIL.
               py::gil_scoped_release nogil;
               p.copy_outputs(nodes, dst);
             }
             for (size_t i = 0; i < nodes.size(); ++i) {
               const NodeSpec& s = p.nodes().at(static_cast<size_t>(nodes[i]));
               if (!s.bf16) continue;
               const std::vector<py::ssize_t> shape(s.shape.begin(), s.shape.end());
               py::array_t<float> wide(shape);
               const auto* bits = static_cast<const uint16_t*>(arrays[i].data());
               float* f = wide.mutable_data();
               for (py::ssize_t j = 0; j < wide.size(); ++j) {
                 const uint32_t w = static_cast<uint32_t>(bits[j]) << 16;
                 std::memcpy(&f[j], &w, sizeof(float));
               }
               arrays[i] = wide;
             }
             return arrays;
           },
           py::arg("nodes"),
           "Copies of the output buffers of `nodes` (int64 for an int64 node, a bf16 "
           "node's values widened to float32, an int8 node's grid bytes as uint8), all "
           "from one run.")
      .def("run",
           [](Plan& p, const SettingsArg& arg, int repeats, int warmup, bool trace,
              std::shared_ptr<Audit> audit) {
             const ExecSettings s = arg.parsed();
             RunResult r;
             {
               py::gil_scoped_release nogil;
               r = p.run(s, repeats, warmup, trace, audit);
             }
             return run_result(std::move(r));
           },
           py::arg("settings"), py::kw_only(), py::arg("repeats") = 10, py::arg("warmup") = 2,
           py::arg("trace") = false, py::arg("audit") = nullptr,
           "Run warmup + repeats times; returns {'ns': per-repeat ns, 'trace': [(node, "
           "worker, cpu, start_ns, end_ns)] of the last repeat when asked}.")
      .def_property_readonly("buffer_slots", &Plan::buffer_slots,
                             "Per node, the index of the buffer it writes.")
      .def_property_readonly("allocated_bytes", &Plan::allocated_bytes,
                             "Bytes of every node buffer together.")
      .def("blocks", [](Plan& p, const SettingsArg& arg) {
             const ExecSettings s = arg.parsed();
             py::gil_scoped_release nogil;
             return p.blocks(s);
           },
           py::arg("settings"), "Blocks each node is cut into under these settings.")
      .def("implementations", [](Plan& p, const SettingsArg& arg) {
             const ExecSettings s = arg.parsed();
             py::gil_scoped_release nogil;
             return p.implementations(s);
           },
           py::arg("settings"),
           "What computes each convolution under these settings (oneDNN's implementation "
           "name, or im2col+ and the product's), direct:<isa> for a node run by a direct "
           "kernel; empty for other nodes.")
      .def("emulated", [](Plan& p, const SettingsArg& arg) {
             const ExecSettings s = arg.parsed();
             py::gil_scoped_release nogil;
             return p.emulated(s);
           },
           py::arg("settings"),
           "Per node, whether its bf16 kernel runs emulated (oneDNN's implementation has no "
           "bf16 dot products); False for fp32 nodes.")
      .def("node_threads", [](Plan& p, const SettingsArg& arg) {
             const ExecSettings s = arg.parsed();
             std::vector<NodeThreads> t;
             {
               py::gil_scoped_release nogil;
               t = p.node_threads(s);
             }
             py::list out;
             for (const auto& n : t) out.append(node_threads_dict(n));
             return out;
           },
           py::arg("settings"),
           "Per node, the per-node thread rule's decision: {'threads', 'requested', "
           "'work_ns', 'team_ns', 'threshold_ns', 'reason'}.")
      .def("time_node", [](Plan& p, const SettingsArg& arg, int node, int repeats, int warmup,
                           int inner) {
             const ExecSettings s = arg.parsed();
             std::vector<double> ns;
             {
               py::gil_scoped_release nogil;
               ns = p.time_node(s, node, repeats, warmup, inner);
             }
             return as_array(std::move(ns));
           },
           py::arg("settings"), py::arg("node"), py::kw_only(), py::arg("repeats") = 10,
           py::arg("warmup") = 2, py::arg("inner") = 1000,
           "The node's kernel as prepared under these settings, alone in a C++ loop on the "
           "calling thread: ns per call, one value per repeat of `inner` calls.");

  m.def("run_instances",
        [](const std::vector<Plan*>& plans, const std::vector<SettingsArg>& args, int repeats,
           int warmup) {
          std::vector<ExecSettings> settings;
          for (const SettingsArg& a : args) settings.push_back(a.parsed());
          std::vector<std::vector<double>> per;
          std::vector<double> ns;
          {
            py::gil_scoped_release nogil;
            ns = run_instances(plans, settings, repeats, warmup, per);
          }
          py::list each;
          for (auto& v : per) each.append(as_array(std::move(v)));
          return py::make_tuple(as_array(std::move(ns)), each);
        },
        py::arg("plans"), py::arg("settings"), py::kw_only(), py::arg("repeats") = 10,
        py::arg("warmup") = 2,
        "Run plans side by side (data parallelism), meeting before every repeat; returns "
        "(per-repeat ns of all together, [per-repeat ns of each instance]).");

  m.def("work_rates", [] {
          const WorkRates r = work_rates();
          py::dict d;
          d["ns_per_byte"] = r.ns_per_byte;
          d["ns_per_flop"] = r.ns_per_flop;
          return d;
        },
        "One core's rates the per-node thread rule estimates a node's work with "
        "(calibrated once per process): {'ns_per_byte', 'ns_per_flop'}.");
  m.def("team_cost_ns", [](const std::string& op_mode, const std::string& pool, int threads) {
          const OperatorMode mode = parse_operator_mode(op_mode);
          const PoolKind kind = parse_pool_kind(pool);
          require_thread_count("threads", threads);
          py::gil_scoped_release nogil;
          return team_cost_ns(mode, kind, threads);
        },
        py::arg("operator"), py::arg("pool"), py::arg("threads"),
        "ns to start and join a team of `threads` (an OpenMP region in library mode, the "
        "pool's parallel_for in framework mode), calibrated once per process and size; the "
        "per-node thread rule's break-even is this x threads / (threads - 1).");
  m.def("preferred_layout", [] { return act_layout_name(preferred_conv_layout()); },
        "The activation layout oneDNN's convolution picks when left free on this machine: "
        "'nchw8c' / 'nchw16c' (its blocked kernels), 'nhwc' or 'nchw'.");
}

}  // namespace ppb::bind
