#include "pyparbench/threading/audit.hpp"

#include "pyparbench/threading/affinity.hpp"

#include <omp.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <tuple>

namespace ppb {

namespace {

void merge(std::vector<int>& into, const std::vector<int>& from) {
  std::vector<int> out;
  std::set_union(into.begin(), into.end(), from.begin(), from.end(), std::back_inserter(out));
  into.swap(out);
}

}  // namespace

void Audit::record(int team, int worker) noexcept {
  try {
    const long tid = current_tid();
    const int cpu = sched_getcpu();
    std::vector<int> mask = thread_affinity();
    rusage ru{};
    getrusage(RUSAGE_THREAD, &ru);
    const bool in_omp = omp_get_level() > 0;
    const int team_size = in_omp ? omp_get_num_threads() : 0;
    if (worker < 0 && in_omp) worker = omp_get_thread_num();

    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = entries_.try_emplace({team, tid});
    Entry& e = it->second;
    if (fresh) {
      e.rec.team = team;
      e.rec.tid = tid;
      e.rec.worker = worker;
      e.vol0 = ru.ru_nvcsw;
      e.invol0 = ru.ru_nivcsw;
    }
    e.vol1 = ru.ru_nvcsw;
    e.invol1 = ru.ru_nivcsw;
    e.rec.omp_team_size = std::max(e.rec.omp_team_size, team_size);
    ++e.rec.reports;
    merge(e.affinity, mask);
    if (cpu >= 0) merge(e.cpus, {cpu});
  } catch (...) {
    // An audit never breaks the run it watches (allocation failure only).
  }
}

void Audit::record_omp_team(int team, int team_size) noexcept {
#pragma omp parallel num_threads(team_size)
  record(team, omp_get_thread_num());
}

std::vector<ThreadRecord> Audit::threads() const {
  std::vector<ThreadRecord> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, e] : entries_) {
      ThreadRecord r = e.rec;
      r.affinity = e.affinity;
      r.cpus_seen = e.cpus;
      r.voluntary_switches = e.vol1 - e.vol0;
      r.involuntary_switches = e.invol1 - e.invol0;
      out.push_back(std::move(r));
    }
  }
  std::sort(out.begin(), out.end(), [](const ThreadRecord& a, const ThreadRecord& b) {
    return std::tie(a.team, a.worker, a.tid) < std::tie(b.team, b.worker, b.tid);
  });
  return out;
}

void Audit::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
}

}  // namespace ppb
