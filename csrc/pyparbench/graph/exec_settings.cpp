#include "pyparbench/graph/exec_settings.hpp"

#include "pyparbench/core/limits.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ppb {

void validate(const ExecSettings& s, size_t nodes) {
  if (s.inter_op < 1)
    throw std::invalid_argument("inter_op must be >= 1, got " + std::to_string(s.inter_op));
  if (s.intra_op < 1)
    throw std::invalid_argument("intra_op must be >= 1, got " + std::to_string(s.intra_op));
  // Every worker starts a thread and an OpenMP team: bound them all together.
  require_thread_count("inter_op", s.inter_op);
  require_thread_count("intra_op", s.intra_op);
  require_thread_count("inter_op x intra_op", int64_t{s.inter_op} * s.intra_op, kMaxRunThreads);
  if (s.scheduler == Scheduler::sync && s.inter_op != 1)
    throw std::invalid_argument("the sync scheduler runs one node at a time: inter_op must be 1, "
                                "got " + std::to_string(s.inter_op));
  if (!s.worker_cpus.empty() && static_cast<int>(s.worker_cpus.size()) != s.inter_op)
    throw std::invalid_argument("worker_cpus must have one list per inter-op worker (" +
                                std::to_string(s.inter_op) + "), got " +
                                std::to_string(s.worker_cpus.size()));
  if (s.groups < 1 || s.groups > s.inter_op)
    throw std::invalid_argument("groups must be between 1 and inter_op (" +
                                std::to_string(s.inter_op) + "), got " + std::to_string(s.groups));
  if (!s.node_group.empty() && s.node_group.size() != nodes)
    throw std::invalid_argument("node_group must have one entry per node (" +
                                std::to_string(nodes) + "), got " +
                                std::to_string(s.node_group.size()));
  if (!std::isfinite(s.alone_below_ns))
    throw std::invalid_argument("alone_below_ns must be a finite number of ns, got " +
                                std::to_string(s.alone_below_ns));
  for (int g : s.node_group)
    if (g < 0 || g >= s.groups)
      throw std::invalid_argument("node_group entries must be in [0, " +
                                  std::to_string(s.groups) + "), got " + std::to_string(g));
}

}  // namespace ppb
