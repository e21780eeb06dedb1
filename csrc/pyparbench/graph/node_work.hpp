// What a node asks of one core: the bytes its kernel reads and writes and
// the arithmetic it does, the inputs of the per-node thread rule
// (thread_rule.hpp). Counted as pyparbench/graph/analysis.py counts them,
// except that an element-wise function is weighed by the vector operations
// it takes (a tanh is some 25, not one), since here the count stands for
// time.
#pragma once

#include "pyparbench/core/tensor.hpp"
#include "pyparbench/graph/node_spec.hpp"

#include <vector>

namespace ppb {

struct NodeWork {
  double bytes = 0;  // inputs, parameters and output
  double flops = 0;  // arithmetic operations, vector lanes counted one by one
};

// `inputs`: the shapes of the node's inputs, in order.
NodeWork node_work(const NodeSpec& spec, const std::vector<Shape>& inputs);

}  // namespace ppb
