// A compiled graph: node specs, one buffer per node output, the dependency
// counts, and the prepared runners of each execution setting used so far
// (oneDNN primitives depend on the thread count, so a setting change means
// new kernels; they are made once per setting and kept).
#pragma once

#include "pyparbench/graph/exec_settings.hpp"
#include "pyparbench/graph/node_runner.hpp"
#include "pyparbench/graph/node_spec.hpp"
#include "pyparbench/graph/thread_rule.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace ppb {

class Audit;

struct TraceEvent {
  int node = 0;
  int threads = 1;  // the node's team (the per-node rule)
  int worker = 0;
  int cpu = -1;
  double start_ns = 0, end_ns = 0;  // from the start of the traced repeat
};

struct RunResult {
  std::vector<double> ns;          // per timed repeat
  std::vector<TraceEvent> trace;   // the last repeat, when asked for
};

class Plan {
 public:
  // nodes in topological order (inputs refer to earlier nodes); outputs:
  // node indices. reuse_buffers: outputs whose lifetimes never overlap share
  // memory (graph/buffer_plan.hpp), and only graph inputs and outputs can be
  // read back. weights_in_place: the linear nodes' kernels read the
  // parameters where they are wherever that gives the same results
  // (make_node_runner), rather than each packing a copy: plans that share one
  // copy of the weights (a generation's prompt and token steps). The caller
  // keeps the parameters alive and unchanged as long as the plan, as ever.
  // std::invalid_argument for an ill-formed graph.
  Plan(std::vector<NodeSpec> nodes, std::vector<int> outputs, bool reuse_buffers = false,
       bool weights_in_place = false);
  ~Plan();

  const std::vector<NodeSpec>& nodes() const { return nodes_; }
  const std::vector<int>& outputs() const { return outputs_; }
  bool weights_in_place() const { return weights_in_place_; }

  // Copies a graph input's data into its buffer (bytes must match).
  void set_input(int node, const void* data, size_t bytes);
  // Points a float32 graph input at the caller's buffer (bytes must match),
  // which the plan then reads and a node may write in place (a decode
  // step's cache kept across runs), without a copy; the caller keeps it
  // alive as long as the plan. Prepared kernels are made again.
  void bind_input(int node, void* data, size_t bytes);
  // A node's output buffer (valid until the plan is destroyed).
  const void* buffer(int node) const;
  size_t buffer_bytes(int node) const;
  // Copies the output buffers of `nodes` into `dst` (buffer_bytes each) as
  // one step: never during a run, so they all come from one run.
  // std::invalid_argument for a node whose buffer a later node reuses.
  void copy_outputs(const std::vector<int>& nodes, const std::vector<void*>& dst) const;

  // Prepares (once) and runs the plan `warmup` + `repeats` times. `audit`:
  // every working thread reports into it (worker w as team w).
  // `before_repeat`, when set, is called before each repeat (instances run
  // side by side meet at a barrier there).
  RunResult run(const ExecSettings& settings, int repeats, int warmup, bool trace,
                const std::shared_ptr<Audit>& audit = {},
                const std::function<void()>& before_repeat = {});
  // Per node, the buffer it writes (aliases and in-place nodes share their
  // input's; with reuse, nodes of disjoint lifetimes share one), and the
  // bytes all buffers take together.
  const std::vector<int>& buffer_slots() const { return slots_; }
  size_t allocated_bytes() const { return allocated_; }
  // Blocks each node was cut into under `settings` (1 in library mode).
  std::vector<int> blocks(const ExecSettings& settings);
  // What computes each convolution and each bf16 node under `settings`
  // (oneDNN's implementation name, or "im2col+..."), "direct:<isa>" for a
  // node run by a direct kernel; empty for other nodes.
  std::vector<std::string> implementations(const ExecSettings& settings);
  // Per node, whether its bf16 kernel runs emulated (oneDNN picked an
  // implementation without bf16 dot products: dnnl_compat.hpp); false for
  // fp32 nodes.
  std::vector<bool> emulated(const ExecSettings& settings);
  // Each node's thread count under `settings` and why (thread_rule.hpp).
  std::vector<NodeThreads> node_threads(const ExecSettings& settings);
  // Node `node`'s kernel as prepared under `settings`, alone in a C++ loop on
  // the calling thread: ns per call, one value per repeat of `inner` calls.
  // std::invalid_argument for a node that computes nothing.
  std::vector<double> time_node(const ExecSettings& settings, int node, int repeats, int warmup,
                                int inner);

 private:
  using Runners = std::vector<std::unique_ptr<NodeRunner>>;
  struct Prepared {
    Runners runners;
    std::vector<NodeThreads> threads;
    int team = 1;  // the most threads any node runs on
  };
  // What the runners depend on: the kernels' threads, how an op is cut,
  // the heavy ops' library, and what the per-node rule decides by (the
  // pool's cost in framework mode, the threshold asked for).
  using RunnersKey = std::tuple<int, OperatorMode, MathLibrary, PoolKind, double>;
  static RunnersKey runners_key(const ExecSettings& settings);
  Prepared& prepared(const ExecSettings& settings);

  std::vector<NodeSpec> nodes_;
  std::vector<int> outputs_;
  std::vector<void*> data_;        // per node; aliases share their input's
  std::vector<void*> owned_;       // allocations to free
  std::vector<bool> overwritten_;  // per node: a later node reuses its buffer
  std::vector<int> slots_;         // per node: index into owned_
  std::vector<size_t> slot_bytes_; // per index into owned_: its size
  std::vector<int> root_;          // per node: the node whose buffer it views (itself if none)
  size_t allocated_ = 0;
  std::vector<std::vector<int>> consumers_;
  std::vector<int> dependencies_;  // distinct input nodes per node
  std::vector<float> ones_;        // a default batch-norm scale
  bool weights_in_place_ = false;
  std::map<RunnersKey, Prepared> runners_;
  mutable std::mutex mu_;          // one run (or copy of outputs) at a time
};

}  // namespace ppb
