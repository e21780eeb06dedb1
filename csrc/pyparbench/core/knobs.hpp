// The study's knobs that take a name, one enum each, and the one place that
// converts between names and values: Python passes names, the native core
// switches on the enums.
#pragma once

#include <array>
#include <string>

namespace ppb {

// Scheduler layer: one node at a time, or independent nodes at once on
// inter-op workers.
enum class Scheduler { sync, async };
// Operator layer: one library call threads the op, or the op is cut into
// blocks run single-threaded on the worker's pool.
enum class OperatorMode { library, framework };
// Library layer: the math library of the heavy ops.
enum class MathLibrary { onednn, eigen, blas };
// Library layer: the thread pool (std: mutex + condition variable).
enum class PoolKind { openmp, std, eigen };
// Which CPUs threads are pinned to (explicit CPU lists need no name).
enum class AffinityPolicy { none, compact, scatter };
// What the heavy ops store and multiply: fp32, or bf16 weights and
// activations with fp32 accumulation and fp32 outputs.
enum class Precision { fp32, bf16 };

// Every math library, in the enum's order.
constexpr std::array<MathLibrary, 3> kMathLibraries{MathLibrary::onednn, MathLibrary::eigen,
                                                    MathLibrary::blas};

// The name a value is known by in Python ("sync", "framework", "onednn", ...).
const char* knob_name(Scheduler v);
const char* knob_name(OperatorMode v);
const char* knob_name(MathLibrary v);
const char* knob_name(PoolKind v);
const char* knob_name(AffinityPolicy v);
const char* knob_name(Precision v);

// The inverse of knob_name; std::invalid_argument naming the knob, the bad
// name and the valid ones ("library must be 'onednn', 'eigen' or 'blas',
// got 'mkl'").
Scheduler parse_scheduler(const std::string& name);
OperatorMode parse_operator_mode(const std::string& name);
MathLibrary parse_library(const std::string& name);
PoolKind parse_pool_kind(const std::string& name);
AffinityPolicy parse_affinity_policy(const std::string& name);
Precision parse_precision(const std::string& name);

}  // namespace ppb
