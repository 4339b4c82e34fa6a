#!/bin/sh
# One command on the GPU machine: the GPU tests, the benchmarks, the same graphs through
# torch.compile, and the comparison table. Build first on the dev machine:
#     cmake -S . -B build-gpu && make -C build-gpu && sh benchmarks/gpu/build.sh build-gpu
# then on the GPU machine (after the runtime prefix of shared/device/README.md):
#     sh benchmarks/gpu/run.sh [BUILD_DIR]        (outputs also go to $OUT when it is set)
B=${1:-build-gpu}
[ $# -gt 0 ] && shift
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/ic-gpu}
mkdir -p "$O"
export CUDA_CACHE_PATH="/tmp/ic-jit-cache-$$"   # a cold driver JIT cache for the compile times
export IC_SOURCE_DIR="$PWD"
rc=0
echo "== GPU tests =="
for t in "$B/Runtime_test_cuda" "$B/Runtime_test_tf32_cuda"; do
    [ -x "$t" ] || { echo "missing $t"; rc=1; continue; }
    log="$O/tests-$(basename "$t").txt"
    "$t" --jobs 4 > "$log" 2>&1
    grep -E -A3 "Assertion|CRASH" "$log" | head -80
    grep -E "FAIL|SKIP|WARN|Synthesis" "$log" | head -40
    [ "$(grep -c '\[FAIL\]' "$log")" = 0 ] || rc=1
done
echo "== ic benchmarks =="
if [ -x "$B/bench_gpu" ]; then
    # eager module loading: the driver JIT-compiles inside cuModuleLoadDataEx, not at the
    # first launch, so "graph -> loaded module" is what it says; no JIT cache (the tests
    # above compiled the same PTX)
    CUDA_MODULE_LOADING=EAGER CUDA_CACHE_DISABLE=1 "$B/bench_gpu" "$@" 2>&1 | tee "$O/ic.txt" | grep -v '^RESULT'
else
    echo "missing $B/bench_gpu (sh benchmarks/gpu/build.sh $B)"; rc=1
fi
echo "== torch.compile =="
PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-400} python3 benchmarks/gpu/torch_bench.py 2>&1 | tee "$O/torch.txt" | grep -v '^RESULT' | tail -30
echo "== torch GEMMs: cuBLAS and torch.compile(mode=max-autotune) =="
PYTHONUNBUFFERED=1 timeout ${TORCH_GEMM_TIMEOUT:-300} python3 benchmarks/gpu/torch_bench.py --gemm-only 2>&1 | tee "$O/torch_gemm.txt" | grep -v '^RESULT' | tail -20
python3 benchmarks/gpu/compare.py "$O/ic.txt" "$O/torch.txt" "$O/torch_gemm.txt" | tee "$O/compare.txt"
exit $rc
