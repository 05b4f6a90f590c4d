#!/bin/sh
# The installed shared library exports the public API only: every dynamic
# symbol it defines is rdmx_ followed by a letter (no internal rdmx__ ones),
# and the CLI needs no symbol the library does not export (it links the
# shared library, so a hidden internal symbol would fail its link).
set -eu
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRW]$/ {print $3}')
[ -n "$syms" ] || { echo "exports: no symbols in $lib" >&2; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^rdmx_[a-z]' || true)
if [ -n "$bad" ]; then
	echo "exports: $lib exports non-public symbols:" >&2
	printf '  %s\n' $bad >&2
	exit 1
fi
echo "exports: $(printf '%s\n' "$syms" | wc -l) public symbols, no internal ones"
