// How a plan is run: the study's Scheduler, Operator and Library knobs as
// the executor sees them (the Python Settings resolve presets, affinity
// policies and core groups into this).
#pragma once

#include <string>
#include <vector>

namespace ppb {

enum class Scheduler { sync, async };
enum class OperatorMode { library, framework };

struct ExecSettings {
  Scheduler scheduler = Scheduler::sync;
  int inter_op = 1;  // workers running independent nodes at once (async)
  int intra_op = 1;  // threads per worker
  // library: one library call threads the op over intra_op threads;
  // framework: the op is cut into intra_op blocks along its leading axis,
  // each run single-threaded on the worker's pool.
  OperatorMode op_mode = OperatorMode::library;
  std::string library = "onednn";  // heavy ops' math library
  std::string pool = "openmp";     // the workers' pools (framework mode)
  // Per worker, the CPUs of its team (thread i on cpus[i % size]); empty
  // lists or no lists: not pinned.
  std::vector<std::vector<int>> worker_cpus;
  // Per node, the worker group (core group / socket) it prefers, for the
  // per-socket placement of parallel branches; empty: any worker. Workers
  // are split into contiguous groups: worker w is in group w * groups /
  // inter_op (so with compact placement a group's workers share a socket).
  std::vector<int> node_group;
  int groups = 1;
};

// Parses the knob names; std::invalid_argument naming a bad value.
Scheduler parse_scheduler(const std::string& s);
OperatorMode parse_operator_mode(const std::string& s);
void validate(const ExecSettings& s, size_t nodes);

}  // namespace ppb
