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
// tier 1 its second (its first SMT sibling), and so on.
struct Slot {
  int cpu = 0;
  int tier = 0;
  int package = 0;
  int numa = -1;
  int core = 0;
  bool taken = false;
};

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// The CPUs pinning may use: every allowed PU with smt, else the first allowed
// PU of each core. Siblings are dropped when the physical cores are enough.
std::vector<Slot> usable_slots(const Topology& topo, const char* policy, int pools, int threads,
                               bool smt) {
  std::vector<Slot> slots;
  int physical = 0, logical = 0;
  for (const Core& core : topo.cores) {
    int tier = 0;
    for (int cpu : core.pus) {
      if (!topo.allowed(cpu)) continue;
      ++logical;
      if (tier == 0) ++physical;
      if (smt || tier == 0) slots.push_back({cpu, tier, core.package, core.numa, core.index});
      ++tier;
    }
  }
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

// Takes `n` free slots among those `in` accepts, best tier first, then by core.
template <class In>
std::vector<int> take(std::vector<Slot>& slots, int n, In in) {
  std::vector<Slot*> free;
  for (Slot& s : slots)
    if (!s.taken && in(s)) free.push_back(&s);
  std::stable_sort(free.begin(), free.end(), [](const Slot* a, const Slot* b) {
    return a->tier != b->tier ? a->tier < b->tier : a->core < b->core;
  });
  std::vector<int> cpus;
  for (int i = 0; i < n; ++i) {
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

CpuLists place_compact(const Topology& topo, int pools, int threads, bool smt) {
  std::vector<Slot> slots = usable_slots(topo, "compact", pools, threads, smt);
  // NUMA nodes that lie inside one socket: the tightest home for a team.
  std::vector<int> numa;
  for (const NumaNode& n : topo.numa_nodes)
    if (n.package >= 0) numa.push_back(n.os_index);

  CpuLists out;
  for (int p = 0; p < pools; ++p) {
    std::vector<int> cpus;
    // Physical cores of a NUMA node, then of a socket; then a NUMA node or a
    // socket with siblings; then whatever is left, in compact order.
    for (int primary_only = 1; primary_only >= 0 && cpus.empty(); --primary_only) {
      auto tier_ok = [&](const Slot& s) { return !primary_only || s.tier == 0; };
      for (int node : numa) {
        auto in = [&](const Slot& s) { return s.numa == node && tier_ok(s); };
        if (count_free(slots, in) >= threads) {
          cpus = take(slots, threads, [&](const Slot& s) { return s.numa == node; });
          break;
        }
      }
      if (!cpus.empty()) break;
      for (const Package& pkg : topo.packages) {
        auto in = [&](const Slot& s) { return s.package == pkg.index && tier_ok(s); };
        if (count_free(slots, in) >= threads) {
          cpus = take(slots, threads, [&](const Slot& s) { return s.package == pkg.index; });
          break;
        }
      }
    }
    if (cpus.empty()) {
      std::vector<Slot*> free;
      for (Slot& s : slots)
        if (!s.taken) free.push_back(&s);
      std::stable_sort(free.begin(), free.end(), [](const Slot* a, const Slot* b) {
        if (a->tier != b->tier) return a->tier < b->tier;
        if (a->package != b->package) return a->package < b->package;
        return a->core < b->core;
      });
      for (int i = 0; i < threads; ++i) {
        free[static_cast<size_t>(i)]->taken = true;
        cpus.push_back(free[static_cast<size_t>(i)]->cpu);
      }
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

CpuLists place(const Topology& topo, AffinityPolicy policy, int pools, int threads, bool smt) {
  require_shape(pools, threads);
  switch (policy) {
    case AffinityPolicy::none:
      return CpuLists(static_cast<size_t>(pools));
    case AffinityPolicy::compact:
      return place_compact(topo, pools, threads, smt);
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
