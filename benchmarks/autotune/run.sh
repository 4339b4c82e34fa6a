#!/usr/bin/env bash
# run.sh - builds bench_autotune (Release) and runs the autotuner's benchmark: the 20 GEMM
# shapes (default, max-autotune, exhaustive), then max-autotune on the BERT layer (B=8).
#
#     benchmarks/autotune/run.sh                      # everything (~1 h on 2 busy cores)
#     benchmarks/autotune/run.sh --gemms --scale 8    # only the GEMM shapes, M / 8
#     benchmarks/autotune/run.sh --bert               # only the BERT layer
#
# BUILD_DIR (default build-bench) is the build folder. The persistent cache goes to a fresh
# temporary folder (the benchmark turns it off for its own compiles anyway).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
mkdir -p "$build"
log=$build/bench-build.log
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DIC_BUILD_TESTS=OFF &&
       make -C "$build" -j"$(nproc)" bench_autotune; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "run.sh: build failed (full log: $log)" >&2
    exit 1
fi
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export IC_CACHE_DIR=$cache
what=all
case "${1:-}" in
    --gemms) what=gemms; shift ;;
    --bert) what=bert; shift ;;
esac
if [ "$what" != bert ]; then
    "$build/bench_autotune" "$@"
fi
if [ "$what" != gemms ]; then
    "$build/bench_autotune" --graph "$root/benchmarks/cpu/bert_layer.json" --bind B=8
fi
