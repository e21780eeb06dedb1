// Eigen's non-blocking pool (Eigen::ThreadPool from
// <unsupported/Eigen/CXX11/ThreadPool>): a lock-free queue per thread, work
// stealing, and idle threads that spin a while before they sleep. A task
// submitted from outside the pool lands on a random thread's queue; when
// that queue is full (1024 tasks) Eigen runs it on the submitting thread.
#pragma once

#include "pyparbench/threading/pool.hpp"

#include <memory>
#include <vector>

namespace ppb {

class EigenPool final : public ThreadPool {
 public:
  EigenPool(int threads, std::vector<int> cpus);
  ~EigenPool() override;
  PoolKind kind() const override { return PoolKind::eigen; }

 protected:
  void enqueue(Task task) override;
  int current_worker() const override;

 private:
  struct Impl;  // keeps Eigen's headers out of this one
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppb
