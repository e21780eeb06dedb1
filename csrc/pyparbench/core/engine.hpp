// The process-wide oneDNN CPU engine and a per-thread stream.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace ppb {

const dnnl::engine& cpu_engine();
// Streams are not shared between threads that may execute at once.
dnnl::stream& thread_stream();

}  // namespace ppb
