# PPB_SANITIZE: a comma-separated -fsanitize= list ("address,undefined" or
# "thread") for a checked build of the extension. Such a build needs the
# sanitizer runtime preloaded into Python (see .ci/sanitize).
set(PPB_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined or thread")
if(PPB_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "PPB_SANITIZE needs GCC or Clang, got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(PPB_SANITIZE MATCHES "thread" AND PPB_SANITIZE MATCHES "address")
    message(FATAL_ERROR "PPB_SANITIZE: thread cannot be combined with address")
  endif()
  # Frame pointers: readable stacks; -g1: file and line in every report (a
  # line table: full -g adds 40 % to the compile for variables no report shows).
  set(_ppb_san_flags -fno-omit-frame-pointer -g1)
  target_compile_options(ppb_core PRIVATE -fsanitize=${PPB_SANITIZE} ${_ppb_san_flags})
  # The bindings (pybind11's conversions, half the build) get every check but
  # UBSan's: its checks of their template code triple their compile time,
  # while the arithmetic it guards, the kernels', is in ppb_core.
  string(REGEX REPLACE "(^|,)undefined" "" _ppb_san_bindings "${PPB_SANITIZE}")
  string(REGEX REPLACE "^," "" _ppb_san_bindings "${_ppb_san_bindings}")
  if(_ppb_san_bindings)
    target_compile_options(_core PRIVATE -fsanitize=${_ppb_san_bindings} ${_ppb_san_flags})
  endif()
  foreach(_t ppb_core _core)
    target_link_options(${_t} PRIVATE -fsanitize=${PPB_SANITIZE})
  endforeach()
  message(STATUS "pyparbench: sanitizers ${PPB_SANITIZE}")
endif()
