// The audit: a recorder that threads doing work report into, so a run can
// say which OS threads executed it, the CPUs each was allowed on and seen
// on, the OpenMP team sizes, and the context switches while it worked.
//
// A thread calls record() when it does work (each task of a pool, or at the
// start and end of a kernel run for every thread of its OpenMP team). The
// first report of a thread for a team opens its entry, every report adds the
// CPU it is on and its affinity mask, and context switches are counted from
// the first report to the last (getrusage(RUSAGE_THREAD), read by the thread
// itself). One recorder can be shared by many teams at once (the pools or
// inter-op workers of a graph run), each reporting under its own team number.
#pragma once

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace ppb {

struct ThreadRecord {
  int team = 0;             // the number the reporter gave (pool, worker)
  long tid = 0;             // OS thread id
  int worker = -1;          // its index in the team (OpenMP thread number or pool
                            // worker index), -1 for a thread outside the team
  int omp_team_size = 0;    // OpenMP threads in its team (largest seen), 0 outside OpenMP
  std::vector<int> affinity;   // CPUs it was allowed on (union over reports)
  std::vector<int> cpus_seen;  // CPUs it was seen on (sched_getcpu)
  long reports = 0;
  long voluntary_switches = 0;    // first to last report
  long involuntary_switches = 0;
};

class Audit {
 public:
  // Reports that the calling thread is doing work for `team`. worker < 0:
  // the OpenMP thread number inside a parallel region, else -1.
  void record(int team, int worker = -1) noexcept;
  // Every thread of the calling thread's OpenMP team of `team_size` reports
  // (a parallel region of that size, so the team that later regions of the
  // same size run on).
  void record_omp_team(int team, int team_size) noexcept;
  // Sorted by team, worker, tid.
  std::vector<ThreadRecord> threads() const;
  void clear();

 private:
  struct Entry {
    ThreadRecord rec;
    std::vector<int> affinity, cpus;
    long vol0 = 0, invol0 = 0, vol1 = 0, invol1 = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<int, long>, Entry> entries_;  // (team, tid)
};

}  // namespace ppb
