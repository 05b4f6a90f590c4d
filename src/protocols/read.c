/* SPDX-License-Identifier: MIT */
/*
 * read: the receiver pulls. For large messages: the payload never crosses
 * the receiver's receive queue, it is fetched with one RDMA READ straight
 * into a receive buffer, and the sender's buffer is zero copy both ways.
 * Both directions run on one RC connection; each side is sender and
 * receiver.
 *
 * Sender: send_depth buffers of max_msg bytes, registered for remote READ
 * (the core's send pool, core/sendpool.h, holding a slot until its ack);
 * the user fills one in place (rdmx_msg_alloc). rdmx_send posts one small
 * signaled SEND carrying a 32-byte descriptor (below). The buffer stays
 * the sender's until the receiver acknowledges it.
 *
 * Receiver: posts desc_depth receives for descriptors. For each descriptor,
 * in arrival order, it takes one of its recv_depth receive buffers, posts
 * an RDMA READ of the payload into it and, once the READ completed,
 * acknowledges: an RDMA WRITE of the descriptor's generation into the
 * sender's ack slot for that buffer (u64 per send buffer; address and rkey
 * come in the hello block). The receive buffer is handed to the user in
 * place and reused on rdmx_msg_release. Messages are delivered in the order
 * their descriptors arrived, whatever order READ completions are seen in.
 *
 * Why the ack is a WRITE and not a SEND: it needs no receive posted on the
 * sender (no RNR, no receive buffers, no credits for acks), it does not mix
 * with the peer's descriptors in the sender's receive queue (which would
 * break their in-order delivery and the credit count), and the sender polls
 * its ack word (acquire load) only when it waits for a buffer. The
 * generation (per-buffer use count, never 0) makes a stale ack harmless.
 * Acks go behind the data: a message's ack is posted at the receiver's next
 * call after rdmx_recv handed it out (after the SEND of an rdmx_send, in
 * rdmx_msg_release, or when a wait finds nothing to do), so a reply is not
 * queued behind the ack of the request it answers.
 *
 * Eager payloads: a payload of at most the receiver's eager_max (its
 * opts.eager_max, 1 KiB by default, or max_msg if smaller; announced in
 * the hello; 0 turns eager off) travels in the same SEND, right after
 * the descriptor (the descriptor sits just before the payload in every send
 * buffer, so one SGE covers both). The receiver copies it into a receive
 * buffer and acknowledges as for a READ. Small messages thus cost one SEND
 * and no round trip; and they are in the receiver's memory as soon as the
 * SEND completed, so a sender may flush and close and the receiver still
 * gets them (a READ needs the sender to be alive until the ack).
 *
 * Flow control: a side holds up to desc_depth = max(recv_depth, send_depth)
 * descriptors it has not acknowledged yet (a receive posted for each) and
 * says so in its hello. A sender never has more descriptors unacknowledged
 * than that (its credits; a credit comes back with the ack), and
 * rdmx_msg_alloc reserves one, so every descriptor finds a receive posted:
 * no RNR in any state, nothing queued on the sender. Back-pressure is
 * rdmx_msg_alloc waiting (-ETIMEDOUT, -EAGAIN for timeout 0) for a buffer
 * that is both free and covered by a credit. A receiver whose buffers are
 * all held by the user leaves descriptors waiting (acknowledged later);
 * nothing is overwritten or dropped.
 *
 * READ depth: both sides ask rdma_cm for READ_DEPTH outstanding READs
 * (initiator depth and responder resources, clamped to the device), and
 * advertise it; a receiver keeps at most min(own, peer's) READs in flight
 * and leaves further descriptors waiting in its queue.
 *
 * Completion model: rdmx_flush returns once every message sent is in the
 * receiver's memory: a READ message when its ack arrived (so flushing needs
 * the receiver to be calling rdmx_recv, rdmx_msg_alloc or rdmx_flush), an
 * eager one when its SEND completed. A sender that closes with READ
 * messages unacknowledged loses them.
 *
 * Descriptor (32 bytes, little-endian), the head of every SEND:
 *   0  u8  type: 1 READ (payload in the sender), 2 EAGER (payload follows)
 *   1  u8  flags: bit 0 = imm valid (RDMX_MSG_IMM)
 *   2  u16 sender buffer index (= ack slot)
 *   4  u32 generation of that buffer (never 0)
 *   8  u64 READ: payload address in the sender; EAGER: 0
 *  16  u32 READ: rkey of the sender's buffers; EAGER: 0
 *  20  u32 payload length
 *  24  u32 immediate data
 *  28  u32 reserved, 0
 *
 * Hello block (24 bytes, little-endian, same in request and reply):
 *   0  u8  block version (1)
 *   1  u8  READs this side answers at once (rd_atomic)
 *   2  u16 desc_depth: descriptors this side can hold (peer's credits)
 *   4  u16 send_depth: send buffers = entries in the ack array
 *   6  u16 eager_max: largest payload carried in a descriptor
 *   8  u32 rkey of the ack array
 *  12  u32 reserved, 0
 *  16  u64 address of the ack array (u64 LE generation per send buffer)
 *
 * Files, bottom first: this one (the wire formats, read.h), then those
 * listed in read_priv.h, up to read_conn.c (set-up, hello, the tables).
 */
#include <errno.h>

#include "core/errors.h"
#include "core/wire.h"
#include "protocols/read.h"

#define DEPTH_MAX 16384u

/* ----------------------------------------------------------- wire formats */

void rdmx__read_desc_encode(const struct rdmx__read_desc *d, uint8_t *b)
{
	b[0] = d->type;
	b[1] = d->flags;
	rdmx__put_u16(b + 2, d->slot);
	rdmx__put_u32(b + 4, d->gen);
	rdmx__put_u64(b + 8, d->addr);
	rdmx__put_u32(b + 16, d->rkey);
	rdmx__put_u32(b + 20, d->len);
	rdmx__put_u32(b + 24, d->imm);
	rdmx__put_u32(b + 28, 0);
}

int rdmx__read_desc_decode(const uint8_t *b, struct rdmx__read_desc *d)
{
	d->type = b[0];
	d->flags = b[1];
	d->slot = rdmx__get_u16(b + 2);
	d->gen = rdmx__get_u32(b + 4);
	d->addr = rdmx__get_u64(b + 8);
	d->rkey = rdmx__get_u32(b + 16);
	d->len = rdmx__get_u32(b + 20);
	d->imm = rdmx__get_u32(b + 24);
	if (d->type != RDMX__READ_DESC_READ && d->type != RDMX__READ_DESC_EAGER)
		return rdmx__fail(-EPROTO, "read: descriptor of unknown type %u", d->type);
	if (d->flags & ~RDMX__READ_DESC_IMM)
		return rdmx__fail(-EPROTO, "read: descriptor with unknown flags 0x%x", d->flags);
	if (rdmx__get_u32(b + 28))
		return rdmx__fail(-EPROTO, "read: descriptor with reserved bytes set");
	if (!d->gen)
		return rdmx__fail(-EPROTO, "read: descriptor with generation 0");
	return 0;
}

void rdmx__read_hello_encode(const struct rdmx__read_hello *h, uint8_t *b)
{
	b[0] = h->version;
	b[1] = h->rd_atomic;
	rdmx__put_u16(b + 2, h->desc_depth);
	rdmx__put_u16(b + 4, h->send_depth);
	rdmx__put_u16(b + 6, h->eager_max);
	rdmx__put_u32(b + 8, h->ack_rkey);
	rdmx__put_u32(b + 12, 0);
	rdmx__put_u64(b + 16, h->ack_addr);
}

/* The values a peer must have for this side to talk to it. */
static int hello_check(const struct rdmx__read_hello *h)
{
	if (!h->desc_depth || h->desc_depth > DEPTH_MAX)
		return rdmx__fail(-EPROTO, "read: peer can hold %u descriptors (1..%u)",
				  h->desc_depth, DEPTH_MAX);
	if (!h->send_depth || h->send_depth > DEPTH_MAX)
		return rdmx__fail(-EPROTO, "read: peer has %u send buffers (1..%u)",
				  h->send_depth, DEPTH_MAX);
	if (!h->rd_atomic)
		return rdmx__fail(-EPROTO, "read: peer answers no RDMA READ (rd_atomic 0)");
	if (!h->ack_addr)
		return rdmx__fail(-EPROTO, "read: peer sent no ack array address");
	return 0;
}

int rdmx__read_hello_decode(const uint8_t *b, size_t len,
			    struct rdmx__read_hello *h)
{
	if (len != RDMX__READ_HELLO_SIZE)
		return rdmx__fail(-EPROTO, "read: peer's hello block is %zu bytes, this side expects %d",
				  len, RDMX__READ_HELLO_SIZE);
	h->version = b[0];
	if (h->version != RDMX__READ_HELLO_VERSION)
		return rdmx__fail(-EPROTO, "read: hello block version mismatch: peer %u, this side %u",
				  h->version, RDMX__READ_HELLO_VERSION);
	if (rdmx__get_u32(b + 12))
		return rdmx__fail(-EPROTO, "read: peer's hello block has reserved bytes set");
	h->rd_atomic = b[1];
	h->desc_depth = rdmx__get_u16(b + 2);
	h->send_depth = rdmx__get_u16(b + 4);
	h->eager_max = rdmx__get_u16(b + 6);
	h->ack_rkey = rdmx__get_u32(b + 8);
	h->ack_addr = rdmx__get_u64(b + 16);
	return hello_check(h);
}
