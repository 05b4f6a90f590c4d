#!/usr/bin/env bash
# rdmx bench end to end on the fake fabric (every protocol and tcp on
# loopback): the JSON parses and has a row per protocol, size and mode with
# every message counted; the CSV has the same rows; --plot writes every chart
# (PNG and SVG) without a gnuplot warning; bad input exits 2; --fail-if and
# --baseline exit 3 when a limit is exceeded; SIGINT keeps the finished rows.
# Usage: bench_fake.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
cmd=(bench)
. "$(dirname "$0")/bench_lib.sh"
# RDMX_TEST_QUICK (TSan, valgrind): the option-handling runs below that
# exercise no threading are skipped; the plain and ASan runs do them all.
quick=${RDMX_TEST_QUICK:-}

"$rdmx" bench --fabric fake -c all --size 8,4K --iters 200 --warmup 20 \
	--conns 2 --json "$dir/b.json" --csv "$dir/b.csv" --plot "$dir/plots" >"$dir/out" ||
	{ cat "$dir/out"; fail "rdmx bench exited $?"; }
cat "$dir/out"
jq -e . "$dir/b.json" >/dev/null || fail "the JSON does not parse"
nproto=$("$rdmx" --version | sed 's/.*(protocols: *//; s/)//' | wc -w)
nproto=$((nproto + 1)) # tcp
# per protocol: 2 sizes x 2 modes x 2 connection counts (1, 2)
rows=$(jq '.results | length' "$dir/b.json")
[ "$rows" -eq $((nproto * 8)) ] || fail "$rows result rows, expected $((nproto * 8))"
[ "$(jq '[.results[].protocol] | unique | length' "$dir/b.json")" -eq "$nproto" ] ||
	fail "not every protocol has results"
jq -e '.results[] | select(.conns == 1) | .msgs == 200' "$dir/b.json" >/dev/null ||
	fail "a single connection did not count 200 messages"
jq -e 'all(.results[]; .msgs == 200 * .conns and .msg_rate > 0 and
	(.mode == "bw" or .rtt_us.p50 > 0))' "$dir/b.json" >/dev/null ||
	fail "a row lacks messages, rate or latency"
[ "$(wc -l <"$dir/b.csv")" -eq $((rows + 1)) ] || fail "CSV rows differ from JSON rows"
jq -e 'all(.results[]; .single_receiver == false and .per_conn_min <= .per_conn_max and
	.jain > 0 and .jain <= 1)' "$dir/b.json" >/dev/null ||
	fail "a row lacks its per-connection figures"
grep -q '^protocol *conns' "$dir/out" || fail "no table on stdout"
for c in latency_cdf throughput_vs_size msgrate_vs_size msgrate_vs_conns; do
	for ext in png svg; do
		[ -s "$dir/plots/$c.$ext" ] || fail "--plot wrote no $c.$ext"
	done
done
[ ! -s "$dir/plots/gnuplot.log" ] || { cat "$dir/plots/gnuplot.log"; fail "gnuplot complained"; }

# --single-receiver (N:1): every protocol with one server thread taking the
# messages of all its connections from the listener (tcp: a thread each).
# Every message is counted (the server's ACK agrees with each client), the
# per-connection figures are the per-connection rates' min and max, and
# Jain's index is theirs, in (0, 1].
"$rdmx" bench --fabric fake -c all --size 64 --iters 100 --warmup 10 --conns 2 \
	--single-receiver --json "$dir/sr.json" --csv "$dir/sr.csv" >"$dir/out" ||
	{ cat "$dir/out"; fail "--single-receiver exited $?"; }
grep -q '^server: --single-receiver' "$dir/out" || fail "--single-receiver: not said in the table"
grep -q '^  2 conns: round trips/s per conn min' "$dir/out" ||
	fail "--single-receiver: no per-connection line under a latency row"
rows=$(jq '.results | length' "$dir/sr.json")
[ "$rows" -eq $((nproto * 4)) ] || fail "--single-receiver: $rows rows, expected $((nproto * 4))"
[ "$(wc -l <"$dir/sr.csv")" -eq $((rows + 1)) ] || fail "--single-receiver: CSV rows differ"
head -1 "$dir/sr.csv" | grep -q ',single_receiver,per_conn_min_msg_rate,per_conn_max_msg_rate,jain,batch,coalesce,sendv$' ||
	fail "--single-receiver: the CSV lacks the per-connection columns"
[ "$(awk -F, 'NR > 1 && $26 == 1' "$dir/sr.csv" | wc -l)" -eq $(((nproto - 1) * 4)) ] ||
	fail "--single-receiver: the CSV does not mark every rdmx row"
jq -e '.config.single_receiver and all(.results[];
	.msgs == 100 * .conns and .single_receiver == (.protocol != "tcp") and
	(.per_conn_msg_rate | length) == .conns and
	.per_conn_min == (.per_conn_msg_rate | min) and
	.per_conn_max == (.per_conn_msg_rate | max) and .per_conn_min <= .per_conn_max and
	.jain > 0 and .jain <= 1 and
	(.jain - ((.per_conn_msg_rate | add) * (.per_conn_msg_rate | add) /
		  (.conns * (.per_conn_msg_rate | map(. * .) | add))) | fabs) < 1e-3)' \
	"$dir/sr.json" >/dev/null || fail "--single-receiver: a row's counts or figures are wrong"

usage "unknown protocol 'nope'" -c nope
usage "--size" --size 8,,64
usage "--size" -s 0
usage "iters" --iters 0
usage "exclude each other" --iters 5 --duration 1
usage "--duration" --duration 0
usage "mode" --mode fast
usage "self-test" --server
usage "-q (--conns): must be between" -q 0
usage "--threads: must be between" --threads 0
usage "tcp has no listener call" -c tcp --single-receiver
usage "not a power of 2" --ring-size 100000
usage "ring-size" --ring-size 1K
# --fail-if and --baseline are checked before any test (usage, exit 2).
usage "'p98' is not a metric" --fail-if 'send_recv:64:p98>1us'
usage "'20xs' is not a limit" --fail-if 'send_recv:64:p99>20xs'
usage "protocol 'tcp'" -c send_recv --fail-if 'tcp:64:p99>1'
usage "not in --size" --size 64 --fail-if 'send_recv:128:p99>1'
usage "bandwidth" --mode lat --fail-if '*:*:msg_s<1'
usage "cannot open" --baseline "$dir/none.json"
usage "needs --baseline" --max-regress 5
usage "--batch" --batch 0
usage "at most 4096" --batch 8192
usage "bandwidth tests" --mode lat --batch 16
usage "coalesce" --coalesce maybe

# Checked before the first test: output paths, the plot directory, gnuplot,
# the memory the sizes need.
usage "same file" --json "$dir/same" --csv "$dir/same"
usage "cannot write in $dir/nodir" --json "$dir/nodir/x.json"
usage "is a directory" --csv "$dir"
touch "$dir/afile"
usage "not a directory" --plot "$dir/afile"
usage "only one can go to stdout" --json - --csv -
usage "GiB" --size 1G --tx-depth 4096 --conns 64
set +e; PATH=/nonexistent "$rdmx" bench --fabric fake --plot "$dir/p2" >"$dir/out" 2>"$dir/err"
rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "gnuplot-nox" "$dir/err" && [ ! -s "$dir/out" ] ||
	{ cat "$dir/err"; fail "no gnuplot: exit $rc, expected 2 naming gnuplot-nox before any test"; }
# --pcap (tcpdump on the device's netdev): not on the fake fabric, not for
# --server; tcpdump missing is a usage error naming the package, before any
# test (the verbs fabric; the device is looked for only after this check).
usage "not with --fabric fake" --pcap "$dir/x.pcap"
usage "and --pcap are for the client" --fabric verbs --server --pcap "$dir/x.pcap"
set +e; PATH=/nonexistent "$rdmx" bench --pcap "$dir/x.pcap" >"$dir/out" 2>"$dir/err"
rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "apt install tcpdump" "$dir/err" && [ ! -s "$dir/out" ] ||
	{ cat "$dir/err"; fail "no tcpdump: exit $rc, expected 2 naming tcpdump before any test"; }
# --json - : the document alone on stdout (the table on stderr), with the
# provenance and the effective configuration.
"$rdmx" bench --fabric fake -c send_recv --size 64 --iters 20 --warmup 2 --json - \
	>"$dir/stdout.json" 2>"$dir/err" || { cat "$dir/err"; fail "--json -"; }
jq -e '(.results | length) == 2 and .rdmx_version != "" and .host != "" and
	(.kernel | startswith("Linux")) and (.command_line | endswith("--json -")) and
	.config.iters == 20 and .config.sizes == [64] and .config.send_depth == 16' \
	"$dir/stdout.json" >/dev/null || { cat "$dir/stdout.json"; fail "--json -: not the document"; }
grep -q '^send_recv' "$dir/err" || fail "--json -: the table is not on stderr"
# --progress always draws the line even off a terminal; auto does not.
[ -n "$quick" ] || for p in always auto; do
	"$rdmx" bench --fabric fake -c tcp --size 64 --mode lat --duration 1.5 \
		--warmup 1 --progress $p >/dev/null 2>"$dir/prog.$p"
done
if [ -z "$quick" ]; then
grep -q 'messages' "$dir/prog.always" || fail "--progress always: no progress line"
! grep -q 'messages' "$dir/prog.auto" || fail "--progress auto: a progress line off a terminal"
fi

# perftest habits: the spellings map to rdmx's, a clashing letter is refused
# or noted with the rdmx spelling, an unknown option gets "did you mean".
usage "did you mean '--size'" --sizz 64
usage "did you mean '--warmup'" --warmpu 5
usage "unknown protocol '18515'" -c 18515
usage "-p (--port): must be between 0 and 65535" -p 70000
usage "exclude each other" -a --size 64
if [ -z "$quick" ]; then
"$rdmx" bench --fabric fake -c tcp --mode lat -a -t 1 --iters 2 --warmup 0 -x 0 -q 1 -F --timeout 999 \
	--out_json >"$dir/a.json" 2>"$dir/err" || { cat "$dir/err"; fail "perftest spellings"; }
jq -e '[.results[].size] == [range(1; 24) | pow(2; .)] and .config.threads == 1' \
	"$dir/a.json" >/dev/null || fail "-a: not every power of 2 from 2 to 8M"
grep -q -- "-F ignored" "$dir/err" || fail "-F: no note"
# headline columns: one-way latency and MB/s (= Gb/s x 125) on request
"$rdmx" bench --fabric fake -c send_recv --size 4K --iters 100 --warmup 5 --latency one-way \
	--rate mbs --json "$dir/h.json" >"$dir/out" || fail "--latency one-way --rate mbs"
grep -q "latency: one-way" "$dir/out" || fail "--latency one-way: not in the table"
mbs=$(awk '/MB\/s/ { on = 1; next } on && /^send_recv/ { print $6; exit }' "$dir/out")
want=$(jq '.results[] | select(.mode == "bw") | .gbps * 125' "$dir/h.json")
awk -v a="$mbs" -v b="$want" 'BEGIN { exit !(a > 0 && (a - b) ^ 2 < (b * 0.01) ^ 2) }' ||
	fail "--rate mbs: the table says $mbs MB/s, the JSON's Gb/s make $want"
p50=$(awk '/^protocol/ { n++ } n == 1 && /^send_recv/ { print $6; exit }' "$dir/out")
want=$(jq '.results[] | select(.mode == "lat") | .one_way_us.p50' "$dir/h.json")
awk -v a="$p50" -v b="$want" 'BEGIN { exit !(a > 0 && (a - b) ^ 2 < 0.01 ^ 2 + (b * 0.01) ^ 2) }' ||
	fail "--latency one-way: the table's p50 $p50 is not the JSON's one-way p50 $want"
fi

# The CI gate: a violated --fail-if exits 3 and names the row; a satisfied
# one exits 0; a baseline with absurd figures is a regression on every row.
gate() { # expect exit status $1 from bench with the rest of the arguments
	local want=$1; shift
	set +e; "$rdmx" bench --fabric fake -c send_recv,tcp --size 64 --iters 50 \
		--warmup 5 "$@" >"$dir/out" 2>"$dir/err"; rc=$?; set -e
	[ "$rc" -eq "$want" ] || { cat "$dir/err"; fail "bench $*: exit $rc, expected $want"; }
}
gate 3 --fail-if 'send_recv:64:p50>1ns' --fail-if 'tcp:*:msg_s<1'
grep -q "send_recv:64:p50>1ns'.*send_recv 64 lat conns 1: rtt_us.p50 = " "$dir/err" ||
	{ cat "$dir/err"; fail "--fail-if: the violated row is not named"; }
grep -q "1 limit exceeded" "$dir/err" || { cat "$dir/err"; fail "--fail-if: no summary"; }
grep -q '^send_recv' "$dir/out" || fail "--fail-if: the table is missing"
[ -n "$quick" ] || {
gate 0 --fail-if 'send_recv:64:p50>1000s' --fail-if '*:*:msg_s<1' --json "$dir/base.json"
jq '.results[] |= (.msg_rate = 1e15 | .rtt_us.p50 = 1e-6)' "$dir/base.json" >"$dir/fast.json"
gate 3 --baseline "$dir/fast.json"
[ "$(grep -c -- '--baseline: .* was ' "$dir/err")" -eq 4 ] ||
	{ cat "$dir/err"; fail "--baseline: not every row (4) regressed"; }
jq '.results[] |= (.msg_rate = 1 | .rtt_us.p50 = 1e9)' "$dir/base.json" >"$dir/slow.json"
gate 0 --baseline "$dir/slow.json" --max-regress 5
}

# Every ring protocol at 1 MiB: the ring grows to hold it by default (the
# default 1 MiB ring cannot hold two 1 MiB records).
"$rdmx" bench --fabric fake -c write_simplex,write_magic,write_duplex,write_atomic \
	--mode lat --size 1M --iters 10 --warmup 1 --json "$dir/big.json" >"$dir/out" 2>&1 ||
	{ cat "$dir/out"; fail "1 MiB messages through the ring protocols"; }
[ "$(jq '[.results[] | select(.msgs == 10)] | length' "$dir/big.json")" -eq 4 ] ||
	fail "not every ring protocol measured 10 messages of 1 MiB"
# --batch: a bandwidth row per value (batch and coalesce in the table, the
# JSON and the CSV), one latency row; a burst's messages all arrive (every
# row counted what the server confirmed).
"$rdmx" bench --fabric fake -c write_simplex,send_recv --size 64 --iters 200 \
	--warmup 10 --batch 1,16 --coalesce on --signal-every 4 \
	--json "$dir/batch.json" --csv "$dir/batch.csv" >"$dir/out" 2>&1 ||
	{ cat "$dir/out"; fail "--batch 1,16"; }
jq -e '[.results[] | select(.mode == "bw") | .batch] == [1, 16, 1, 16] and
	[.results[] | select(.mode == "lat") | .batch] == [1, 1] and
	all(.results[]; .msgs == 200 and .coalesce == "on") and
	.config.coalesce == "on" and .config.signal_every == 4' "$dir/batch.json" >/dev/null ||
	{ cat "$dir/batch.json"; fail "--batch: rows, batch or coalesce wrong in the JSON"; }
grep -Eq '^write_simplex +1 +64 .* 16$' "$dir/out" || { cat "$dir/out"; fail "--batch: no batch column in the table"; }
[ "$(cut -d, -f30,31 "$dir/batch.csv" | sort | uniq -c | awk '{print $1 " " $2}' | tr '\n' ' ')" = "4 1,on 2 16,on 1 batch,coalesce " ] ||
	{ cat "$dir/batch.csv"; fail "--batch: batch and coalesce columns in the CSV"; }
# --sendv: a burst is one rdmx_sendv from the bench's staging buffer; 203
# messages end in a cut burst of 11 (sent before END), and 400 KiB ones
# overflow the 1 MiB stage mid-burst; the server confirms every message
# of every row (the bench checks its count and their sequence numbers).
"$rdmx" bench --fabric fake -c send_recv,write_simplex,tcp --mode bw --size 64,400K \
	--iters 203 --warmup 10 --batch 1,16 --sendv --json "$dir/vec.json" \
	--csv "$dir/vec.csv" >"$dir/out" 2>&1 || { cat "$dir/out"; fail "--sendv"; }
jq -e '(.results | length) == 12 and all(.results[]; .msgs == 203) and
	all(.results[]; .sendv == (.protocol != "tcp")) and .config.sendv' \
	"$dir/vec.json" >/dev/null || { cat "$dir/vec.json"; fail "--sendv: rows or sendv wrong in the JSON"; }
grep -q 'one rdmx_sendv a burst' "$dir/out" || { cat "$dir/out"; fail "--sendv: not said in the table"; }
# ... and only the bandwidth rows: a latency row is sent as without it
"$rdmx" bench --fabric fake -c send_recv --size 64 --iters 50 --warmup 5 --sendv \
	--json "$dir/vec2.json" >"$dir/out" 2>&1 || { cat "$dir/out"; fail "--sendv, both modes"; }
jq -e '[.results[] | [.mode, .sendv]] == [["lat", false], ["bw", true]]' "$dir/vec2.json" >/dev/null ||
	{ cat "$dir/vec2.json"; fail "--sendv: a latency row says sendv"; }
[ "$(cut -d, -f32 "$dir/vec.csv" | sort | uniq -c | awk '{print $1 " " $2}' | tr '\n' ' ')" = "4 0 8 1 1 sendv " ] ||
	{ cat "$dir/vec.csv"; fail "--sendv: the sendv column in the CSV"; }
# Results survive Ctrl-C: SIGINT in the middle of a run exits 130, and the
# JSON and CSV hold every row finished before it (whole files, no leftovers).
set +e
timeout --preserve-status -s INT 4 "$rdmx" bench --fabric fake -c all --size 64 \
	--duration 1 --json "$dir/int.json" --csv "$dir/int.csv" >"$dir/out" 2>"$dir/err"
rc=$?
set -e
stopped_run "$rc" $((nproto * 2))
jq -e 'all(.results[]; .msgs > 0 and .msg_rate > 0)' "$dir/int.json" >/dev/null ||
	fail "SIGINT: a row in the JSON was not measured to the end"
! ls "$dir"/*.tmp >/dev/null 2>&1 || fail "SIGINT: temporary files left behind"
grep -q '^send_recv' "$dir/out" || fail "SIGINT: the finished rows are not on stdout"

echo "ok: rdmx bench on the fake fabric"
