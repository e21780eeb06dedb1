#include "pyparbench/threading/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>

namespace ppb {

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_t b) const { hwloc_bitmap_free(b); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

TopologyPtr load(const std::string& synthetic) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) throw std::runtime_error("hwloc_topology_init failed");
  TopologyPtr owned(t);
  if (synthetic.empty()) {
    // Keep the CPUs a cgroup hides in the picture; allowed_cpus says which
    // ones may be used.
    hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
    hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  } else if (hwloc_topology_set_synthetic(t, synthetic.c_str()) != 0) {
    throw std::invalid_argument("invalid hwloc synthetic topology '" + synthetic +
                                "' (expected e.g. 'package:2 core:24 pu:2')");
  }
  if (hwloc_topology_load(t) != 0) throw std::runtime_error("hwloc_topology_load failed");
  return owned;
}

std::vector<int> to_vector(hwloc_const_bitmap_t b) {
  std::vector<int> v;
  int i;
  hwloc_bitmap_foreach_begin(i, b) v.push_back(i);
  hwloc_bitmap_foreach_end();
  return v;
}

// The CPUs the process is bound to, within the CPUs hwloc says are allowed.
std::vector<int> allowed_of(hwloc_topology_t t, bool synthetic) {
  BitmapPtr allowed(hwloc_bitmap_alloc());
  if (!synthetic && hwloc_get_cpubind(t, allowed.get(), HWLOC_CPUBIND_PROCESS) == 0) {
    hwloc_bitmap_and(allowed.get(), allowed.get(), hwloc_topology_get_allowed_cpuset(t));
  } else {
    hwloc_bitmap_copy(allowed.get(), hwloc_topology_get_allowed_cpuset(t));
  }
  hwloc_bitmap_and(allowed.get(), allowed.get(), hwloc_topology_get_complete_cpuset(t));
  return to_vector(allowed.get());
}

int package_of(hwloc_topology_t t, hwloc_obj_t obj) {
  hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, obj);
  return p ? static_cast<int>(p->logical_index) : 0;
}

// The NUMA node whose CPUs include all of `cpuset`, -1 if none does.
int numa_of(hwloc_topology_t t, hwloc_const_cpuset_t cpuset) {
  const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (node->cpuset && !hwloc_bitmap_iszero(node->cpuset) &&
        hwloc_bitmap_isincluded(cpuset, node->cpuset))
      return static_cast<int>(node->os_index);
  }
  return -1;
}

void add_caches(hwloc_topology_t t, std::vector<Cache>& out,
                std::vector<CacheInstance>& instances) {
  const hwloc_obj_type_t types[] = {HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2ICACHE,
                                    HWLOC_OBJ_L2CACHE,  HWLOC_OBJ_L3ICACHE, HWLOC_OBJ_L3CACHE,
                                    HWLOC_OBJ_L4CACHE,  HWLOC_OBJ_L5CACHE};
  for (hwloc_obj_type_t type : types) {
    // Instances of one level may differ (hybrid CPUs): one entry per kind.
    std::map<std::tuple<uint64_t, int, int>, int> kinds;  // (size, line, cpus) -> count
    std::string kind = "unified";
    int level = 0;
    const int n = hwloc_get_nbobjs_by_type(t, type);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t c = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i));
      level = static_cast<int>(c->attr->cache.depth);
      if (c->attr->cache.type == HWLOC_OBJ_CACHE_DATA) kind = "data";
      if (c->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) kind = "instruction";
      const int cpus = c->cpuset ? hwloc_bitmap_weight(c->cpuset) : 0;
      ++kinds[{c->attr->cache.size, static_cast<int>(c->attr->cache.linesize), cpus}];
      CacheInstance one;
      one.level = level;
      one.type = kind;
      one.size = c->attr->cache.size;
      if (c->cpuset) one.pus = to_vector(c->cpuset);
      instances.push_back(std::move(one));
    }
    for (const auto& [key, count] : kinds) {
      Cache cache;
      cache.level = level;
      cache.type = kind;
      cache.size = std::get<0>(key);
      cache.line_size = std::get<1>(key);
      cache.cpus_per_instance = std::get<2>(key);
      cache.count = count;
      out.push_back(cache);
    }
  }
}

Topology build(hwloc_topology_t t, const std::string& synthetic) {
  Topology topo;
  topo.synthetic = !synthetic.empty();
  topo.source = topo.synthetic ? synthetic : "this machine";

  const int npackages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  topo.packages.resize(static_cast<size_t>(std::max(1, npackages)));
  for (size_t i = 0; i < topo.packages.size(); ++i) topo.packages[i].index = static_cast<int>(i);

  // Cores in logical order; a machine where hwloc sees no cores gets one
  // core per PU.
  const bool have_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0;
  const hwloc_obj_type_t core_type = have_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int ncores = hwloc_get_nbobjs_by_type(t, core_type);
  for (int i = 0; i < ncores; ++i) {
    hwloc_obj_t c = hwloc_get_obj_by_type(t, core_type, static_cast<unsigned>(i));
    Core core;
    core.index = static_cast<int>(topo.cores.size());
    core.package = package_of(t, c);
    core.numa = numa_of(t, c->cpuset);
    hwloc_obj_t pu = nullptr;
    while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(t, c->cpuset, HWLOC_OBJ_PU, pu)))
      core.pus.push_back(static_cast<int>(pu->os_index));
    if (core.pus.empty()) continue;
    topo.packages[static_cast<size_t>(core.package)].cores.push_back(core.index);
    for (int p : core.pus) {
      Pu u;
      u.os_index = p;
      u.core = core.index;
      u.package = core.package;
      u.numa = core.numa;
      for (int q : core.pus)
        if (q != p) u.siblings.push_back(q);
      topo.pus.push_back(u);
      topo.packages[static_cast<size_t>(core.package)].pus.push_back(p);
    }
    topo.cores.push_back(std::move(core));
  }

  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    NumaNode node;
    node.os_index = static_cast<int>(n->os_index);
    node.memory = n->attr ? n->attr->numanode.local_memory : 0;
    if (n->cpuset) node.pus = to_vector(n->cpuset);
    for (const Package& p : topo.packages) {
      const bool inside = !node.pus.empty() &&
                          std::all_of(node.pus.begin(), node.pus.end(), [&](int cpu) {
                            return std::find(p.pus.begin(), p.pus.end(), cpu) != p.pus.end();
                          });
      if (inside) node.package = p.index;
    }
    topo.numa_nodes.push_back(std::move(node));
  }

  add_caches(t, topo.caches, topo.cache_instances);
  topo.allowed_cpus = allowed_of(t, topo.synthetic);
  return topo;
}

struct Machine {
  TopologyPtr topo;
  std::mutex mu;  // hwloc_get_cpubind allocates; keep callers apart
};

Machine& machine() {
  static Machine m{load(""), {}};
  return m;
}

}  // namespace

const Pu& Topology::pu(int os_index) const {
  for (const Pu& p : pus)
    if (p.os_index == os_index) return p;
  throw std::out_of_range("no CPU " + std::to_string(os_index) + " in topology " + source);
}

bool Topology::allowed(int os_index) const {
  return std::binary_search(allowed_cpus.begin(), allowed_cpus.end(), os_index);
}

Topology load_topology(const std::string& synthetic) {
  auto topo = load(synthetic);
  return build(topo.get(), synthetic);
}

std::vector<int> process_allowed_cpus() {
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mu);
  return allowed_of(m.topo.get(), false);
}

std::string cpu_list_str(const std::vector<int>& cpus) {
  std::vector<int> v(cpus);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(v[i]);
    if (j > i) s += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

}  // namespace ppb
