// Machine topology from hwloc: what the cores and sockets are, and which
// CPUs this process may use.
#pragma once

#include <string>
#include <vector>

namespace ppb {

struct TopologySummary {
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;  // physical cores
  int pus = 0;    // logical CPUs (hardware threads)
  std::vector<int> allowed_cpus;  // OS indices this process may run on
  std::string source;             // "this machine" or the synthetic description
};

// synthetic: empty for this machine, else an hwloc synthetic description
// such as "package:2 core:24 pu:2".
TopologySummary topology_summary(const std::string& synthetic = "");

}  // namespace ppb
