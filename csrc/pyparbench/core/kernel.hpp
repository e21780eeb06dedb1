// Base of every prepared kernel: a fixed intra-op thread count, a lock so
// that one kernel object is never bound and run by two callers at once, and
// the run / timed-loop entry points shared by all ops.
#pragma once

#include "pyparbench/core/threads.hpp"
#include "pyparbench/timing/time_loop.hpp"

#include <mutex>
#include <vector>

namespace ppb {

class Kernel {
 public:
  explicit Kernel(std::optional<int> threads) : threads_(resolve_threads(threads)) {}
  virtual ~Kernel() = default;
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  int threads() const { return threads_; }

 protected:
  // Runs the kernel on whatever bind() has set; called with the lock held.
  virtual void execute() = 0;

  // Runs f under the kernel's lock (for state changes such as new weights).
  template <class F>
  void locked(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f();
  }

  template <class Bind>
  void run_with(Bind&& bind) {
    std::lock_guard<std::mutex> lock(mu_);
    bind();
    execute();
  }

  template <class Bind>
  std::vector<double> timed_with(Bind&& bind, int repeats, int warmup) {
    std::lock_guard<std::mutex> lock(mu_);
    bind();
    return time_loop([this] { execute(); }, repeats, warmup);
  }

  const int threads_;

 private:
  std::mutex mu_;
};

}  // namespace ppb
