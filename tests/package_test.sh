#!/bin/sh
# The installed package works for a consumer: `cmake --install` into a temp
# prefix, then build examples/consumer against it
#   1. with find_package(synclog): synclog::synclog (libsynclog.a) and
#      synclog::synclog_shared (libsynclog.so),
#   2. with pkg-config: the shared library, and libsynclog.a plus the
#      libraries `pkg-config --static` lists,
# and run each build (it opens a log, appends, reopens, replays, prints ok).
# Any failing step fails the test and prints that step's output.
#
#   package_test.sh BUILD_DIR CONSUMER_SOURCE_DIR [CXX]
# $CMAKE names the cmake to use (default: cmake on PATH).
set -eu

build=$(cd "$1" && pwd)
consumer=$(cd "$2" && pwd)
cxx=${3:-c++}
cmake=${CMAKE:-cmake}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/synclog-package-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
log=$tmp/step.log

fail() { echo "FAIL: $*"; [ -s "$log" ] && cat "$log"; exit 1; }
step() {  # step DESCRIPTION COMMAND...: runs it, output to $log, fails loudly
  what=$1; shift
  echo "== $what"
  "$@" >"$log" 2>&1 || fail "$what"
}
run_consumer() {  # run_consumer NAME BINARY: must print exactly "ok"
  rm -rf "$tmp/log-$1"
  mkdir "$tmp/log-$1"
  out=$("$2" "$tmp/log-$1" 2>&1) || fail "$1 consumer exited non-zero: $out"
  [ "$out" = ok ] || fail "$1 consumer printed: $out"
  echo "   $1 consumer: ok"
}

generator=
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"

step "cmake --install $build --prefix $prefix" "$cmake" --install "$build" --prefix "$prefix"
for f in include/synclog/log.h include/synclog/config.h include/synclog/error.h \
         include/synclog/position.h; do
  [ -f "$prefix/$f" ] || fail "not installed: $f"
done
static_lib=$(find "$prefix" -name libsynclog.a | head -n 1)
shared_lib=$(find "$prefix" -name libsynclog.so | head -n 1)
pc=$(find "$prefix" -name synclog.pc | head -n 1)
config=$(find "$prefix" -name synclogConfig.cmake | head -n 1)
[ -n "$static_lib" ] || fail "libsynclog.a not installed"
[ -n "$pc" ] || fail "synclog.pc not installed"
[ -n "$config" ] || fail "synclogConfig.cmake not installed"
[ -x "$prefix/bin/synclog-dump" ] || fail "synclog-dump not installed"
libdir=$(dirname "$static_lib")
if [ -z "$shared_lib" ]; then
  echo "   no libsynclog.so (SYNCLOG_BUILD_SHARED=OFF): the shared variants are skipped"
fi

# 1. find_package
for variant in static shared; do
  [ "$variant" = shared ] && [ -z "$shared_lib" ] && continue
  on=OFF; [ "$variant" = shared ] && on=ON
  # shellcheck disable=SC2086
  step "find_package consumer ($variant): configure" "$cmake" -S "$consumer" -B "$tmp/cmake-$variant" \
    $generator -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" -DSYNCLOG_SHARED=$on
  step "find_package consumer ($variant): build" "$cmake" --build "$tmp/cmake-$variant"
  run_consumer "find_package-$variant" "$tmp/cmake-$variant/consumer"
  deps=$(ldd "$tmp/cmake-$variant/consumer")
  case "$variant:$deps" in
    static:*libsynclog.so*) fail "the static consumer loads libsynclog.so: $deps" ;;
    shared:*"$libdir/libsynclog.so"*) ;;
    shared:*) fail "the shared consumer does not load $libdir/libsynclog.so: $deps" ;;
  esac
done

# 2. pkg-config
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
step "pkg-config --cflags --libs synclog" pkg-config --cflags --libs synclog
flags=$(pkg-config --cflags --libs synclog)
static_flags=$(pkg-config --static --cflags --libs synclog)
for l in -luring -laio -ltomlplusplus; do
  case " $static_flags " in *" $l "*) ;; *) fail "pkg-config --static lacks $l: $static_flags" ;; esac
done
if [ -n "$shared_lib" ]; then
  # shellcheck disable=SC2086
  step "pkg-config consumer (shared): build" \
    "$cxx" -std=c++23 "$consumer/main.cc" -o "$tmp/pc-shared" $flags
  LD_LIBRARY_PATH=$libdir run_consumer pkg-config-shared "$tmp/pc-shared"
fi
# libsynclog.a by name (-l:), everything else as pkg-config --static says.
static_flags=$(echo "$static_flags" | sed 's/-lsynclog\b/-l:libsynclog.a/')
# shellcheck disable=SC2086
step "pkg-config consumer (static): build" \
  "$cxx" -std=c++23 "$consumer/main.cc" -o "$tmp/pc-static" $static_flags
run_consumer pkg-config-static "$tmp/pc-static"

echo "PASS"
