#!/usr/bin/env bash
# ci-fuzz.sh - builds the libFuzzer harnesses (unittests/Fuzz/fuzz_*.c) with clang-19 under
# ASan + UBSan into build-fuzz/ and runs each for its share of a time budget, starting from a
# copy of its seed corpus (the tree is never written). Prints executions and coverage per
# fuzzer; exits non-zero on a crash, hang, leak or UB, printing the saved input's path.
#
#     bash scripts/ci-fuzz.sh [SECONDS_TOTAL]         # CI: 60 s shared by all harnesses
#     bash scripts/ci-fuzz.sh --each SECONDS [NAME..] # long runs: SECONDS per harness
#
# FUZZ_JOBS=N runs N fuzzer processes per harness (-fork=N); FUZZ_KEEP=DIR keeps the grown
# corpora and crash files in DIR instead of a temporary folder (docs/fuzzing.md).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}

total=60 each=0 only=()
if [[ ${1:-} == --each ]]; then
    each=${2:?"--each needs SECONDS"}
    shift 2
    only=("$@")
elif [[ $# -gt 0 ]]; then
    total=$1
fi

for tool in clang-19 clang++-19; do
    command -v "$tool" >/dev/null || { echo "ci-fuzz: $tool not found (apt-get install clang-19 libclang-rt-19-dev)" >&2; exit 1; }
done

mapfile -t names < <(cd "$root/unittests/Fuzz" && ls fuzz_*.c | sed -E 's/^fuzz_(.*)\.c$/\1/')
if ((${#only[@]})); then
    names=("${only[@]}")
fi
targets=(fuzz_make_seeds)
for n in "${names[@]}"; do targets+=("fuzz_$n"); done

echo "ci-fuzz: building ${targets[*]} in $build"
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DIC_FUZZ=ON -DIC_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Fuzz \
    -DCMAKE_C_FLAGS_FUZZ="-O1 -g" -DCMAKE_CXX_FLAGS_FUZZ="-O1 -g" >/dev/null || exit 1
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}" >"$build/fuzz-build.log" 2>&1 ||
    { tail -40 "$build/fuzz-build.log"; echo "ci-fuzz: build failed" >&2; exit 1; }

work=${FUZZ_KEEP:-$(mktemp -d)}
mkdir -p "$work/corpus" "$work/tmp"
# The harnesses' own temporary folders (and -fork's files) go here too: a fuzzer that stops on
# a crash cannot remove its folder, and none of it may land elsewhere.
export TMPDIR=$work/tmp
# Seeds that hold this build's version (saved models, cache entries): made now, as they go
# stale with every source change; the committed corpus adds their sealed forms.
"$build/fuzz_make_seeds" "$work/corpus" >/dev/null || { echo "ci-fuzz: fuzz_make_seeds failed" >&2; exit 1; }
per=$each
if ((each == 0)); then
    per=$((total / ${#names[@]}))
    ((per < 1)) && per=1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fork=()
[[ -n ${FUZZ_JOBS:-} ]] && fork=(-fork="$FUZZ_JOBS" -ignore_crashes=0)

failed=0
for n in "${names[@]}"; do
    src=$root/unittests/Fuzz
    corpus=$work/corpus/$n crashes=$work/crashes/$n
    mkdir -p "$corpus" "$crashes"
    cp -n "$src/corpus/$n/"* "$corpus/" 2>/dev/null
    [[ -d $src/regress/$n ]] && cp -n "$src/regress/$n/"* "$corpus/" 2>/dev/null
    dict=()
    [[ -f $src/$n.dict ]] && dict=(-dict="$src/$n.dict")
    log=$work/$n.log
    start=$(date +%s)
    (cd "$work" && "$build/fuzz_$n" "$corpus" "${dict[@]}" "${fork[@]}" -max_total_time="$per" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" ) >"$log" 2>&1
    rc=$?
    execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}')
    cov=$(grep -E '#[0-9]+.*(DONE|INITED|pulse|NEW|REDUCE)' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')
    if [[ -n ${FUZZ_JOBS:-} ]]; then # -fork: "#<execs>: cov: N ft: N corp: ..." lines
        last=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -1)
        [[ -n $last ]] && execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last") &&
            cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' <<<"$last")
    fi
    echo "ci-fuzz: $n: ${execs} executions in $(($(date +%s) - start)) s, ${cov:-cov: ?}, corpus $(ls "$corpus" | wc -l) inputs"
    if ((rc != 0)); then
        failed=1
        echo "ci-fuzz: $n FAILED (exit $rc); the input that failed:" >&2
        grep -E 'Test unit written to|^SUMMARY|ERROR: |runtime error' "$log" | head -10 >&2
        tail -30 "$log" >&2
    fi
done
if ((failed)) || [[ -n ${FUZZ_KEEP:-} ]]; then
    echo "ci-fuzz: corpora, logs and crash inputs are in $work"
else
    rm -rf "$work"
fi
exit $failed
