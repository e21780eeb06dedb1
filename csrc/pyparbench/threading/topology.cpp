#include "pyparbench/threading/topology.hpp"

#include <hwloc.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace ppb {

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_t b) const { hwloc_bitmap_free(b); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

TopologyPtr load(const std::string& synthetic) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) throw std::runtime_error("hwloc_topology_init failed");
  TopologyPtr owned(t);
  if (synthetic.empty()) {
    // Keep the CPUs a cgroup hides in the picture; allowed_cpus says which
    // ones may be used.
    hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
    hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  } else if (hwloc_topology_set_synthetic(t, synthetic.c_str()) != 0) {
    throw std::invalid_argument("invalid hwloc synthetic topology '" + synthetic +
                                "' (expected e.g. 'package:2 core:24 pu:2')");
  }
  if (hwloc_topology_load(t) != 0) throw std::runtime_error("hwloc_topology_load failed");
  return owned;
}

// What hwloc writes to stderr while `fn` runs (its XML parsers explain a
// rejected file only there, with HWLOC_XML_VERBOSE set). One capture at a
// time; stderr is restored before returning.
template <class Fn>
std::string capture_stderr(Fn fn) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  const int saved = tmp ? dup(STDERR_FILENO) : -1;
  if (saved < 0 || dup2(fileno(tmp), STDERR_FILENO) < 0) {
    if (saved >= 0) close(saved);
    if (tmp) std::fclose(tmp);
    fn();
    return "";
  }
  try {
    fn();
  } catch (...) {
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    std::fclose(tmp);
    throw;
  }
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  std::rewind(tmp);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0 && out.size() < 65536) out.append(buf, n);
  std::fclose(tmp);
  return out;
}

// hwloc's explanation, cut to its first meaningful line.
std::string first_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, kept;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    kept = line;
    break;
  }
  if (kept.size() > 300) kept = kept.substr(0, 300) + "...";
  return kept;
}

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw std::invalid_argument("topology file " + path + ": " + why);
}

std::string read_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_file(path, std::string("cannot be read (") + std::strerror(errno) + ")");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) bad_file(path, "cannot be read (not a regular file)");
  if (size > kMaxTopologyFileBytes)
    bad_file(path, "is " + std::to_string(size >> 20) + " MiB, over the " +
                       std::to_string(kMaxTopologyFileBytes >> 20) +
                       " MiB an hwloc XML topology may take");
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(&text[0], size)) bad_file(path, "cannot be read");
  // Not XML at all: say so before hwloc's parser does, in fewer words.
  size_t i = 0;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i == text.size()) bad_file(path, "is empty, not an hwloc XML topology");
  if (text[i] != '<')
    bad_file(path, "is not XML (expected an hwloc XML topology, as `lstopo --of xml` writes it)");
  if (text.find("<topology") == std::string::npos)
    bad_file(path, "is XML but not an hwloc topology (no <topology> element)");
  return text;
}

TopologyPtr load_xml(const std::string& path) {
  const std::string text = read_topology_file(path);
  // hwloc reads this once per process: set before any XML is parsed.
  setenv("HWLOC_XML_VERBOSE", "1", 0);
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) throw std::runtime_error("hwloc_topology_init failed");
  TopologyPtr owned(t);
  hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  int rc = 0;
  const std::string said = capture_stderr([&] {
    rc = hwloc_topology_set_xmlbuffer(t, text.data(), static_cast<int>(text.size()));
    if (rc == 0) rc = hwloc_topology_load(t) == 0 ? 0 : 1;
  });
  if (rc != 0) {
    std::string why = first_line(said);
    bad_file(path, "hwloc rejects it" + (why.empty() ? std::string() : ": " + why));
  }
  if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU) < 1) bad_file(path, "describes no CPU (no PU)");
  return owned;
}

std::vector<int> to_vector(hwloc_const_bitmap_t b) {
  std::vector<int> v;
  int i;
  hwloc_bitmap_foreach_begin(i, b) v.push_back(i);
  hwloc_bitmap_foreach_end();
  return v;
}

// The CPUs the process is bound to, within the CPUs hwloc says are allowed
// (this machine); the allowed cpuset alone (a synthetic one, a file).
std::vector<int> allowed_of(hwloc_topology_t t, bool this_machine) {
  BitmapPtr allowed(hwloc_bitmap_alloc());
  if (this_machine && hwloc_get_cpubind(t, allowed.get(), HWLOC_CPUBIND_PROCESS) == 0) {
    hwloc_bitmap_and(allowed.get(), allowed.get(), hwloc_topology_get_allowed_cpuset(t));
  } else {
    hwloc_bitmap_copy(allowed.get(), hwloc_topology_get_allowed_cpuset(t));
  }
  hwloc_bitmap_and(allowed.get(), allowed.get(), hwloc_topology_get_complete_cpuset(t));
  return to_vector(allowed.get());
}

int package_of(hwloc_topology_t t, hwloc_obj_t obj) {
  hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, obj);
  return p ? static_cast<int>(p->logical_index) : 0;
}

// The home NUMA node of `cpuset` (a core's or a PU's): among the nodes local
// to all of it, the one local to the fewest CPUs (a node of its sub-NUMA
// cluster rather than CXL memory attached to the whole machine), then the
// lowest OS index (DRAM before KNL's MCDRAM); -1 if none is local to it.
int numa_of(hwloc_topology_t t, hwloc_const_cpuset_t cpuset) {
  const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  int best = -1, best_weight = 0;
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (!node->cpuset || hwloc_bitmap_iszero(node->cpuset) ||
        !hwloc_bitmap_isincluded(cpuset, node->cpuset))
      continue;
    const int w = hwloc_bitmap_weight(node->cpuset);
    const int os = static_cast<int>(node->os_index);
    if (best < 0 || w < best_weight || (w == best_weight && os < best)) {
      best = os;
      best_weight = w;
    }
  }
  return best;
}

void add_cpu_kinds(hwloc_topology_t t, Topology& topo) {
#if HWLOC_API_VERSION >= 0x00020400
  const int n = hwloc_cpukinds_get_nr(t, 0);
  if (n < 2) return;  // one kind: nothing to tell cores apart by
  BitmapPtr set(hwloc_bitmap_alloc());
  for (int i = 0; i < n; ++i) {
    int efficiency = -1;
    unsigned nr_infos = 0;
    struct hwloc_info_s* infos = nullptr;
    if (hwloc_cpukinds_get_info(t, static_cast<unsigned>(i), set.get(), &efficiency, &nr_infos,
                                &infos, 0) != 0)
      continue;
    CpuKind kind;
    kind.index = static_cast<int>(topo.cpu_kinds.size());
    kind.efficiency = efficiency;
    for (unsigned j = 0; j < nr_infos; ++j)
      kind.infos.emplace_back(infos[j].name ? infos[j].name : "",
                              infos[j].value ? infos[j].value : "");
    for (const Pu& p : topo.pus)
      if (hwloc_bitmap_isset(set.get(), static_cast<unsigned>(p.os_index)))
        kind.pus.push_back(p.os_index);
    topo.cpu_kinds.push_back(std::move(kind));
  }
  for (const CpuKind& k : topo.cpu_kinds) {
    for (int cpu : k.pus)
      for (Pu& p : topo.pus)
        if (p.os_index == cpu) p.kind = k.index;
  }
  for (Core& c : topo.cores)
    for (const Pu& p : topo.pus)
      if (p.core == c.index && p.kind >= 0) c.kind = p.kind;
#else
  (void)t;
  (void)topo;
#endif
}

void add_caches(hwloc_topology_t t, std::vector<Cache>& out,
                std::vector<CacheInstance>& instances) {
  const hwloc_obj_type_t types[] = {HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2ICACHE,
                                    HWLOC_OBJ_L2CACHE,  HWLOC_OBJ_L3ICACHE, HWLOC_OBJ_L3CACHE,
                                    HWLOC_OBJ_L4CACHE,  HWLOC_OBJ_L5CACHE};
  for (hwloc_obj_type_t type : types) {
    // Instances of one level may differ (hybrid CPUs): one entry per kind.
    std::map<std::tuple<uint64_t, int, int>, int> kinds;  // (size, line, cpus) -> count
    std::string kind = "unified";
    int level = 0;
    const int n = hwloc_get_nbobjs_by_type(t, type);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t c = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i));
      level = static_cast<int>(c->attr->cache.depth);
      if (c->attr->cache.type == HWLOC_OBJ_CACHE_DATA) kind = "data";
      if (c->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) kind = "instruction";
      const int cpus = c->cpuset ? hwloc_bitmap_weight(c->cpuset) : 0;
      ++kinds[{c->attr->cache.size, static_cast<int>(c->attr->cache.linesize), cpus}];
      CacheInstance one;
      one.level = level;
      one.type = kind;
      one.size = c->attr->cache.size;
      if (c->cpuset) one.pus = to_vector(c->cpuset);
      instances.push_back(std::move(one));
    }
    for (const auto& [key, count] : kinds) {
      Cache cache;
      cache.level = level;
      cache.type = kind;
      cache.size = std::get<0>(key);
      cache.line_size = std::get<1>(key);
      cache.cpus_per_instance = std::get<2>(key);
      cache.count = count;
      out.push_back(cache);
    }
  }
}

Topology build(hwloc_topology_t t, const std::string& kind, const std::string& source) {
  Topology topo;
  topo.kind = kind;
  topo.synthetic = kind == "synthetic";
  topo.source = source;

  const int npackages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  topo.packages.resize(static_cast<size_t>(std::max(1, npackages)));
  for (size_t i = 0; i < topo.packages.size(); ++i) topo.packages[i].index = static_cast<int>(i);

  // Cores in logical order; a machine where hwloc sees no cores gets one
  // core per PU.
  const bool have_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0;
  const hwloc_obj_type_t core_type = have_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int ncores = hwloc_get_nbobjs_by_type(t, core_type);
  for (int i = 0; i < ncores; ++i) {
    hwloc_obj_t c = hwloc_get_obj_by_type(t, core_type, static_cast<unsigned>(i));
    Core core;
    core.index = static_cast<int>(topo.cores.size());
    core.package = package_of(t, c);
    core.numa = numa_of(t, c->cpuset);
    hwloc_obj_t pu = nullptr;
    while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(t, c->cpuset, HWLOC_OBJ_PU, pu)))
      core.pus.push_back(static_cast<int>(pu->os_index));
    if (core.pus.empty()) continue;
    topo.packages[static_cast<size_t>(core.package)].cores.push_back(core.index);
    for (int p : core.pus) {
      Pu u;
      u.os_index = p;
      u.core = core.index;
      u.package = core.package;
      u.numa = core.numa;
      for (int q : core.pus)
        if (q != p) u.siblings.push_back(q);
      topo.pus.push_back(u);
      topo.packages[static_cast<size_t>(core.package)].pus.push_back(p);
    }
    topo.cores.push_back(std::move(core));
  }

  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    NumaNode node;
    node.os_index = static_cast<int>(n->os_index);
    node.memory = n->attr ? n->attr->numanode.local_memory : 0;
    if (n->subtype) node.subtype = n->subtype;
    if (n->cpuset) node.local_pus = to_vector(n->cpuset);
    for (const Pu& p : topo.pus)
      if (p.numa == node.os_index) node.pus.push_back(p.os_index);
    std::sort(node.pus.begin(), node.pus.end());
    node.memory_only = node.pus.empty();
    for (const Package& p : topo.packages) {
      const bool inside = !node.pus.empty() &&
                          std::all_of(node.pus.begin(), node.pus.end(), [&](int cpu) {
                            return std::find(p.pus.begin(), p.pus.end(), cpu) != p.pus.end();
                          });
      if (inside) node.package = p.index;
    }
    topo.numa_nodes.push_back(std::move(node));
  }

  add_caches(t, topo.caches, topo.cache_instances);
  for (const CacheInstance& c : topo.cache_instances) {
    if (c.level != 3 || c.type == "instruction") continue;
    const int id = static_cast<int>(topo.l3_domains.size());
    topo.l3_domains.push_back(c.pus);
    for (Core& core : topo.cores)
      if (!core.pus.empty() &&
          std::find(c.pus.begin(), c.pus.end(), core.pus.front()) != c.pus.end())
        core.l3 = id;
  }
  add_cpu_kinds(t, topo);

  topo.allowed_cpus = allowed_of(t, kind == "machine");
  for (const Pu& p : topo.pus)
    if (!topo.allowed(p.os_index)) topo.disallowed_cpus.push_back(p.os_index);
  std::sort(topo.disallowed_cpus.begin(), topo.disallowed_cpus.end());
  BitmapPtr offline(hwloc_bitmap_dup(hwloc_topology_get_complete_cpuset(t)));
  hwloc_bitmap_andnot(offline.get(), offline.get(), hwloc_topology_get_topology_cpuset(t));
  if (hwloc_bitmap_weight(offline.get()) > 0) topo.offline_cpus = to_vector(offline.get());
  return topo;
}

struct Machine {
  TopologyPtr topo;
  std::mutex mu;  // hwloc_get_cpubind allocates; keep callers apart
};

Machine& machine() {
  static Machine m{load(""), {}};
  return m;
}

}  // namespace

const Pu& Topology::pu(int os_index) const {
  for (const Pu& p : pus)
    if (p.os_index == os_index) return p;
  throw std::out_of_range("no CPU " + std::to_string(os_index) + " in topology " + source);
}

bool Topology::allowed(int os_index) const {
  return std::binary_search(allowed_cpus.begin(), allowed_cpus.end(), os_index);
}

Topology load_topology(const std::string& synthetic) {
  auto topo = load(synthetic);
  if (synthetic.empty()) return build(topo.get(), "machine", "this machine");
  return build(topo.get(), "synthetic", synthetic);
}

Topology load_topology_file(const std::string& path) {
  auto topo = load_xml(path);
  Topology out = build(topo.get(), "file", path);
  if (out.allowed_cpus.empty())
    bad_file(path, "allows no CPU (all " + std::to_string(out.pus.size()) +
                       " CPUs are disallowed: " + cpu_list_str(out.disallowed_cpus) + ")");
  return out;
}

std::vector<int> process_allowed_cpus() {
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mu);
  return allowed_of(m.topo.get(), true);
}

std::string cpu_list_str(const std::vector<int>& cpus) {
  std::vector<int> v(cpus);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(v[i]);
    if (j > i) s += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

}  // namespace ppb
