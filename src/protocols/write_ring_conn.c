/* SPDX-License-Identifier: MIT */
/*
 * The engine of the single-sender ring protocols (see write_ring.h and the
 * headers of write_simplex.c, write_magic.c and write_duplex.c).
 *
 * Each side owns a receive ring (opts.ring_size bytes, registered for
 * remote WRITE) and a staging ring of the same size that mirrors the
 * peer's receive ring byte for byte: the record for peer offset o is built
 * at staging[o & mask] - the user writes the payload there in place
 * (rdmx_msg_alloc hands out that spot), rdmx_send adds header and footer
 * around it and ONE RDMA WRITE copies header+payload+footer to the same
 * offset of the peer's ring. A staging byte is reused only once the WRITE
 * that read it completed locally (tracked by `done`) and the peer released
 * the record there (tracked by `head`).
 *
 * Flow control. Two limits bound what a sender may write: bytes (its
 * tail may run at most ring_size ahead of the peer's released head) and
 * messages (at most win records not yet released: the message window,
 * peer recv_depth + own send_depth; with notify IMM every message needs a
 * posted receive, so there win is the peer's recv_depth, what it posts). The receiver reports its head as a count
 * of records released (a contiguous prefix; out-of-order releases wait
 * for the gap to close); the sender turns a count into a byte offset with
 * its table of record end offsets (`ends`, win + 1 entries).
 *
 * How the count travels (opts.ack; the protocol gives the default):
 *  - ack SEND (write_simplex/magic): the receiver SENDs it (8 bytes, into one of the
 *    N_CTRL buffers the sender keeps posted) when the released bytes since
 *    the last update reach ring_size / 4, or the released records reach
 *    win / 2, or when asked. One update is in flight at a time; more are
 *    coalesced (a count is absolute, the latest wins). A sender whose
 *    cached head shows too little room ASKS: it RDMA-WRITEs into the
 *    receiver's ask word the smallest count T that would make room.
 *  - ack READ (write_duplex): the receiver stores the count in a registered word
 *    (release store); a blocked sender RDMA-READs it. The receiver posts
 *    nothing at all on the data path.
 *
 * No deadlock when a sender waits for room (simplex/magic). The sender
 * waits on two things only: completions of its own WRITEs (the hardware
 * delivers them without the peer's software), and a count >= T. It asks
 * for T (T <= records sent) before it waits, and re-asks for a larger T
 * only. The receiver checks the ask word in every call on the connection
 * (recv, wait loops, release, alloc, send, flush) and sends an update as
 * soon as released >= ask; releasing every message it received makes
 * released reach the sender's count, hence T. Its update goes out at once
 * unless one is in flight, and that one completes by hardware (the sender
 * keeps N_CTRL receives posted and reposts them in every poll of its own
 * wait loop). So as long as the receiving application keeps receiving and
 * releasing, a blocked sender is always answered; if it holds messages,
 * the sender waits for exactly those and times out cleanly.
 *
 * Sleeping receivers (notify POLL, OFF or REV). A record lands in the
 * ring by RDMA WRITE and makes no completion at the receiver, so a wait
 * that sleeps in the kernel (wait modes block and adaptive) must be woken
 * by the sender. Before it sleeps on its wait set, the receiver WRITEs
 * its sleep count (gen, +1 per sleep) into the sender's ctl.sleep_gen
 * (ops->sleep_announce), waits for that WRITE to complete (it is then in
 * the sender's memory) and polls its ring once more; the sender reads
 * sleep_gen once after every record WRITE and every ask it posts, and
 * again when a record WRITE completes (it is then in the receiver's
 * memory), and when it holds a count it has not rung for, posts a 0-byte
 * SEND (the doorbell): it lands in one of the receiver's N_CTRL receives
 * (posted for updates with ack SEND, for doorbells alone with ack READ),
 * after the WRITEs before it (RC order), and its completion wakes the
 * receiver, which reposts it. One doorbell per sleep at most; a doorbell
 * for a sleep that ended is a spurious wake. No record is missed: either
 * the record was placed before the count (the last poll sees it) or the
 * sender's read at the record's completion sees the count - as long as
 * the sender takes that completion, i.e. keeps calling or waiting on its
 * connection (a wait of its own sleeps on the send CQ too), which
 * rdmx_conn_fd's contract asks of it. Otherwise the receiver wakes at the
 * next record or the wait set's backstop (RDMX__WAIT_BACKSTOP_MS). With
 * ack READ, a sender out of room READs the head in timed parks (no
 * completion tells it of a release). The doorbell is write_ring_notify.c's.
 *
 * Bursts (rdmx_send_flags RDMX_SEND_MORE, notify POLL): place() stages a
 * record as send does, push_held() posts what is staged in one WRITE (the
 * send side is write_ring_send.c); see write_ring_burst.h. The other notify modes post each record as it is
 * sent (IMM: one completion per record; OFF and REV: the tail word and the
 * pre-clear belong to one record), and count it in the burst's FIFO too,
 * so that sends_done has one count for every mode.
 *
 * Wait loops all go through rdmx__conn_wait(), which sees the peer leave;
 * WRITEs to a peer that left fail with a retry error: never a hang.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/doorbell.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/opts.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/qp.h"
#include "core/ring.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "write_ring_priv.h"

#define BLOCK_LEN 40 /* fits the connect private data (56 bytes) */

/* Message handles (core/msg.h): a SEND handle's value is the alloc id,
 * a RECV handle's the record's sequence number. */

#define HELLO_MAGIC 0x1

/* The variant a table of this engine describes (its .family). */
static const struct rdmx__wring_variant *variant_of(const struct rdmx_protocol_ops *proto)
{
	return proto->family;
}

/* A connection of this engine: its table runs rdmx__wring_setup(). */
static int is_wring(const rdmx_conn *c)
{
	return c && c->proto->conn->setup == rdmx__wring_setup;
}

int rdmx__wring_stats(const rdmx_conn *c, struct rdmx__wring_stats *out)
{
	if (!is_wring(c) || !out)
		return -EINVAL;
	*out = wr_of(c)->st;
	out->coalesced = wr_of(c)->burst.writes;
	out->split = wr_of(c)->burst.splits;
	return 0;
}

/* ---------------------------------------------------------------- setup */

static int map_rings(rdmx_conn *c, int magic)
{
	struct wring *p = wr_of(c);
	size_t size = c->opts.ring_size, span = magic ? 2 * size : size;
	int rc;

	p->ring = rdmx__ring_map(size, magic);
	p->stage = p->ring ? rdmx__ring_map(size, magic) : NULL;
	if (!p->stage)
		return -ENOMEM;
	p->local_magic = magic;
	rc = c->f->reg_mr(c->ep, p->ring, span,
			  RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE, &p->ring_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->stage, span, RDMX__ACCESS_LOCAL,
				  &p->stage_mr);
	return rc;
}

static void unmap_rings(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	size_t size = c->opts.ring_size;

	if (p->stage_mr)
		c->f->dereg_mr(p->stage_mr);
	if (p->ring_mr)
		c->f->dereg_mr(p->ring_mr);
	p->stage_mr = p->ring_mr = NULL;
	rdmx__ring_unmap(p->stage, size, p->local_magic);
	rdmx__ring_unmap(p->ring, size, p->local_magic);
	p->stage = p->ring = NULL;
}

/*
 * write_magic: try the double mapping; if the mapping or its registration
 * is refused, fall back to skipping to the lap start (pad records) and
 * leave the reason in the connection's error text.
 */
static int make_rings(rdmx_conn *c)
{
	char why[RDMX__ERRMSG_LEN];

	if (!variant_of(c->proto)->double_map)
		return map_rings(c, 0);
	if (!map_rings(c, 1))
		return 0;
	snprintf(why, sizeof(why), "%s", rdmx__last());
	unmap_rings(c);
	rdmx__failo(&c->err, -EOPNOTSUPP,
		    "write_magic: double-mapped ring refused (%s); records skip to the ring start instead",
		    why);
	return map_rings(c, 0);
}

uint64_t rdmx__wring_mem_estimate(const rdmx_conn *c)
{
	uint64_t span = (uint64_t)c->opts.ring_size *
			(variant_of(c->proto)->double_map ? 2 : 1);

	return 2 * span + 4096; /* ring, stage; ctl words fit a page */
}

static int make_ctl(rdmx_conn *c)
{
	struct wring *p = wr_of(c);

	p->ctl_len = sizeof(struct ctl) + (size_t)p->nrecv * sizeof(p->ctl->rbuf[0]);
	p->ctl = rdmx__alloc_buf(p->ctl_len);
	if (!p->ctl)
		return rdmx__fail(-ENOMEM, "%s: out of memory for control words",
				  c->proto->name);
	p->ctl->tail = rdmx__cword(0); /* notify OFF: nothing yet */
	return c->f->reg_mr(c->ep, p->ctl, p->ctl_len,
			    RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE |
			    RDMX__ACCESS_READ, &p->ctl_mr);
}

static int create_queues(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	/* a receive completion wakes a sleeping receiver: with notify IMM
	 * one per record; with POLL, OFF or REV the doorbell of "Sleeping
	 * receivers" above. A record posts up to WRING_WRS_MAX requests, its
	 * last one signaled. */
	struct rdmx__qp_want w = {
		.send_wr = WRING_WRS_MAX * c->opts.send_depth + 8,
		.send_cqe = c->opts.send_depth + 8,
		.recv_wr = p->nrecv ? p->nrecv : 1,
	};

	return rdmx__qp_make(c, &w);
}

/* Options this engine cannot work with: -EINVAL with the reason. */
int rdmx__wring_check_opts(const struct rdmx_protocol_ops *proto,
			   const struct rdmx_conn_opts *o, uint32_t max_msg)
{
	uint64_t rec = rdmx__ring_rec_size(max_msg);
	int rc = rdmx__check_ring_opts(o);

	if (rc)
		return rc;
	if (max_msg && 2 * rec > o->ring_size)
		return rdmx__fail(-EINVAL, "%s: ring_size %u cannot hold two records of max_msg_size %u (needs %llu bytes)",
				  proto->name, o->ring_size, max_msg,
				  (unsigned long long)(2 * rec));
	return rdmx__wring_check_variant(proto, o);
}

int rdmx__wring_setup(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	int rc;

	p->ack_read = rdmx__wring_ack_of(c->proto, &c->opts) == RDMX_ACK_READ;
	p->notify = rdmx__wring_notify_of(&c->opts);
	p->imm = p->notify == RDMX_NOTIFY_IMM;
	p->rseed = rdmx__ring_seed();
	p->nrecv = N_CTRL; /* updates (ack SEND) and doorbells */
	if (p->imm) /* one receive per message of the window */
		p->nrecv += c->opts.recv_depth;
	rc = make_rings(c);
	if (!rc)
		rc = make_ctl(c);
	if (!rc)
		rc = create_queues(c);
	for (uint32_t i = 0; !rc && i < p->nrecv; i++)
		rc = rdmx__wring_post_ctrl_recv(c, i);
	if (!rc)
		rc = rdmx__wburst_init(&p->burst, p->notify == RDMX_NOTIFY_POLL &&
				       c->opts.coalesce != RDMX_COALESCE_OFF,
				       c->opts.ring_size, c->opts.send_depth);
	if (!rc && p->notify >= RDMX_NOTIFY_OFF && c->max_inline < sizeof(uint64_t))
		rc = rdmx__fail(-EOPNOTSUPP, "%s: notify %s needs inline WRITEs, which this device refused",
				c->proto->name, rdmx__wring_notify_name(p->notify));
	p->st.imm = p->imm;
	p->st.notify = p->notify;
	p->st.ack_read = p->ack_read;
	return rc;
}

void rdmx__wring_teardown(rdmx_conn *c)
{
	struct wring *p = wr_of(c);

	if (p->ctl_mr)
		c->f->dereg_mr(p->ctl_mr);
	unmap_rings(c);
	free(p->ctl);
	free(p->ends);
	rdmx__ring_rel_free(&p->rel);
	rdmx__wburst_free(&p->burst); /* what is held is dropped */
}

/* ---------------------------------------------------------------- hello */

/*
 * The block (40 bytes, both directions):
 *   0 u64 receive ring address     8 u32 its rkey    12 u32 ring size
 *  16 u64 stamp seed of the ring  24 u64 control words address
 *  32 u32 their rkey              36 u16 send_depth
 *  38 u8 notify (enum rdmx_notify) in bits 0-3, ack (enum rdmx_ack; 0:
 *        the protocol's default) in bits 4-7
 *  39 u8 flags (HELLO_MAGIC: both rings of this side are double-mapped)
 */
int rdmx__wring_hello_out(rdmx_conn *c, uint8_t *b, size_t cap, size_t *len)
{
	struct wring *p = wr_of(c);

	if (cap < BLOCK_LEN)
		return rdmx__fail(-EMSGSIZE, "%s: no room for the hello block",
				  c->proto->name);
	rdmx__put_u64(b, (uintptr_t)p->ring);
	rdmx__put_u32(b + 8, p->ring_mr->rkey);
	rdmx__put_u32(b + 12, c->opts.ring_size);
	rdmx__put_u64(b + 16, p->rseed);
	rdmx__put_u64(b + 24, (uintptr_t)p->ctl);
	rdmx__put_u32(b + 32, p->ctl_mr->rkey);
	rdmx__put_u16(b + 36, (uint16_t)c->opts.send_depth);
	b[38] = (uint8_t)(p->notify | (p->ack_read ? RDMX_ACK_READ : RDMX_ACK_SEND) << 4);
	b[39] = p->local_magic ? HELLO_MAGIC : 0;
	*len = BLOCK_LEN;
	return 0;
}

/* What the peer's block says must match ours. */
static int hello_check(rdmx_conn *c, const uint8_t *b, size_t len)
{
	struct wring *p = wr_of(c);
	uint8_t notify = b[38] & 0xf, ack = b[38] >> 4;
	uint32_t size;

	if (len != BLOCK_LEN)
		return rdmx__fail(-EPROTO, "%s: protocol block of %zu bytes, expected %u",
				  c->proto->name, len, BLOCK_LEN);
	size = rdmx__get_u32(b + 12);
	if (size != c->opts.ring_size)
		return rdmx__fail(-EPROTO, "%s: ring_size mismatch: this side %u, peer %u",
				  c->proto->name, c->opts.ring_size, size);
	if (notify != p->notify)
		return rdmx__fail(-EPROTO, "%s: notify mismatch: this side %s, peer %s",
				  c->proto->name, rdmx__wring_notify_name(p->notify),
				  rdmx__wring_notify_name(notify));
	if (!ack)
		ack = variant_of(c->proto)->head_by_read ? RDMX_ACK_READ : RDMX_ACK_SEND;
	if (ack != (p->ack_read ? RDMX_ACK_READ : RDMX_ACK_SEND))
		return rdmx__fail(-EPROTO, "%s: ack mismatch: this side %s, peer %s",
				  c->proto->name, p->ack_read ? "read" : "send",
				  rdmx__wring_ack_name(ack));
	if (!rdmx__get_u16(b + 36))
		return rdmx__fail(-EPROTO, "%s: peer send_depth 0", c->proto->name);
	return 0;
}

int rdmx__wring_hello_in(rdmx_conn *c, const uint8_t *b, size_t len)
{
	struct wring *p = wr_of(c);
	int magic, rc = hello_check(c, b, len);

	if (rc)
		return rc;
	p->peer_ring = rdmx__get_u64(b);
	p->peer_ring_rkey = rdmx__get_u32(b + 8);
	p->sseed = rdmx__get_u64(b + 16);
	p->peer_ctl = rdmx__get_u64(b + 24);
	p->peer_ctl_rkey = rdmx__get_u32(b + 32);
	magic = p->local_magic && (b[39] & HELLO_MAGIC);
	rdmx__ring_geo_init(&p->rgeo, c->opts.ring_size, magic);
	rdmx__ring_geo_init(&p->sgeo, c->opts.ring_size, magic);
	p->st.magic = magic;
	p->win_out = c->peer_recv_depth + (p->imm ? 0 : c->opts.send_depth);
	p->win_in = c->opts.recv_depth + (p->imm ? 0 : rdmx__get_u16(b + 36));
	p->ends = calloc(p->win_out + 1, sizeof(*p->ends));
	if (!p->ends || rdmx__ring_rel_init(&p->rel, p->win_in))
		return rdmx__fail(-ENOMEM, "%s: out of memory for %u+%u records",
				  c->proto->name, p->win_out, p->win_in);
	return 0;
}

