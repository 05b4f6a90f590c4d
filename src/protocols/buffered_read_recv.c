/* SPDX-License-Identifier: MIT */
/*
 * buffered_read's receiver (the design: buffered_read_conn.c): pulling the
 * tail, taking records in place, releases and their reports, a sleeping
 * receiver's announcement.
 */
#include <errno.h>
#include <stddef.h>

#include "buffered_read_priv.h"

#define BUSY_TURNS 64

/* ops->sleep_announce: publish our sleep (core/doorbell.h). The last look
 * is a tail READ posted after our count completed: with a READ of ours
 * out, sleep (its completion wakes us) and decide after it. */
int rdmx__br_sleep_announce(rdmx_conn *c)
{
	struct br *p = br_of(c);
	const struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_GEN << 32,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->ctl->gen_src,
		.len = sizeof(uint64_t),
		.lkey = p->ctl_mr->lkey,
		.remote_addr = p->peer_ctl + offsetof(struct rdmx__br_ctl, sleep),
		.rkey = p->peer_ctl_rkey,
	};
	int rc = rdmx__br_reap(c);

	if (rc < 0 || p->rd_state != RD_IDLE)
		return rc < 0 ? rc : 0;
	return rdmx__bell_announce(c, &p->bell, &p->ctl->gen_src, &wr);
}

/* Read the peer's tail once nothing fetched is left to take. Once our
 * sleep is published, only once: the last look after our count is in
 * the peer's memory (core/doorbell.h); then the doorbell says when. */
static int pull(rdmx_conn *c)
{
	struct br *p = br_of(c);

	if (p->rd_state != RD_IDLE || p->rd < p->fetched)
		return 0;
	if (p->bell.announced) {
		if (p->bell.announced != RDMX__BELL_PLACED || p->looked)
			return 0;
		p->looked = 1;
	}
	p->rd_state = RD_TAIL;
	return rdmx__br_post(c, K_TAIL, RDMX__OP_READ, &p->ctl->rd_tail, p->ctl_mr->lkey, 8,
		    p->peer_ctl + offsetof(struct rdmx__br_ctl, tail), p->peer_ctl_rkey);
}

/* 1 with the next record in @m, 0 none fetched, -EPROTO. */
static int take(rdmx_conn *c, struct rdmx_msg *m)
{
	struct br *p = br_of(c);
	struct rdmx__ring_rec_view v;
	int64_t seq;
	int rc;

	for (;;) {
		if (p->rd >= p->fetched)
			return 0;
		rc = rdmx__ring_peek(&p->pgeo, p->mirror + (p->rd & p->pgeo.mask),
				     p->pseed, p->rd, c->max_msg, 1, &v);
		if (rc < 0)
			return rc;
		if (rc == 0 || p->rd + v.size > p->fetched) {
			p->fetched = p->rd; /* a torn tail: read it again */
			return 0;
		}
		if (!(v.flags & RDMX__RING_REC_PAD))
			break;
		p->rd += v.size;
	}
	seq = rdmx__ring_rel_push(&p->rel, p->rd + v.size);
	if (seq < 0)
		return rdmx__fail(-EPROTO, "buffered_read: the peer overran the window of %u messages",
				  p->rel.cap);
	m->data = p->mirror + ((p->rd + RDMX__RING_HDR) & p->pgeo.mask);
	m->len = v.len;
	m->cap = v.len;
	m->imm = (v.flags & RDMX__RING_REC_IMM) ? v.imm : 0;
	m->flags = (v.flags & RDMX__RING_REC_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(m, c, RDMX__MSG_RECV, (uint64_t)seq);
	p->rd += v.size;
	woke(p); /* a later sleep is a new one */
	return 1;
}

/* Pull, take in completions; as rdmx__br_reap(). */
static int progress(rdmx_conn *c)
{
	int rc = pull(c);

	return rc ? rc : rdmx__br_reap(c);
}

/* The wait step with a READ of ours out: it completes within a round
 * trip, so nap as short as a park goes rather than sleep on the wait set
 * and pay a wake-up for it (nothing out: the idle step sleeps, a doorbell
 * wakes it); the naps do not lengthen the idle step's parks. */
static int nap(rdmx_conn *c, struct rdmx__deadline *d)
{
	unsigned park_us = d->park_us;
	int rc;

	d->timed = 1;
	d->park_us = 0;
	rc = rdmx__recv_idle(c, d);
	d->timed = 0;
	d->park_us = park_us;
	return rc;
}

int rdmx__br_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct br *p = br_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (unsigned i = 1;; i++) {
		rc = take(c, m);
		if (rc > 0)
			return 0;
		if (rc < 0)
			return rdmx__conn_down(c, rc, "%s", rdmx__last());
		rc = progress(c);
		/* a section came in: take it before any error or check of the
		 * peer. Its progress is published, so the sender's rdmx_flush
		 * may return and its close come at once, and the same poll
		 * may hold the flushed completions that the close caused:
		 * returning that error first said "closed by peer" with every
		 * message fetched (conformance's peer close under TSan, 2 runs
		 * in 16, 0 of 40 delivered) */
		if (p->rd < p->fetched)
			continue;
		if (rc < 0)
			return rc;
		/* a READ of ours out: poll again, but every BUSY_TURNS the wait
		 * step runs (the deadline, the peer's liveness: a tail that
		 * keeps promising records that never check out must not spin
		 * past the caller's timeout) */
		if (rc > 0 && i % BUSY_TURNS)
			continue;
		if ((rc = rc > 0 ? nap(c, &d) : rdmx__recv_idle(c, &d)))
			return rc;
	}
}

/* After a release: report when a third of the ring or half the sender's
 * window was released since the last report. */
static int maybe_report(rdmx_conn *c)
{
	struct br *p = br_of(c);

	publish(p);
	if (3 * (p->rel.head - p->rep_head) >= p->pgeo.size ||
	    2 * (p->rel.released - p->rep_released) >= p->rel.cap)
		return rdmx__br_report(c);
	return 0;
}

/* The first message as rdmx__br_recv takes it, then the records already
 * fetched; no READ is waited for. */
int rdmx__br_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			int timeout_ms, int *later)
{
	int n = 1, rc = rdmx__br_recv(c, m, timeout_ms);

	if (rc)
		return rc;
	while (n < max && (rc = take(c, &m[n])) > 0)
		n++;
	if (rc < 0)
		*later = rdmx__conn_down(c, rc, "%s", rdmx__last());
	return n;
}

/* Give back @m without reporting: 1 if the released prefix grew, 0, or
 * -EINVAL. */
static int release_one(rdmx_conn *c, struct rdmx_msg *m)
{
	struct br *p = br_of(c);

	return rdmx__one_buf_release(c, &p->ob, &p->rel, m);
}

/* A report that cannot go out took the connection down: the next call
 * says so; the messages are released either way. */
static void released(rdmx_conn *c)
{
	if (c->state != RDMX__CONN_DOWN)
		(void)maybe_report(c);
}

int rdmx__br_release(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc = release_one(c, m);

	if (rc > 0)
		released(c);
	return rc < 0 ? rc : 0;
}

/* One report (or none) for the whole vector. */
int rdmx__br_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	int first = 0, grew = 0;

	for (int i = 0; i < n; i++) {
		int rc = release_one(c, &m[i]);

		grew |= rc > 0;
		if (rc < 0 && !first)
			first = rc;
	}
	if (grew)
		released(c);
	return first;
}
