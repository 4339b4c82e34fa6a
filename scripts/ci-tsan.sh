#!/usr/bin/env bash
# ci-tsan.sh - the threading contract under ThreadSanitizer: builds build-tsan/ (clang-19,
# -DIC_TSAN=ON: cmake/tsan.cmake) with only the library and unittests/Runtime/test_threads.c,
# runs that test and fails on any TSan report, even one in a test that passed.
#
#     bash scripts/ci-tsan.sh            # TSAN_BUILD_DIR=dir to build elsewhere
#
# What TSan sees here: our C code is instrumented; libLLVM, libomp and the JIT-compiled
# kernels are not. OpenMP's own synchronisation (fork/join of the kernels' teams, barriers)
# reaches TSan through libarcher.so, the OMPT tool of libomp-19-dev, loaded by
# OMP_TOOL_LIBRARIES; its "verbose" line proves it was loaded. ignore_noninstrumented_modules=1
# is what the Archer documentation prescribes: libomp and libLLVM publish their internal
# objects through atomics TSan cannot see, so the locks they take on them look racy (seen
# here: libomp's per-worker mutex, created by the worker and locked by the master; the mutex
# of an llvm::TimerGroup, a ManagedStatic made by the first thread that builds a pass pipeline).
# The option ignores only what those libraries do themselves; every access our code makes stays
# checked, so no suppression file is needed, and none may hide our code. The kernels' own
# memory accesses are not seen: test_threads.c checks their results against the reference.
#
# The test runs over unittests/Runtime/tsan/ (Criterion's runner does not start under TSan).

set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TSAN_BUILD_DIR:-$root/build-tsan}
archer=/usr/lib/llvm-19/lib/libarcher.so
test_bin=Runtime_test_threads_tsan

for need in clang-19 clang++-19; do
    command -v "$need" >/dev/null || { echo "ci-tsan: $need not found (apt-get install clang-19)" >&2; exit 1; }
done
if [[ ! -f $archer ]]; then
    echo "ci-tsan: $archer not found (libomp-19-dev)" >&2
    exit 1
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DIC_BUILD_TESTS=ON -DIC_TSAN=ON \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 >/dev/null || exit 1
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "$test_bin" || exit 1

log=$(mktemp)
cache=$(mktemp -d)
trap 'rm -rf "$log" "$cache"' EXIT
# llvm-symbolizer gives the reports their function names and lines
PATH=/usr/lib/llvm-19/bin:$PATH \
OMP_TOOL_LIBRARIES=$archer ARCHER_OPTIONS=verbose=1 \
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1 \
IC_CACHE_DIR=$cache \
    "$build/$test_bin" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

fail=0
if ! grep -q 'Archer detected OpenMP application with TSan' "$log"; then
    echo "ci-tsan: libarcher.so was not loaded: OpenMP synchronisation would be invisible to TSan" >&2
    fail=1
fi
# "WARNING: ThreadSanitizer: data race", "ERROR: ThreadSanitizer: SEGV", "ThreadSanitizer: starting new
# threads after multi-threaded fork"...: any of its lines is a failure, whatever the test said
if grep -q 'ThreadSanitizer' "$log"; then
    echo "ci-tsan: ThreadSanitizer reported (above)" >&2
    fail=1
fi
if ((rc != 0)); then
    echo "ci-tsan: $test_bin failed (exit $rc)" >&2
    fail=1
fi
exit $fail
