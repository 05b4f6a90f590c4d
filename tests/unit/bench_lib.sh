# Shared by bench_fake.sh, rpc_bench_fake.sh and kv_bench_fake.sh (sourced):
# the scratch directory, fail, and the usage-error and SIGINT checks of a
# bench command. Set rdmx (the binary) and cmd (the subcommand's words,
# e.g. (rpc bench)) before calling them.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

usage() { # expect exit status 2 and a message naming the problem
	local want=$1; shift
	set +e; "$rdmx" "${cmd[@]}" --fabric fake "$@" >/dev/null 2>"$dir/err"; rc=$?; set -e
	[ "$rc" -eq 2 ] || fail "${cmd[*]} $* exited $rc, expected 2"
	grep -q -- "$want" "$dir/err" || { cat "$dir/err"; fail "${cmd[*]} $*: no '$want'"; }
}

# After a SIGINT to the run (exit status $1): it exited 130 and said so,
# int.json holds some but not all $2 rows (into $rows), int.csv as many.
stopped_run() {
	local rc=$1 all=$2
	[ "$rc" -eq 130 ] || { cat "$dir/err"; fail "SIGINT: exit $rc, expected 130"; }
	grep -q 'stopped by signal 2' "$dir/err" || { cat "$dir/err"; fail "SIGINT: no message"; }
	rows=$(jq '.results | length' "$dir/int.json") || fail "SIGINT: the JSON does not parse"
	[ "$rows" -ge 1 ] && [ "$rows" -lt "$all" ] ||
		fail "SIGINT: $rows rows, expected some but not all $all"
	[ "$(wc -l <"$dir/int.csv")" -eq $((rows + 1)) ] ||
		fail "SIGINT: CSV rows differ from JSON rows"
}
