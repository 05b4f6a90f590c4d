#!/usr/bin/env bash
# A foreign rdma_cm client (rping) that connects to an rdmx listener is
# rejected, the listener survives, and a proper rdmx client connects after.
# Usage: foreign_client.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
addr=${RDMX_TEST_ADDR:-${RDMX_SANDBOX_ADDR:-}}
[ -n "$addr" ] || { echo "foreign_client: set RDMX_TEST_ADDR (or run in sandbox/run)" >&2; exit 1; }
port=$((20000 + $$ % 20000))
log=$(mktemp)
trap 'kill "$spid" 2>/dev/null || true; rm -f "$log"' EXIT

"$rdmx" pingpong --server --port "$port" "$addr" >"$log" 2>&1 &
spid=$!
for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
grep -q listening "$log" || { echo "server did not start:"; cat "$log"; exit 1; }

if timeout 30 rping -c -a "$addr" -p "$port" -C 1 -v; then
  echo "FAIL: rping was served by an rdmx listener"; exit 1
fi
echo "ok: rping was rejected"
kill -0 "$spid" || { echo "FAIL: listener died after the foreign client"; cat "$log"; exit 1; }

timeout 120 "$rdmx" pingpong --iters 200 --size 1000 --verify --port "$port" "$addr"
timeout 30 tail --pid="$spid" -f /dev/null || { echo "FAIL: server did not exit"; exit 1; }
wait "$spid"
echo "ok: rdmx client served after the rejection; server log:"
cat "$log"
