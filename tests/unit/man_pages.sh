#!/usr/bin/env bash
# The man pages and --help come from one source: for each command, the
# built man page equals `rdmx help --man CMD` (the build step ran on the
# current binary), every option --help lists is in the man page (with its
# value placeholder), and man renders the page without a warning.
# Usage: man_pages.sh RDMX_BINARY MAN_DIR
set -euo pipefail
rdmx=$1
mandir=$2
fail() { echo "FAIL: $*"; exit 1; }
for cmd in rdmx devices pingpong bench; do
	page=$mandir/rdmx-$cmd.1
	[ "$cmd" = rdmx ] && page=$mandir/rdmx.1
	[ -s "$page" ] || fail "no $page"
	"$rdmx" help --man "$cmd" | cmp -s - "$page" || fail "$page is not what 'rdmx help --man $cmd' writes"
	if [ "$cmd" = rdmx ]; then help=$("$rdmx" --help); else help=$("$rdmx" "$cmd" --help); fi
	opts=$(sed -n '/^OPTIONS$/,/^[A-Z]/p' <<<"$help" | grep -oE -- '--[a-z][a-z0-9-]*(=[A-Z]+)?' | sort -u)
	[ "$(wc -l <<<"$opts")" -ge 2 ] || fail "$cmd --help lists no options"
	for o in $opts; do
		name=${o%%=*} var=${o#*=}
		roff='\\fB'$(sed 's/-/\\\\-/g' <<<"$name")'\\fR'
		[ "$var" != "$o" ] && roff="$roff=\\\\fI$var\\\\fR"
		grep -q -- "$roff" "$page" || fail "$page lacks $o"
	done
	# every section of --help is a section of the man page
	for s in $(grep -E '^[A-Z][A-Z ]*$' <<<"$help" | tr ' ' '_'); do
		grep -q "^\.SH ${s//_/ }\$" "$page" || fail "$page lacks the section ${s//_/ }"
	done
	if command -v man >/dev/null; then
		warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || true
		[ -z "$warn" ] || fail "man warns about $page: $warn"
	fi
	echo "ok: $page ($(wc -l <<<"$opts") options)"
done
