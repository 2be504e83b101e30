#!/bin/sh
# The installed package works for a consumer: `cmake --install` into a temp
# prefix, then build examples/consumer against it
#   1. with find_package(synclog): synclog::synclog (libsynclog.a) and
#      synclog::synclog_shared (libsynclog.so),
#   2. with pkg-config alone: synclog.pc (libsynclog.so, found at run time
#      through the rpath it adds) and synclog-static.pc (libsynclog.a),
# and run each build (it checks synclog::version() against the headers,
# opens a log, appends, reopens, replays, prints ok). The prefix is moved
# after installing: nothing in it may name where it was installed. The
# shared library must export only the public API (nm), and synclog-bench
# with its fio profiles is installed when the build has it.
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

step "cmake --install $build --prefix $tmp/staged" "$cmake" --install "$build" --prefix "$tmp/staged"
mv "$tmp/staged" "$prefix"
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
[ -x "$prefix/bin/synclog-restore" ] || fail "synclog-restore not installed"
[ -f "$prefix/include/synclog/restore.h" ] || fail "synclog/restore.h not installed"
[ -f "$prefix/include/synclog/version.h" ] || fail "synclog/version.h not installed"
if [ -x "$build/bench/synclog-bench" ]; then
  [ -x "$prefix/bin/synclog-bench" ] || fail "synclog-bench not installed"
  [ -f "$prefix/share/synclog/fio-profiles/sync-write-fdatasync.fio" ] ||
    fail "fio profiles not installed in share/synclog/fio-profiles"
  # It finds them there by itself (the prefix was moved after installing).
  step "installed synclog-bench finds its fio profiles" sh -c \
    "'$prefix/bin/synclog-bench' --list | grep -qx 'fio profiles: $prefix/share/synclog/fio-profiles'"
fi
libdir=$(dirname "$static_lib")
if [ -z "$shared_lib" ]; then
  echo "   no libsynclog.so (SYNCLOG_BUILD_SHARED=OFF): the shared variants are skipped"
else
  # Only the public API: classes Log, Reader, Tailer, Config, Error and the
  # free functions of include/synclog (std templates instantiated on public
  # types may come along). Nothing of seg::, io::, sync::, metrics:: or an
  # Impl.
  nm -D --defined-only -C "$shared_lib" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' \
    >"$tmp/exports"
  grep 'synclog::' "$tmp/exports" |
    grep -vE '^(typeinfo( name)? for |vtable for )?synclog::(Log|Reader|Tailer|Config|Error)(::|$| )|^synclog::(to_string|segment_kind_for|to_prometheus|to_json|version|restore)(\[abi:cxx11\])?\(' \
    >"$tmp/internal" || true
  if [ -s "$tmp/internal" ]; then
    echo "FAIL: libsynclog.so exports $(wc -l <"$tmp/internal") symbols outside the public API, e.g.:"
    head -20 "$tmp/internal"
    exit 1
  fi
  if grep -E '::Impl::' "$tmp/exports" | head -5 | grep -q .; then
    fail "libsynclog.so exports an Impl: $(grep -E '::Impl::' "$tmp/exports" | head -3)"
  fi
  echo "   libsynclog.so exports $(grep -c 'synclog::' "$tmp/exports") synclog symbols, all public API"
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

# 2. pkg-config alone: no -std flag, no library path, no LD_LIBRARY_PATH here.
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
[ -f "$PKG_CONFIG_PATH/synclog-static.pc" ] || fail "synclog-static.pc not installed"
case " $(pkg-config --cflags synclog) " in *" -std=c++23 "*) ;; *) fail "synclog.pc Cflags lack -std=c++23" ;; esac
if [ -n "$shared_lib" ]; then
  # shellcheck disable=SC2046
  step "pkg-config consumer (shared): build" \
    "$cxx" "$consumer/main.cc" -o "$tmp/pc-shared" $(pkg-config --cflags --libs synclog)
  run_consumer pkg-config-shared "$tmp/pc-shared"
  # Through the rpath synclog.pc adds: no LD_LIBRARY_PATH is set here.
  loaded=$(ldd "$tmp/pc-shared" | awk '/libsynclog\.so/ { print $3 }')
  [ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$shared_lib")" ] ||
    fail "pc-shared does not load $shared_lib: $(ldd "$tmp/pc-shared")"
fi
# shellcheck disable=SC2046
step "pkg-config consumer (static): build" \
  "$cxx" "$consumer/main.cc" -o "$tmp/pc-static" $(pkg-config --cflags --libs synclog-static)
run_consumer pkg-config-static "$tmp/pc-static"
case "$(ldd "$tmp/pc-static")" in *libsynclog.so*) fail "the static pkg-config consumer loads libsynclog.so" ;; esac

echo "PASS"
