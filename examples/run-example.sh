#!/bin/sh
# Run the example connector on a scratch directory twice and show what it
# wrote: the first pass creates, the second finds nothing to do.
set -eu
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin="$build/examples/kv_connector"
echo "# first pass: declare a, b and a bucket with one key and an index entry"
"$bin" "$dir/state" "$dir/kv" a=1 b=2 docs/intro=hello docs@index/all=intro
echo "# second pass, same declarations (only the bucket's per-pass refresh)"
"$bin" "$dir/state" "$dir/kv" a=1 b=2 docs/intro=hello docs@index/all=intro
echo "# third pass: a changes, b and the bucket are no longer declared"
"$bin" "$dir/state" "$dir/kv" a=3
echo "# files now:"
(cd "$dir/kv" && find . -type f | sort | while read -r f; do printf '%s = %s\n' "$f" "$(cat "$f")"; done)
