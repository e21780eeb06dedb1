// The thread-pool interface of the Library layer: parallel_for and task
// submission with a join, implemented three ways (openmp_pool, std_pool,
// eigen_pool). A pool owns `threads` threads that do all its work (the caller
// only hands work over and waits), and can be pinned: thread i runs on
// cpus[i % cpus.size()].
//
// An exception thrown by a task is caught on the pool thread; the first one
// is rethrown by the parallel_for that ran it, or by join() for submitted
// tasks (the others of that batch still run). A pool stays usable after an
// error. Destroying a pool runs the tasks still queued, then stops and joins
// its threads. A task must not wait on its own pool (no nested parallel_for).
#pragma once

#include "pyparbench/core/knobs.hpp"
#include "pyparbench/threading/audit.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ppb {

// The first exception of a batch of tasks.
class ErrorSlot {
 public:
  void capture() noexcept;  // call from a catch block
  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }
  // Rethrows the captured exception (and forgets it), if any.
  void rethrow();

 private:
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::exception_ptr first_;
};

// Counts work in flight; wait() returns once it is back to zero.
class WorkCounter {
 public:
  void add(int64_t n = 1) noexcept { n_.fetch_add(n, std::memory_order_relaxed); }
  void done() noexcept;
  void wait();

 private:
  std::atomic<int64_t> n_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

// Pool threads pin themselves as they start (thread i to cpus[i % size]);
// the pool's constructor waits for all of them and reports a failed pin.
class WorkerStart {
 public:
  WorkerStart(std::vector<int> cpus, int threads) : cpus_(std::move(cpus)), threads_(threads) {}
  // Called first thing by worker `index`.
  void arrive(int index) noexcept;
  // Blocks until every worker arrived; std::system_error if a pin failed.
  void wait();

 private:
  const std::vector<int> cpus_;
  const int threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::exception_ptr error_;
};

class ThreadPool {
 public:
  using Task = std::function<void()>;
  virtual ~ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  virtual PoolKind kind() const = 0;
  int threads() const { return threads_; }
  // The CPUs the pool's threads are pinned to (empty: not pinned).
  const std::vector<int>& cpus() const { return cpus_; }

  // fn(i) for every i in [0, n), spread over the pool's threads; returns when
  // all are done, rethrowing the first exception.
  virtual void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);
  // Queues a task (thread-safe).
  void submit(Task task);
  // Waits for every task submitted so far, then rethrows the first exception
  // any of them threw.
  void join();

  // While attached, every unit of work reports into `audit` as `team`.
  void attach_audit(std::shared_ptr<Audit> audit, int team);
  void detach_audit();

 protected:
  // threads >= 1; cpus empty or checked with require_pinnable.
  ThreadPool(int threads, std::vector<int> cpus);

  // Runs a task on one of the pool's threads.
  virtual void enqueue(Task task) = 0;
  // The calling thread's index in the pool, -1 if it is not one of them.
  virtual int current_worker() const = 0;

  // Runs `fn` as one unit of work: audit report when attached, exception
  // caught into `errors`.
  template <class F>
  void run_unit(F&& fn, ErrorSlot& errors) noexcept {
    if (auditing_.load(std::memory_order_relaxed)) report();
    try {
      fn();
    } catch (...) {
      errors.capture();
    }
  }
  // A submitted task: run_unit into the pool's error slot, then counted done.
  void run_submitted(const Task& task) noexcept;
  // Before destruction: wait for what is queued, forget errors.
  void drain() noexcept;

  const int threads_;
  const std::vector<int> cpus_;

 private:
  void report() noexcept;
  WorkCounter pending_;
  ErrorSlot errors_;
  std::atomic<bool> auditing_{false};
  std::mutex audit_mu_;
  std::shared_ptr<Audit> audit_;
  int audit_team_ = 0;
};

// std::invalid_argument naming a bad thread count; cpus as for
// require_pinnable (empty: not pinned).
std::unique_ptr<ThreadPool> make_pool(PoolKind kind, int threads, std::vector<int> cpus = {});

}  // namespace ppb
