// Data parallelism across core groups: several plans (each a copy of the
// model on a slice of the batch) run side by side, each on its own thread
// with its own settings, meeting at a barrier before every repeat so that a
// repeat's time is that of the slowest instance.
#pragma once

#include "pyparbench/graph/plan.hpp"

#include <vector>

namespace ppb {

// Per-repeat wall time of all instances together (ns); each instance's own
// times are returned in `per_instance`.
std::vector<double> run_instances(const std::vector<Plan*>& plans,
                                  const std::vector<ExecSettings>& settings, int repeats,
                                  int warmup, std::vector<std::vector<double>>& per_instance);

}  // namespace ppb
