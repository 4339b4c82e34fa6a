#!/bin/bash
# gpu-check.sh - on the GPU machine: the conformance corpus through `ic-run --device cuda`
# and the GPU benchmark, for one or more build folders in the same run (so that a change is
# compared with its baseline on the same card). Build on the dev machine first (ic-run, and
# bench_gpu by benchmarks/gpu/build.sh); see shared/device/README.md for the runtime prefix.
#
#     bash scripts/gpu-check.sh [--no-bench] [--bench-args "ARGS"] DIR [DIR...]
#
# Prints, per folder, the conformance summary ("N passed, N failed" from compare.py) and the
# bench_gpu table; outputs are kept under $OUT (or /tmp/ic-gpu-check) per folder.
set -u
cd "$(dirname "$0")/.." || exit 1
bench=1 bench_args="--iters 50"
while [[ $# -gt 0 && $1 == --* ]]; do
    case $1 in
    --no-bench) bench=0; shift ;;
    --bench-args) bench_args=$2; shift 2 ;;
    *) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $# -ge 1 ]] || { echo "usage: gpu-check.sh [--no-bench] [--bench-args ARGS] DIR [DIR...]" >&2; exit 2; }
out=${OUT:-/tmp/ic-gpu-check}
mkdir -p "$out"
export IC_SOURCE_DIR=$PWD IC_CONFORMANCE_PYTHON=${IC_CONFORMANCE_PYTHON:-python3}
rc=0
for d in "$@"; do
    tag=$(basename "$d")
    echo "== conformance on cuda: $d =="
    IC_CONFORMANCE_FLAGS="--backend compiled --device cuda --no-compare --iters 1 --warmup 0" \
        bash unittests/Conformance/run_conformance.sh "$d" >"$out/conformance-$tag.txt" 2>&1 || rc=1
    tail -25 "$out/conformance-$tag.txt"
done
if ((bench)); then
    for d in "$@" "$1"; do   # the first folder again at the end: the run-to-run noise
        [[ -x $d/bench_gpu ]] || { echo "gpu-check: no $d/bench_gpu"; rc=1; continue; }
        echo "== bench_gpu: $d =="
        CUDA_MODULE_LOADING=EAGER CUDA_CACHE_DISABLE=1 "$d/bench_gpu" $bench_args 2>&1 |
            tee -a "$out/bench-$(basename "$d").txt" | grep -v '^RESULT'
    done
fi
exit $rc
