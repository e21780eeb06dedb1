#include "pyparbench/threading/pool_bench.hpp"

#include "pyparbench/core/checks.hpp"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

void check_counts(int repeats, int warmup) {
  require_at_least("repeats", repeats, 1);
  require_at_least("warmup", warmup, 0);
}

}  // namespace

std::vector<double> bench_submit(ThreadPool& pool, int64_t tasks, int repeats, int warmup) {
  check_counts(repeats, warmup);
  require_at_least("tasks", tasks, 1);
  std::vector<double> ns;
  std::atomic<int64_t> counter{0};
  for (int r = 0; r < warmup + repeats; ++r) {
    counter.store(0);
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < tasks; ++i)
      pool.submit([&counter] { counter.fetch_add(1, std::memory_order_relaxed); });
    pool.join();
    const double dt = ns_since(t0);
    if (counter.load() != tasks)
      throw std::runtime_error("bench_submit: " + std::to_string(counter.load()) + " of " +
                               std::to_string(tasks) + " tasks ran");
    if (r >= warmup) ns.push_back(dt);
  }
  return ns;
}

std::vector<double> bench_fork_join(ThreadPool& pool, int repeats, int warmup) {
  check_counts(repeats, warmup);
  std::vector<double> ns;
  std::atomic<int64_t> sink{0};
  const auto fn = [&sink](int64_t) { sink.fetch_add(1, std::memory_order_relaxed); };
  for (int r = 0; r < warmup + repeats; ++r) {
    const auto t0 = Clock::now();
    pool.parallel_for(pool.threads(), fn);
    const double dt = ns_since(t0);
    if (r >= warmup) ns.push_back(dt);
  }
  return ns;
}

std::vector<double> omp_fork_join(int threads, int repeats, int warmup) {
  check_counts(repeats, warmup);
  require_at_least("threads", threads, 1);
  std::vector<double> ns;
  std::atomic<int64_t> sink{0};
  for (int r = 0; r < warmup + repeats; ++r) {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    sink.fetch_add(1, std::memory_order_relaxed);
    const double dt = ns_since(t0);
    if (r >= warmup) ns.push_back(dt);
  }
  return ns;
}

std::vector<double> omp_barrier(int threads, int repeats, int warmup, int inner) {
  check_counts(repeats, warmup);
  require_at_least("threads", threads, 1);
  require_at_least("inner", inner, 1);
  std::vector<double> ns;
#pragma omp parallel num_threads(threads)
  {
    for (int r = 0; r < warmup + repeats; ++r) {
#pragma omp barrier
      const auto t0 = Clock::now();
      for (int i = 0; i < inner; ++i) {
#pragma omp barrier
      }
      if (omp_get_thread_num() == 0 && r >= warmup) ns.push_back(ns_since(t0) / inner);
    }
  }
  return ns;
}

}  // namespace ppb
