#!/usr/bin/env bash
# ci-install.sh [BUILD_DIR] - checks that a build installs like a real library (issue 15):
# installs BUILD_DIR (default build-asan, the CI's sanitized build, already built) into a
# temporary prefix, then, using only what is installed:
#   - the files, and the soname chain libic-llvm.so -> .so.<major> -> .so.<version>;
#   - no installed file names the build or the source folder (text files: never; binaries of a
#     sanitized build: only as the source file names ASan/UBSan embed for their reports, which
#     GCC and Clang keep absolute whatever -ffile-prefix-map says);
#   - every installed header compiles alone as C11 and C++17 (unittests/Tools/check_headers.sh);
#   - examples/run_graph built by CMake (find_package(ic-llvm), shared, and static) and by
#     `cc $(pkg-config --cflags --libs ic-llvm)`, each run on its bundled graph (compiled, checked
#     against the reference executor). The CMake builds find libic-llvm.so through the build
#     RPATH CMake gives them; the pkg-config one through LD_LIBRARY_PATH=PREFIX/lib;
#   - the README's C sample ("Using the library from C"), built and run the same way;
#   - the installed tools: ic-run --version, --help and a checked run; ic-export --help, also
#     through a symlink (it finds its Python package from its real location), and a small
#     module exported by it and run by ic-run against PyTorch's outputs; ic-export runs by
#     $IC_TORCH_PYTHON or /usr/bin/python3, which needs torch (test.sh installs python3-torch).
# Exits non-zero on the first failure, saying what failed. scripts/test.sh runs it (ci_step).
set -uo pipefail

IC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start=$SECONDS
build_arg=${1:-$IC_ROOT/build-asan}
die() {
    echo "ci-install: $*" >&2
    exit 1
}
[[ -f $build_arg/CMakeCache.txt ]] || die "$build_arg is not a configured build folder (build it first)"
build=$(cd "$build_arg" && pwd -P)
src=$(cd "$IC_ROOT" && pwd -P)

cache_get() { # NAME: a value of the build's CMakeCache.txt
    sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1
}
version=$(cache_get CMAKE_PROJECT_VERSION)
libdir=$(cache_get CMAKE_INSTALL_LIBDIR)
cc=$(cache_get CMAKE_C_COMPILER)
cxx=$(cache_get CMAKE_CXX_COMPILER)
sanitize=$(cache_get IC_SANITIZE)
[[ -n $version && -n $libdir && -n $cc ]] || die "$build/CMakeCache.txt lacks the project version, libdir or compiler"
python=${IC_TORCH_PYTHON:-/usr/bin/python3}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
lib=$prefix/$libdir
export IC_CACHE_DIR=$tmp/cache # the examples' and tools' compiles write nowhere else
example=$src/examples/run_graph
graph=(mlp.json B=3)

# Runs a command quietly; on failure prints its output and stops.
run() { # WHAT CMD...
    local what=$1
    shift
    if ! "$@" >"$tmp/log" 2>&1; then
        sed 's/^/  /' "$tmp/log" | tail -40 >&2
        die "$what failed: $*"
    fi
}

echo "ci-install: installing $build into a temporary prefix"
run "cmake --install" cmake --install "$build" --prefix "$prefix"

# ---- the files and the soname chain ----
for f in "$lib/libic-llvm.so.$version" "$lib/libic-llvm.a" "$prefix/include/ic/ic.h" \
    "$prefix/include/ic/ops.def" "$lib/cmake/ic-llvm/ic-llvm-config.cmake" \
    "$lib/cmake/ic-llvm/ic-llvm-config-version.cmake" "$lib/pkgconfig/ic-llvm.pc" \
    "$prefix/bin/ic-run" "$prefix/bin/ic-dump" "$prefix/bin/ic-cache" "$prefix/bin/ic-export"; do
    [[ -f $f ]] || die "not installed: ${f#"$prefix"/}"
done
major=${version%%.*}
soname=$(readelf -d "$lib/libic-llvm.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == "libic-llvm.so.$major" ]] || die "soname is '$soname', expected libic-llvm.so.$major"
[[ $(readlink "$lib/libic-llvm.so.$major") == "libic-llvm.so.$version" ]] ||
    die "libic-llvm.so.$major does not point at libic-llvm.so.$version"
[[ $(readlink "$lib/libic-llvm.so") == "libic-llvm.so.$major" ]] ||
    die "libic-llvm.so does not point at libic-llvm.so.$major"
echo "ci-install: files and soname chain libic-llvm.so -> .so.$major -> .so.$version: ok"

# ---- no file names this machine's build or source folder ----
leaks=$(grep -rIlF -e "$build" -e "$src" "$prefix")
[[ -z $leaks ]] || die "installed text files name the build or source folder: $leaks"
leaks=$(grep -rlF -e "$build" "$prefix")
[[ -z $leaks ]] || die "installed files name the build folder $build: $leaks"
while IFS= read -r f; do
    bad=$(strings -a "$f" | grep -oE '/[A-Za-z0-9_/.+-]+' | awk -v s="$src/" 'index($0, s) == 1 &&
        substr($0, length(s) + 1) !~ /^(lib|tools|include)\/[A-Za-z0-9_\/.-]+\.(c|h|def)$/')
    [[ -z $bad ]] || die "${f#"$prefix"/} names the source folder: $(head -3 <<<"$bad")"
    [[ $sanitize == ON ]] || die "${f#"$prefix"/} names source files of $src (not a sanitized build)"
done < <(grep -rlF -e "$src/" "$prefix")
echo "ci-install: no installed file names $build or $src: ok"

# ---- the headers, alone ----
run "the header check" env CC="$cc" CXX="$cxx" bash "$src/unittests/Tools/check_headers.sh" "$prefix/include"
echo "ci-install: every installed header compiles alone as C11 and C++17: ok"

# ---- the example, built outside the tree against the installed library ----
check_example() { # WHAT EXE [ENV...]: runs EXE on the bundled graph from the example's folder
    local what=$1 exe=$2
    shift 2
    (cd "$example" && run "$what" env "$@" "$exe" "${graph[@]}") || exit 1
    grep -q "every output matches the reference executor" "$tmp/log" ||
        die "$what: no 'every output matches' line"
}
uses_prefix_lib() { # EXE [ENV...]: the loader takes libic-llvm.so.<major> from the prefix
    local exe=$1 deps
    shift
    deps=$(env "$@" ldd "$exe") || die "ldd $exe failed"
    grep -qF "libic-llvm.so.$major => $lib/libic-llvm.so.$major" <<<"$deps" ||
        die "$exe does not load $lib/libic-llvm.so.$major: $(grep ic-llvm <<<"$deps")"
}
for kind in shared static; do
    flag=OFF
    [[ $kind == static ]] && flag=ON
    run "configuring the example (CMake, $kind)" cmake -S "$example" -B "$tmp/ex-$kind" \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" -DRUN_GRAPH_STATIC=$flag
    run "building the example (CMake, $kind)" cmake --build "$tmp/ex-$kind"
    check_example "the example (CMake, $kind)" "$tmp/ex-$kind/run_graph" -u LD_LIBRARY_PATH
done
uses_prefix_lib "$tmp/ex-shared/run_graph" -u LD_LIBRARY_PATH
if ldd "$tmp/ex-static/run_graph" | grep libic-llvm; then
    die "the static example loads libic-llvm.so"
fi
echo "ci-install: example built with find_package(ic-llvm) (shared via RPATH, static): ok"

export PKG_CONFIG_PATH=$lib/pkgconfig
[[ $(pkg-config --modversion ic-llvm) == "$version" ]] || die "pkg-config --modversion ic-llvm is not $version"
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
run "building the example (pkg-config)" "$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/run_graph_pc" \
    "$example/run_graph.c" $(pkg-config --cflags --libs ic-llvm) -lm
check_example "the example (pkg-config)" "$tmp/run_graph_pc" LD_LIBRARY_PATH="$lib"
uses_prefix_lib "$tmp/run_graph_pc" LD_LIBRARY_PATH="$lib"
echo "ci-install: example built with cc \$(pkg-config --cflags --libs ic-llvm): ok"

# The README's sample (section "Using the library from C"), as printed there, on mlp.json.
awk '/^## Using the library from C/ { on = 1 } on && /^```c$/ { c = 1; next }
     c && /^```$/ { exit } c { print }' "$src/README.md" >"$tmp/readme_sample.c"
[[ -s $tmp/readme_sample.c ]] || die "README.md: no C sample in 'Using the library from C'"
# shellcheck disable=SC2046
run "building the README's sample" "$cc" -std=c11 -Wall -Wextra -pedantic -Werror \
    -o "$tmp/readme_sample" "$tmp/readme_sample.c" $(pkg-config --cflags --libs ic-llvm)
(cd "$example" && run "the README's sample" env LD_LIBRARY_PATH="$lib" "$tmp/readme_sample") || exit 1
grep -q "^p\[0\] = " "$tmp/log" || die "the README's sample printed: $(cat "$tmp/log")"
echo "ci-install: the README's C sample builds and runs: ok"

# ---- the installed tools ----
run "ic-run --version" "$prefix/bin/ic-run" --version
grep -q "^ic-run (ic-llvm) $version, build [0-9a-f]\{16\}$" "$tmp/log" ||
    die "ic-run --version printed: $(cat "$tmp/log")"
run "ic-run --help" "$prefix/bin/ic-run" --help
grep -q "^usage: ic-run" "$tmp/log" || die "ic-run --help printed no usage"
run "ic-dump --help" "$prefix/bin/ic-dump" --help
run "ic-cache --help" "$prefix/bin/ic-cache" --help
run "the installed ic-run on the example graph" "$prefix/bin/ic-run" "$example/mlp.json" \
    --bind B=2 --check --iters 1 --warmup 0 --no-compare
ln -s "$prefix/bin/ic-export" "$tmp/ic-export-link"
for exe in "$prefix/bin/ic-export" "$tmp/ic-export-link"; do
    run "ic-export --help ($exe, $python)" "$python" "$exe" --help
    grep -q "^usage: ic-export" "$tmp/log" || die "$exe --help printed no usage"
    # Importing the script (not as __main__) sets its path and its ic-dump: both the prefix's.
    got=$(cd "$tmp" && env -u IC_EXPORT_DUMP "$python" -c "import os, runpy
runpy.run_path('$exe', run_name='check')
import ic_export; print(ic_export.__file__, os.environ.get('IC_EXPORT_DUMP'))" 2>&1)
    [[ $got == "$prefix/share/ic-llvm/python/ic_export/__init__.py $prefix/bin/ic-dump" ]] ||
        die "$exe should import ic_export from $prefix/share/ic-llvm/python and use" \
            "$prefix/bin/ic-dump; it says: $got"
done
# A real export by the installed ic-export (its shape check runs the installed ic-dump), run
# by the installed ic-run against PyTorch's outputs.
cat >"$tmp/tiny.py" <<'PY'
import torch


def make():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    return m.eval(), (torch.randn(3, 8),)
PY
run "the installed ic-export on a small module" "$python" "$prefix/bin/ic-export" module \
    "$tmp/tiny.py:make" -o "$tmp/tiny"
run "the installed ic-run on ic-export's graph" "$prefix/bin/ic-run" "$tmp/tiny/model.json" \
    --inputs "$tmp/tiny/inputs.safetensors" --expect "$tmp/tiny/expected.safetensors" \
    --iters 1 --warmup 0 --no-compare
echo "ci-install: installed ic-run, ic-dump, ic-cache and ic-export run (a module exported and checked): ok"

echo "ci-install: passed in $((SECONDS - start)) s"
