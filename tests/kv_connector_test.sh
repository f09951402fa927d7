#!/bin/sh
# The connector walkthrough's program, run for real: bytes on disk after
# each pass, and the docs' code blocks are the examples' code.
# Usage: kv_connector_test.sh KV_CONNECTOR DOC SOURCE...
set -eu
bin=$1 doc=$2
shift 2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin" "$t/state" "$t/kv" a=1 b=2 docs/x=hello docs@index/all=x >/dev/null
[ "$(cat "$t/kv/a")" = 1 ] || fail "a"
[ "$(cat "$t/kv/docs/x")" = hello ] || fail "docs/x"
[ "$(cat "$t/kv/docs/.index/all")" = x ] || fail "index"
# unchanged: nothing applied but the bucket's per-pass refresh
out=$("$bin" "$t/state" "$t/kv" a=1 b=2 docs/x=hello docs@index/all=x)
echo "$out" | grep -q "applied 1," || fail "second pass applied: $out"
# change one, drop one, drop the bucket (its content goes with it)
"$bin" "$t/state" "$t/kv" a=3 >/dev/null
[ "$(cat "$t/kv/a")" = 3 ] || fail "a=3"
[ ! -e "$t/kv/b" ] || fail "b not deleted"
[ ! -e "$t/kv/docs" ] || fail "bucket not deleted"
# every ```c block of the doc is in one of the examples, verbatim
awk '/^```c$/{on=1; buf=""; next} /^```$/{if(on){print buf > (FILENAME ".block." n++)}; on=0; next} on{buf=buf $0 "\n"}' n=0 "$doc"
for b in "$doc".block.*; do
	python3 - "$b" "$@" <<'PY' || { rm -f "$doc".block.*; fail "doc block $b not in $*"; }
import sys
block = open(sys.argv[1]).read().strip("\n")
sys.exit(0 if any(block in open(s).read() for s in sys.argv[2:]) else 1)
PY
done
rm -f "$doc".block.*
echo "kv_connector: 1 passed, 0 failed"
