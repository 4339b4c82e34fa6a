#!/usr/bin/env bash
# setup.sh - the one set-up command on a fresh Debian 12 machine: installs the packages that
# are missing (sudo only when not root and only when something is missing), builds ic-llvm into
# build/ (Release) and runs the demo on the bundled example graph.
#
#     bash scripts/setup.sh                 # BUILD_DIR=other/dir to build elsewhere
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

ic_setup_main() {
    set -euo pipefail
    cd "$IC_ROOT"
    local build=${BUILD_DIR:-build}
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
