# Shared steps of the SDK tests (sourced, not run): install the Kiln build to a private prefix
# and build a plugin project out of tree against it, the way a third-party author would.
# The functions below expect build_dir, source_dir and work (a temporary folder the caller
# removes); an SDK test sets them with sdk_test_start.

step() { echo "== $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

# sdk_test_start <kiln build dir> <kiln source dir> <name>: the two arguments every SDK test
# takes, as build_dir and source_dir, and work, a fresh temporary folder removed at exit.
sdk_test_start() {
  build_dir=$(cd "$1" && pwd)
  source_dir=$(cd "$2" && pwd)
  work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-$3-XXXXXX")
  trap 'rm -rf "$work"' EXIT
}

# install_kiln <prefix>: cmake --install of $build_dir, checked for the package files and kiln.
install_kiln() {
  local prefix=$1
  step "installing $build_dir to $prefix"
  cmake --install "$build_dir" --prefix "$prefix" > "$work/install.log" || {
    cat "$work/install.log"; fail "cmake --install failed"; }
  [[ -f $prefix/lib/cmake/Kiln/KilnConfig.cmake ]] || fail "no KilnConfig.cmake under $prefix/lib/cmake/Kiln"
  [[ -x $prefix/bin/kiln ]] || fail "$prefix/bin/kiln was not installed"
}

# build_plugin <project dir> <build dir> <prefix>: configure with find_package(Kiln) from <prefix>
# and no build type (kiln_add_plugin must pick an optimised one), then build. With the C++
# compiler Kiln was built with, as an author must (the loader refuses another compiler family:
# KilnConfig.cmake warns); the default compiler when the build tree does not say.
build_plugin() {
  local project=$1 out=$2 prefix=$3
  local generator=() compiler=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  local kiln_cxx
  kiln_cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2> /dev/null || true)
  [[ -n $kiln_cxx ]] && compiler=(-DCMAKE_CXX_COMPILER="$kiln_cxx")
  step "building $project against $prefix${kiln_cxx:+ with $kiln_cxx}"
  cmake -S "$project" -B "$out" "${generator[@]}" "${compiler[@]}" -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" 2>&1 || {
    cat "$work/configure.log"; fail "configuring $project against $prefix failed"; }
  cmake --build "$out" -j 2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building $project failed"; }
}

# require_sdk_only_links <library>: a plugin sees only the SDK, so it links libkiln_sdk and never
# libkiln_core.
require_sdk_only_links() {
  local library=$1 needed
  needed=$(readelf -d "$library" | grep NEEDED)
  grep -q 'libkiln_sdk' <<< "$needed" || fail "$library does not link libkiln_sdk: $needed"
  ! grep -q 'libkiln_core' <<< "$needed" || fail "$library links libkiln_core: $needed"
}

# final_eval_accuracy <run dir>: the accuracy of the last evaluation (non-train) record in metrics.jsonl.
# passes_plugins_test <kiln> <library> <ok lines> <what> [args...]: runs `kiln plugins test` on the
# library (extra args such as --set go after it) without KILN_PLUGIN_PATH, prints its report, and
# fails unless it exits 0 with exactly <ok lines> passing lines; the report is left in $tested.
passes_plugins_test() {
  local kiln=$1 library=$2 count=$3 what=$4
  shift 4
  tested=$(env -u KILN_PLUGIN_PATH "$kiln" plugins test "$library" "$@" 2> "$work/plugins-test.log") || {
    echo "$tested"; cat "$work/plugins-test.log"; fail "kiln plugins test $library failed: the sample does not pass its contract"; }
  echo "$tested"
  [[ $(grep -c '^  ok    ' <<< "$tested") == "$count" ]] || fail "'kiln plugins test' did not pass the $count $what"
}

final_eval_accuracy() {
  grep -v '"split": *"train"' "$1/metrics.jsonl" | tail -1 | sed -E 's/.*"accuracy": *([0-9.eE+-]+).*/\1/'
}
