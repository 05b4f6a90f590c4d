/* SPDX-License-Identifier: MIT */
/*
 * write_duplex: write_simplex (read its header first: record format,
 * polling, staging, flow control are the same) in which the receiver
 * makes no outbound verbs at all on the data path: one QP carries both
 * directions, and a sender learns the receiver's head by RDMA-READing it.
 *
 * The receiver publishes the count of records it released (the contiguous
 * prefix; release order is free) in a registered 8-byte word with a
 * release store on every release that moves it; its address and rkey
 * travel in the hello. The sender keeps a cached copy and READs the word
 * only when the cached head shows too little room (ring bytes or message
 * window) - one READ in flight at a time, repeated while it waits. The
 * receiver therefore posts no SEND, WRITE or READ and keeps no receive
 * posted: while it only receives, its send and receive queues stay idle
 * (test_ring_proto checks c->posted[] and posted_recv do not move while
 * 30 laps of a ring stream in with back-pressure). The price is one READ
 * round trip on the sender each time it runs out of cached room, and the
 * receiver's CPU and HCA doing nothing for flow control.
 *
 * No deadlock: a sender waiting for room only waits for its own READ
 * completions and re-reads; whatever the receiver released is visible to
 * the next READ. An 8-byte aligned word is assumed to be read untorn (rxe
 * and HCAs read it as one unit); a count above what was sent is refused
 * as a protocol error, never trusted.
 *
 * This is the default (opts.ack RDMX_ACK_DEFAULT); opts.ack SEND makes it
 * write_simplex. Notification may be poll (default), off or rev
 * (write_ring_notify.c); RDMX_NOTIFY_IMM with ack READ is -EINVAL: it
 * would need posted receives and completions on the receiver, the very
 * thing this protocol avoids.
 */
#include "core/protocol.h"
#include "core/wire.h"
#include "write_ring.h"

/* The engine's variant: pad records at the ring's end, the head READ by the sender. */
static const struct rdmx__wring_variant duplex_variant = {
	.head_by_read = 1,
};

const struct rdmx_protocol_ops rdmx__proto_write_duplex =
	RDMX__WRING_OPS("write_duplex", RDMX__PROTO_WRITE_DUPLEX, &duplex_variant);
