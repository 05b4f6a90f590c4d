/* SPDX-License-Identifier: MIT */
/*
 * buffered_read's sender (the design: buffered_read_conn.c): records stamped in
 * place in our own ring, the tail published, the receiver's progress taken
 * in (reported or READ), doorbells for a sleeping receiver.
 */
#include <errno.h>
#include <stddef.h>

#include "buffered_read_priv.h"

/* Widen progress word @w against our 64-bit total @ours into *@v: kept
 * when torn (halves disagree) or behind what we knew. */
static void widen(uint64_t w, uint64_t ours, uint64_t *v)
{
	uint32_t n, behind;
	uint64_t full;

	if (rdmx__cword_get(w, &n))
		return;
	behind = (uint32_t)ours - n;
	if (behind > UINT32_MAX / 2)
		return; /* ahead of what we sent: not a count of ours */
	full = ours - behind;
	if (full > *v)
		*v = full;
}

/* Take in the peer's progress, as reported (rep) and as read (rd_pub),
 * each word once. */
static void refresh(struct br *p)
{
	for (int i = 0; i < 2; i++) {
		const uint64_t *w = i ? p->ctl->rd_pub : p->ctl->rep;

		widen(__atomic_load_n(&w[0], __ATOMIC_ACQUIRE), p->tail, &p->p_fetched);
		widen(__atomic_load_n(&w[1], __ATOMIC_ACQUIRE), p->tail, &p->p_head);
		widen(__atomic_load_n(&w[2], __ATOMIC_ACQUIRE), p->sent, &p->p_released);
	}
}

static int has_room(const struct br *p, uint64_t rsize)
{
	return p->sent - p->p_released < p->win_out &&
	       rdmx__ring_fits(&p->geo, p->tail, p->p_head, rsize);
}

static int fetched_all(const struct br *p, uint64_t rsize)
{
	(void)rsize;
	return p->p_fetched >= p->tail;
}

/* READ the peer's published progress (one READ at a time). */
static int read_progress(rdmx_conn *c)
{
	struct br *p = br_of(c);

	if (p->pub_out)
		return 0;
	p->pub_out = 1;
	return rdmx__br_post(c, K_PUB, RDMX__OP_READ, p->ctl->rd_pub, p->ctl_mr->lkey, 24,
		    p->peer_ctl + offsetof(struct rdmx__br_ctl, pub), p->peer_ctl_rkey);
}

/* Wait until @until holds, READing the receiver's progress meanwhile;
 * bounded by @timeout_ms and the connection's health. */
static int wait_for(rdmx_conn *c, uint64_t rsize, int timeout_ms,
		    int (*until)(const struct br *, uint64_t))
{
	struct br *p = br_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	d.timed = 1; /* progress is READ: no completion announces it */
	for (;;) {
		refresh(p);
		if (until(p, rsize))
			return 0;
		rc = read_progress(c);
		if (!rc)
			rc = rdmx__br_reap(c);
		if (rc < 0)
			return rc;
		if (c->state == RDMX__CONN_DOWN)
			return rdmx__fail(c->down_rc, "%s", c->err.msg);
		if ((rc = rdmx__conn_wait(c, &d)))
			return rc;
	}
}

int rdmx__br_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			int timeout_ms)
{
	struct br *p = br_of(c);
	uint64_t rsize = rdmx__ring_rec_size(size), pad, start;
	int rc = rdmx__one_buf_busy(c, &p->ob);

	if (rc)
		return rc;
	refresh(p);
	if (!has_room(p, rsize) && (rc = wait_for(c, rsize, timeout_ms, has_room)))
		return rc;
	start = rdmx__ring_place(&p->geo, p->tail, rsize, &pad);
	rdmx__one_buf_give(c, &p->ob, m, p->ring + ((start + RDMX__RING_HDR) & p->geo.mask),
			   start, size);
	return 0;
}

static int live_alloc(rdmx_conn *c, const struct rdmx_msg *m)
{
	return rdmx__one_buf_is(c, &br_of(c)->ob, m);
}

/* The receiver published a sleep we did not ring for: a doorbell. With
 * every doorbell in flight even after a reap, the next send rings. */
static int ring_if_asleep(rdmx_conn *c)
{
	struct br *p = br_of(c);
	const struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_BELL << 32,
		.op = RDMX__OP_SEND,
		.flags = RDMX__WR_SIGNALED,
	};
	int rc;

	if (p->bells_out >= RDMX__BR_BELLS && (rc = rdmx__br_reap(c)) < 0)
		return rc;
	if (p->bells_out >= RDMX__BR_BELLS)
		return 0;
	rc = rdmx__bell_ring(c, &p->bell, &p->ctl->sleep, &wr);
	p->bells_out += rc > 0;
	p->bells_sent += rc > 0;
	return rc < 0 ? rc : 0;
}

int rdmx__br_send(rdmx_conn *c, struct rdmx_msg *m)
{
	struct br *p = br_of(c);
	uint64_t start = p->ob.start;

	if (!live_alloc(c, m))
		return rdmx__fail(-EINVAL, "buffered_read: not a message from rdmx_msg_alloc on this connection");
	if (m->len > p->ob.cap)
		return rdmx__fail(-EMSGSIZE, "buffered_read: %zu bytes in a %zu-byte buffer",
				  (size_t)m->len, p->ob.cap);
	if (start != p->tail)
		rdmx__ring_put_pad(p->ring + (p->tail & p->geo.mask), p->seed, p->tail);
	rdmx__ring_put_rec(p->ring + (start & p->geo.mask), p->seed, start,
			   (uint32_t)m->len, m->imm,
			   (m->flags & RDMX_MSG_IMM) ? RDMX__RING_REC_IMM : 0);
	p->tail = start + rdmx__ring_rec_size(m->len);
	p->sent++;
	p->ob.live = 0;
	/* seq_cst: the tail is visible before we read the sleep word */
	__atomic_store_n(&p->ctl->tail, rdmx__cword((uint32_t)p->tail), __ATOMIC_SEQ_CST);
	rdmx__msg_spend(m);
	(void)ring_if_asleep(c); /* down on failure: the next call says */
	return 0;
}

int rdmx__br_flush(rdmx_conn *c, int timeout_ms)
{
	struct br *p = br_of(c);

	refresh(p);
	if (fetched_all(p, 0))
		return 0;
	return wait_for(c, 0, timeout_ms, fetched_all);
}

/* A send is complete once the receiver fetched it: all of them when its
 * progress shows everything, else (conservatively) those it released.
 * One step: take in reports, READ the receiver's progress if none is
 * out, reap. */
int rdmx__br_sends_done(rdmx_conn *c, uint64_t *done)
{
	struct br *p = br_of(c);
	int rc;

	refresh(p);
	*done = p->p_fetched >= p->tail ? p->sent : p->p_released;
	if (*done == p->sent)
		return 0;
	rc = read_progress(c);
	return rc ? rc : rdmx__br_reap(c);
}
