// Intra-op thread counts. oneDNN (OpenMP runtime) reads omp_get_max_threads()
// both when a primitive is created and when it runs, and a primitive must run
// with the count it was created for, so a kernel fixes its count at creation
// and every use of it goes through ThreadsScope.
#pragma once

#include <optional>

namespace ppb {

// The count used when a kernel is created without an explicit one.
int default_threads();
void set_default_threads(int n);
// Resolves a requested count: none means "the current default"; < 1 throws.
int resolve_threads(std::optional<int> requested);

// Sets the calling thread's OpenMP team size for its lifetime.
class ThreadsScope {
 public:
  explicit ThreadsScope(int n);
  ~ThreadsScope();
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

}  // namespace ppb
