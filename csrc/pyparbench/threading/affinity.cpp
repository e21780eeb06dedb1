#include "pyparbench/threading/affinity.hpp"

#include "pyparbench/threading/topology.hpp"

#include <omp.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>

namespace ppb {

namespace {

struct CpuSet {
  explicit CpuSet(int ncpus) : n(std::max(ncpus, 1024)), set(CPU_ALLOC(n)), size(CPU_ALLOC_SIZE(n)) {
    if (!set) throw std::bad_alloc();
    CPU_ZERO_S(size, set);
  }
  ~CpuSet() { CPU_FREE(set); }
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;
  int n;
  cpu_set_t* set;
  size_t size;
};

int max_cpu(const std::vector<int>& cpus) {
  int m = 0;
  for (int c : cpus) m = std::max(m, c);
  return m;
}

// errno of sched_setaffinity, 0 on success; safe inside a parallel region.
int try_pin(const std::vector<int>& cpus) {
  try {
    CpuSet s(max_cpu(cpus) + 1);
    for (int c : cpus) CPU_SET_S(static_cast<size_t>(c), s.size, s.set);
    return sched_setaffinity(0, s.size, s.set) == 0 ? 0 : errno;
  } catch (...) {
    return ENOMEM;
  }
}

// Thread t's CPU when a team is pinned one thread per CPU.
std::vector<int> one_of(const std::vector<int>& cpus, int t) {
  return {cpus[static_cast<size_t>(t) % cpus.size()]};
}

void check_pin(int err, const std::vector<int>& cpus) {
  if (err != 0)
    throw std::system_error(err, std::generic_category(),
                            "sched_setaffinity(" + cpu_list_str(cpus) + ")");
}

// Size of the team pinned by pin_omp_team for this master thread (0: not
// pinned, or reset since).
thread_local int t_pinned_team = 0;
// A WorkerPlacement of this thread pinned its team: unpinned runs keep it.
thread_local bool t_team_held = false;

// Gives each thread t >= first of the calling thread's OpenMP team of
// `team_size` the mask mask_of(t); std::system_error for a failed pin, after
// the others are pinned.
template <class MaskOf>
void pin_team_threads(int team_size, int first, MaskOf mask_of) {
  std::atomic<int> err{0};
  std::atomic<int> bad_thread{-1};
#pragma omp parallel num_threads(team_size)
  {
    const int t = omp_get_thread_num();
    if (t >= first) {
      int e;
      try {
        e = try_pin(mask_of(t));
      } catch (...) {
        e = ENOMEM;
      }
      if (e != 0) {
        err.store(e);
        bad_thread.store(t);
      }
    }
  }
  if (err.load() != 0) check_pin(err.load(), mask_of(bad_thread.load()));
}

}  // namespace

long current_tid() { return static_cast<long>(syscall(SYS_gettid)); }

std::vector<int> thread_affinity() {
  for (int n = 1024; n <= (1 << 20); n *= 4) {
    CpuSet s(n);
    if (sched_getaffinity(0, s.size, s.set) == 0) {
      std::vector<int> cpus;
      for (int c = 0; c < s.n; ++c)
        if (CPU_ISSET_S(static_cast<size_t>(c), s.size, s.set)) cpus.push_back(c);
      return cpus;
    }
    if (errno != EINVAL) throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
  }
  throw std::runtime_error("sched_getaffinity: CPU mask too large");
}

void set_thread_affinity(const std::vector<int>& cpus) { check_pin(try_pin(cpus), cpus); }

void require_pinnable(const std::vector<int>& cpus, const char* what) {
  if (cpus.empty()) throw std::invalid_argument(std::string(what) + " is empty");
  const std::vector<int> allowed = process_allowed_cpus();
  std::set<int> seen;
  for (int c : cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), c))
      throw std::invalid_argument(std::string(what) + ": CPU " + std::to_string(c) +
                                  " is not one this process may use (allowed: " +
                                  cpu_list_str(allowed) + ")");
    if (!seen.insert(c).second)
      throw std::invalid_argument(std::string(what) + ": CPU " + std::to_string(c) +
                                  " is listed twice");
  }
}

void pin_omp_team(const std::vector<int>& cpus, int team_size) {
  if (cpus.empty()) throw std::invalid_argument("pin_omp_team: no CPUs");
  if (team_size < 1)
    throw std::invalid_argument("team size must be >= 1, got " + std::to_string(team_size));
  // Threads libgomp starts in the region below inherit the master's mask:
  // the team's CPUs, never more.
  set_thread_affinity(cpus);
  t_pinned_team = std::max(t_pinned_team, team_size);
  pin_team_threads(team_size, 0, [&cpus](int t) { return one_of(cpus, t); });
}

std::vector<long> omp_team_tids(int team_size) {
  if (team_size < 1)
    throw std::invalid_argument("team size must be >= 1, got " + std::to_string(team_size));
  std::vector<long> tids(static_cast<size_t>(team_size), -1);
#pragma omp parallel num_threads(team_size)
  {
    const int i = omp_get_thread_num();
    if (i < team_size) tids[static_cast<size_t>(i)] = current_tid();
  }
  return tids;
}

TeamPlacement::TeamPlacement(const std::vector<int>& cpus, int team_size) {
  if (!cpus.empty()) {
    saved_ = thread_affinity();
    restore_ = true;
    try {
      pin_omp_team(cpus, team_size);
    } catch (...) {
      try_pin(saved_);
      throw;
    }
  } else if (t_pinned_team > 0 && !t_team_held) {
    // An earlier run pinned this master's team: give its threads the
    // master's own mask back before running unpinned.
    const std::vector<int> mask = thread_affinity();
    const int n = std::max(t_pinned_team, team_size);
    t_pinned_team = 0;
    pin_team_threads(n, 0, [&mask](int) { return mask; });
  }
}

TeamPlacement::~TeamPlacement() {
  if (restore_) try_pin(saved_);
}

WorkerPlacement::WorkerPlacement(const std::vector<int>& cpus, int team_size, bool pin_team) {
  if (cpus.empty()) return;
  saved_ = thread_affinity();
  set_thread_affinity(cpus);
  pinned_ = true;
  if (pin_team && team_size > 1) {
    try {
      // The thread itself too (team thread 0): left on all of `cpus`, it
      // can sit on team thread 1's CPU spinning at the region's barrier,
      // where that thread cannot run until the scheduler moves it, some
      // milliseconds later (a run's first region then took 8 ms, not 30 us).
      pin_team_threads(team_size, 0, [&cpus](int t) { return one_of(cpus, t); });
    } catch (...) {
      try_pin(saved_);  // no destructor runs for a failed constructor
      throw;
    }
    team_size_ = team_size;
    held_before_ = t_team_held;
    t_team_held = true;
  }
}

WorkerPlacement::~WorkerPlacement() {
  if (!pinned_) return;
  if (team_size_ > 0) {
    t_team_held = held_before_;
    // Later unpinned runs from this thread reuse the same team.
    try {
      pin_team_threads(team_size_, 1, [this](int) { return saved_; });
    } catch (...) {  // those threads keep the narrower masks; nothing else to do
    }
  }
  try_pin(saved_);
}

}  // namespace ppb
