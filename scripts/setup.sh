#!/usr/bin/env bash
# setup.sh - the one set-up command on a fresh Debian 12 machine: installs the packages that
# are missing (sudo only when not root and only when something is missing), builds ic-llvm into
# build/ (Release) and runs the demo on the bundled example graph.
#
#     bash scripts/setup.sh                 # BUILD_DIR=other/dir to build elsewhere
#     bash scripts/setup.sh --install [PREFIX]
#
# --install: the same Release build, then `cmake --install` into PREFIX (default /usr/local):
# the library, headers, tools, CMake package and pkg-config file. sudo only when PREFIX is not
# writable and you are not root; ldconfig when PREFIX is a system one (/usr, /usr/local).
#
# scripts/test.sh sources this file for ic_install_deps and ic_build; sourcing runs nothing.

IC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# What the build needs. g++ because CMake's project() enables CXX (LLVM's CMake package);
# libc6-dev because gcc only recommends it and we install without recommends.
IC_PACKAGES=(llvm-19-dev libomp-19-dev libjansson-dev libcriterion-dev cmake gcc g++ libc6-dev
             make pkg-config)

# Prints the packages of IC_PACKAGES that are not installed, one a line.
ic_missing_packages() {
    local p
    for p in "${IC_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
            echo "$p"
    done
}

# Installs what is missing: one apt-get update, then one apt-get install. Non-interactive, so
# it also runs in CI without a terminal.
ic_install_deps() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "setup: dpkg-query not found (not Debian?); make sure these are installed:" \
             "${IC_PACKAGES[*]}" >&2
        return 0
    fi
    local missing
    mapfile -t missing < <(ic_missing_packages)
    if ((${#missing[@]} == 0)); then
        echo "setup: all required packages are installed"
        return 0
    fi
    echo "setup: installing ${missing[*]}"
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "setup: need root to install ${missing[*]}: run as root or install sudo" >&2
            return 1
        fi
        sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q || return 1
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}" || return 1
}

# ic_build DIR [CMAKE ARGS...]: configures and builds everything in DIR.
ic_build() {
    local dir=$1
    shift
    cmake -S "$IC_ROOT" -B "$dir" "$@" || return 1
    cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" || return 1
}

# True when DIR, or the first of its parents that exists, is writable by us.
ic_writable() {
    local d=$1
    while [[ ! -e $d ]]; do
        d=$(dirname "$d")
    done
    [[ -w $d ]]
}

# ic_install_to BUILD PREFIX: installs a finished build into PREFIX (absolute).
ic_install_to() {
    local build=$1 prefix=$2 sudo=()
    if [[ $(id -u) -ne 0 ]] && ! ic_writable "$prefix"; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "setup: $prefix is not writable: run as root, install sudo or pick another PREFIX" >&2
            return 1
        fi
        sudo=(sudo)
    fi
    "${sudo[@]}" cmake --install "$build" --prefix "$prefix" || return 1
    if ((${#sudo[@]})); then
        # cmake --install wrote its manifest into the build folder as root: give it back.
        sudo chown "$(id -u):$(id -g)" "$build/install_manifest.txt" || return 1
    fi
    if [[ $prefix == /usr || $prefix == /usr/local ]]; then
        local ldconfig
        ldconfig=$(PATH=$PATH:/sbin:/usr/sbin command -v ldconfig) || {
            echo "setup: ldconfig not found: run it as root to refresh the loader's cache" >&2
            return 1
        }
        "${sudo[@]}" "$ldconfig" || return 1
    fi
    local libdir
    libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
    echo
    echo "setup: installed into $prefix: libic-llvm.so and .a in $prefix/$libdir, headers in" \
         "$prefix/include/ic, ic-run ic-dump ic-cache ic-export in $prefix/bin"
    "$prefix/bin/ic-run" --version
    if [[ $prefix != /usr && $prefix != /usr/local ]]; then
        echo "setup: $prefix is not a system prefix: set LD_LIBRARY_PATH=$prefix/$libdir (or add it" \
             "to /etc/ld.so.conf.d), CMAKE_PREFIX_PATH=$prefix and PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig"
    fi
}

ic_setup_install() { # BUILD PREFIX (absolute)
    local build=$1 prefix=$2
    ic_install_deps
    ic_build "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix"
    ic_install_to "$build" "$prefix"
}

ic_setup_main() {
    set -euo pipefail
    local cwd=$PWD
    cd "$IC_ROOT"
    local build=${BUILD_DIR:-build}
    case ${1:-} in
        "") ;;
        --install)
            (($# <= 2)) || { echo "setup: usage: setup.sh [--install [PREFIX]]" >&2; return 2; }
            local prefix=${2:-/usr/local}
            [[ $prefix == /* ]] || prefix=$cwd/$prefix
            ic_setup_install "$build" "$prefix"
            return
            ;;
        *)
            echo "setup: unknown argument '$1' (usage: setup.sh [--install [PREFIX]])" >&2
            return 2
            ;;
    esac
    ic_install_deps
    ic_build "$build" -DCMAKE_BUILD_TYPE=Release
    echo
    echo "== demo: the seed pattern ((a + b1) + c) * b2 + b3, a and c of [16384, 512] =="
    "$build/ic-dump" benchmarks/graphs/seed_pattern.json
    "$build/ic-run" benchmarks/graphs/seed_pattern.json --check
    echo
    echo "setup: done. Tools are in $build/ (ic-run, ic-dump); run the tests with: bash scripts/test.sh"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    ic_setup_main "$@"
fi
