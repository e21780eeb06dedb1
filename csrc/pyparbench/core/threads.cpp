#include "pyparbench/core/threads.hpp"

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
  if (n < 1) throw std::invalid_argument("threads must be >= 1, got " + std::to_string(n));
  default_count().store(n);
}

int resolve_threads(std::optional<int> requested) {
  if (!requested) return default_threads();
  if (*requested < 1)
    throw std::invalid_argument("threads must be >= 1, got " + std::to_string(*requested));
  return *requested;
}

ThreadsScope::ThreadsScope(int n) : saved_(omp_get_max_threads()) {
  if (n != saved_) omp_set_num_threads(n);
}

ThreadsScope::~ThreadsScope() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

}  // namespace ppb
