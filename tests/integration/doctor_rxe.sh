#!/usr/bin/env bash
# rdmx doctor on the RDMA device under test: no check fails on a healthy
# set-up; with a pingpong server on the device's address, the route and
# the round trip pass; with nothing listening, the round trip fails naming
# the server to start. In the sandbox VM only (RDMX_SANDBOX=1), the set-up
# is then broken on purpose and restored: the netdev's IPv4 address removed
# (only link-local GIDs left) and its MTU lowered to 576; each makes doctor
# fail naming the fix.
# Usage: doctor_rxe.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
addr=${RDMX_TEST_ADDR:-${RDMX_SANDBOX_ADDR:-}}
[ -n "$addr" ] || { echo "doctor_rxe: set RDMX_TEST_ADDR (or run in sandbox/run)" >&2; exit 1; }
out=$(mktemp)
spid=
restore=()
cleanup() {
  [ -z "$spid" ] || kill "$spid" 2>/dev/null || true
  for cmd in "${restore[@]}"; do eval "$cmd" || true; done
  rm -f "$out" "$out.srv"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

# doctor ARGS...: run it into $out, return its status.
doctor() { set +e; "$rdmx" doctor "$@" >"$out" 2>&1; local rc=$?; set -e; return $rc; }

doctor || fail "doctor failed on a healthy set-up"
grep -q '^fail' "$out" && fail "a fail line on a healthy set-up"
grep -q '^ok    gid .*RoCEv2' "$out" || fail "no RoCEv2 GID reported"
grep -q '^ok    isolation .*memory windows' "$out" || fail "rxe's memory windows not reported"
doctor --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["fail"] == 0 and d["ok"] >= 5, d' "$out" \
  || fail "--json is not valid or disagrees"
echo "ok: healthy set-up, no failure"; cat "$out"

port=$((20000 + $$ % 20000))
"$rdmx" pingpong --server --port "$port" "$addr" >"$out.srv" 2>&1 &
spid=$!
for _ in $(seq 100); do grep -q listening "$out.srv" && break; sleep 0.1; done
doctor --port "$port" "$addr" || fail "doctor against a pingpong server"
grep -q "^ok    route .*resolves via" "$out" || fail "no route line"
grep -q "^ok    pingpong .*and back in" "$out" || fail "no round trip"
echo "ok: route and round trip to a pingpong server"
wait "$spid" || true
spid=
if doctor --port $((port + 1)) --timeout 2000 "$addr"; then fail "doctor passed with nothing listening"; fi
grep -A1 '^fail  pingpong' "$out" | grep -q "fix: start 'rdmx pingpong --server'" \
  || fail "the round-trip failure does not name the fix"
echo "ok: nothing listening fails, naming the server to start"

[ "${RDMX_SANDBOX:-}" = 1 ] && [ "${RDMX_SANDBOX_ROLE:-}" != native ] || { echo "not in the sandbox VM: the set-up is not broken on purpose"; exit 0; }
dev=$(ip -4 -o addr show | awk -v a="$addr" '{ split($4, p, "/"); if (p[1] == a) { print $2, $4; exit } }')
netdev=${dev% *}; cidr=${dev#* }
[ -n "$netdev" ] || fail "no netdev carries $addr"

# broken WHAT BREAK RESTORE FAIL_RE FIX_RE: break the set-up; doctor must
# fail (a line matching FAIL_RE) naming the fix (FIX_RE); then restore it.
broken() {
  local what=$1 brk=$2 fix=$3 fail_re=$4 fix_re=$5
  eval "$brk"; restore+=("$fix"); sleep 1
  if doctor; then fail "doctor passed with $what"; fi
  grep -q "$fail_re" "$out" || fail "no failure for $what"
  grep -q "$fix_re" "$out" || fail "the failure for $what does not name the fix"
  echo "ok: $what fails, naming the fix"; grep -A1 '^fail' "$out"
  eval "$fix"; restore=(); sleep 1
}
broken "no IPv4 address on $netdev (the GID broken)" "ip addr del $cidr dev $netdev" \
  "ip addr add $cidr dev $netdev" '^fail  gid .*no routable GID' \
  "fix: give $netdev an IPv4 address: ip addr add"
mtu=$(cat "/sys/class/net/$netdev/mtu")
broken "MTU 576 on $netdev" "ip link set dev $netdev mtu 576" \
  "ip link set dev $netdev mtu $mtu" '^fail  mtu ' "fix: ip link set dev $netdev mtu 1500"
doctor || fail "doctor fails after the set-up was restored"
echo "ok: restored"
