// Runs a prepared plan: sync (the calling thread runs the nodes one at a
// time in topological order) or async (inter_op workers take ready nodes
// from a queue and run independent nodes at once, each worker with its own
// OpenMP team, and in framework mode its own pool).
#pragma once

#include "pyparbench/graph/exec_settings.hpp"
#include "pyparbench/graph/node_runner.hpp"
#include "pyparbench/graph/plan.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace ppb {

class Audit;

// runners[i] null: the node computes nothing (input, reshape). `team`: the
// most threads any node runs on (the per-node rule's, at most intra_op):
// each worker's OpenMP team or pool has that many. `audit`, when given,
// receives a report from every thread that works: worker w reports as team
// w (its OpenMP team and, in framework mode, its pool threads).
RunResult execute(const std::vector<NodeRunner*>& runners,
                  const std::vector<std::vector<int>>& consumers,
                  const std::vector<int>& dependencies, const ExecSettings& settings, int team,
                  int repeats, int warmup, bool trace, const std::shared_ptr<Audit>& audit = {},
                  const std::function<void()>& before_repeat = {});

}  // namespace ppb
