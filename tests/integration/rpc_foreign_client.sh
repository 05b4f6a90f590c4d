#!/usr/bin/env bash
# A foreign rdma_cm client (rping) that connects to an rdmx RPC server is
# rejected, for every transport (msg, rfp, herd): rping fails, the server
# lives on, an rdmx RPC client is served after it, and the server counts
# no client for the foreign one.
# Usage: rpc_foreign_client.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
addr=${RDMX_TEST_ADDR:-${RDMX_SANDBOX_ADDR:-}}
[ -n "$addr" ] || { echo "rpc_foreign_client: set RDMX_TEST_ADDR (or run in sandbox/run)" >&2; exit 1; }
log=$(mktemp)
spid=
trap '[ -z "$spid" ] || kill "$spid" 2>/dev/null || true; rm -f "$log"' EXIT

port=$((20000 + $$ % 20000))
for t in msg rfp herd; do
  port=$((port + 1))
  # --tx-depth (the window): rfp's and herd's slots per client, the call's window at most
  "$rdmx" rpc --transport "$t" --port "$port" --tx-depth 4 serve "$addr" >"$log" 2>&1 &
  spid=$!
  for _ in $(seq 100); do grep -q serving "$log" && break; sleep 0.1; done
  grep -q serving "$log" || { echo "FAIL: $t server did not start:"; cat "$log"; exit 1; }

  if timeout 30 rping -c -a "$addr" -p "$port" -C 1 -v; then
    echo "FAIL: rping was served by an rdmx rpc server ($t)"; exit 1
  fi
  kill -0 "$spid" || { echo "FAIL: the $t server died after the foreign client"; cat "$log"; exit 1; }
  echo "ok: rping was rejected ($t)"

  timeout 120 "$rdmx" rpc --transport "$t" --port "$port" --iters 200 --size 1000 --tx-depth 4 call "$addr"
  kill -INT "$spid"
  timeout 30 tail --pid="$spid" -f /dev/null || { echo "FAIL: $t server did not exit"; exit 1; }
  wait "$spid"
  spid=
  grep -q "served 200 calls for 1 clients (0 refused, 0 dropped" "$log" ||
    { echo "FAIL: $t server's counts:"; cat "$log"; exit 1; }
  echo "ok: rdmx rpc client served after the rejection ($t):"
  cat "$log"
done
