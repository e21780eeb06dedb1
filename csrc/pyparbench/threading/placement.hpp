// Placement: which CPUs the threads of each pool (inter-op worker and its
// intra-op team) are pinned to. A pure function of a Topology, so it is
// tested on synthetic machines.
//
// Policies, over the CPUs the process may use:
//   none     no pinning (every pool gets an empty list)
//   compact  physical cores of one socket first, SMT siblings last; each
//            pool's team is kept on one NUMA node, else on one socket, when
//            it fits there, else it takes the next free CPUs in compact order
//   scatter  threads dealt round-robin across sockets (and across NUMA nodes
//            within a socket), physical cores before SMT siblings; pool p
//            takes threads p*T .. p*T+T-1 of that order
// SMT siblings are used only when smt is true and the physical cores are not
// enough: with smt=false each core offers its first allowed PU only.
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/threading/topology.hpp"

#include <vector>

namespace ppb {

using CpuLists = std::vector<std::vector<int>>;

// `pools` lists of `threads` OS CPU indices each (empty lists for none).
// std::invalid_argument when pools or threads < 1, or when pinning needs more
// CPUs than the process may use (physical cores with smt=false, logical CPUs
// with smt=true).
CpuLists place(const Topology& topo, AffinityPolicy policy, int pools, int threads, bool smt);

// Explicit lists, one per pool, each of `threads` CPUs. std::invalid_argument
// for a CPU the process may not use, a CPU listed twice, a list of the wrong
// length, or (with smt=false) two SMT siblings of one core.
CpuLists place_explicit(const Topology& topo, const CpuLists& cpus, int pools, int threads,
                        bool smt);

}  // namespace ppb
