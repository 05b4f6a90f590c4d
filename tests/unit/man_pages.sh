#!/usr/bin/env bash
# The man pages and --help come from one source: for each command, the
# built man page equals `rdmx help --man CMD` (the build step ran on the
# current binary), every option --help lists is in the man page (with its
# value placeholder), and groff renders the page without a warning.
# Usage: man_pages.sh RDMX_BINARY MAN_DIR
set -euo pipefail
rdmx=$1
mandir=$2
fail() { echo "FAIL: $*"; exit 1; }
# kv-get, rpc-bench, ...: the subcommands rdmx kv get, rdmx rpc bench, ...
# (rdmx help --man rpc bench)
for cmd in rdmx devices pingpong bench doctor kv kv-serve kv-get kv-put kv-del kv-bench \
	rpc rpc-serve rpc-call rpc-bench; do
	page=$mandir/rdmx-$cmd.1
	[ "$cmd" = rdmx ] && page=$mandir/rdmx.1
	[ -s "$page" ] || fail "no $page"
	read -ra words <<<"${cmd//-/ }"
	man=$("$rdmx" help --man "${words[@]}")
	[ "$man" = "$(cat "$page")" ] || fail "$page is not what 'rdmx help --man ${words[*]}' writes"
	if [ "$cmd" = rdmx ]; then help=$("$rdmx" --help); else help=$("$rdmx" "${words[@]}" --help); fi
	# the option names of --help's OPTIONS section (no subprocess per
	# option: this runs under a loaded machine in make check)
	n=0 in_opts=0
	while IFS= read -r line; do
		[[ $line == OPTIONS ]] && { in_opts=1; continue; }
		[[ $in_opts == 1 && $line =~ ^[A-Z] ]] && break
		[[ $in_opts == 1 && $line =~ ^\ +(-[a-zA-Z],\ )?--([a-z][a-z0-9_-]*)(=([A-Z]+))? ]] || continue
		name=${BASH_REMATCH[2]} var=${BASH_REMATCH[4]}
		roff="\\fB\\-\\-${name//-/\\-}\\fR"
		[ -n "$var" ] && roff="$roff=\\fI$var\\fR"
		[[ $man == *"$roff"* ]] || fail "$page lacks --$name ($roff)"
		n=$((n + 1))
	done <<<"$help"
	[ "$n" -ge 2 ] || fail "$cmd --help lists no options"
	# every section of --help is a section of the man page
	while IFS= read -r line; do
		[[ $line =~ ^[A-Z][A-Z\ ]*$ ]] || continue
		[[ $man == *$'\n'".SH $line"$'\n'* ]] || fail "$page lacks the section $line"
	done <<<"$help"
	if command -v groff >/dev/null; then
		warn=$(groff -man -ww -z "$page" 2>&1) || true
		[ -z "$warn" ] || fail "groff warns about $page: $warn"
	fi
	echo "ok: $page ($n options)"
done
