#include "pyparbench/timing/time_loop.hpp"

#include "pyparbench/core/checks.hpp"

#include <chrono>

namespace ppb {

std::vector<double> time_loop(const std::function<void()>& fn, int repeats, int warmup) {
  require_at_least("repeats", repeats, 1);
  require_at_least("warmup", warmup, 0);
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ns(static_cast<size_t>(repeats));
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = clock::now();
    fn();
    const auto t1 = clock::now();
    ns[static_cast<size_t>(i)] = std::chrono::duration<double, std::nano>(t1 - t0).count();
  }
  return ns;
}

}  // namespace ppb
