#!/usr/bin/env bash
# run.sh - builds ic-llvm (Release) and runs the CPU GEMM benchmark against OpenBLAS in one command.
#
#     benchmarks/gemm/run.sh                 # 1024^3 matmul and linear [16384,512]x[512,512]+bias+relu
#     benchmarks/gemm/run.sh --threads 2     # team size for ic and OpenBLAS (default 2)
#     benchmarks/gemm/run.sh --quick         # small sizes, a smoke run
#     benchmarks/gemm/run.sh --sweep         # the matmul under a grid of ic_gemm_params
#
# OpenBLAS (Debian: apt-get install libopenblas-dev) is a benchmark-only dependency; without it
# only our numbers are printed. BUILD_DIR (default build-bench-gemm) is the build folder.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build-bench-gemm}
threads=2
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    [[ ${args[i]} == --threads ]] && threads=${args[i + 1]:-2}
done
mkdir -p "$build"
log=$build/bench-build.log
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DIC_BUILD_TESTS=OFF &&
       make -C "$build" -j"$(nproc)" bench_gemm; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "run.sh: build failed (full log: $log)" >&2
    exit 1
fi
# the same team size for both; OpenBLAS's own threads, libomp's for ours
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
# Debian's OpenBLAS 0.3.21 takes Sapphire Rapids for a Prescott (SSE3 kernels, ~30 GFLOP/s a
# core): give it its AVX-512 kernels on AVX-512 hosts, so it is the strongest baseline.
# An OPENBLAS_CORETYPE already set wins; bench_gemm prints the kernel OpenBLAS uses.
if [[ -z ${OPENBLAS_CORETYPE+x} ]] && grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
exec "$build/bench_gemm" "$@"
