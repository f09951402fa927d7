#!/bin/sh
# reconcile_deps.sh ENGINE_SRC_DIR [LIBTENDENGINE_A]
#
# Issue 16: calls between the engine and reconcile.c go one way.
# reconcile.c (the pure reconcile decision) calls no function defined in
# engine.c, batch.c or commit.c (the driver), nor in store.c, registry.c,
# inspect.c or check.c (the store and what reads it); they may call it.
#
# 1. source: no non-static function defined in those files (a name at
#    column 0 followed by '(', its return type on the line above not
#    static) appears as a word in reconcile.c;
# 2. objects, given the engine's static library: no undefined symbol of
#    reconcile.c.o is defined by one of those files' objects.
set -u
src=$1
lib=${2:-}
files="engine.c batch.c commit.c store.c registry.c inspect.c check.c"
rec=$src/reconcile.c
fail=0

[ -f "$rec" ] || { echo "FAIL: no $rec"; exit 1; }

defs() {
	awk 'FNR > 1 && /^[A-Za-z_][A-Za-z0-9_]*\(/ && prev !~ /^static/ {
		name = $0; sub(/\(.*/, "", name); print name
	} { prev = $0 }' "$1"
}

for f in $files; do
	n=0 bad=0
	for fn in $(defs "$src/$f"); do
		n=$((n + 1))
		if grep -qw -- "$fn" "$rec"; then
			echo "FAIL: reconcile.c names $f's $fn:"
			grep -nw -- "$fn" "$rec" | sed 's/^/    /'
			bad=1
		fi
	done
	if [ $n = 0 ]; then
		echo "FAIL: source: $f: no non-static function found"
		fail=1
	elif [ $bad = 0 ]; then
		echo "source: $f: $n non-static functions, none named in reconcile.c"
	else
		fail=1
	fi
done

if [ -n "$lib" ]; then
	# nm -A -g: "archive:member: value type name", "...: U name"
	syms=$(nm -A -g "$lib") || { echo "FAIL: nm $lib"; exit 1; }
	# member name -> its defined and undefined global symbols
	table=$(printf '%s\n' "$syms" | awk -F: '{
		m = $2; sub(/.*\//, "", m); n = split($3, w, " ");
		if (n == 2 && w[1] == "U") print m, "U", w[2];
		else if (n == 3) print m, "D", w[3] }')
	undef=$(printf '%s\n' "$table" |
	    awk '$1 == "reconcile.c.o" && $2 == "U" { print $3 }' | sort -u)
	if ! printf '%s\n' "$table" | grep -q '^reconcile\.c\.o '; then
		echo "FAIL: no reconcile.c.o in $lib"
		exit 1
	fi
	echo "objects: reconcile.c.o needs:" $undef
	for f in $files; do
		both=$(printf '%s\n' "$table" | awk -v o="$f.o" -v u="$undef" '
		    BEGIN { n = split(u, a, " "); for (i = 1; i <= n; i++) need[a[i]] = 1 }
		    $1 == o && $2 == "D" { d++; if ($3 in need) print $3 }
		    END { if (!d) print "-none-defined-" }')
		ndef=$(printf '%s\n' "$table" | awk -v o="$f.o" '$1 == o && $2 == "D"' | wc -l)
		if [ "$both" = "-none-defined-" ]; then
			echo "FAIL: objects: $f.o defines nothing in $lib"
			fail=1
		elif [ -n "$both" ]; then
			echo "FAIL: objects: reconcile.c.o calls $f.o's:" $both
			fail=1
		else
			echo "objects: $f.o: $ndef global symbols, none used by reconcile.c.o"
		fi
	done
fi
[ $fail = 0 ] && echo "ok: reconcile.c calls nothing of the driver's"
exit $fail
