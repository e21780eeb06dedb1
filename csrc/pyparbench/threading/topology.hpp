// Machine topology from hwloc: sockets (packages), NUMA nodes, physical
// cores, logical CPUs with their SMT siblings, caches, and the CPUs this
// process may use. A topology can also be synthetic (an hwloc synthetic
// description), so that planning code is tested for big servers anywhere.
//
// CPU numbers are always OS indices (what taskset, sched_setaffinity and
// /proc call CPU numbers). For synthetic topologies hwloc numbers PUs in
// logical order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppb {

struct Pu {
  int os_index = 0;
  int core = 0;     // index into Topology::cores
  int package = 0;  // index into Topology::packages
  int numa = -1;    // OS index of its NUMA node, -1 when unknown
  std::vector<int> siblings;  // OS indices of the other PUs of its core
};

struct Core {
  int index = 0;          // logical index (position in Topology::cores)
  int package = 0;        // index into Topology::packages
  int numa = -1;          // OS index of its NUMA node, -1 when unknown
  std::vector<int> pus;   // OS indices of its PUs, in logical order
};

struct Package {
  int index = 0;            // logical index
  std::vector<int> cores;   // indices into Topology::cores
  std::vector<int> pus;     // OS indices
};

struct NumaNode {
  int os_index = 0;
  int package = -1;         // the package holding all its PUs, -1 if it spans packages
  std::vector<int> pus;     // OS indices
  uint64_t memory = 0;      // local memory in bytes (0 when unknown)
};

struct Cache {
  int level = 0;
  std::string type;         // "data", "instruction" or "unified"
  uint64_t size = 0;        // bytes per instance
  int line_size = 0;        // bytes, 0 when unknown
  int count = 0;            // instances in the machine
  int cpus_per_instance = 0;  // PUs sharing one instance
};

// One cache as hwloc sees it: which CPUs share it. Sizing decisions (the
// micro-batch budget, the probes' working sets) read these, so that a team
// is given the caches it runs in, not every instance in the machine.
struct CacheInstance {
  int level = 0;
  std::string type;         // "data", "instruction" or "unified"
  uint64_t size = 0;        // bytes
  std::vector<int> pus;     // OS indices of the CPUs sharing it
};

struct Topology {
  std::string source;       // "this machine" or the synthetic description
  bool synthetic = false;
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;  // logical order
  std::vector<Pu> pus;      // logical order
  std::vector<Cache> caches;
  std::vector<CacheInstance> cache_instances;  // every instance, level by level
  std::vector<int> allowed_cpus;  // sorted OS indices this process may use

  const Pu& pu(int os_index) const;  // throws std::out_of_range
  bool allowed(int os_index) const;
};

// synthetic: empty for this machine, else an hwloc synthetic description such
// as "package:2 core:24 pu:2" (std::invalid_argument when hwloc rejects it).
// For this machine, allowed_cpus is the process's CPU binding (taskset)
// intersected with the CPUs its cgroup allows; for a synthetic one, all PUs.
Topology load_topology(const std::string& synthetic = "");

// The CPUs this process may use now (OS indices, sorted); cheap after the
// first call, which loads this machine's topology once.
std::vector<int> process_allowed_cpus();

// "0-3,8" style.
std::string cpu_list_str(const std::vector<int>& cpus);


}  // namespace ppb
