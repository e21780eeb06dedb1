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
  # Frame pointers: readable stacks; -g: file and line in every report.
  set(_ppb_san_flags -fsanitize=${PPB_SANITIZE} -fno-omit-frame-pointer -g)
  foreach(_t ppb_core _core)
    target_compile_options(${_t} PRIVATE ${_ppb_san_flags})
    target_link_options(${_t} PRIVATE -fsanitize=${PPB_SANITIZE})
  endforeach()
  message(STATUS "pyparbench: sanitizers ${PPB_SANITIZE}")
endif()
