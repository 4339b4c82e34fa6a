#!/bin/bash
# Conformance run: graphs written from the spec alone, executed by ic-run and
# by real PyTorch (torch_oracle.py); every output must agree within the spec's
# tolerances.
#
# usage: unittests/Conformance/run_conformance.sh BUILD_DIR
#   IC_CONFORMANCE_FLAGS  ic-run flags for every case (default "--backend ref"); to
#                         check the compiler: "--backend compiled --no-compare
#                         --iters 1 --warmup 0" (or "--backend unfused ...")
#   IC_CONFORMANCE_JOBS   parallel ic-run processes (default: nproc)
#   IC_CONFORMANCE_KEEP   set to 1 to keep the work folder (it is printed)
#   IC_CONFORMANCE_PYTHON the interpreter with torch (default /usr/bin/python3)
#   IC_CONFORMANCE_ONLY   a regex: only the cases whose name matches (gen_cases.py)
# Prints one line per failing case and a final "N passed, N failed"; exits 1
# on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 1
fi
ic_run=$(cd "$1" 2>/dev/null && pwd)/ic-run
if [ ! -x "$ic_run" ]; then
	echo "run_conformance: no ic-run in '$1' (build it first)" >&2
	exit 1
fi
# Debian's python3-torch lives under the system interpreter, not under
# whatever python3 comes first on PATH.
py=${IC_CONFORMANCE_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
	echo "run_conformance: $py cannot import torch; install Debian's python3-torch" \
		"(sudo apt-get install -y python3-torch)" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ic-conformance.XXXXXX") || exit 1
if [ "${IC_CONFORMANCE_KEEP:-0}" = 1 ]; then
	echo "run_conformance: work folder $work"
else
	trap 'rm -rf "$work"' EXIT
fi

"$py" "$here/gen_cases.py" "$work" || exit 1

# One case: ic-run with the case's own args plus IC_CONFORMANCE_FLAGS; its
# exit status and stderr are kept for compare.py.
run_one() {
	local extra=$2 base=$work/$1 rc
	local args=("$base.json" --save-outputs "$base.out.safetensors")
	[ -f "$base.in.safetensors" ] && args+=(--inputs "$base.in.safetensors")
	# shellcheck disable=SC2086  # word splitting of the flag lists is wanted
	timeout 120 "$ic_run" "${args[@]}" $extra $flags \
		>"$base.stdout" 2>"$base.stderr"
	rc=$?
	echo "$rc" >"$base.rc"
}
export -f run_one
flags=${IC_CONFORMANCE_FLAGS---backend ref}
export work ic_run flags

# PyTorch's side runs alongside ic-run's.
"$py" "$here/torch_oracle.py" --batch "$work/cases.tsv" "$work" &
oracle=$!

jobs=${IC_CONFORMANCE_JOBS:-$(nproc)}
# shellcheck disable=SC2016  # $1 $2 belong to the inner bash
cut -f1,3 "$work/cases.tsv" | tr '\t' '\n' |
	xargs -d '\n' -n 2 -P "$jobs" bash -c 'run_one "$1" "$2"' _ ||
	true

if ! wait "$oracle"; then
	echo "run_conformance: torch_oracle.py failed" >&2
	exit 1
fi
"$py" "$here/compare.py" "$work"
