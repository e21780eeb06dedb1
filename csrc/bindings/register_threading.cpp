// Topology, placement, thread pools and the audit recorder. Thin: argument
// conversion and GIL release; the logic lives in csrc/pyparbench/threading
// and in pyparbench/threading/.
#include "bindings/pybind.hpp"
#include "pyparbench/core/knobs.hpp"
#include "pyparbench/threading/affinity.hpp"
#include "pyparbench/threading/audit.hpp"
#include "pyparbench/threading/placement.hpp"
#include "pyparbench/threading/pool.hpp"
#include "pyparbench/threading/pool_bench.hpp"
#include "pyparbench/threading/pool_checks.hpp"
#include "pyparbench/threading/topology.hpp"

namespace ppb::bind {

namespace {

using U64Array = py::array_t<uint64_t, py::array::c_style>;
using I64Array = py::array_t<int64_t, py::array::c_style>;

std::pair<const uint64_t*, const int64_t*> work_inputs(const U64Array& seeds,
                                                       const I64Array& iters) {
  if (seeds.ndim() != 1 || iters.ndim() != 1 || seeds.size() != iters.size())
    throw py::value_error("seeds and iters must be 1-D arrays of one length, got " +
                          std::to_string(seeds.size()) + " and " + std::to_string(iters.size()) +
                          " elements");
  return {seeds.data(), iters.data()};
}

py::dict record_dict(const ThreadRecord& r) {
  py::dict d;
  d["team"] = r.team;
  d["tid"] = r.tid;
  d["worker"] = r.worker;
  d["omp_team_size"] = r.omp_team_size;
  d["affinity"] = r.affinity;
  d["cpus_seen"] = r.cpus_seen;
  d["reports"] = r.reports;
  d["voluntary_switches"] = r.voluntary_switches;
  d["involuntary_switches"] = r.involuntary_switches;
  return d;
}

void register_topology(py::module_& m) {
  py::class_<Pu>(m, "Pu", "A logical CPU (hardware thread).")
      .def_readonly("os_index", &Pu::os_index, "OS CPU number.")
      .def_readonly("core", &Pu::core, "Index of its core in Topology.cores.")
      .def_readonly("package", &Pu::package, "Index of its socket in Topology.packages.")
      .def_readonly("numa", &Pu::numa, "OS index of its NUMA node (-1: unknown).")
      .def_readonly("siblings", &Pu::siblings, "OS numbers of the other PUs of its core.")
      .def_readonly("kind", &Pu::kind, "Index of its CPU kind in Topology.cpu_kinds (-1: none).")
      .def("__repr__", [](const Pu& p) {
        return "Pu(os_index=" + std::to_string(p.os_index) + ", core=" + std::to_string(p.core) +
               ", package=" + std::to_string(p.package) + ")";
      });
  py::class_<Core>(m, "Core", "A physical core.")
      .def_readonly("index", &Core::index, "Logical index (position in Topology.cores).")
      .def_readonly("package", &Core::package, "Index of its socket.")
      .def_readonly("numa", &Core::numa, "OS index of its NUMA node (-1: unknown).")
      .def_readonly("pus", &Core::pus, "OS numbers of its PUs, in logical order.")
      .def_readonly("kind", &Core::kind, "Index of its CPU kind in Topology.cpu_kinds (-1: none).")
      .def_readonly("l3", &Core::l3, "Index of its L3 in Topology.l3_domains (-1: none).")
      .def("__repr__", [](const Core& c) {
        return "Core(index=" + std::to_string(c.index) + ", pus=" + cpu_list_str(c.pus) + ")";
      });
  py::class_<Package>(m, "Package", "A socket.")
      .def_readonly("index", &Package::index)
      .def_readonly("cores", &Package::cores, "Indices into Topology.cores.")
      .def_readonly("pus", &Package::pus, "OS CPU numbers.");
  py::class_<NumaNode>(m, "NumaNode", "A NUMA node.")
      .def_readonly("os_index", &NumaNode::os_index)
      .def_readonly("package", &NumaNode::package,
                    "The socket holding all its CPUs, -1 if it spans sockets.")
      .def_readonly("pus", &NumaNode::pus,
                    "OS numbers of the CPUs whose home node it is (empty: memory-only).")
      .def_readonly("local_pus", &NumaNode::local_pus,
                    "OS numbers of the CPUs hwloc says it is local to.")
      .def_readonly("memory_only", &NumaNode::memory_only,
                    "No CPU's home node (CXL memory, MCDRAM): it holds no threads.")
      .def_readonly("subtype", &NumaNode::subtype, "hwloc's subtype ('MCDRAM', ...), often ''.")
      .def_readonly("memory", &NumaNode::memory, "Local memory in bytes (0: unknown).");
  py::class_<CpuKind>(m, "CpuKind", "One kind of CPU (hwloc's CPU kinds: P or E cores).")
      .def_readonly("index", &CpuKind::index, "hwloc's order: least to most powerful.")
      .def_readonly("efficiency", &CpuKind::efficiency,
                    "hwloc's efficiency rank, higher is faster (-1: unknown).")
      .def_readonly("pus", &CpuKind::pus, "OS CPU numbers.")
      .def_property_readonly("infos", [](const CpuKind& k) {
        py::dict d;
        for (const auto& [name, value] : k.infos) d[py::str(name)] = value;
        return d;
      }, "hwloc's information: FrequencyMaxMHz, CoreType, ...");
  py::class_<Cache>(m, "Cache", "One kind of cache at one level.")
      .def_readonly("level", &Cache::level)
      .def_readonly("type", &Cache::type, "'data', 'instruction' or 'unified'.")
      .def_readonly("size", &Cache::size, "Bytes per instance.")
      .def_readonly("line_size", &Cache::line_size)
      .def_readonly("count", &Cache::count, "Instances in the machine.")
      .def_readonly("cpus_per_instance", &Cache::cpus_per_instance);
  py::class_<CacheInstance>(m, "CacheInstance", "One cache and the CPUs that share it.")
      .def_readonly("level", &CacheInstance::level)
      .def_readonly("type", &CacheInstance::type, "'data', 'instruction' or 'unified'.")
      .def_readonly("size", &CacheInstance::size, "Bytes.")
      .def_readonly("pus", &CacheInstance::pus, "OS CPU numbers of the CPUs sharing it.");
  py::class_<Topology>(m, "Topology", "A machine's topology (hwloc); see pyparbench.topology().")
      .def_readonly("source", &Topology::source)
      .def_readonly("kind", &Topology::kind, "'machine', 'synthetic' or 'file'.")
      .def_readonly("synthetic", &Topology::synthetic, "Made from an hwloc synthetic string.")
      .def_readonly("packages", &Topology::packages)
      .def_readonly("numa_nodes", &Topology::numa_nodes)
      .def_readonly("cores", &Topology::cores)
      .def_readonly("pus", &Topology::pus)
      .def_readonly("caches", &Topology::caches)
      .def_readonly("cache_instances", &Topology::cache_instances,
                    "Every cache instance with the CPUs sharing it, level by level.")
      .def_readonly("l3_domains", &Topology::l3_domains,
                    "The OS CPU numbers of each L3 instance.")
      .def_readonly("cpu_kinds", &Topology::cpu_kinds,
                    "CPU kinds, least powerful first (empty: one kind).")
      .def_readonly("allowed_cpus", &Topology::allowed_cpus,
                    "Sorted OS CPU numbers this process may use.")
      .def_readonly("disallowed_cpus", &Topology::disallowed_cpus,
                    "CPUs of the topology that may not be used (cgroup, binding).")
      .def_readonly("offline_cpus", &Topology::offline_cpus, "CPUs that are offline.")
      .def("__repr__", [](const Topology& t) {
        return "Topology(" + t.source + ": " + std::to_string(t.packages.size()) +
               " packages, " + std::to_string(t.cores.size()) + " cores, " +
               std::to_string(t.pus.size()) + " PUs, allowed " + cpu_list_str(t.allowed_cpus) +
               ")";
      });

  m.def("load_topology",
        [](const std::string& synthetic) {
          py::gil_scoped_release nogil;
          return load_topology(synthetic);
        },
        py::arg("synthetic") = "",
        "This machine's topology, or a synthetic one from an hwloc description.");
  m.def("load_topology_file",
        [](const std::string& path) {
          py::gil_scoped_release nogil;
          return load_topology_file(path);
        },
        py::arg("path"), "The topology an hwloc XML file describes.");
  m.attr("MAX_TOPOLOGY_FILE_BYTES") = kMaxTopologyFileBytes;
  m.def("process_allowed_cpus", &process_allowed_cpus,
        py::call_guard<py::gil_scoped_release>(), "CPUs this process may use now.");
  m.def("place",
        [](const Topology& topo, const std::string& policy, int pools, int threads, bool smt,
           int group) {
          return place(topo, parse_affinity_policy(policy), pools, threads, smt, group);
        },
        py::arg("topology"), py::arg("policy"), py::arg("pools"), py::arg("threads"),
        py::arg("smt"), py::arg("group") = 0, "CPU lists of a placement policy (see placement.hpp).");
  m.def("place_explicit", &place_explicit, py::arg("topology"), py::arg("cpus"), py::arg("pools"),
        py::arg("threads"), py::arg("smt"), "Checked explicit CPU lists, one per pool.");
}

void register_affinity(py::module_& m) {
  m.def("current_tid", &current_tid, "OS thread id of the calling thread.");
  m.def("thread_affinity", &thread_affinity, "CPUs the calling thread may run on.");
  m.def("omp_team_tids", &omp_team_tids, py::arg("threads"),
        py::call_guard<py::gil_scoped_release>(),
        "OS thread ids of the calling thread's OpenMP team of that size, by thread number.");
}

void register_audit(py::module_& m) {
  py::class_<Audit, std::shared_ptr<Audit>>(m, "Audit",
                                            "Recorder that threads doing work report into.")
      .def(py::init<>())
      .def("threads",
           [](const Audit& a) {
             py::list out;
             for (const ThreadRecord& r : a.threads()) out.append(record_dict(r));
             return out;
           },
           "One dict per (team, thread) that reported.")
      .def("clear", &Audit::clear);
}

void register_pools(py::module_& m) {
  py::class_<ThreadPool>(m, "Pool", "A thread pool ('openmp', 'std' or 'eigen'); see "
                                    "pyparbench.threading.Pool.")
      .def(py::init([](const std::string& kind, int threads, std::vector<int> cpus) {
             py::gil_scoped_release nogil;
             return make_pool(parse_pool_kind(kind), threads, std::move(cpus));
           }),
           py::arg("kind"), py::arg("threads"), py::arg("cpus") = std::vector<int>{})
      .def_property_readonly("kind", [](const ThreadPool& p) { return knob_name(p.kind()); })
      .def_property_readonly("threads", &ThreadPool::threads)
      .def_property_readonly("cpus", &ThreadPool::cpus)
      .def("work",
           [](ThreadPool& p, const U64Array& seeds, const I64Array& iters, bool submit) {
             auto [s, it] = work_inputs(seeds, iters);
             U64Array out(seeds.size());
             uint64_t* o = out.mutable_data();
             const int64_t n = seeds.size();
             py::gil_scoped_release nogil;
             pool_work(p, s, it, o, n, submit);
             return out;
           },
           py::arg("seeds"), py::arg("iters"), py::arg("submit"))
      .def("count", &pool_count, py::arg("tasks"), py::arg("submitters"),
           py::call_guard<py::gil_scoped_release>())
      .def("fail", &pool_fail, py::arg("tasks"), py::arg("fail_at"), py::arg("submit"),
           py::call_guard<py::gil_scoped_release>())
      .def("bench_submit",
           [](ThreadPool& p, int64_t tasks, int repeats, int warmup) {
             std::vector<double> ns;
             {
               py::gil_scoped_release nogil;
               ns = bench_submit(p, tasks, repeats, warmup);
             }
             return as_array(std::move(ns));
           },
           py::arg("tasks"), py::arg("repeats"), py::arg("warmup"))
      .def("bench_fork_join",
           [](ThreadPool& p, int repeats, int warmup) {
             std::vector<double> ns;
             {
               py::gil_scoped_release nogil;
               ns = bench_fork_join(p, repeats, warmup);
             }
             return as_array(std::move(ns));
           },
           py::arg("repeats"), py::arg("warmup"))
      .def("_attach_audit", &ThreadPool::attach_audit, py::arg("audit"), py::arg("team"))
      .def("_detach_audit", &ThreadPool::detach_audit);

  m.def("serial_work", [](const U64Array& seeds, const I64Array& iters) {
    auto [s, it] = work_inputs(seeds, iters);
    U64Array out(seeds.size());
    uint64_t* o = out.mutable_data();
    const int64_t n = seeds.size();
    py::gil_scoped_release nogil;
    serial_work(s, it, o, n);
    return out;
  }, py::arg("seeds"), py::arg("iters"), "The pools' test workload in a plain loop.");
  m.def("work_item", &work_item, py::arg("seed"), py::arg("iters"),
        "iters rounds of splitmix64 from seed.");
  m.def("omp_fork_join",
        [](int threads, int repeats, int warmup) {
          std::vector<double> ns;
          {
            py::gil_scoped_release nogil;
            ns = omp_fork_join(threads, repeats, warmup);
          }
          return as_array(std::move(ns));
        },
        py::arg("threads"), py::arg("repeats"), py::arg("warmup"),
        "ns per empty OpenMP parallel region started by the calling thread.");
  m.def("omp_barrier",
        [](int threads, int repeats, int warmup, int inner) {
          std::vector<double> ns;
          {
            py::gil_scoped_release nogil;
            ns = omp_barrier(threads, repeats, warmup, inner);
          }
          return as_array(std::move(ns));
        },
        py::arg("threads"), py::arg("repeats"), py::arg("warmup"), py::arg("inner") = 100,
        "ns per OpenMP barrier inside one region.");
  m.def("omp_gap",
        [](int threads, double gap_ns, int repeats, int warmup) {
          GapTimes t;
          {
            py::gil_scoped_release nogil;
            t = omp_gap(threads, gap_ns, repeats, warmup);
          }
          return py::make_tuple(as_array(std::move(t.region_ns)),
                                as_array(std::move(t.serial_ns)));
        },
        py::arg("threads"), py::arg("gap_ns"), py::arg("repeats"), py::arg("warmup"),
        "(region ns, serial ns) per repeat: OpenMP regions after a serial stretch of gap_ns.");
}

}  // namespace

void register_threading(py::module_& m) {
  register_topology(m);
  register_affinity(m);
  register_audit(m);
  register_pools(m);
}

}  // namespace ppb::bind
