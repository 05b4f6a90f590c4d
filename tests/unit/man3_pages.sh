#!/usr/bin/env bash
# The section-3 pages come from the headers' doc comments (scripts/man3):
# every public function has a doc comment in the house form, every
# function the shared library exports has its page, every page is of an
# exported function or a header's overview (one a header), and groff
# renders each page without a warning.
# Usage: man3_pages.sh LIBRDMX_SO MAN3_DIR HEADER...
set -euo pipefail
lib=$1 dir=$2
shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
python3 "$here/scripts/man3" --check "$@" || fail "public functions without a doc comment"
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort)
[ -n "$exported" ] || fail "no functions exported by $lib"
declared=$(python3 "$here/scripts/man3" --list "$@" | sort)
n=0
for f in $exported; do
	[ -s "$dir/$f.3" ] || fail "$f is exported but has no page $dir/$f.3"
	grep -qx "$f" <<<"$declared" || fail "$f is exported but declared in no public header"
	n=$((n + 1))
done
overviews=0
for p in "$dir"/*.3; do
	f=$(basename "$p" .3)
	if head -n 1 "$p" | grep ', its overview:' >/dev/null; then
		overviews=$((overviews + 1)) # rdmx(3), rdmx_rpc(3), rdmx_kv(3): a header's
	else
		grep -qx "$f" <<<"$exported" || fail "$p: $f is not exported by $lib"
	fi
	grep -q "^\.SH NAME" "$p" && grep -q "^\.SH DESCRIPTION" "$p" || fail "$p lacks NAME or DESCRIPTION"
done
if command -v groff >/dev/null; then
	warn=$(for p in "$dir"/*.3; do groff -man -ww -z "$p" 2>&1; done) || true
	[ -z "$warn" ] || fail "groff warns: $warn"
fi
[ "$overviews" -eq "$#" ] || fail "$overviews overview pages for $# headers"
echo "ok: $n exported functions, each with its page, and $overviews header overviews in $dir"
