#!/usr/bin/env bash
# test.sh - the one test command: installs what is missing (as scripts/setup.sh does), builds
# everything with AddressSanitizer + UBSan into build-asan/ and runs the whole suite with ctest.
# The last line is always "N passed, N failed"; the exit status is non-zero if anything failed.
#
#     bash scripts/test.sh                  # BUILD_DIR=other/dir to build elsewhere
#
# Sanitizers and Criterion: each Criterion test runs in a forked worker. ASan and UBSan errors
# abort the worker, which Criterion reports as a failure. A leak, though, is only found by
# LeakSanitizer when the worker exits, after it has reported success, and Criterion ignores
# that exit status. So the leak reports in ctest's log (Testing/Temporary/LastTest.log) are
# read here, and a test that passed with a sanitizer report is counted as failed. The tools
# (ic-run, ic-dump) that the tests start are sanitized too: a leak there is a non-zero exit.

set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$IC_ROOT" || exit 1

summary() { # passed failed
    echo "$1 passed, $2 failed"
}

# The conformance tests run every spec op through real PyTorch (Debian's python3-torch, for
# /usr/bin/python3) as an oracle that shares no code with ic-llvm; the model suite (ctest
# Models_cpu) exports torchvision models too. Only the tests need them.
IC_PACKAGES+=(python3 python3-torch python3-torchvision python3-numpy)
# scripts/ci-tsan.sh and ci-fuzz.sh: ThreadSanitizer and libFuzzer need clang and its runtime
# (libomp-19-dev has libarcher.so, the OpenMP tool TSan needs)
IC_PACKAGES+=(clang-19 libclang-rt-19-dev)
ic_install_deps || { echo "test: installing the dependencies failed" >&2; summary 0 0; exit 1; }

build=${BUILD_DIR:-build-asan}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}

if ! ic_build "$build" -DIC_SANITIZE=ON; then
    echo "test: the sanitized build failed" >&2
    summary 0 0
    exit 1
fi

# LeakSanitizer needs ptrace-like access to stop threads; some containers forbid it and LSan
# then fails every process. Probe once, and run without leak checks (saying so) if it fails.
probe_dir=$(mktemp -d)
printf 'int main(void){return 0;}\n' >"$probe_dir/p.c"
if cc -fsanitize=address -o "$probe_dir/p" "$probe_dir/p.c" 2>/dev/null &&
    ! ASAN_OPTIONS=detect_leaks=1 "$probe_dir/p" >/dev/null 2>&1; then
    echo "test: LeakSanitizer does not work here (ptrace restricted?): leak checks are off" >&2
    export ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}"
fi
rm -rf "$probe_dir"

log=$(mktemp)
# Every run starts from an empty persistent cache (ctest points IC_CACHE_DIR there): cold compiles.
rm -rf "$build/test-cache"
(cd "$build" && ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)") 2>&1 | tee "$log"
ctest_rc=${PIPESTATUS[0]}

# ctest: "100% tests passed, 0 tests failed out of 12"
line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
rm -f "$log"
if [[ -z $line ]]; then
    echo "test: ctest ran no tests (exit $ctest_rc)" >&2
    summary 0 0
    exit 1
fi
failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
passed=$((total - failed))

# Tests that passed but printed a sanitizer report (see the header).
dirty=$(awk '
    /^[0-9]+\/[0-9]+ Testing: / { name = $3 }
    /ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:/ { if (name != "") bad[name] = 1 }
    /^Test Passed\./ { if (name in bad) print name }
' "$build/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u)
if [[ -n $dirty ]]; then
    for t in $dirty; do
        echo "test: $t passed but a sanitizer reported an error (see $build/Testing/Temporary/LastTest.log):" >&2
        awk -v t="$t" '
            /^[0-9]+\/[0-9]+ Testing: / { on = ($3 == t) }
            on && /ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:|^    #[0-9]|^SUMMARY:/ { print "  " $0 }
        ' "$build/Testing/Temporary/LastTest.log" | head -40 >&2
        passed=$((passed - 1))
        failed=$((failed + 1))
    done
fi

# Steps outside ctest (each counts as one test): they build with other compilers or sanitizers,
# or install the library. Each scripts/ci-<name>.sh exits 0 on success.
ci_step() { # NAME SCRIPT [ARGS...]
    local name=$1
    shift
    echo "== test: $name =="
    if bash "$@"; then
        echo "test: $name passed"
        passed=$((passed + 1))
    else
        echo "test: $name FAILED" >&2
        failed=$((failed + 1))
    fi
}
# (helpers' steps go here, one ci_step line each)
ci_step install scripts/ci-install.sh "$build"
ci_step tsan scripts/ci-tsan.sh
ci_step fuzz scripts/ci-fuzz.sh 60

summary "$passed" "$failed"
if ((failed > 0 || ctest_rc != 0)); then
    exit 1
fi
exit 0
