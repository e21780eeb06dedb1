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

void check_pin(int err, const std::vector<int>& cpus) {
  if (err != 0)
    throw std::system_error(err, std::generic_category(),
                            "sched_setaffinity(" + cpu_list_str(cpus) + ")");
}

// Size of the team pinned by pin_omp_team for this master thread (0: not
// pinned, or reset since).
thread_local int t_pinned_team = 0;

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
  std::atomic<int> err{0};
  std::atomic<int> bad_cpu{-1};
#pragma omp parallel num_threads(team_size)
  {
    const size_t i = static_cast<size_t>(omp_get_thread_num()) % cpus.size();
    const int e = try_pin({cpus[i]});
    if (e != 0) {
      err.store(e);
      bad_cpu.store(cpus[i]);
    }
  }
  t_pinned_team = std::max(t_pinned_team, team_size);
  if (err.load() != 0) check_pin(err.load(), {bad_cpu.load()});
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
  } else if (t_pinned_team > 0) {
    // An earlier run pinned this master's team: give its threads the
    // master's own mask back before running unpinned.
    const std::vector<int> mask = thread_affinity();
    const int n = std::max(t_pinned_team, team_size);
    std::atomic<int> err{0};
#pragma omp parallel num_threads(n)
    {
      const int e = try_pin(mask);
      if (e != 0) err.store(e);
    }
    t_pinned_team = 0;
    check_pin(err.load(), mask);
  }
}

TeamPlacement::~TeamPlacement() {
  if (restore_) try_pin(saved_);
}

}  // namespace ppb
