// Placement: which CPUs the threads of each pool (inter-op worker and its
// intra-op team) are pinned to. A pure function of a Topology, so it is
// tested on synthetic machines.
//
// Policies, over the CPUs the process may use:
//   none     no pinning (every pool gets an empty list)
//   compact  physical cores first, SMT siblings last (siblings found by
//            core, whatever their OS numbers); each pool's team is kept in
//            one L3 domain, else one NUMA node, else one socket, when it fits
//            there, else it takes the next free CPUs in compact order. On a
//            hybrid machine a team stays on one CPU kind where it fits, the
//            most powerful first. With group > 0, pools come in groups of
//            `group` (an instance's inter-op workers): a group is first given
//            the tightest home holding all its threads, so an instance never
//            crosses a NUMA node it fits in (group 0: no instances)
//   scatter  threads dealt round-robin across sockets (and across NUMA nodes
//            within a socket), physical cores before SMT siblings; pool p
//            takes threads p*T .. p*T+T-1 of that order
// SMT siblings are used only when smt is true and the physical cores are not
// enough: with smt=false each core offers its first allowed PU only.
// Disallowed CPUs are never used; memory-only NUMA nodes hold no CPU.
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
CpuLists place(const Topology& topo, AffinityPolicy policy, int pools, int threads, bool smt,
               int group = 0);

// Explicit lists, one per pool, each of `threads` CPUs. std::invalid_argument
// for a CPU the process may not use, a CPU listed twice, a list of the wrong
// length, or (with smt=false) two SMT siblings of one core.
CpuLists place_explicit(const Topology& topo, const CpuLists& cpus, int pools, int threads,
                        bool smt);

}  // namespace ppb
