// Base of every prepared kernel: a fixed intra-op thread count, a lock so
// that one kernel object is never bound and run by two callers at once, and
// the run / timed-loop entry points shared by all ops.
//
// A kernel can also carry a placement (the CPUs of its OpenMP team: thread i
// on cpus[i % size], the calling thread being thread 0), applied around every
// run and timed loop, and an attached audit that its team reports into at
// the start and end of each run and timed loop. Placement, audit and the
// timed loop come from threading/ and timing/, so the base of the kernels
// sits in ops/, above them.
#pragma once

#include "pyparbench/core/threads.hpp"
#include "pyparbench/threading/affinity.hpp"
#include "pyparbench/timing/time_loop.hpp"

#include <memory>
#include <mutex>
#include <vector>

namespace ppb {

class Audit;

class Kernel {
 public:
  explicit Kernel(std::optional<int> threads) : threads_(resolve_threads(threads)) {}
  virtual ~Kernel() = default;
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  int threads() const { return threads_; }

  // Pins the kernel's team to `cpus` for every later run (checked with
  // require_pinnable: std::invalid_argument naming a bad CPU). The calling
  // thread gets its own mask back after each run; the team's other threads
  // stay pinned until a run of an unpinned kernel from the same thread.
  void pin(std::vector<int> cpus);
  void unpin();
  // Empty when not pinned.
  std::vector<int> pinned_cpus() const;

  // While attached, every run reports its team into `audit` as `team`.
  void attach_audit(std::shared_ptr<Audit> audit, int team);
  void detach_audit();

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
    TeamScope team(*this);
    execute();
  }

  template <class Bind>
  std::vector<double> timed_with(Bind&& bind, int repeats, int warmup) {
    std::lock_guard<std::mutex> lock(mu_);
    bind();
    TeamScope team(*this);
    return time_loop([this] { execute(); }, repeats, warmup);
  }

  const int threads_;

 private:
  // Placement and audit around one run or timed loop; made with mu_ held.
  class TeamScope {
   public:
    explicit TeamScope(Kernel& k);
    ~TeamScope();
    TeamScope(const TeamScope&) = delete;
    TeamScope& operator=(const TeamScope&) = delete;

   private:
    Kernel& k_;
    TeamPlacement placement_;
  };

  mutable std::mutex mu_;
  std::vector<int> cpus_;  // placement; empty: not pinned
  std::shared_ptr<Audit> audit_;
  int audit_team_ = 0;
};

}  // namespace ppb
