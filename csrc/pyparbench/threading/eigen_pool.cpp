#include "pyparbench/threading/eigen_pool.hpp"

#include <unsupported/Eigen/CXX11/ThreadPool>

#include <atomic>

namespace ppb {

namespace {

// Eigen's thread environment, with each new thread pinning itself first.
// Eigen creates thread i (its CurrentThreadId) i-th.
struct PinningEnvironment : Eigen::StlThreadEnvironment {
  std::shared_ptr<WorkerStart> start;
  std::shared_ptr<std::atomic<int>> next = std::make_shared<std::atomic<int>>(0);

  EnvThread* CreateThread(std::function<void()> f) {
    const int index = next->fetch_add(1);
    return new EnvThread([s = start, index, f = std::move(f)] {
      s->arrive(index);
      f();
    });
  }
};

}  // namespace

struct EigenPool::Impl {
  Impl(int threads, const std::vector<int>& cpus)
      : start(std::make_shared<WorkerStart>(cpus, threads)),
        pool(threads, /*allow_spinning=*/true, make_env(start)) {}
  static PinningEnvironment make_env(std::shared_ptr<WorkerStart> s) {
    PinningEnvironment env;
    env.start = std::move(s);
    return env;
  }
  std::shared_ptr<WorkerStart> start;
  Eigen::ThreadPoolTempl<PinningEnvironment> pool;
};

EigenPool::EigenPool(int threads, std::vector<int> cpus)
    : ThreadPool(threads, std::move(cpus)), impl_(std::make_unique<Impl>(threads_, cpus_)) {
  // On a failed pin the threads still run; stop them before reporting it.
  try {
    impl_->start->wait();
  } catch (...) {
    impl_.reset();
    throw;
  }
}

EigenPool::~EigenPool() {
  drain();
  impl_.reset();  // Eigen's destructor stops and joins the threads
}

void EigenPool::enqueue(Task task) { impl_->pool.Schedule(std::move(task)); }

int EigenPool::current_worker() const { return impl_->pool.CurrentThreadId(); }

}  // namespace ppb
