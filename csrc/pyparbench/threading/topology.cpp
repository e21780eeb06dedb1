#include "pyparbench/threading/topology.hpp"

#include <hwloc.h>

#include <memory>
#include <stdexcept>

namespace ppb {

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

TopologyPtr load(const std::string& synthetic) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) throw std::runtime_error("hwloc_topology_init failed");
  TopologyPtr owned(t);
  if (!synthetic.empty() && hwloc_topology_set_synthetic(t, synthetic.c_str()) != 0)
    throw std::invalid_argument("invalid hwloc synthetic topology '" + synthetic + "'");
  if (hwloc_topology_load(t) != 0) throw std::runtime_error("hwloc_topology_load failed");
  return owned;
}

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(t, type);
  return n > 0 ? n : 0;
}

}  // namespace

TopologySummary topology_summary(const std::string& synthetic) {
  auto topo = load(synthetic);
  hwloc_topology_t t = topo.get();
  TopologySummary s;
  s.packages = std::max(1, count(t, HWLOC_OBJ_PACKAGE));
  s.numa_nodes = std::max(1, count(t, HWLOC_OBJ_NUMANODE));
  s.cores = count(t, HWLOC_OBJ_CORE);
  s.pus = count(t, HWLOC_OBJ_PU);
  s.source = synthetic.empty() ? "this machine" : synthetic;
  hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
  if (synthetic.empty() && hwloc_get_cpubind(t, allowed, HWLOC_CPUBIND_PROCESS) == 0) {
    hwloc_bitmap_and(allowed, allowed, hwloc_topology_get_allowed_cpuset(t));
  } else {
    hwloc_bitmap_copy(allowed, hwloc_topology_get_allowed_cpuset(t));
  }
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, allowed) s.allowed_cpus.push_back(cpu);
  hwloc_bitmap_foreach_end();
  hwloc_bitmap_free(allowed);
  return s;
}

}  // namespace ppb
