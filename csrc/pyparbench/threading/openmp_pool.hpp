// The OpenMP pool: a driver thread that owns an OpenMP team of `threads`
// (itself and threads-1 libgomp workers), so the team is this pool's alone
// and keeps its threads and their pinning for the pool's lifetime.
// parallel_for runs one parallel region on the team (one block per thread);
// submitted tasks are gathered into OpenMP tasks, created by one thread of
// a region and run by all of them.
#pragma once

#include "pyparbench/threading/pool.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ppb {

class OpenMPPool final : public ThreadPool {
 public:
  OpenMPPool(int threads, std::vector<int> cpus);
  ~OpenMPPool() override;
  PoolKind kind() const override { return PoolKind::openmp; }
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) override;

 protected:
  void enqueue(Task task) override;
  int current_worker() const override;

 private:
  void drive();
  void run_queued();
  // Runs job on the driver thread (inside no region), waits, rethrows.
  void call(const std::function<void()>& job);

  std::mutex call_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable cv_;       // wakes the driver
  std::condition_variable done_cv_;  // wakes the caller of call()
  const std::function<void()>* job_ = nullptr;
  bool job_done_ = false;
  std::exception_ptr job_error_;
  std::vector<Task> queued_;
  bool stop_ = false;
  bool started_ = false;
  std::exception_ptr start_error_;
  std::thread driver_;
};

}  // namespace ppb
