#include "pyparbench/threading/pool_bench.hpp"

#include "pyparbench/core/checks.hpp"
#include "pyparbench/threading/pool_checks.hpp"

#include <omp.h>

#include <algorithm>
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

GapTimes omp_gap(int threads, double gap_ns, int repeats, int warmup) {
  check_counts(repeats, warmup);
  require_at_least("threads", threads, 1);
  if (!(gap_ns >= 0.0))
    throw std::invalid_argument("gap_ns must be >= 0, got " + std::to_string(gap_ns));
  // The serial stretch: rounds of work_item, counted once, alone, so that the
  // same work is timed in every repeat.
  int64_t iters = 0;
  if (gap_ns > 0.0) {
    constexpr int64_t probe = 1 << 16;
    double best = 1e300;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      volatile uint64_t keep = work_item(static_cast<uint64_t>(i), probe);
      (void)keep;
      best = std::min(best, ns_since(t0));
    }
    iters = std::max<int64_t>(1, static_cast<int64_t>(gap_ns * probe / std::max(best, 1.0)));
  }
  GapTimes out;
  std::atomic<int64_t> sink{0};
  uint64_t seed = 1;
  for (int r = 0; r < warmup + repeats; ++r) {
    const auto s0 = Clock::now();
    if (iters > 0) seed = work_item(seed, iters);
    const double serial = ns_since(s0);
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    sink.fetch_add(1, std::memory_order_relaxed);
    const double dt = ns_since(t0);
    if (r >= warmup) {
      out.region_ns.push_back(dt);
      out.serial_ns.push_back(serial);
    }
  }
  sink.fetch_add(static_cast<int64_t>(seed & 1), std::memory_order_relaxed);
  return out;
}

}  // namespace ppb
