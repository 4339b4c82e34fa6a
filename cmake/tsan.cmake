# tsan.cmake - IC_TSAN: build everything with ThreadSanitizer (scripts/ci-tsan.sh builds
# build-tsan with it and runs unittests/Runtime/test_threads.c).
#
# TSan needs clang (Debian's clang-19 with libclang-rt-19-dev): configure with
# -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19. It cannot be combined with
# ASan (IC_SANITIZE): both own the shadow memory. -O1 keeps the stacks readable and the run
# fast enough; -g gives the reports their source lines.
#
# libomp and libLLVM are not instrumented. OpenMP's synchronisation reaches TSan through
# libarcher.so (an OMPT tool shipped with libomp-19-dev): run with
# OMP_TOOL_LIBRARIES=/usr/lib/llvm-19/lib/libarcher.so (ci-tsan.sh does).
option(IC_TSAN "ic: build everything with ThreadSanitizer (clang only)" OFF)
if(IC_TSAN)
  if(IC_SANITIZE)
    message(FATAL_ERROR "ic: IC_TSAN and IC_SANITIZE (ASan) cannot be combined")
  endif()
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ic: IC_TSAN needs clang (-DCMAKE_C_COMPILER=clang-19), not ${CMAKE_C_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=thread -g -O1 -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# Runtime_test_threads_tsan: unittests/Runtime/test_threads.c over the small runner of
# unittests/Runtime/tsan/ (Criterion's own does not start under TSan: see its header there).
# Defined once the directory is read, when the library targets exist.
function(ic_tsan_targets)
  if(NOT IC_BUILD_TESTS)
    return()
  endif()
  set(_t ${CMAKE_CURRENT_SOURCE_DIR}/unittests)
  add_executable(Runtime_test_threads_tsan ${_t}/Runtime/test_threads.c ${_t}/common/testutil.c
                 ${_t}/Runtime/tsan/lite_main.c)
  target_include_directories(Runtime_test_threads_tsan BEFORE PRIVATE ${_t}/Runtime/tsan)
  target_include_directories(Runtime_test_threads_tsan PRIVATE ${_t}/common
                             ${CMAKE_CURRENT_SOURCE_DIR}/lib/Graph ${CMAKE_CURRENT_SOURCE_DIR}/lib/Runtime)
  target_compile_definitions(Runtime_test_threads_tsan PRIVATE IC_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}"
                             IC_BUILD_DIR="${CMAKE_CURRENT_BINARY_DIR}")
  target_link_libraries(Runtime_test_threads_tsan PRIVATE ic-llvm-static)
endfunction()
if(IC_TSAN)
  cmake_language(DEFER CALL ic_tsan_targets)
endif()
