#!/usr/bin/env bash
# The memcached front door against Debian's memcached: the same command
# script (kv_mc_script.txt) to both, the replies compared byte for byte by
# kv_mc_compare. Usage: kv_mc_compare.sh RDMX_BINARY KV_MC_COMPARE_BINARY
set -euo pipefail
rdmx=$1 cmp=$2
here=$(cd "$(dirname "$0")" && pwd)
mc=$(command -v memcached || true)
[ -x "${mc:-/usr/sbin/memcached}" ] || mc=/usr/sbin/memcached
if [ ! -x "$mc" ]; then
  echo "FAIL: memcached is not installed; 'scripts/install-deps' installs it" \
       "(Debian package memcached: apt-get install memcached)"
  exit 1
fi
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

# rdmx on a port the system picks: it prints it (the TCP door alone: --port -1
# keeps the RDMA door closed, so no RDMA device is needed).
"$rdmx" kv serve --port -1 --memcached-addr 127.0.0.1 --memcached-port 0 --capacity 1000 \
  --memory 8M >"$tmp/rdmx.log" 2>&1 &
pids+=($!)
# memcached: a free port found by trying (it exits when the port is taken).
user=()
[ "$(id -u)" -eq 0 ] && user=(-u nobody)
for try in 1 2 3 4 5 6 7 8; do
  mport=$((20000 + (RANDOM % 20000)))
  "$mc" "${user[@]}" -l 127.0.0.1 -p "$mport" -U 0 >"$tmp/mc.log" 2>&1 &
  mpid=$!
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$mport") 2>/dev/null && break 2
    kill -0 "$mpid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$mpid" 2>/dev/null || true
  mpid=
done
[ -n "${mpid:-}" ] || { echo "FAIL: memcached did not start:"; cat "$tmp/mc.log"; exit 1; }
pids+=("$mpid")
for _ in $(seq 100); do
  rport=$(sed -n 's/.*serving memcached on 127.0.0.1:\([0-9]*\),.*/\1/p' "$tmp/rdmx.log")
  [ -n "$rport" ] && break
  sleep 0.1
done
[ -n "${rport:-}" ] || { echo "FAIL: rdmx kv serve did not start:"; cat "$tmp/rdmx.log"; exit 1; }
echo "memcached $("$mc" -V 2>/dev/null | head -1) on $mport, rdmx kv on $rport"
"$cmp" "$here/kv_mc_script.txt" "$mport" "$rport"
