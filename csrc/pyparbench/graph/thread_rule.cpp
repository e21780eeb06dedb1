#include "pyparbench/graph/thread_rule.hpp"

#include "pyparbench/ops/direct_kernels.hpp"
#include "pyparbench/threading/pool.hpp"
#include "pyparbench/threading/pool_bench.hpp"
#include "pyparbench/timing/peak.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace ppb {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// An element-wise ReLU over 48 KiB in, 48 KiB out (in L2 on any x86 core):
// the rate a small glue op streams at.
double calibrate_ns_per_byte() {
  constexpr int64_t n = 12 * 1024;
  std::vector<float> x(n, 0.5f), y(n);
  const auto relu = direct_kernels().eltwise[static_cast<int>(DirectEltwise::relu)];
  std::vector<double> ns;
  for (int r = 0; r < 60; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    relu(x.data(), y.data(), n);
    const auto t1 = std::chrono::steady_clock::now();
    if (r >= 10) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return median(ns) / (2.0 * n * sizeof(float));
}

double calibrate_ns_per_flop() {
  const PeakTiming t = time_fma(1, 4000, 7, 2, "", {});
  return t.work > 0 ? 2.0 * median(t.ns) / t.work : 0.0;
}

std::string ns_str(double ns) {
  char buf[32];
  if (ns >= 1e6) std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  else if (ns >= 1e3) std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g ns", ns);
  return buf;
}

}  // namespace

WorkRates work_rates() {
  static const WorkRates r{calibrate_ns_per_byte(), calibrate_ns_per_flop()};
  return r;
}

double team_cost_ns(OperatorMode mode, PoolKind pool, int threads) {
  if (threads <= 1) return 0;
  static std::mutex mu;
  static std::map<std::tuple<OperatorMode, PoolKind, int>, double> cache;
  const auto key = std::make_tuple(mode, mode == OperatorMode::library ? PoolKind::openmp : pool,
                                   threads);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  double ns;
  if (mode == OperatorMode::library) {
    ns = median(omp_fork_join(threads, 200, 20));
  } else {
    auto p = make_pool(pool, threads);
    ns = median(bench_fork_join(*p, 200, 20));
  }
  return cache.emplace(key, ns).first->second;
}

NodeThreads choose_threads(const NodeWork& work, const ExecSettings& s, bool can_thread) {
  NodeThreads t;
  t.requested = s.intra_op;
  if (!can_thread) {
    t.threads = 0;
    t.reason = "computes nothing";
    return t;
  }
  const WorkRates r = work_rates();
  t.work_ns = work.bytes * r.ns_per_byte + work.flops * r.ns_per_flop;
  if (s.intra_op == 1) {
    t.reason = "one thread requested";
    t.direct = t.work_ns <= kDirectMaxWorkNs;
    return t;
  }
  t.threads = s.intra_op;
  if (s.alone_below_ns == 0) {
    t.reason = "the per-node rule is off";
    return t;
  }
  if (s.alone_below_ns > 0) {
    t.threshold_ns = s.alone_below_ns;
  } else {
    t.team_ns = team_cost_ns(s.op_mode, s.pool, s.intra_op);
    t.threshold_ns = t.team_ns * s.intra_op / (s.intra_op - 1);
  }
  const std::string est = "work est. " + ns_str(t.work_ns) + " on one core";
  const std::string what = s.alone_below_ns > 0
                               ? "the threshold set, " + ns_str(t.threshold_ns)
                               : "the break-even of a " + std::to_string(s.intra_op) +
                                     "-thread team (" + ns_str(t.team_ns) + " to start and join), " +
                                     ns_str(t.threshold_ns);
  if (t.work_ns < t.threshold_ns) {
    t.threads = 1;
    t.direct = t.work_ns <= kDirectMaxWorkNs;
    t.reason = est + " < " + what;
  } else {
    t.reason = est + " >= " + what;
  }
  return t;
}

}  // namespace ppb
