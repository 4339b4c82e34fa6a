#!/bin/sh
# Builds the GPU benchmark driver against a build folder's static library (run on the dev
# machine; the GPU machine has no compiler toolchain for LLVM):
#     sh benchmarks/gpu/build.sh [BUILD_DIR]        -> BUILD_DIR/bench_gpu
set -e
B=${1:-build-gpu}
cd "$(dirname "$0")/../.."
[ -f "$B/libic-llvm.a" ] || { echo "build.sh: no $B/libic-llvm.a (cmake -S . -B $B && make -C $B)" >&2; exit 1; }
LLVM_CONFIG=${LLVM_CONFIG:-llvm-config-19}
${CC:-cc} -O2 -std=gnu11 -Iinclude benchmarks/gpu/bench_gpu.c "$B/libic-llvm.a" \
    $($LLVM_CONFIG --ldflags --libs) -Wl,--push-state,--no-as-needed -lomp -Wl,--pop-state \
    -ljansson -ldl -lm -lpthread -o "$B/bench_gpu"
echo "built $B/bench_gpu"
