/* SPDX-License-Identifier: MIT */
/*
 * write_simplex: every message is ONE RDMA WRITE into a ring the receiver
 * owns, and the receiver reads it there in place (zero copy both ways).
 *
 * Each side of a connection has a receive ring of opts.ring_size bytes
 * (a power of two that must hold two records of max_msg; -EINVAL
 * otherwise) registered for remote WRITE; its address, rkey, size and the
 * seed of its record stamps travel in the hello block, and ring_size and
 * notify must be equal on both sides (the reject names what differs).
 * rdmx_msg_alloc hands out the payload spot of the next record in a
 * registered staging ring that mirrors the peer's ring, rdmx_send writes
 * the record header (length, flags, the user's immediate data, a stamp)
 * and footer around it and posts one WRITE of header+payload+footer to the
 * same offset of the peer's ring. One buffer from rdmx_msg_alloc may be
 * outstanding at a time (a second call is -EBUSY).
 *
 * A record that would cross the end of the ring skips to its start: a
 * 16-byte pad record (its own small unsignaled WRITE, posted with the
 * record's) fills the rest of the lap. rdmx__wring_stats() counts the pads
 * and the bytes they waste; write_magic avoids them.
 *
 * Notification. By default (RDMX_NOTIFY_POLL) the receiver polls the
 * record at its head: the header stamp and the footer stamp (the record's
 * last 8 bytes) are hashes of the record's 64-bit ring offset, so bytes of
 * an earlier lap never match, and a record is complete when both match.
 * The receiver thus needs no receive WQEs and no completion queue on its
 * data path, and a WRITE costs the receiver's HCA no CQE and its CPU no
 * poll_cq: the cheapest receive there is. The stamps are read with acquire
 * loads, the header's before its length is trusted and the footer's before
 * the payload is read. This assumes a WRITE's bytes are placed in
 * increasing address order (the footer last): rxe and real HCAs do so,
 * the InfiniBand specification does not promise it. With
 * RDMX_NOTIFY_IMM the WRITE is a WRITE_WITH_IMM: the receiver keeps
 * recv_depth zero-payload receives posted and takes a record when its
 * receive completes, which does not depend on placement order (the
 * completion guarantees the whole WRITE landed). The user's immediate
 * data always travels in the record header, in every mode. Two more:
 * RDMX_NOTIFY_OFF chains an inline WRITE of the new tail into a word the
 * receiver polls, RDMX_NOTIFY_REV lays records downward with a trailing
 * valid byte (src/protocols/write_ring_notify.c). opts.ack READ has the
 * sender READ the receiver's head instead of the SENDs below
 * (write_duplex's flow control).
 *
 * Flow control (details and the no-deadlock argument in write_ring_conn.c):
 * the receiver returns its head, as a count of records released, with a
 * SEND into one of 16 buffers the sender keeps posted - batched, only when
 * a quarter of the ring or half the message window was released since the
 * last update, or when the sender asked for it by writing the count it
 * needs into the receiver's ask word because its cached head showed too
 * little room. Messages may be released in any order; the head moves over
 * the contiguous released prefix. A full peer ring makes rdmx_msg_alloc
 * wait up to its timeout (-EAGAIN with 0, -ETIMEDOUT after); nothing is
 * ever overwritten or dropped. rdmx_flush waits for the local completions
 * of the WRITEs.
 *
 * Verbs per message: sender 1 WRITE (+1 pad WRITE per lap), 1 CQE;
 * receiver none (poll) or 1 receive + CQE (IMM); plus one 8-byte SEND per
 * quarter ring released.
 */
#include "core/protocol.h"
#include "core/wire.h"
#include "write_ring.h"

/* The engine's variant: pad records at the ring's end, head updates by SEND. */
static const struct rdmx__wring_variant simplex_variant = {
	.double_map = 0,
	.head_by_read = 0,
};

const struct rdmx_protocol_ops rdmx__proto_write_simplex =
	RDMX__WRING_OPS("write_simplex", RDMX__PROTO_WRITE_SIMPLEX, &simplex_variant);
