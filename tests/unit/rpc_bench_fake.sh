#!/usr/bin/env bash
# rdmx rpc bench end to end on the fake fabric (msg, rfp, herd and the tcp
# baseline on loopback): the JSON parses and has a row per transport, size
# and client count with sane figures (calls > 0, p50 <= p99, the clients'
# calls sum to the row's, fairness in (0, 1], work requests per call for
# the RDMA transports only); the CSV has the same rows, --plot its charts;
# bad input exits 2 with a message naming the problem; SIGINT keeps the
# finished rows.
# Usage: rpc_bench_fake.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
cmd=(rpc bench)
. "$(dirname "$0")/bench_lib.sh"

plot=()
command -v gnuplot >/dev/null && plot=(--plot "$dir/plots")
"$rdmx" rpc bench --fabric fake --transport all --size 32,4K --conns 4 --iters 200 --warmup 20 \
	--json "$dir/r.json" --csv "$dir/r.csv" "${plot[@]}" >"$dir/out" ||
	{ cat "$dir/out"; fail "rdmx rpc bench exited $?"; }
cat "$dir/out"
jq -e . "$dir/r.json" >/dev/null || fail "the JSON does not parse"
# 4 transports x 2 sizes x 3 client counts (1, 2, 4)
rows=$(jq '.results | length' "$dir/r.json")
[ "$rows" -eq 24 ] || fail "$rows result rows, expected 24"
for t in msg rfp herd tcp; do for s in 32 4096; do for c in 1 2 4; do
	jq -e --arg t $t --argjson s $s --argjson c $c \
		'[.results[] | select(.transport == $t and .size == $s and .clients == $c)] |
		 length == 1' "$dir/r.json" >/dev/null || fail "no single row for $t $s B $c clients"
done; done; done
jq -e 'all(.results[]; .calls == 200 * .clients and .calls_per_s > 0 and
	.rtt_us.p50 > 0 and .rtt_us.p50 <= .rtt_us.p99 and .rtt_us.p99 <= .rtt_us.p99_9 and
	(.per_client_calls | add) == .calls and (.per_client_calls | length) == .clients and
	.client_min_calls_per_s <= .client_max_calls_per_s and .jain > 0 and .jain <= 1.000001 and
	.server_cpu_us_per_call >= 0 and .seconds > 0)' "$dir/r.json" >/dev/null ||
	fail "a row lacks calls, rate, latency or per-client figures"
# rfp fetches its responses: 0 work requests per call when the clients'
# READs find them (on a quiet host, even on the fake), up to one push per
# call when they do not; msg and herd send every response.
jq -e 'all(.results[]; if .transport == "tcp" then .server_wr_per_call == null
	elif .transport == "rfp" then .server_wr_per_call >= 0 and .server_wr_per_call <= 1.01
	else .server_wr_per_call > 0 end)' "$dir/r.json" >/dev/null ||
	fail "work requests per call: expected for msg and herd, 0..1 for rfp, none for tcp"
jq -e 'all(.results[]; (.transport == "msg") == (.protocol == "send_recv"))' \
	"$dir/r.json" >/dev/null || fail "msg's protocol is not named (or another's is)"
jq -e '.tool == "rdmx rpc bench" and .config.clients == 4 and .config.sizes == [32, 4096]
	and (.command_line | startswith("rdmx rpc bench"))' "$dir/r.json" >/dev/null ||
	fail "the provenance or the configuration is missing"
[ "$(wc -l <"$dir/r.csv")" -eq $((rows + 1)) ] || fail "CSV rows differ from JSON rows"
grep -q '^transport *size *clients' "$dir/out" || fail "no table on stdout"
if [ ${#plot[@]} -gt 0 ]; then
	for c in rpc_calls_vs_clients rpc_latency_cdf; do for ext in png svg; do
		[ -s "$dir/plots/$c.$ext" ] || fail "--plot wrote no $c.$ext"
	done; done
	[ ! -s "$dir/plots/gnuplot.log" ] || { cat "$dir/plots/gnuplot.log"; fail "gnuplot complained"; }
fi
# --duration: the clients' calls still sum to the row's
"$rdmx" rpc bench --fabric fake --transport msg,tcp --size 64 --conns 2 --duration 0.3 --tx-depth 4 \
	--protocol write_duplex --json - >"$dir/d.json" 2>"$dir/err" || { cat "$dir/err"; fail "--duration"; }
jq -e '(.results | length) == 4 and all(.results[]; .calls > 0 and
	(.per_client_calls | add) == .calls and .window == 4) and
	.results[0].protocol == "write_duplex"' "$dir/d.json" >/dev/null ||
	{ cat "$dir/d.json"; fail "--duration --tx-depth 4 --json -"; }
grep -q '^msg/write_duplex' "$dir/err" || fail "--json -: the table is not on stderr"

usage "unknown transport 'udp'" --transport msg,udp
usage "expected msg, rfp, herd, tcp or all" --transport ,
usage "above the echo method's largest request, --max-size 4K" --size 32,8K --max-size 4K
usage "-q (--conns): must be between 1 and 64" -q 0
usage "--conns: must be between 1 and 64" --conns 65
usage "--clients: must be between 1 and 64" --clients 65
usage "--size" --size 8,,64
usage "-t (--tx-depth): must be between" -t 0
usage "exclude each other" --iters 5 --duration 1
usage "--duration" --duration 0
usage "'nope' is not one of" --protocol nope
usage "self-test" --server
usage "only one can go to stdout" --json - --csv -
usage "cannot write in $dir/nodir" --json "$dir/nodir/x.json"
touch "$dir/afile"
usage "not a directory" --plot "$dir/afile"
usage "not --server" --fabric verbs --server --plot "$dir/p"

# Ctrl-C: exit 130 with the rows finished before it, whole files.
set +e
timeout --preserve-status -s INT 3 "$rdmx" rpc bench --fabric fake --transport all --size 64 \
	--duration 1 --json "$dir/int.json" --csv "$dir/int.csv" >"$dir/out" 2>"$dir/err"
rc=$?
set -e
stopped_run "$rc" 4

echo "ok: rdmx rpc bench on the fake fabric"
