// The mutex + condition variable pool (the Caffe2 / PyTorch style): one
// shared FIFO queue, a mutex around it, idle workers asleep on a condition
// variable, one wake-up per task.
#pragma once

#include "pyparbench/threading/pool.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace ppb {

class StdPool final : public ThreadPool {
 public:
  StdPool(int threads, std::vector<int> cpus);
  ~StdPool() override;
  PoolKind kind() const override { return PoolKind::std; }

 protected:
  void enqueue(Task task) override;
  int current_worker() const override;

 private:
  void work(int index);
  void stop() noexcept;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  WorkerStart start_;
  std::vector<std::thread> workers_;
};

}  // namespace ppb
