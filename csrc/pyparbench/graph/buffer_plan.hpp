// Buffer reuse for a compiled graph: which node outputs may share memory.
//
// One buffer per node output makes every node write memory that nothing
// touched since the previous run: at batch 8 a CNN's activations are
// hundreds of MB, so each layer's output misses every cache on its way in.
// Sharing a buffer between outputs whose lifetimes never overlap keeps the
// working set near the largest few tensors, mostly cache-resident.
//
// The rule holds under any schedule (sync, or async with any number of
// workers running independent nodes at once): a node may take over a
// buffer only when every node that wrote or read the buffer's current
// contents is one of its ancestors in the dependency graph, and so has
// finished before it starts.
#pragma once

#include <cstddef>
#include <vector>

namespace ppb {

struct BufferNode {
  std::vector<int> inputs;  // distinct earlier nodes read
  size_t bytes = 0;         // the output's size
  int alias_of = -1;        // >= 0: writes into (or views) that input's buffer
  bool keep = false;        // a graph input or output: its buffer is its own for good
};

struct BufferPlan {
  std::vector<int> slot;       // per node: the buffer it writes (aliases: their input's)
  std::vector<size_t> bytes;   // per buffer: the largest output it holds
  // Per node: whether a later node takes its buffer over, so that its value
  // does not survive the run.
  std::vector<bool> overwritten;
};

// reuse false: one buffer per node that is not an alias.
BufferPlan plan_buffers(const std::vector<BufferNode>& nodes, bool reuse);

}  // namespace ppb
