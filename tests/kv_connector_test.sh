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
# every ```c block of the doc is in one of the examples, verbatim (one
# python for all of them: 23 startups took 20 s on a loaded machine)
python3 - "$doc" "$@" <<'PY' || fail "a code block of $doc is not in $*"
import re, sys
doc = open(sys.argv[1]).read()
srcs = [open(s).read() for s in sys.argv[2:]]
blocks = re.findall(r"^```c\n(.*?)^```$", doc, re.S | re.M)
if not blocks:
    sys.exit("no ```c blocks found")
bad = [b for b in blocks if not any(b.strip("\n") in s for s in srcs)]
for b in bad:
    print("not in the examples:\n" + b)
sys.exit(1 if bad else 0)
PY
echo "kv_connector: 1 passed, 0 failed"
