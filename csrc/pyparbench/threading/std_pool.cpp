#include "pyparbench/threading/std_pool.hpp"

namespace ppb {

namespace {
thread_local const StdPool* t_pool = nullptr;
thread_local int t_index = -1;
}  // namespace

StdPool::StdPool(int threads, std::vector<int> cpus)
    : ThreadPool(threads, std::move(cpus)), start_(cpus_, threads) {
  try {
    workers_.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
    start_.wait();
  } catch (...) {
    stop();
    throw;
  }
}

StdPool::~StdPool() {
  drain();
  stop();
}

void StdPool::stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
}

void StdPool::enqueue(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

int StdPool::current_worker() const { return t_pool == this ? t_index : -1; }

void StdPool::work(int index) {
  t_pool = this;
  t_index = index;
  start_.arrive(index);
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // wrapped by the base class: never throws
  }
}

}  // namespace ppb
