// Correctness workloads for the pools, so tests can compare every pool with
// a serial loop and count what ran, without Python in the tasks.
#pragma once

#include "pyparbench/threading/pool.hpp"

#include <cstdint>
#include <vector>

namespace ppb {

// `iters` rounds of splitmix64 starting from `seed` (iters <= 0: the seed).
uint64_t work_item(uint64_t seed, int64_t iters);

// out[i] = work_item(seeds[i], iters[i]) for i < n, in a plain loop.
void serial_work(const uint64_t* seeds, const int64_t* iters, uint64_t* out, int64_t n);

// The same on a pool: through parallel_for, or one submitted task per item
// and a join.
void pool_work(ThreadPool& pool, const uint64_t* seeds, const int64_t* iters, uint64_t* out,
               int64_t n, bool submit);

// `tasks` tasks submitted by `submitters` threads at once (task i submitted
// once, by thread i % submitters), then join(): how many times each task ran.
std::vector<int32_t> pool_count(ThreadPool& pool, int64_t tasks, int submitters);

// `tasks` tasks of which task `fail_at` throws std::runtime_error: through
// parallel_for or submit + join, so the error surfaces from there.
void pool_fail(ThreadPool& pool, int64_t tasks, int64_t fail_at, bool submit);

}  // namespace ppb
