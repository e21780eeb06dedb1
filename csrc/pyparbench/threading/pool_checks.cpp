#include "pyparbench/threading/pool_checks.hpp"

#include "pyparbench/core/checks.hpp"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace ppb {

uint64_t work_item(uint64_t seed, int64_t iters) {
  uint64_t x = seed;
  for (int64_t i = 0; i < iters; ++i) {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    x = z ^ (z >> 31);
  }
  return x;
}

void serial_work(const uint64_t* seeds, const int64_t* iters, uint64_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = work_item(seeds[i], iters[i]);
}

void pool_work(ThreadPool& pool, const uint64_t* seeds, const int64_t* iters, uint64_t* out,
               int64_t n, bool submit) {
  if (!submit) {
    pool.parallel_for(n, [=](int64_t i) { out[i] = work_item(seeds[i], iters[i]); });
    return;
  }
  try {
    for (int64_t i = 0; i < n; ++i)
      pool.submit([=] { out[i] = work_item(seeds[i], iters[i]); });
  } catch (...) {
    try { pool.join(); } catch (...) {}  // never leave tasks behind on the caller's buffers
    throw;
  }
  pool.join();
}

std::vector<int32_t> pool_count(ThreadPool& pool, int64_t tasks, int submitters) {
  require_at_least("tasks", tasks, 0);
  require_at_least("submitters", submitters, 1);
  auto counts = std::make_unique<std::atomic<int32_t>[]>(static_cast<size_t>(tasks));
  for (int64_t i = 0; i < tasks; ++i) counts[i].store(0);
  auto submit_from = [&](int s) {
    for (int64_t i = s; i < tasks; i += submitters)
      pool.submit([&counts, i] { counts[i].fetch_add(1, std::memory_order_relaxed); });
  };
  std::vector<std::thread> threads;
  for (int s = 1; s < submitters; ++s) threads.emplace_back(submit_from, s);
  submit_from(0);
  for (auto& t : threads) t.join();
  pool.join();
  std::vector<int32_t> out(static_cast<size_t>(tasks));
  for (int64_t i = 0; i < tasks; ++i) out[static_cast<size_t>(i)] = counts[i].load();
  return out;
}

void pool_fail(ThreadPool& pool, int64_t tasks, int64_t fail_at, bool submit) {
  require_at_least("tasks", tasks, 1);
  if (fail_at < 0 || fail_at >= tasks)
    throw std::out_of_range("fail_at must be in [0, " + std::to_string(tasks) + "), got " +
                            std::to_string(fail_at));
  std::atomic<int64_t> sink{0};
  auto task = [&sink, fail_at](int64_t i) {
    if (i == fail_at)
      throw std::runtime_error("task " + std::to_string(i) + " failed (deliberate test error)");
    sink.fetch_add(1, std::memory_order_relaxed);
  };
  if (!submit) {
    pool.parallel_for(tasks, task);
    return;
  }
  try {
    for (int64_t i = 0; i < tasks; ++i) pool.submit([&task, i] { task(i); });
  } catch (...) {
    try { pool.join(); } catch (...) {}
    throw;
  }
  pool.join();
}

}  // namespace ppb
