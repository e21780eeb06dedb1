#include "pyparbench/ops/kernel.hpp"

#include "pyparbench/threading/audit.hpp"

namespace ppb {

void Kernel::pin(std::vector<int> cpus) {
  require_pinnable(cpus, "kernel cpus");
  std::lock_guard<std::mutex> lock(mu_);
  cpus_ = std::move(cpus);
}

void Kernel::unpin() {
  std::lock_guard<std::mutex> lock(mu_);
  cpus_.clear();
}

std::vector<int> Kernel::pinned_cpus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cpus_;
}

void Kernel::attach_audit(std::shared_ptr<Audit> audit, int team) {
  std::lock_guard<std::mutex> lock(mu_);
  audit_ = std::move(audit);
  audit_team_ = team;
}

void Kernel::detach_audit() {
  std::lock_guard<std::mutex> lock(mu_);
  audit_.reset();
}

Kernel::TeamScope::TeamScope(Kernel& k) : k_(k), placement_(k.cpus_, k.threads_) {
  if (k_.audit_) k_.audit_->record_omp_team(k_.audit_team_, k_.threads_);
}

Kernel::TeamScope::~TeamScope() {
  if (k_.audit_) k_.audit_->record_omp_team(k_.audit_team_, k_.threads_);
}

}  // namespace ppb
