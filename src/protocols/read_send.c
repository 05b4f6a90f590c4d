/* SPDX-License-Identifier: MIT */
/*
 * The read protocol's send side (the design is at the top of read.c):
 * a descriptor in front of each message, SENT; the send pool's hooks
 * (credits, what is not flushed yet); rdmx_flush.
 */
#include <errno.h>

#include "read_priv.h"

/* -------------------------------------------------------------- sending */

/* Sent messages not yet in the receiver's memory. */
static uint32_t tx_unflushed(const struct rd *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nposted; i++) {
		uint32_t s = p->posted[i];
		const struct tx *t = &p->tx[s];

		n += !(t->acked || (t->eager && rdmx__sendpool_done(&p->sp, s)));
	}
	return n;
}

/* The pool's room hook: a credit for one more descriptor. */
static int rd_room(rdmx_conn *c)
{
	struct rd *p = rd_of(c);

	return p->sp.nalloc + p->unacked < p->peer.desc_depth;
}

/* The pool's unflushed hook. */
static uint32_t rd_unflushed(rdmx_conn *c)
{
	return tx_unflushed(rd_of(c));
}

const struct rdmx__sendpool_ops rdmx__read_pool_ops = {
	.reap = rdmx__read_progress,
	.room = rd_room,
	.unflushed = rd_unflushed,
};

/* Write the descriptor in front of the payload; eager: one SGE for both. */
static void tx_describe(rdmx_conn *c, uint32_t idx, const struct rdmx_msg *m,
			struct rdmx__wr *wr)
{
	struct rd *p = rd_of(c);
	struct tx *t = &p->tx[idx];
	uint8_t *slot = rdmx__sendpool_at(&p->sp, idx);
	struct rdmx__read_desc d = {
		.type = RDMX__READ_DESC_EAGER,
		.slot = (uint16_t)idx,
		.len = (uint32_t)m->len,
	};

	t->gen = t->gen + 1 ? t->gen + 1 : 1;
	t->eager = m->len <= p->peer.eager_max;
	d.gen = t->gen;
	if (m->flags & RDMX_MSG_IMM) {
		d.flags = RDMX__READ_DESC_IMM;
		d.imm = m->imm;
	}
	if (!t->eager) {
		d.type = RDMX__READ_DESC_READ;
		d.addr = (uintptr_t)(slot + DATA_OFF);
		d.rkey = p->sp.mr->rkey;
	}
	rdmx__read_desc_encode(&d, slot + DESC_OFF);
	wr->addr = slot + DESC_OFF;
	wr->len = RDMX__READ_DESC_SIZE + (t->eager ? d.len : 0);
}

/* Post @m's descriptor; with @more (RDMX_SEND_MORE) the pool may hold it
 * to chain it with the next ones (core/sendpool.h). */
static int rd_post(rdmx_conn *c, struct rdmx_msg *m, int more)
{
	struct rd *p = rd_of(c);
	int64_t idx = rdmx__sendpool_slot(c, &p->sp, m);
	struct rdmx__wr wr = { .op = RDMX__OP_SEND };
	struct tx *t;
	int rc;

	if (idx < 0)
		return rdmx__fail(-EINVAL, "read: not a message from rdmx_msg_alloc on this connection");
	t = &p->tx[idx];
	tx_describe(c, (uint32_t)idx, m, &wr);
	rc = rdmx__sendpool_post_more(c, &p->sp, (uint32_t)idx, &wr, m, more);
	if (rc)
		return rc;
	t->acked = 0;
	p->posted[p->nposted++] = (uint32_t)idx;
	p->unacked++;
	if (!p->sp.nheld)
		rdmx__read_ack_flush(c); /* acks go behind the data */
	return 0;
}

int rdmx__read_send(rdmx_conn *c, struct rdmx_msg *m)
{
	return rd_post(c, m, 0);
}

int rdmx__read_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	return rd_post(c, m, 1);
}

/* One round of progress first: queued acks go out even when nothing of
 * ours is unflushed. */
int rdmx__read_flush(rdmx_conn *c, int timeout_ms)
{
	int rc = rdmx__read_progress(c);

	return rc ? rc : rdmx__sendpool_flush(c, &rd_of(c)->sp, timeout_ms);
}

