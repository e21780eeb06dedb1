#include "pyparbench/core/knobs.hpp"

#include "pyparbench/core/enum_names.hpp"

namespace ppb {

namespace {

constexpr std::pair<Scheduler, const char*> kSchedulers[] = {
    {Scheduler::sync, "sync"},
    {Scheduler::async, "async"},
};
constexpr std::pair<OperatorMode, const char*> kOperatorModes[] = {
    {OperatorMode::library, "library"},
    {OperatorMode::framework, "framework"},
};
constexpr std::pair<MathLibrary, const char*> kLibraries[] = {
    {MathLibrary::onednn, "onednn"},
    {MathLibrary::eigen, "eigen"},
    {MathLibrary::blas, "blas"},
};
constexpr std::pair<PoolKind, const char*> kPoolKinds[] = {
    {PoolKind::openmp, "openmp"},
    {PoolKind::std, "std"},
    {PoolKind::eigen, "eigen"},
};
constexpr std::pair<AffinityPolicy, const char*> kAffinityPolicies[] = {
    {AffinityPolicy::none, "none"},
    {AffinityPolicy::compact, "compact"},
    {AffinityPolicy::scatter, "scatter"},
};

constexpr std::pair<Precision, const char*> kPrecisions[] = {
    {Precision::fp32, "fp32"},
    {Precision::bf16, "bf16"},
};

}  // namespace

const char* knob_name(Scheduler v) { return enum_name(kSchedulers, v); }
const char* knob_name(OperatorMode v) { return enum_name(kOperatorModes, v); }
const char* knob_name(MathLibrary v) { return enum_name(kLibraries, v); }
const char* knob_name(PoolKind v) { return enum_name(kPoolKinds, v); }
const char* knob_name(AffinityPolicy v) { return enum_name(kAffinityPolicies, v); }
const char* knob_name(Precision v) { return enum_name(kPrecisions, v); }

Scheduler parse_scheduler(const std::string& name) {
  return enum_value(kSchedulers, "scheduler", name);
}
OperatorMode parse_operator_mode(const std::string& name) {
  return enum_value(kOperatorModes, "operator", name);
}
MathLibrary parse_library(const std::string& name) {
  return enum_value(kLibraries, "library", name);
}
PoolKind parse_pool_kind(const std::string& name) { return enum_value(kPoolKinds, "pool", name); }
AffinityPolicy parse_affinity_policy(const std::string& name) {
  return enum_value(kAffinityPolicies, "affinity", name, "a list of CPUs");
}

Precision parse_precision(const std::string& name) {
  return enum_value(kPrecisions, "precision", name);
}

}  // namespace ppb
