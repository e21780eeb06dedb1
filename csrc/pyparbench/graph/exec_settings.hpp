// How a plan is run: the study's Scheduler, Operator and Library knobs as
// the executor sees them (the Python Settings resolve presets, affinity
// policies and core groups into this).
#pragma once

#include "pyparbench/core/knobs.hpp"

#include <cstddef>
#include <vector>

namespace ppb {

struct ExecSettings {
  Scheduler scheduler = Scheduler::sync;
  int inter_op = 1;  // workers running independent nodes at once (async)
  int intra_op = 1;  // threads per worker
  // library: one library call threads the op over intra_op threads;
  // framework: the op is cut into intra_op blocks along its leading axis,
  // each run single-threaded on the worker's pool.
  OperatorMode op_mode = OperatorMode::library;
  MathLibrary library = MathLibrary::onednn;  // heavy ops' math library
  PoolKind pool = PoolKind::openmp;           // the workers' pools (framework mode)
  // Per worker, the CPUs of its team (thread i on cpus[i % size]); empty
  // lists or no lists: not pinned.
  std::vector<std::vector<int>> worker_cpus;
  // Per node, the worker group (core group / socket) it prefers, for the
  // per-socket placement of parallel branches; empty: any worker. Workers
  // are split into contiguous groups: worker w is in group w * groups /
  // inter_op (so with compact placement a group's workers share a socket).
  std::vector<int> node_group;
  int groups = 1;
  // The per-node thread rule (thread_rule.hpp): a node whose estimated
  // work on one core is below this many ns runs alone, on the calling
  // thread; < 0: the calibrated break-even of this machine's team, 0: the
  // rule off (every node on intra_op threads).
  double alone_below_ns = -1;
};

// std::invalid_argument naming a bad count, CPU list or node group.
void validate(const ExecSettings& s, size_t nodes);

}  // namespace ppb
