#include "pyparbench/graph/instances.hpp"

#include "pyparbench/core/checks.hpp"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ppb {

namespace {

// A reusable barrier; the last arrival of each round records the time.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return;
    const long gen = generation_;
    if (++count_ == n_) {
      count_ = 0;
      ++generation_;
      stamps_.push_back(std::chrono::steady_clock::now());
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen || broken_; });
    }
  }
  // After a failure: nobody waits any more.
  void break_all() {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }
  const std::vector<std::chrono::steady_clock::time_point>& stamps() const { return stamps_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int count_ = 0;
  long generation_ = 0;
  bool broken_ = false;
  std::vector<std::chrono::steady_clock::time_point> stamps_;
};

}  // namespace

std::vector<double> run_instances(const std::vector<Plan*>& plans,
                                  const std::vector<ExecSettings>& settings, int repeats,
                                  int warmup, std::vector<std::vector<double>>& per_instance) {
  if (plans.empty()) throw std::invalid_argument("run_instances needs at least one plan");
  if (plans.size() != settings.size())
    throw std::invalid_argument("one settings per instance: " + std::to_string(plans.size()) +
                                " plans, " + std::to_string(settings.size()) + " settings");
  require_at_least("repeats", repeats, 1);
  const int n = static_cast<int>(plans.size());
  Barrier barrier(n);
  per_instance.assign(plans.size(), {});
  std::vector<std::exception_ptr> errors(plans.size());
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        per_instance[i] = plans[i]->run(settings[i], repeats, warmup, false, {},
                                        [&] { barrier.arrive_and_wait(); })
                              .ns;
      } catch (...) {
        errors[i] = std::current_exception();
        barrier.break_all();
      }
      // The end of the last repeat; also releases the others if this one failed.
      barrier.arrive_and_wait();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Stamps: the start of each repeat, then the end of the last one. A
  // repeat lasts from its start to the next start (everyone arrived).
  const auto& st = barrier.stamps();
  std::vector<double> ns;
  for (int r = warmup; r < warmup + repeats; ++r)
    ns.push_back(std::chrono::duration<double, std::nano>(st[r + 1] - st[r]).count());
  return ns;
}

}  // namespace ppb
