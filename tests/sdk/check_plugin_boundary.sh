#!/usr/bin/env bash
# The plugin boundary, checked on the tree and on the build:
#   1. every `#include <kiln/...>` / `"kiln/..."` in plugins/ and samples/ names a header of the
#      contract (interfaces/) or of the SDK (sdk/include/) -- never a core header (core/include/)
#      or a host-only SDK header (sdk/internal/) -- and no plugin includes a file of another
#      plugin's folder;
#   2. every built plugin library links libkiln_sdk and not libkiln_core (readelf -d);
#   3. the install ships exactly the contract's and the SDK's headers under include/kiln;
#   4. each installed header compiles on its own (a plugin may include any one of them first):
#      none relies on another #include coming before it, nor on a header the install lacks.
# Steps 1 and 4 also run once on a planted mistake (a core include in a plugin, a header missing
# an #include), and must fail there: a checker that never fails would pass everything.
# Usage: check_plugin_boundary.sh <kiln build dir> <kiln source dir>
set -euo pipefail

# shellcheck source=tests/sdk/sdk_test_lib.sh
source "$(dirname "$0")/sdk_test_lib.sh"
sdk_test_start "$1" "$2" boundary

# check_includes <tree>: prints one line per violation; exit status 1 if there is any.
check_includes() {
  local tree=$1 bad=0 file line header
  while IFS=: read -r file line header; do
    header=$(sed -E 's/.*#include[[:space:]]*[<"]([^">]+)[">].*/\1/' <<< "$header")
    case $header in
      kiln/*)
        if [[ ! -f $tree/interfaces/$header && ! -f $tree/sdk/include/$header ]]; then
          echo "$file:$line: includes $header, which is not a contract or SDK header (plugins see only interfaces/ and sdk/include/)"
          bad=1
        fi ;;
      ../*|*/../*)
        echo "$file:$line: includes $header from outside its own folder (a plugin never includes another plugin's files)"
        bad=1 ;;
    esac
  done < <(cd "$tree" && grep -rnE '^[[:space:]]*#[[:space:]]*include' plugins samples \
             --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.cu' --include='*.cuh' || true)
  return $bad
}

step "includes in plugins/ and samples/"
check_includes "$source_dir" || fail "a plugin or sample reaches past the SDK (lines above)"

step "the include check catches a planted core include"
mkdir -p "$work/tree"
cp -a "$source_dir/interfaces" "$source_dir/sdk" "$source_dir/plugins" "$source_dir/samples" "$work/tree/"
echo '#include "kiln/train/trainer.hpp"' >> "$work/tree/plugins/model-mlp/mlp_model.cpp"
if planted=$(check_includes "$work/tree"); then fail "the include check missed a planted core include"; fi
grep -qF "plugins/model-mlp/mlp_model.cpp:" <<< "$planted" || fail "the planted include was not named: $planted"

step "what the built plugins link"
count=0
for library in "$build_dir"/lib/kiln/plugins/libkiln-*.so; do
  needed=$(readelf -d "$library" | sed -nE 's/.*Shared library: \[(.*)\]/\1/p' | tr '\n' ' ')
  echo "  $(basename "$library"): $needed"
  grep -q 'libkiln_sdk\.so' <<< "$needed" || fail "$library does not link libkiln_sdk"
  ! grep -q 'libkiln_core' <<< "$needed" || fail "$library links libkiln_core"
  count=$((count + 1))
done
((count > 0)) || fail "no plugin libraries under $build_dir/lib/kiln/plugins"

step "the install ships only the contract's and the SDK's headers"
prefix=$work/prefix
install_kiln "$prefix"
installed=$(cd "$prefix/include" && find kiln -type f | sort)
expected=$( (cd "$source_dir/interfaces" && find kiln -type f; cd "$source_dir/sdk/include" && find kiln -type f) | sort)
if [[ $installed != "$expected" ]]; then
  diff <(echo "$expected") <(echo "$installed") || true
  fail "the installed headers differ from interfaces/ + sdk/include/ (left: expected, right: installed)"
fi
echo "$installed" | sed 's/^/  include\//'

# header_compiles_alone <include dir> <header>: a source holding only `#include <header>`
# compiles (syntax only, C++20 as the SDK requires), with nothing but <include dir> added and the
# one definition kiln_add_plugin() gives every plugin (kiln/sdk/plugin.hpp refuses to compile
# without a contract fingerprint; any value does for this).
header_compiles_alone() {
  printf '#include <%s>\n' "$2" |
    "${CXX:-c++}" -std=c++20 -fsyntax-only -DKILN_CONTRACT_FINGERPRINT='"0000000000000000"' -I"$1" -x c++ - 2>&1
}
export -f header_compiles_alone

step "each installed header compiles on its own"
failures=$(cd "$prefix/include" && find kiln -type f -name '*.h*' | sort |
  xargs -P "$(nproc)" -I{} bash -c 'header_compiles_alone "$1" "$2" > /dev/null || echo "$2"' _ "$prefix/include" {})
if [[ -n $failures ]]; then
  while read -r header; do
    echo "--- include/$header alone:"
    header_compiles_alone "$prefix/include" "$header" | head -n 20
  done <<< "$failures"
  fail "installed headers that do not compile on their own: $(tr '\n' ' ' <<< "$failures")"
fi

step "the header check catches a planted header that forgets an #include"
mkdir -p "$work/planted/kiln"
printf '#pragma once\ninline std::string planted_name() { return "x"; }\n' > "$work/planted/kiln/planted.hpp"
if header_compiles_alone "$work/planted" kiln/planted.hpp > /dev/null; then
  fail "the header check passed a header that uses std::string without <string>"
fi
echo "OK: $count plugins, $(wc -l <<< "$installed") installed headers, each compiles on its own"
