#!/usr/bin/env bash
# run.sh - builds ic-llvm (Release) and runs the CPU benchmark driver in one command.
#
#     benchmarks/cpu/run.sh                  # full run (~3 min on 2 cores)
#     benchmarks/cpu/run.sh --quick          # smoke run with small sizes
#     benchmarks/cpu/run.sh --json > r.json  # machine-readable; progress stays on stderr
#     benchmarks/cpu/run.sh --only seed_pattern,softmax
#
# BUILD_DIR (default build-bench) is the build folder; the build log goes to BUILD_DIR/bench-build.log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
mkdir -p "$build"
log=$build/bench-build.log
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DIC_BUILD_TESTS=OFF &&
       make -C "$build" -j"$(nproc)" bench_cpu; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "run.sh: build failed (full log: $log)" >&2
    exit 1
fi
exec "$build/bench_cpu" --graphs "$root/benchmarks/cpu" "$@"
