#include "pyparbench/threading/openmp_pool.hpp"

#include "pyparbench/threading/affinity.hpp"

#include <omp.h>

namespace ppb {

OpenMPPool::OpenMPPool(int threads, std::vector<int> cpus)
    : ThreadPool(threads, std::move(cpus)) {
  driver_ = std::thread([this] { drive(); });
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return started_; });
  if (start_error_) {
    stop_ = true;
    lock.unlock();
    cv_.notify_all();
    driver_.join();
    std::rethrow_exception(start_error_);
  }
}

OpenMPPool::~OpenMPPool() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  driver_.join();
}

void OpenMPPool::drive() {
  // Form the team once (pinned when asked): later regions of this size from
  // this thread reuse the same threads.
  std::exception_ptr error;
  try {
    if (!cpus_.empty()) {
      pin_omp_team(cpus_, threads_);
    } else {
#pragma omp parallel num_threads(threads_)
      {
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
    start_error_ = error;
  }
  done_cv_.notify_all();
  if (error) return;

  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || job_ || !queued_.empty(); });
    if (job_) {
      const std::function<void()>* job = job_;
      lock.unlock();
      std::exception_ptr e;
      try {
        (*job)();
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      job_ = nullptr;
      job_error_ = e;
      job_done_ = true;
      done_cv_.notify_all();
    } else if (!queued_.empty()) {
      lock.unlock();
      run_queued();
      lock.lock();
    } else {
      return;  // stop_, with nothing queued
    }
  }
}

void OpenMPPool::run_queued() {
  // Batches stay alive (and in place) until the region's closing barrier,
  // by which every task has run.
  std::deque<std::vector<Task>> batches;
#pragma omp parallel num_threads(threads_)
  {
#pragma omp single
    {
      for (;;) {
        std::vector<Task> batch;
        {
          std::lock_guard<std::mutex> lock(mu_);
          batch.swap(queued_);
        }
        if (batch.empty()) break;
        batches.push_back(std::move(batch));
        const std::vector<Task>& b = batches.back();
        for (size_t i = 0; i < b.size(); ++i) {
          const Task* task = &b[i];
#pragma omp task firstprivate(task)
          (*task)();  // wrapped by the base class: never throws
        }
      }
    }
  }
}

void OpenMPPool::call(const std::function<void()>& job) {
  std::lock_guard<std::mutex> serial(call_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &job;
  job_done_ = false;
  cv_.notify_one();
  done_cv_.wait(lock, [this] { return job_done_; });
  std::exception_ptr e = std::move(job_error_);
  job_error_ = nullptr;
  if (e) std::rethrow_exception(e);
}

void OpenMPPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  ErrorSlot errors;
  const int64_t blocks = std::min<int64_t>(n, threads_);
  call([&] {
#pragma omp parallel num_threads(threads_)
    {
      const int64_t b = omp_get_thread_num();
      if (b < blocks) {
        const int64_t lo = n * b / blocks, hi = n * (b + 1) / blocks;
        run_unit(
            [&] {
              for (int64_t i = lo; i < hi && !errors.failed(); ++i) fn(i);
            },
            errors);
      }
    }
  });
  errors.rethrow();
}

void OpenMPPool::enqueue(Task task) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake = queued_.empty();
    queued_.push_back(std::move(task));
  }
  if (wake) cv_.notify_one();
}

int OpenMPPool::current_worker() const {
  return omp_get_level() > 0 ? omp_get_thread_num() : -1;
}

}  // namespace ppb
