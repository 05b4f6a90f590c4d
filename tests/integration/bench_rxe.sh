#!/usr/bin/env bash
# rdmx bench -c all on the RDMA device (rxe in the sandbox): the JSON parses,
# every protocol and tcp has its rows with every message counted, and the
# server/client split works (a --server process and a client run).
# Usage: bench_rxe.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
dir=$(mktemp -d)
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

timeout 600 "$rdmx" bench -c all --size 64,4K --iters 50 --warmup 5 --json "$dir/b.json" ||
	fail "rdmx bench -c all exited $?"
jq -e . "$dir/b.json" >/dev/null || fail "the JSON does not parse"
names=$("$rdmx" --version | sed 's/.*(protocols: *//; s/)//')
for p in $names tcp; do
	n=$(jq --arg p "$p" '[.results[] | select(.protocol == $p and .msgs == 50)] | length' "$dir/b.json")
	[ "$n" -eq 4 ] || fail "$p: $n complete rows, expected 4 (2 sizes x lat, bw)"
done
[ "$(jq -r .device "$dir/b.json")" != "verbs" ] || fail "no device named"
jq -e '.rdmx_version != "" and (.kernel | startswith("Linux")) and .config.iters == 50' \
	"$dir/b.json" >/dev/null || fail "the JSON lacks its provenance"
# The CI gate on the device: a violated --fail-if exits 3 and names the row.
set +e
timeout 300 "$rdmx" bench -c send_recv --mode lat --size 64 --iters 20 --warmup 2 \
	--fail-if 'send_recv:64:p50>1ns' >"$dir/gate" 2>&1
rc=$?
set -e
[ "$rc" -eq 3 ] && grep -q 'send_recv 64 lat conns 1: rtt_us.p50' "$dir/gate" ||
	{ cat "$dir/gate"; fail "--fail-if on the device: exit $rc, expected 3 naming the row"; }

addr=${RDMX_TEST_ADDR:-${RDMX_SANDBOX_ADDR:-}}
[ -n "$addr" ] || { echo "ok (no RDMX_SANDBOX_ADDR: server/client split not tested)"; exit 0; }
port=$((20000 + $$ % 20000))
"$rdmx" bench --server --port "$port" --size 4K "$addr" >"$dir/srv" 2>&1 &
spid=$!
for _ in $(seq 100); do grep -q listening "$dir/srv" && break; sleep 0.1; done
grep -q listening "$dir/srv" || { cat "$dir/srv"; fail "server did not start"; }
timeout 300 "$rdmx" bench -c send_recv,tcp --size 4K --iters 50 --port "$port" \
	--csv "$dir/c.csv" "$addr" || fail "client exited $?"
[ "$(wc -l <"$dir/c.csv")" -eq 5 ] || fail "client CSV: expected 4 rows"
timeout 30 tail --pid="$spid" -f /dev/null || fail "server did not exit after the run"
wait "$spid" || fail "server exited with an error: $(cat "$dir/srv")"
spid=
echo "ok: rdmx bench on the device; server log:"
cat "$dir/srv"
