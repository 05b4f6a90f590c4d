#!/usr/bin/env bash
# rdmx bench --pcap on rxe between two sandbox VMs: host A runs
# `rdmx bench --server`, host B a short client run of write_simplex and read
# with --pcap (tcpdump on B's eth0). Then, on this host, tshark must find in
# B's capture the RoCEv2 opcodes of those protocols (RDMA WRITE packets,
# RDMA READ requests and responses, at least one per timed message), the
# JSON must name the file, and sandbox/run's own capture of the link
# (--pcap) must hold every WRITE packet B saw. (One host cannot be captured:
# rxe delivers traffic between its own addresses internally.)
# Usage: tests/integration/pcap_rxe.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
ITERS=20
fail() { echo "FAIL: pcap_rxe: $*"; exit 1; }

if [ "${RDMX_SANDBOX_ROLE:-}" = B ]; then # the client, inside VM B
	exec timeout 300 "$B/bin/rdmx" bench -c write_simplex,read --mode lat \
		--size 64,4K --iters "$ITERS" --warmup 2 --port 18000 \
		--pcap "$B/pcap-test/b.pcap" --json "$B/pcap-test/b.json" "$RDMX_PEER_ADDR"
fi

command -v tshark >/dev/null || fail "tshark is not installed (scripts/install-deps; Debian: tshark)"
rm -rf "$B/pcap-test"
mkdir -p "$B/pcap-test"
echo "== two hosts: rdmx bench --pcap on B, sandbox/run --pcap of the link =="
sandbox/run --hosts 2 --timeout 900 --pcap "$B/pcap-test/link.pcap" \
	--server-cmd "$B/bin/rdmx bench --server --port 18000 --size 64,4K" \
	-- "$0" "$B" || fail "the client run on B exited $?"

# opcodes FILE: "count opcode" lines of the RoCEv2 packets in FILE.
opcodes() {
	tshark -r "$1" -d udp.port==4791,infiniband -T fields -e infiniband.bth.opcode \
		2>/dev/null | sort -n | uniq -c
}
# count FILE OPCODE...: packets of FILE with any of these BTH opcodes.
count() {
	local f=$1
	shift
	opcodes "$f" | awk -v set=" $* " 'index(set, " " $2 " ") { n += $1 } END { print n + 0 }'
}
echo "B's capture (count, BTH opcode):"
opcodes "$B/pcap-test/b.pcap"
jq -e --arg f "$B/pcap-test/b.pcap" '.pcap == $f' "$B/pcap-test/b.json" >/dev/null ||
	fail "the JSON does not name the capture"
# RC opcodes: RDMA WRITE first/middle/last/only 6 7 8 10 (with immediate:
# 9 11); READ request 12, READ response first/middle/last/only 13-16.
writes=$(count "$B/pcap-test/b.pcap" 6 7 8 9 10 11)
reads=$(count "$B/pcap-test/b.pcap" 12)
responses=$(count "$B/pcap-test/b.pcap" 13 14 15 16)
[ "$writes" -ge "$ITERS" ] || fail "$writes RDMA WRITE packets (write_simplex), expected >= $ITERS"
[ "$reads" -ge "$ITERS" ] || fail "$reads RDMA READ requests (read), expected >= $ITERS"
[ "$responses" -ge "$reads" ] || fail "$responses READ responses for $reads requests"
link=$(count "$B/pcap-test/link.pcap" 6 7 8 9 10 11)
[ "$link" -ge "$writes" ] || fail "the link capture has $link WRITE packets, B's $writes"
echo "ok: B captured $writes RDMA WRITE, $reads READ request, $responses READ response packets; the link $link WRITE"
rm -rf "$B/pcap-test"
