// What runs one node of a plan: its prepared kernel(s) bound to the plan's
// buffers. In library mode one kernel threads the op over intra_op threads;
// in framework mode the op is cut into blocks along its leading axis (at
// batch 1 along its channels or output features), each a single-threaded
// kernel, and the blocks run on the worker's pool.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/graph/exec_settings.hpp"
#include "pyparbench/graph/node_spec.hpp"

#include <memory>
#include <string>
#include <vector>

namespace ppb {

class ThreadPool;

class NodeRunner {
 public:
  virtual ~NodeRunner() = default;
  // pool: the running worker's pool (used in framework mode).
  virtual void run(ThreadPool* pool) = 0;
  // Blocks the op was cut into (1 in library mode).
  virtual int blocks() const = 0;
  // What computes a convolution or a bf16 node (oneDNN's implementation
  // name of its first block), "direct:<isa>" for a node run by a direct kernel
  // (direct_runner.hpp); empty for other ops.
  virtual std::string implementation() const = 0;
  // Whether the node's bf16 kernel runs without bf16 dot products (oneDNN
  // picked an emulating implementation); false for fp32 and direct kernels.
  virtual bool emulated() const { return false; }
  // The node's kernel alone on the calling thread, `inner` calls per timed
  // repeat: ns per call, each repeat.
  virtual std::vector<double> time_alone(int repeats, int warmup, int inner);
};

// Builds the runner of node `spec`, reading its inputs from `ins` and
// writing `out`, on `threads` threads (the per-node rule's count,
// thread_rule.hpp: 1 runs the node on the calling thread), by a direct
// kernel when `direct` and its op has one. `weights_in_place`: an fp32
// linear node on oneDNN reads its weight where the spec's parameter is
// (StreamedLinear::borrow_weights; Linear's weights_in_place where its
// matmul allows) instead of packing its own copy, the same results bit for
// bit. Returns null for ops that compute nothing (input, reshape).
// std::invalid_argument for an op or library that cannot run the node.
std::unique_ptr<NodeRunner> make_node_runner(const NodeSpec& spec, const std::vector<Tensor>& ins,
                                             const Tensor& out, const ExecSettings& settings,
                                             const std::vector<float>& ones, int threads,
                                             bool direct, bool weights_in_place = false);

}  // namespace ppb
