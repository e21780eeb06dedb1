#include "pyparbench/core/threads.hpp"

#include "pyparbench/core/limits.hpp"

#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>

namespace ppb {

namespace {
std::atomic<int>& default_count() {
  static std::atomic<int> n{omp_get_max_threads()};
  return n;
}
}  // namespace

int default_threads() { return default_count().load(); }

void set_default_threads(int n) {
  require_thread_count("threads", n);
  default_count().store(n);
}

int resolve_threads(std::optional<int> requested) {
  if (!requested) return default_threads();
  require_thread_count("threads", *requested);
  return *requested;
}

ThreadsScope::ThreadsScope(int n) : saved_(omp_get_max_threads()) {
  if (n != saved_) omp_set_num_threads(n);
}

ThreadsScope::~ThreadsScope() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

}  // namespace ppb
