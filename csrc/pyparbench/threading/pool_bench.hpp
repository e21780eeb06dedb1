// Microbenchmarks of the thread-pool layer (the study's pool-overhead
// experiment), timed in C++: per-task overhead of each pool, the fork/join
// latency of a pool's parallel_for, and OpenMP's own fork/join and barrier
// latency. Each returns one duration in nanoseconds per timed repeat.
#pragma once

#include "pyparbench/threading/pool.hpp"

#include <cstdint>
#include <vector>

namespace ppb {

// `tasks` trivial tasks (one relaxed atomic increment each) submitted one by
// one, then join(): ns per repeat (divide by tasks for ns per task).
std::vector<double> bench_submit(ThreadPool& pool, int64_t tasks, int repeats, int warmup);

// parallel_for(threads, trivial): the pool's fork/join latency, ns per call.
std::vector<double> bench_fork_join(ThreadPool& pool, int repeats, int warmup);

// An empty `omp parallel num_threads(threads)` region started by the calling
// thread: ns per region.
std::vector<double> omp_fork_join(int threads, int repeats, int warmup);

// `omp barrier` inside one region of `threads`: ns per barrier, each repeat
// the mean of `inner` barriers timed on thread 0.
std::vector<double> omp_barrier(int threads, int repeats, int warmup, int inner = 100);

// Parallel regions of `threads` with a serial stretch of about `gap_ns`
// between them: the calling thread works alone (a fixed amount of integer
// work, sized to take gap_ns on a quiet thread before any region of this
// call) while the team's idle threads wait as the OpenMP wait policy says
// (spin, then sleep). Per repeat: the region's ns (its fork, after the gap,
// and its join) and the serial stretch's ns (longer than gap_ns when the
// waiting threads slow the working one: SMT siblings, or CPUs shared with
// other processes).
struct GapTimes {
  std::vector<double> region_ns;
  std::vector<double> serial_ns;
};
GapTimes omp_gap(int threads, double gap_ns, int repeats, int warmup);

}  // namespace ppb
