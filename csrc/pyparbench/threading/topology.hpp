// Machine topology from hwloc: sockets (packages), NUMA nodes, physical
// cores, logical CPUs with their SMT siblings, caches, and the CPUs this
// process may use. A topology can also be synthetic (an hwloc synthetic
// description) or read from an hwloc XML file (`lstopo --of xml` on another
// machine), so that planning code is tested for big servers anywhere and a
// machine one does not have is planned as it is. All three go through one
// path: hwloc loads them, build() reads the model out.
//
// CPU numbers are always OS indices (what taskset, sched_setaffinity and
// /proc call CPU numbers). For synthetic topologies hwloc numbers PUs in
// logical order; a file keeps the machine's numbering (SMT siblings far
// apart, packages interleaved).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ppb {

struct Pu {
  int os_index = 0;
  int core = 0;     // index into Topology::cores
  int package = 0;  // index into Topology::packages
  int numa = -1;    // OS index of its NUMA node, -1 when unknown
  std::vector<int> siblings;  // OS indices of the other PUs of its core
  int kind = -1;    // index into Topology::cpu_kinds, -1 when hwloc knows none
};

struct Core {
  int index = 0;          // logical index (position in Topology::cores)
  int package = 0;        // index into Topology::packages
  int numa = -1;          // OS index of its NUMA node, -1 when unknown
  std::vector<int> pus;   // OS indices of its PUs, in logical order
  int kind = -1;          // index into Topology::cpu_kinds, -1 when none
  int l3 = -1;            // index into Topology::l3_domains, -1 when none
};

struct Package {
  int index = 0;            // logical index
  std::vector<int> cores;   // indices into Topology::cores
  std::vector<int> pus;     // OS indices
};

// A NUMA node. Each PU belongs to one node (its home: the node with the
// fewest CPUs among those local to it, then the lowest OS index); a node that
// is no PU's home (CXL memory, KNL's MCDRAM, a node with no CPUs) is
// memory-only: it holds no threads.
struct NumaNode {
  int os_index = 0;
  int package = -1;         // the package holding all its PUs, -1 if it spans packages
  std::vector<int> pus;     // OS indices of the PUs whose home it is
  std::vector<int> local_pus;  // OS indices of the PUs hwloc says it is local to
  bool memory_only = false;
  std::string subtype;      // hwloc's subtype ("MCDRAM", "GPUMemory", ...), often empty
  uint64_t memory = 0;      // local memory in bytes (0 when unknown)
};

// One kind of CPU (hwloc's CPU kinds: P and E cores of a hybrid CPU).
struct CpuKind {
  int index = 0;            // hwloc's order: least to most powerful
  int efficiency = -1;      // hwloc's efficiency rank (-1: unknown); higher is faster
  std::vector<int> pus;     // OS indices
  std::vector<std::pair<std::string, std::string>> infos;  // FrequencyMaxMHz, CoreType, ...
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
  std::string source;       // "this machine", the synthetic description or the file's path
  std::string kind = "machine";  // "machine", "synthetic" or "file"
  bool synthetic = false;   // kind == "synthetic"
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;  // logical order
  std::vector<Pu> pus;      // logical order
  std::vector<Cache> caches;
  std::vector<CacheInstance> cache_instances;  // every instance, level by level
  std::vector<std::vector<int>> l3_domains;  // the PUs (OS indices) of each L3 instance
  std::vector<CpuKind> cpu_kinds;  // hwloc's order (least powerful first); empty: one kind
  std::vector<int> allowed_cpus;  // sorted OS indices this process may use
  std::vector<int> disallowed_cpus;  // PUs in the topology not allowed (cgroup, binding)
  std::vector<int> offline_cpus;  // CPUs the machine has but that are offline

  const Pu& pu(int os_index) const;  // throws std::out_of_range
  bool allowed(int os_index) const;
};

// synthetic: empty for this machine, else an hwloc synthetic description such
// as "package:2 core:24 pu:2" (std::invalid_argument when hwloc rejects it).
// For this machine, allowed_cpus is the process's CPU binding (taskset)
// intersected with the CPUs its cgroup allows; for a synthetic one, all PUs.
Topology load_topology(const std::string& synthetic = "");

// The topology an hwloc XML file describes (hwloc 2.x's `lstopo --of xml`;
// 1.x exports as far as this hwloc reads them). allowed_cpus is the file's
// allowed cpuset (the cgroup of the process that wrote it); disallowed CPUs
// stay in the model. std::invalid_argument naming the file for a file that
// cannot be read, is over kMaxTopologyFileBytes, is not XML, is XML hwloc
// rejects (with hwloc's message), has no PU or no allowed PU.
constexpr long kMaxTopologyFileBytes = 64L << 20;
Topology load_topology_file(const std::string& path);

// The CPUs this process may use now (OS indices, sorted); cheap after the
// first call, which loads this machine's topology once.
std::vector<int> process_allowed_cpus();

// "0-3,8" style.
std::string cpu_list_str(const std::vector<int>& cpus);


}  // namespace ppb
