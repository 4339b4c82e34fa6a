#!/usr/bin/env bash
# check_headers.sh INCLUDE_DIR - every public header (INCLUDE_DIR/ic/*.h) compiles alone, with
# INCLUDE_DIR as the only include path (no LLVM, no jansson, no private folder), as C11 and as
# C++17, warnings as errors; a header declaring IC_API functions wraps them in extern "C", and
# each header survives being included twice. Run by ctest (Tools_check_headers) on the source
# tree and by scripts/ci-install.sh on the installed prefix. CC and CXX pick the compilers.
set -uo pipefail

inc=${1:?usage: check_headers.sh INCLUDE_DIR}
cc=${CC:-cc}
cxx=${CXX:-c++}
shopt -s nullglob
headers=("$inc"/ic/*.h)
if ((${#headers[@]} == 0)); then
    echo "check_headers: no headers in $inc/ic" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for h in "${headers[@]}"; do
    name=ic/$(basename "$h")
    printf '#include <%s>\n#include <%s>\nint ic_check_headers_tu;\n' "$name" "$name" >"$tmp/tu.c"
    cp "$tmp/tu.c" "$tmp/tu.cpp"
    if ! "$cc" -std=c11 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$inc" "$tmp/tu.c" \
        2>"$tmp/err"; then
        echo "check_headers: $name does not compile alone as C11:" >&2
        sed 's/^/  /' "$tmp/err" >&2
        fail=1
    fi
    if ! "$cxx" -std=c++17 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$inc" "$tmp/tu.cpp" \
        2>"$tmp/err"; then
        echo "check_headers: $name does not compile alone as C++17:" >&2
        sed 's/^/  /' "$tmp/err" >&2
        fail=1
    fi
    if grep -q '^IC_API' "$h" && ! grep -q 'extern "C"' "$h"; then
        echo "check_headers: $name declares IC_API functions outside extern \"C\"" \
             "(C++ programs could not link them)" >&2
        fail=1
    fi
done
if ((fail == 0)); then
    echo "check_headers: ${#headers[@]} headers in $inc/ic compile alone as C11 and C++17"
fi
exit $fail
