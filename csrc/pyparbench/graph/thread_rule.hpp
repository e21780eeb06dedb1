// The per-node thread rule: when a plan is prepared, each node gets its own
// thread count. A node whose work would take one core less time than a team
// of intra_op threads costs to start and join runs alone, on the calling
// (worker) thread, with no team fork; every other node gets intra_op
// threads. t threads can save at most work * (1 - 1/t), so the break-even
// is team_ns(t) * t / (t - 1).
//
// Both sides are calibrated on this machine once per process: the team's
// cost by timing empty OpenMP regions of t threads (library mode) or the
// pool's parallel_for of t trivial blocks (framework mode), under this
// process's wait policy; a node's work in ns from its bytes and arithmetic
// (node_work.hpp) at this core's rates (an in-cache element-wise stream, and
// half the multiply-add peak, which is what small products and convolutions
// reach).
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/graph/exec_settings.hpp"
#include "pyparbench/graph/node_work.hpp"

#include <string>

namespace ppb {

// One core's rates, calibrated on first use.
struct WorkRates {
  double ns_per_byte = 0;
  double ns_per_flop = 0;
};
WorkRates work_rates();

// ns to start and join a team of `threads` (calibrated on first use per
// mode, pool kind and size); 0 for one thread.
double team_cost_ns(OperatorMode mode, PoolKind pool, int threads);

struct NodeThreads {
  int threads = 1;            // the node's team; 1: on the calling thread, 0: computes nothing
  int requested = 1;          // intra_op
  double work_ns = 0;         // the estimate of the node's time on one core
  double team_ns = 0;         // what a team of `requested` costs to start and join
  double threshold_ns = 0;    // below it, the node runs alone
  std::string reason;         // why, in words
  // Alone and small enough (kDirectMaxWorkNs) for a direct kernel, where
  // the op has one: there a library call's fixed cost is a large share.
  bool direct = false;
};

// The most work (ns on one core) a node run by a direct kernel has; above
// it a library call's fixed cost (about a microsecond) is under 5 %, and
// the library's own kernel runs the node (on one thread when alone).
constexpr double kDirectMaxWorkNs = 20000;

// The rule for a node of `work` under `settings` (settings.alone_below_ns:
// < 0 the calibrated break-even, 0 the rule off, > 0 that threshold).
// `can_thread`: false for a node that computes nothing.
NodeThreads choose_threads(const NodeWork& work, const ExecSettings& settings, bool can_thread);

}  // namespace ppb
