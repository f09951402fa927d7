#!/bin/sh
# What a connector author gets from `meson install`: tend.pc alone must
# be enough to compile and link a connector (no libgit2, ncurses, LMDB or
# xxHash .pc needed, no defines of tend's dependencies in its cflags).
#
# usage: pkgconfig.sh BUILD_DIR CONNECTOR.c CC...
set -u
BUILD=${1:?build dir}
SRC=${2:?connector source}
shift 2
D=$(mktemp -d "${TMPDIR:-/tmp}/tend-pc-XXXXXX")
trap 'rm -rf "$D"' EXIT
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }

meson install -C "$BUILD" --no-rebuild --quiet --destdir "$D/root" \
	>"$D/install.log" 2>&1 || { cat "$D/install.log" >&2; exit 1; }
PC=$(find "$D/root" -name tend.pc)
[ -n "$PC" ] || { echo "FAIL: no tend.pc installed" >&2; exit 1; }
PCDIR=$(dirname "$PC")
# only the installed .pc files: nothing of the system's can help
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG_LIBDIR="$PCDIR"
# the prefix the .pc names, moved under the destdir
PREFIX=$(pkg-config --variable=prefix tend)
pc() { pkg-config --define-variable=prefix="$D/root$PREFIX" "$@" tend; }

CFLAGS=$(pc --cflags) || fail "pkg-config --cflags tend: $(pc --cflags 2>&1)"
LIBS=$(pc --libs) || fail "pkg-config --libs tend: $(pc --libs 2>&1)"
pc --static --libs >/dev/null || fail "pkg-config --static --libs tend"
for f in $CFLAGS; do
	case $f in
	-I*) ;;
	*) fail "cflags: $f (only -I\${includedir}): $CFLAGS" ;;
	esac
done
[ "$(echo $CFLAGS)" = "-I$D/root$PREFIX/include" ] ||
	fail "cflags are '$CFLAGS', want -I\${includedir}"
# nor through the system's .pc files (ncursesw's -D_XOPEN_SOURCE=600)
SYSCFLAGS=$(unset PKG_CONFIG_LIBDIR; PKG_CONFIG_PATH="$PCDIR" pkg-config \
	--cflags tend 2>&1)
case " $SYSCFLAGS" in
*" -D"*) fail "with the system's .pc files, cflags: $SYSCFLAGS" ;;
esac
grep -q '^Requires' "$PC" && fail "Requires in tend.pc: $(grep '^Requires' "$PC")"

# a connector, compiled and linked with nothing but these flags, and run
# (a sanitized libtend needs the sanitizers' runtime in the program too:
# that is the test setup's business, not tend.pc's)
SAN=
[ -n "${TEND_SANITIZED:-}" ] && SAN=-fsanitize=address,undefined
"$@" -Wall -Wextra -pedantic -Werror $CFLAGS $SAN -o "$D/connector" "$SRC" \
	$LIBS || fail "the connector does not build against tend.pc"
if [ -x "$D/connector" ]; then
	LIBDIR=$(pc --variable=libdir)
	LD_LIBRARY_PATH="$LIBDIR" "$D/connector" "$D/state" "$D/kv" \
		k=v >/dev/null || fail "the connector does not run"
	[ "$(cat "$D/kv/k" 2>/dev/null)" = v ] || fail "the connector wrote no k"
	# a versioned SONAME: the program records libtend.so.0, which the
	# installed library provides (libtend.so is the link-time name)
	need=$(readelf -d "$D/connector" | sed -n 's/.*NEEDED.*\[\(libtend[^]]*\)\].*/\1/p')
	[ "$need" = libtend.so.0 ] || fail "the connector needs '$need', want libtend.so.0"
	[ -e "$LIBDIR/libtend.so.0" ] || fail "no libtend.so.0 installed"
	soname=$(readelf -d "$LIBDIR/libtend.so" | sed -n 's/.*SONAME.*\[\(.*\)\].*/\1/p')
	[ "$soname" = libtend.so.0 ] || fail "libtend's SONAME is '$soname'"
fi
[ "$FAILS" = 0 ] || exit 1
echo "tend.pc: $CFLAGS / $LIBS"
