#!/usr/bin/env bash
# rdmx bench --pcap on the device, stopped by Ctrl-C: SIGINT to the whole
# process group (rdmx and its tcpdump, as a terminal sends it) mid-test; rdmx
# exits 130, tcpdump is gone and its file is a valid capture, the JSON names
# it, and the self-test's note says why it holds no packet (one host: rxe
# loopback). The packets themselves: pcap_rxe.sh (two hosts).
# Usage: pcap_self.sh RDMX_BINARY
set -euo pipefail
rdmx=$1
dir=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || kill -KILL -- -"$pid" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/err" 2>/dev/null; exit 1; }
command -v tcpdump >/dev/null || { echo "skipped: tcpdump not installed"; exit 0; }

setsid "$rdmx" bench -c send_recv --mode lat --size 64 --duration 60 \
	--pcap "$dir/s.pcap" --json "$dir/s.json" >"$dir/out" 2>"$dir/err" &
pid=$!
# until the capture runs and a test is under way (bounded: 120 s)
for _ in $(seq 1200); do
	grep -q capturing "$dir/err" && [ -s "$dir/s.pcap" ] && break
	kill -0 "$pid" 2>/dev/null || fail "rdmx bench ended before the signal"
	sleep 0.1
done
grep -q capturing "$dir/err" || fail "no capture started within 120 s"
sleep 1
kill -INT -- -"$pid"
set +e
timeout 60 tail --pid="$pid" -f /dev/null
wait "$pid"
rc=$?
set -e
pid=
[ "$rc" -eq 130 ] || fail "exit status $rc after SIGINT, expected 130"
! pgrep -f "$dir/s.pcap" >/dev/null || fail "tcpdump still runs after rdmx ended"
tcpdump -r "$dir/s.pcap" -c 1 >/dev/null 2>&1 || fail "the capture is not a readable pcap file"
grep -q "packets\? captured on" "$dir/err" || fail "no packet count on stderr"
grep -q "delivers internally" "$dir/err" || fail "no note on the self-test's loopback"
jq -e --arg f "$dir/s.pcap" '.pcap == $f' "$dir/s.json" >/dev/null || fail "the JSON does not name the capture"
echo "ok: bench --pcap stopped by SIGINT: exit 130, capture closed, JSON names it"
