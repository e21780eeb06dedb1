// The native timing loop: a measurement holds no Python.
#pragma once

#include <functional>
#include <vector>

namespace ppb {

// Runs fn `warmup` times untimed, then `repeats` times, and returns the
// duration of each timed run in nanoseconds.
std::vector<double> time_loop(const std::function<void()>& fn, int repeats, int warmup);

}  // namespace ppb
