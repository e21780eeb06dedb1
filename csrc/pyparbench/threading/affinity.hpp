// Pinning threads: the calling thread, and every thread of the calling
// thread's OpenMP team.
//
// libgomp keeps one pool of worker threads per master thread and hands the
// same threads, in the same order, to every later non-nested parallel region
// of the same size started by that master. So pinning inside a region of the
// team's size pins the threads that later regions of that size (oneDNN's)
// run on. A region of another size changes the pool: a smaller one lets the
// surplus threads exit, a larger one starts new threads, which inherit the
// master's mask. The audit shows when that happened.
#pragma once

#include <vector>

namespace ppb {

// The OS thread id (gettid) of the calling thread.
long current_tid();

// CPUs the calling thread may run on (sorted OS indices).
std::vector<int> thread_affinity();
// Restricts the calling thread to `cpus`; std::system_error on failure.
void set_thread_affinity(const std::vector<int>& cpus);

// Checks a CPU list that threads are about to be pinned to: non-empty, no CPU
// twice, every CPU one this process may use. std::invalid_argument naming
// the bad CPU; `what` names the list in the message.
void require_pinnable(const std::vector<int>& cpus, const char* what);

// Pins the calling thread's OpenMP team of `team_size` threads: thread i
// (the calling thread is 0) to cpus[i % cpus.size()].
void pin_omp_team(const std::vector<int>& cpus, int team_size);

// OS thread ids of the calling thread's team of `team_size`, by thread number.
std::vector<long> omp_team_tids(int team_size);

// Pins the calling thread's team for one kernel run and undoes what must be
// undone after it: the calling thread gets its own mask back. With no CPUs,
// a team that an earlier run left pinned is given the caller's mask again,
// unless a WorkerPlacement of the calling thread holds it.
class TeamPlacement {
 public:
  TeamPlacement(const std::vector<int>& cpus, int team_size);
  ~TeamPlacement();
  TeamPlacement(const TeamPlacement&) = delete;
  TeamPlacement& operator=(const TeamPlacement&) = delete;

 private:
  std::vector<int> saved_;
  bool restore_ = false;
};

// Pins a graph worker's thread for a whole run to all of `cpus` and, with
// pin_team, every thread of its team of `team_size` (the worker's own thread
// included, as thread 0) to one CPU each: thread t on cpus[t % size]; the
// team is started under the whole mask. Unpinned kernel runs from the
// thread meanwhile keep the team as pinned here. The destructor gives the
// team, then the thread, the thread's earlier mask. No CPUs: nothing is
// pinned.
class WorkerPlacement {
 public:
  WorkerPlacement(const std::vector<int>& cpus, int team_size, bool pin_team);
  ~WorkerPlacement();
  WorkerPlacement(const WorkerPlacement&) = delete;
  WorkerPlacement& operator=(const WorkerPlacement&) = delete;

 private:
  std::vector<int> saved_;
  bool pinned_ = false;
  int team_size_ = 0;  // of the team pinned here; 0: none
  bool held_before_ = false;
};

}  // namespace ppb
