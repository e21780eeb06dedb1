#include "pyparbench/threading/pool.hpp"

#include "pyparbench/core/limits.hpp"
#include "pyparbench/threading/affinity.hpp"
#include "pyparbench/threading/eigen_pool.hpp"
#include "pyparbench/threading/openmp_pool.hpp"
#include "pyparbench/threading/std_pool.hpp"

#include <algorithm>
#include <stdexcept>

namespace ppb {

void ErrorSlot::capture() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_) first_ = std::current_exception();
  failed_.store(true, std::memory_order_relaxed);
}

void ErrorSlot::rethrow() {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = std::move(first_);
    first_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
  }
  if (e) std::rethrow_exception(e);
}

void WorkCounter::done() noexcept {
  if (n_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // Taking the lock orders the notify after a waiter's check of n_.
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
}

void WorkCounter::wait() {
  if (n_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return n_.load(std::memory_order_acquire) == 0; });
}

void WorkerStart::arrive(int index) noexcept {
  std::exception_ptr error;
  if (!cpus_.empty()) {
    try {
      set_thread_affinity({cpus_[static_cast<size_t>(index) % cpus_.size()]});
    } catch (...) {
      error = std::current_exception();
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error && !error_) error_ = error;
  if (++arrived_ == threads_) cv_.notify_all();
}

void WorkerStart::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return arrived_ >= threads_; });
  if (error_) std::rethrow_exception(error_);
}

ThreadPool::ThreadPool(int threads, std::vector<int> cpus)
    : threads_(threads), cpus_(std::move(cpus)) {}

namespace {

// State shared by the blocks of one parallel_for; the blocks hold it, so it
// outlives the caller's wait however the wake-up races.
struct ForCall {
  explicit ForCall(int64_t blocks) { left.add(blocks); }
  WorkCounter left;
  ErrorSlot errors;
};

}  // namespace

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>(n, threads_);
  auto call = std::make_shared<ForCall>(blocks);
  int64_t b = 0;
  try {
    for (; b < blocks; ++b) {
      const int64_t lo = n * b / blocks, hi = n * (b + 1) / blocks;
      enqueue([this, call, lo, hi, &fn] {
        run_unit(
            [&] {
              for (int64_t i = lo; i < hi && !call->errors.failed(); ++i) fn(i);
            },
            call->errors);
        call->left.done();
      });
    }
  } catch (...) {
    call->errors.capture();
    for (; b < blocks; ++b) call->left.done();  // never handed over
  }
  call->left.wait();
  call->errors.rethrow();
}

void ThreadPool::submit(Task task) {
  pending_.add();
  try {
    enqueue([this, t = std::move(task)] { run_submitted(t); });
  } catch (...) {
    pending_.done();
    throw;
  }
}

void ThreadPool::run_submitted(const Task& task) noexcept {
  run_unit(task, errors_);
  pending_.done();
}

void ThreadPool::join() {
  pending_.wait();
  errors_.rethrow();
}

void ThreadPool::drain() noexcept {
  try {
    pending_.wait();
    errors_.rethrow();
  } catch (...) {
  }
}

void ThreadPool::attach_audit(std::shared_ptr<Audit> audit, int team) {
  std::lock_guard<std::mutex> lock(audit_mu_);
  audit_ = std::move(audit);
  audit_team_ = team;
  auditing_.store(audit_ != nullptr);
}

void ThreadPool::detach_audit() {
  std::lock_guard<std::mutex> lock(audit_mu_);
  auditing_.store(false);
  audit_.reset();
}

void ThreadPool::report() noexcept {
  std::shared_ptr<Audit> audit;
  int team;
  {
    std::lock_guard<std::mutex> lock(audit_mu_);
    audit = audit_;
    team = audit_team_;
  }
  if (audit) audit->record(team, current_worker());
}

std::unique_ptr<ThreadPool> make_pool(PoolKind kind, int threads, std::vector<int> cpus) {
  require_thread_count("threads", threads);
  if (!cpus.empty()) require_pinnable(cpus, "pool cpus");
  switch (kind) {
    case PoolKind::openmp: return std::make_unique<OpenMPPool>(threads, std::move(cpus));
    case PoolKind::std: return std::make_unique<StdPool>(threads, std::move(cpus));
    case PoolKind::eigen: return std::make_unique<EigenPool>(threads, std::move(cpus));
  }
  throw std::invalid_argument(std::string("no pool of kind ") + knob_name(kind));
}

}  // namespace ppb
