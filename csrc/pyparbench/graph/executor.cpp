#include "pyparbench/graph/executor.hpp"

#include "pyparbench/core/threads.hpp"
#include "pyparbench/threading/affinity.hpp"
#include "pyparbench/threading/audit.hpp"
#include "pyparbench/threading/pool.hpp"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace ppb {

namespace {

using Clock = std::chrono::steady_clock;

// A spin-wait hint to the core: x86's PAUSE, aarch64's YIELD, else nothing.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

double since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

// What one worker owns for a run: its CPUs and, in framework mode, its pool.
// Made on the worker's own thread, so the thread's mask and OpenMP team are
// its own.
class WorkerContext {
 public:
  WorkerContext(const ExecSettings& s, int team, int worker, const std::shared_ptr<Audit>& audit)
      : audit_(audit), worker_(worker), team_(team), cpus_(cpus_of(s, worker)),
        placement_(cpus_, team_, s.op_mode == OperatorMode::library) {
    if (s.op_mode == OperatorMode::framework) {
      pool_ = make_pool(s.pool, team_, cpus_);
      if (audit_) pool_->attach_audit(audit_, worker_);
    }
    report();
  }
  ~WorkerContext() {
    if (pool_ && audit_) pool_->detach_audit();
  }
  ThreadPool* pool() const { return pool_.get(); }
  // The worker and its OpenMP team report into the audit.
  void report() const {
    if (!audit_) return;
    audit_->record(worker_);
    if (!pool_) {
      ThreadsScope scope(team_);
      audit_->record_omp_team(worker_, team_);
    }
  }

 private:
  // The worker's CPUs; empty: not pinned.
  static std::vector<int> cpus_of(const ExecSettings& s, int worker) {
    const auto w = static_cast<size_t>(worker);
    return w < s.worker_cpus.size() ? s.worker_cpus[w] : std::vector<int>{};
  }

  std::shared_ptr<Audit> audit_;
  int worker_, team_;
  std::vector<int> cpus_;
  WorkerPlacement placement_;  // outlives the pool: its threads are stopped first
  std::unique_ptr<ThreadPool> pool_;
};

void run_node(NodeRunner* r, ThreadPool* pool, int node, int worker, bool record,
              std::vector<TraceEvent>& events, Clock::time_point t0) {
  if (!record) {
    if (r) r->run(pool);
    return;
  }
  TraceEvent& e = events[static_cast<size_t>(node)];
  e.node = node;
  e.worker = worker;
  e.cpu = sched_getcpu();
  e.start_ns = since(t0);
  if (r) r->run(pool);
  e.end_ns = since(t0);
}

RunResult run_sync(const std::vector<NodeRunner*>& runners, const ExecSettings& s, int team,
                   int repeats, int warmup, bool trace, const std::shared_ptr<Audit>& audit,
                   const std::function<void()>& before_repeat) {
  WorkerContext ctx(s, team, 0, audit);
  RunResult res;
  std::vector<TraceEvent> events(runners.size());
  const int n = static_cast<int>(runners.size());
  for (int rep = 0; rep < warmup + repeats; ++rep) {
    const bool record = trace && rep == warmup + repeats - 1;
    if (before_repeat) before_repeat();
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) run_node(runners[i], ctx.pool(), i, 0, record, events, t0);
    const double ns = since(t0);
    if (rep >= warmup) res.ns.push_back(ns);
  }
  ctx.report();
  if (trace) res.trace = std::move(events);
  return res;
}

// The async scheduler's shared state: a ready queue per worker group,
// dependency counters, and a generation number that starts each repeat.
class AsyncRun {
 public:
  AsyncRun(const std::vector<NodeRunner*>& runners, const std::vector<std::vector<int>>& consumers,
           const std::vector<int>& deps, const ExecSettings& s, int team)
      : runners_(runners), consumers_(consumers), deps_(deps), s_(s), team_(team),
        remaining_(runners.size()), queues_(static_cast<size_t>(s.groups)),
        events_(runners.size()) {}

  RunResult run(int repeats, int warmup, bool trace, const std::shared_ptr<Audit>& audit,
                const std::function<void()>& before_repeat) {
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> start_errors(static_cast<size_t>(s_.inter_op));
    for (int w = 0; w < s_.inter_op; ++w)
      workers.emplace_back([this, w, &audit, &start_errors] { worker(w, audit, start_errors); });
    RunResult res;
    std::exception_ptr error;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_done_.wait(lock, [&] { return started_ == s_.inter_op; });
    }
    for (auto& e : start_errors)
      if (e && !error) error = e;
    for (int rep = 0; !error && rep < warmup + repeats; ++rep) {
      record_ = trace && rep == warmup + repeats - 1;
      if (before_repeat) before_repeat();
      const auto t0 = Clock::now();
      start_repeat(t0);
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_done_.wait(lock, [&] { return done_ == static_cast<int>(runners_.size()) || error_; });
        error = error_;
      }
      const double ns = since(t0);
      if (rep >= warmup && !error) res.ns.push_back(ns);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      stopping_.store(true, std::memory_order_relaxed);
    }
    cv_work_.notify_all();
    for (auto& t : workers) t.join();
    if (error) std::rethrow_exception(error);
    if (trace) res.trace = std::move(events_);
    return res;
  }

 private:
  void start_repeat(Clock::time_point t0) {
    std::lock_guard<std::mutex> lock(mu_);
    t0_ = t0;
    done_ = 0;
    for (size_t i = 0; i < runners_.size(); ++i) {
      remaining_[i].store(deps_[i], std::memory_order_relaxed);
      if (deps_[i] == 0) push_locked(static_cast<int>(i));
    }
    cv_work_.notify_all();
  }

  int group_of(int node) const {
    return s_.node_group.empty() ? 0 : s_.node_group[static_cast<size_t>(node)];
  }

  void push_locked(int node) {
    queues_[static_cast<size_t>(group_of(node))].push_back(node);
    queued_.fetch_add(1, std::memory_order_release);
  }

  // A node for worker w: from its group's queue first, else any other.
  bool pop_locked(int w, int& node) {
    const size_t g = static_cast<size_t>(w * s_.groups / s_.inter_op);
    for (size_t k = 0; k < queues_.size(); ++k) {
      auto& q = queues_[(g + k) % queues_.size()];
      if (!q.empty()) {
        node = q.front();
        q.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

  void worker(int w, const std::shared_ptr<Audit>& audit,
              std::vector<std::exception_ptr>& start_errors) {
    std::unique_ptr<WorkerContext> ctx;
    try {
      ctx = std::make_unique<WorkerContext>(s_, team_, w, audit);
    } catch (...) {
      start_errors[static_cast<size_t>(w)] = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++started_;
    }
    cv_done_.notify_all();
    if (!ctx) return;
    for (;;) {
      int node = -1;
      spin_for_work();
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_work_.wait(lock, [&] { return stop_ || pop_locked(w, node); });
        if (node < 0) break;  // stop_ with nothing queued
      }
      try {
        run_node(runners_[static_cast<size_t>(node)], ctx->pool(), node, w, record_, events_,
                 t0_);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
        cv_done_.notify_all();
        continue;
      }
      finish(node);
    }
    ctx->report();
  }

  // An idle worker spins a short while before sleeping: waking a sleeping
  // thread costs tens of microseconds on a VM, more than most nodes take
  // (the same trade-off as Eigen's pool and OpenMP's spin count).
  void spin_for_work() const {
    const auto until = Clock::now() + kSpin;
    while (queued_.load(std::memory_order_acquire) == 0 &&
           !stopping_.load(std::memory_order_relaxed) && Clock::now() < until)
      cpu_relax();
  }

  void finish(int node) {
    int woken = 0;
    std::lock_guard<std::mutex> lock(mu_);
    for (int c : consumers_[static_cast<size_t>(node)])
      if (remaining_[static_cast<size_t>(c)].fetch_sub(1, std::memory_order_relaxed) == 1) {
        push_locked(c);
        ++woken;
      }
    if (++done_ == static_cast<int>(runners_.size())) cv_done_.notify_all();
    if (woken > 1) cv_work_.notify_all();
    else if (woken == 1) cv_work_.notify_one();
  }

  const std::vector<NodeRunner*>& runners_;
  const std::vector<std::vector<int>>& consumers_;
  const std::vector<int>& deps_;
  const ExecSettings& s_;
  const int team_;
  std::vector<std::atomic<int>> remaining_;
  std::vector<std::deque<int>> queues_;
  std::atomic<int> queued_{0};
  std::atomic<bool> stopping_{false};
  static constexpr std::chrono::microseconds kSpin{50};
  std::vector<TraceEvent> events_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  Clock::time_point t0_;
  int done_ = 0, started_ = 0;
  bool stop_ = false;
  bool record_ = false;
  std::exception_ptr error_;
};

}  // namespace

RunResult execute(const std::vector<NodeRunner*>& runners,
                  const std::vector<std::vector<int>>& consumers,
                  const std::vector<int>& dependencies, const ExecSettings& settings, int team,
                  int repeats, int warmup, bool trace, const std::shared_ptr<Audit>& audit,
                  const std::function<void()>& before_repeat) {
  if (settings.scheduler == Scheduler::sync)
    return run_sync(runners, settings, team, repeats, warmup, trace, audit, before_repeat);
  AsyncRun run(runners, consumers, dependencies, settings, team);
  return run.run(repeats, warmup, trace, audit, before_repeat);
}

}  // namespace ppb
