// A node run by a direct kernel (ops/direct_kernels.hpp, or the serial
// channels-last pooling loop) bound to the plan's buffers when the plan is
// prepared: a run is one call of the kernel on the calling thread, with no
// argument checks, no lock and no OpenMP region. Used for small nodes that
// run alone (the per-node thread rule, thread_rule.hpp) when the op has
// such a kernel.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/graph/node_runner.hpp"
#include "pyparbench/graph/node_spec.hpp"

#include <memory>
#include <vector>

namespace ppb {

// The direct runner of `spec` on `ins` / `out`, or null when its op, layout
// or shape has no direct kernel. The node must already have passed its
// library kernel's checks (make_node_runner builds that first).
std::unique_ptr<NodeRunner> make_direct_runner(const NodeSpec& spec, const std::vector<Tensor>& ins,
                                               const Tensor& out);

}  // namespace ppb
