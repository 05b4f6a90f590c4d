#!/usr/bin/env bash
# rdmx kv bench end to end on the fake fabric, with Debian's memcached
# (scripts/install-deps installs it: it is required, not skipped): the JSON
# parses and has a row per workload, path and value size with sane figures
# (ops add up, GETs plus PUTs are the ops, percentiles ordered, no misses,
# no bad values, retries per million GETs for the READ rows only), the
# targets per size, the CSV the same rows, --plot its charts; bad input
# exits 2 with a message naming the problem; SIGINT keeps the finished rows.
# Usage: kv_bench_fake.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
cmd=(kv bench)
. "$(dirname "$0")/bench_lib.sh"

[ -x /usr/bin/memcached ] ||
	fail "/usr/bin/memcached is not installed; 'scripts/install-deps' installs it" \
	     "(Debian package memcached)"
plot=()
command -v gnuplot >/dev/null && plot=(--plot "$dir/plots")
"$rdmx" kv bench --fabric fake --iters 300 --keys 100 --size 32,2K --conns 3 \
	--memcached-spawn --json "$dir/r.json" --csv "$dir/r.csv" "${plot[@]}" >"$dir/out" ||
	{ cat "$dir/out"; fail "rdmx kv bench exited $?"; }
cat "$dir/out"
jq -e . "$dir/r.json" >/dev/null || fail "the JSON does not parse"
# per size: the lab's 7 (put and get on rpc, door, memcached; get on read),
# 2 mixes x 2 dists x 4 paths, one torn row
rows=$(jq '.results | length' "$dir/r.json")
[ "$rows" -eq $((2 * (7 + 16 + 1))) ] || fail "$rows result rows, expected 48"
for s in 32 2048; do
	for p in rpc door memcached; do for w in put get; do
		jq -e --arg w $w --arg p $p --argjson s $s '[.results[] | select(.workload == $w
			and .path == $p and .value_size == $s and .clients == 1)] | length == 1' \
			"$dir/r.json" >/dev/null || fail "no single lab row $w $p $s B"
	done; done
	for w in 95/5 50/50; do for d in uniform zipf; do for p in rpc read door memcached; do
		jq -e --arg w $w --arg d $d --arg p $p --argjson s $s '[.results[] | select(
			.workload == $w and .dist == $d and .path == $p and .value_size == $s and
			.clients == 3)] | length == 1' "$dir/r.json" >/dev/null ||
			fail "no single row $w $d $p $s B"
	done; done; done
	jq -e --argjson s $s '[.results[] | select(.workload == "torn" and .path == "read"
		and .value_size == $s and .dist == "hot")] | length == 1' "$dir/r.json" >/dev/null ||
		fail "no torn row at $s B"
done
jq -e 'all(.results[]; .ops == 300 and .ops_per_s > 0 and .seconds > 0 and
	.lat_us.p50 > 0 and .lat_us.min <= .lat_us.p50 and .lat_us.p50 <= .lat_us.p99 and
	.lat_us.p99 <= .lat_us.p99_9 and .lat_us.p99_9 <= .lat_us.max and
	.misses == 0 and .bad_values == 0 and (.per_client_ops | length) == .clients and
	(.per_client_ops | add) == .ops and all(.per_client_ops[]; . > 0))' "$dir/r.json" >/dev/null ||
	fail "a row lacks ops, rate, ordered latencies or per-client ops, or has misses or bad values"
jq -e 'all(.results[] | select(.workload != "torn"); .gets + .puts == .ops) and
	all(.results[] | select(.workload == "put"); .gets == 0) and
	all(.results[] | select(.workload == "get" or .workload == "torn"); .gets == .ops) and
	all(.results[] | select(.workload == "95/5"); .gets > .puts) and
	all(.results[] | select(.workload == "torn"); .puts > 0)' "$dir/r.json" >/dev/null ||
	fail "GETs and PUTs do not add up to the ops (or the torn test's writer did nothing)"
jq -e 'all(.results[]; if .path == "read" then .gets_read + .fallbacks == .gets and
	((.retries_per_m_gets - .torn_retries * 1e6 / .gets) | fabs) <= 1e-6 * (.retries_per_m_gets + 1)
	else .retries_per_m_gets == null and .gets_read == 0 end) and
	all(.results[] | select(.path == "rpc"); .gets_rpc == .gets)' "$dir/r.json" >/dev/null ||
	fail "the GET path counters (gets_read, gets_rpc, retries/M) do not match the paths"
jq -e '(.targets | length) == 2 and all(.targets[]; .read_vs_rpc_p50 > 0 and
	.read_vs_memcached_p50 > 0 and .door_vs_memcached_ops > 0 and
	.door_vs_memcached_pairs == 4)' "$dir/r.json" >/dev/null || fail "targets missing"
jq -e '.tool == "rdmx kv bench" and .config.clients == 3 and .config.sizes == [32, 2048]
	and .config.memcached == "spawned" and (.command_line | startswith("rdmx kv bench"))' \
	"$dir/r.json" >/dev/null || fail "the provenance or the configuration is missing"
[ "$(wc -l <"$dir/r.csv")" -eq $((rows + 1)) ] || fail "CSV rows differ from JSON rows"
grep -q '^work *keys *path' "$dir/out" || fail "no table on stdout"
grep -q 'GET p50 read/rpc' "$dir/out" || fail "no targets below the table"
grep -q 'fewer here' "$dir/out" || fail "fewer ops than the lab's: not said"
if [ ${#plot[@]} -gt 0 ]; then
	for c in kv_get_latency_cdf kv_mixed_ops; do for ext in png svg; do
		[ -s "$dir/plots/$c.$ext" ] || fail "--plot wrote no $c.$ext"
	done; done
	[ ! -s "$dir/plots/gnuplot.log" ] || { cat "$dir/plots/gnuplot.log"; fail "gnuplot complained"; }
fi
# one path, one mix, --json -: the table goes to stderr
"$rdmx" kv bench --fabric fake --iters 50 --keys 20 --size 64 --get-path read --mix 80/20 \
	--dist zipf --memcached -1 --json - >"$dir/d.json" 2>"$dir/err" ||
	{ cat "$dir/err"; fail "--get-path read --mix 80/20"; }
jq -e '[.results[].workload] == ["get", "put", "get", "80/20", "80/20", "torn"] and
	[.results[].path] == ["read", "door", "door", "read", "door", "read"]' "$dir/d.json" \
	>/dev/null || { cat "$dir/d.json"; fail "--get-path read --mix 80/20 --memcached -1: rows"; }
grep -q '^80/20' "$dir/err" || fail "--json -: the table is not on stderr"

usage "'90/5' is not GET/PUT percentages" --mix 90/5
usage "'x' is not GET/PUT" --mix 95/5,x
usage "'normal' is not uniform or zipf" --dist normal
usage "each of uniform and zipf once" --dist zipf,uniform,zipf
usage "outside 8..64K" --size 4
usage "outside 8..64K" -s 32,128K
usage "--conns: must be between 1 and 64" --conns 65
usage "-n (--iters): must be between" -n 0
usage "--ops: must be between" --ops 0
usage "'write' is not one of" --get-path write
usage "self-test" 10.0.0.1
usage "exclude each other" --memcached-spawn --memcached 11211
usage "only one can go to stdout" --json - --csv -
usage "cannot write in $dir/nodir" --json "$dir/nodir/x.json"

# Ctrl-C once the first row is in the files: exit 130 with the rows
# finished before it (some, not all 18), whole files.
"$rdmx" kv bench --fabric fake --iters 2000 --keys 50 --size 32 --conns 2 --memcached -1 \
	--json "$dir/int.json" --csv "$dir/int.csv" >"$dir/out" 2>"$dir/err" &
bg=$!
for _ in $(seq 600); do
	[ "$(jq '.results | length' "$dir/int.json" 2>/dev/null || echo 0)" -ge 1 ] && break
	sleep 0.1
done
kill -INT $bg
set +e; wait $bg; rc=$?; set -e
stopped_run "$rc" 18
grep -q '^work *keys *path' "$dir/out" || fail "SIGINT: no table of the finished rows"

echo "ok: rdmx kv bench on the fake fabric"
