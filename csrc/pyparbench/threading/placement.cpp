#include "pyparbench/threading/placement.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {

// One CPU a thread may be pinned to. tier 0 is a core's first allowed PU,
// tier 1 its second (its first SMT sibling), and so on. rank orders CPU
// kinds: 0 the most powerful (P cores), then the others; 0 without kinds.
struct Slot {
  int cpu = 0;
  int tier = 0;
  int package = 0;
  int numa = -1;
  int core = 0;
  int l3 = -1;
  int kind = -1;
  int rank = 0;
  bool taken = false;
};

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Rank of each CPU kind, most powerful first: by efficiency where hwloc
// knows it, else by hwloc's order (least powerful first).
std::vector<int> kind_ranks(const Topology& topo) {
  std::vector<int> order(topo.cpu_kinds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const CpuKind& ka = topo.cpu_kinds[static_cast<size_t>(a)];
    const CpuKind& kb = topo.cpu_kinds[static_cast<size_t>(b)];
    if (ka.efficiency != kb.efficiency) return ka.efficiency > kb.efficiency;
    return a > b;
  });
  std::vector<int> rank(topo.cpu_kinds.size());
  for (size_t r = 0; r < order.size(); ++r) rank[static_cast<size_t>(order[r])] = static_cast<int>(r);
  return rank;
}

// The CPUs pinning may use: every allowed PU with smt, else the first allowed
// PU of each core (siblings are found by core, whatever their numbers).
// Siblings are dropped when the physical cores are enough. Ordered by kind
// (the most powerful first), then by core (hwloc's logical order).
std::vector<Slot> usable_slots(const Topology& topo, const char* policy, int pools, int threads,
                               bool smt) {
  const std::vector<int> rank = kind_ranks(topo);
  std::vector<Slot> slots;
  int physical = 0, logical = 0;
  for (const Core& core : topo.cores) {
    int tier = 0;
    const int r = core.kind >= 0 && static_cast<size_t>(core.kind) < rank.size()
                      ? rank[static_cast<size_t>(core.kind)]
                      : 0;
    for (int cpu : core.pus) {
      if (!topo.allowed(cpu)) continue;
      ++logical;
      if (tier == 0) ++physical;
      if (smt || tier == 0) {
        Slot s;
        s.cpu = cpu;
        s.tier = tier;
        s.package = core.package;
        s.numa = core.numa;
        s.core = core.index;
        s.l3 = core.l3;
        s.kind = core.kind;
        s.rank = r;
        slots.push_back(s);
      }
      ++tier;
    }
  }
  std::stable_sort(slots.begin(), slots.end(),
                   [](const Slot& a, const Slot& b) { return a.rank < b.rank; });
  const long need = static_cast<long>(pools) * threads;
  if (need > static_cast<long>(slots.size())) {
    std::string msg = std::string(policy) + " placement of " + plural(pools, "pool") + " x " +
                      plural(threads, "thread") + " needs " + std::to_string(need) +
                      " CPUs, but this process may use only ";
    if (smt) {
      msg += plural(logical, "logical CPU") + " (" + cpu_list_str(topo.allowed_cpus) + ")";
    } else {
      msg += plural(physical, "physical core") + " with smt=False";
      if (logical > physical) msg += " (" + std::to_string(logical) + " logical CPUs with smt=True)";
    }
    msg += "; use fewer pools or threads, or affinity='none'";
    throw std::invalid_argument(msg);
  }
  if (need <= physical)
    slots.erase(std::remove_if(slots.begin(), slots.end(), [](const Slot& s) { return s.tier > 0; }),
                slots.end());
  return slots;
}

void require_shape(int pools, int threads) {
  if (pools < 1) throw std::invalid_argument("pools must be >= 1, got " + std::to_string(pools));
  if (threads < 1)
    throw std::invalid_argument("threads must be >= 1, got " + std::to_string(threads));
}

// Takes `n` free slots among those `in` accepts: best tier first, then the
// most powerful kind, then by package and core.
template <class In>
std::vector<int> take(std::vector<Slot>& slots, int n, In in) {
  std::vector<Slot*> free;
  for (Slot& s : slots)
    if (!s.taken && in(s)) free.push_back(&s);
  std::stable_sort(free.begin(), free.end(), [](const Slot* a, const Slot* b) {
    if (a->tier != b->tier) return a->tier < b->tier;
    if (a->rank != b->rank) return a->rank < b->rank;
    if (a->package != b->package) return a->package < b->package;
    return a->core < b->core;
  });
  std::vector<int> cpus;
  for (int i = 0; i < n && i < static_cast<int>(free.size()); ++i) {
    free[static_cast<size_t>(i)]->taken = true;
    cpus.push_back(free[static_cast<size_t>(i)]->cpu);
  }
  return cpus;
}

template <class In>
int count_free(const std::vector<Slot>& slots, In in) {
  return static_cast<int>(
      std::count_if(slots.begin(), slots.end(), [&](const Slot& s) { return !s.taken && in(s); }));
}

// A home for a team or an instance: an L3 domain, a NUMA node inside one
// package, a package or (kind >= 0 only) the whole machine, each restricted
// to one CPU kind when kind >= 0.
struct Domain {
  enum Level { l3, numa, package, all } level = all;
  int id = -1;
  int kind = -1;
  bool contains(const Slot& s) const {
    if (kind >= 0 && s.kind != kind) return false;
    switch (level) {
      case l3: return s.l3 == id;
      case numa: return s.numa == id;
      case package: return s.package == id;
      case all: return true;
    }
    return false;
  }
};

// Every home, tightest first; on a hybrid machine each CPU kind's (the most
// powerful first), then homes of any kind.
std::vector<Domain> domains(const Topology& topo) {
  std::vector<int> kinds;
  if (topo.cpu_kinds.size() > 1) {
    const std::vector<int> rank = kind_ranks(topo);
    kinds.resize(rank.size());
    for (size_t k = 0; k < rank.size(); ++k) kinds[static_cast<size_t>(rank[k])] = static_cast<int>(k);
  }
  kinds.push_back(-1);
  std::vector<Domain> out;
  for (int kind : kinds) {
    for (size_t i = 0; i < topo.l3_domains.size(); ++i)
      out.push_back({Domain::l3, static_cast<int>(i), kind});
    for (const NumaNode& n : topo.numa_nodes)
      if (n.package >= 0 && !n.memory_only) out.push_back({Domain::numa, n.os_index, kind});
    for (const Package& p : topo.packages) out.push_back({Domain::package, p.index, kind});
    if (kind >= 0) out.push_back({Domain::all, -1, kind});
  }
  return out;
}

// The tightest home among `homes` holding `n` free slots that `within`
// accepts: for a team, any home on physical cores before any with SMT
// siblings (more cores at work); for an instance (`instance`), the tightest
// home first, siblings or not, so that it stays inside a NUMA node it fits
// in. nullptr if none.
template <class Within>
const Domain* find_home(const std::vector<Slot>& slots, const std::vector<Domain>& homes, int n,
                        Within within, bool instance = false) {
  auto fits = [&](const Domain& d, bool primary_only) {
    auto in = [&](const Slot& s) {
      return within(s) && d.contains(s) && (!primary_only || s.tier == 0);
    };
    return count_free(slots, in) >= n;
  };
  if (instance) {
    for (const Domain& d : homes)
      for (int primary_only = 1; primary_only >= 0; --primary_only)
        if (fits(d, primary_only != 0)) return &d;
    return nullptr;
  }
  for (int primary_only = 1; primary_only >= 0; --primary_only)
    for (const Domain& d : homes)
      if (fits(d, primary_only != 0)) return &d;
  return nullptr;
}

// Each pool's team in the tightest home it fits (an L3 domain, a NUMA node, a
// package; on a hybrid machine one CPU kind), else the next free CPUs in
// compact order. With group > 0, pools come in groups of `group` (one
// instance's workers): a group is first given the tightest home that holds
// all its threads, so an instance never crosses a NUMA node (or a package,
// or an L3) it fits in. group 0: the pools are not instances.
CpuLists place_compact(const Topology& topo, int pools, int threads, bool smt, int group) {
  std::vector<Slot> slots = usable_slots(topo, "compact", pools, threads, smt);
  const std::vector<Domain> homes = domains(topo);
  CpuLists out;
  Domain instance_home;  // level all, kind -1: everything
  for (int p = 0; p < pools; ++p) {
    if (group > 0 && p % group == 0) {
      const int n = std::min(group, pools - p) * threads;
      const Domain* h = find_home(slots, homes, n, [](const Slot&) { return true; }, true);
      instance_home = h ? *h : Domain{};
    }
    auto within = [&](const Slot& s) { return instance_home.contains(s); };
    std::vector<int> cpus;
    if (const Domain* h = find_home(slots, homes, threads, within)) {
      cpus = take(slots, threads, [&](const Slot& s) { return within(s) && h->contains(s); });
    } else if (count_free(slots, within) >= threads) {
      cpus = take(slots, threads, within);
    } else {
      cpus = take(slots, threads, [](const Slot&) { return true; });
    }
    out.push_back(std::move(cpus));
  }
  return out;
}

CpuLists place_scatter(const Topology& topo, int pools, int threads, bool smt) {
  const std::vector<Slot> slots = usable_slots(topo, "scatter", pools, threads, smt);
  int max_tier = 0;
  for (const Slot& s : slots) max_tier = std::max(max_tier, s.tier);
  std::vector<int> order;
  for (int tier = 0; tier <= max_tier; ++tier) {
    // package -> (NUMA node -> its CPUs of this tier, by core)
    std::map<int, std::map<int, std::deque<int>>> groups;
    for (const Slot& s : slots)
      if (s.tier == tier) groups[s.package][s.numa].push_back(s.cpu);
    std::map<int, size_t> next_group;  // per package, the NUMA node to draw from next
    bool any = true;
    while (any) {
      any = false;
      for (auto& [pkg, nodes] : groups) {
        size_t& g = next_group[pkg];
        for (size_t tries = 0; tries < nodes.size(); ++tries) {
          auto it = std::next(nodes.begin(), static_cast<long>(g % nodes.size()));
          ++g;
          if (!it->second.empty()) {
            order.push_back(it->second.front());
            it->second.pop_front();
            any = true;
            break;
          }
        }
      }
    }
  }
  CpuLists out(static_cast<size_t>(pools));
  for (int p = 0; p < pools; ++p)
    out[static_cast<size_t>(p)].assign(order.begin() + p * threads,
                                       order.begin() + (p + 1) * threads);
  return out;
}

}  // namespace

CpuLists place(const Topology& topo, AffinityPolicy policy, int pools, int threads, bool smt,
               int group) {
  require_shape(pools, threads);
  if (group < 0) throw std::invalid_argument("group must be >= 0, got " + std::to_string(group));
  switch (policy) {
    case AffinityPolicy::none:
      return CpuLists(static_cast<size_t>(pools));
    case AffinityPolicy::compact:
      return place_compact(topo, pools, threads, smt, group);
    case AffinityPolicy::scatter:
      return place_scatter(topo, pools, threads, smt);
  }
  return {};
}

CpuLists place_explicit(const Topology& topo, const CpuLists& cpus, int pools, int threads,
                        bool smt) {
  require_shape(pools, threads);
  if (static_cast<int>(cpus.size()) != pools)
    throw std::invalid_argument("explicit affinity gives " + plural(static_cast<int>(cpus.size()), "CPU list") +
                                " for " + plural(pools, "pool"));
  std::map<int, int> core_owner;  // core -> the CPU that uses it (smt=false)
  std::set<int> seen;
  for (size_t p = 0; p < cpus.size(); ++p) {
    const auto& list = cpus[p];
    if (static_cast<int>(list.size()) != threads)
      throw std::invalid_argument("explicit affinity: pool " + std::to_string(p) + " lists " +
                                  plural(static_cast<int>(list.size()), "CPU") + " for " +
                                  plural(threads, "thread") + ": " + cpu_list_str(list));
    for (int cpu : list) {
      if (!topo.allowed(cpu))
        throw std::invalid_argument("CPU " + std::to_string(cpu) +
                                    " is not one this process may use (allowed: " +
                                    cpu_list_str(topo.allowed_cpus) + ")");
      if (!seen.insert(cpu).second)
        throw std::invalid_argument("CPU " + std::to_string(cpu) +
                                    " is listed twice; pools and threads need distinct CPUs");
      if (!smt) {
        const int core = topo.pu(cpu).core;
        auto [it, fresh] = core_owner.emplace(core, cpu);
        if (!fresh)
          throw std::invalid_argument("CPUs " + std::to_string(it->second) + " and " +
                                      std::to_string(cpu) + " are SMT siblings of core " +
                                      std::to_string(core) + "; pass smt=True to use both");
      }
    }
  }
  return cpus;
}

}  // namespace ppb
