/* SPDX-License-Identifier: MIT */
/*
 * The ring engine's receive side (see write_ring_conn.c for the design):
 * taking the record at our read offset, the receive calls, releasing
 * records (publishing the released count, ack READ, or reporting it, ack
 * SEND), and the announcement of a sleeping receiver.
 */
#include <errno.h>
#include <stddef.h>

#include "core/conn.h"
#include "core/doorbell.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/msg.h"
#include "core/protocol.h"
#include "core/ring.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "write_ring_priv.h"

static void fill_recv_msg(rdmx_conn *c, const struct rdmx__ring_rec_view *v,
			  uint64_t seq, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);

	m->data = p->ring + rdmx__wring_at(p, &p->rgeo, p->rd, v->size) +
		  (p->notify == RDMX_NOTIFY_REV ? 0 : RDMX__RING_HDR);
	m->len = v->len;
	m->cap = v->len;
	m->imm = (v->flags & RDMX__RING_REC_IMM) ? v->imm : 0;
	m->flags = (v->flags & RDMX__RING_REC_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(m, c, RDMX__MSG_RECV, seq);
}

/* Take the record at rd: 1 with @m filled, 0 if none is complete yet. */
static int take(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);
	struct rdmx__ring_rec_view v;
	int64_t seq;
	int rc;

	for (;;) {
		rc = rdmx__wring_announced(c);
		if (rc > 0)
			rc = rdmx__wring_peek(c, &v);
		if (rc <= 0)
			return rc;
		if (!(v.flags & RDMX__RING_REC_PAD))
			break;
		p->rd += v.size;
	}
	seq = rdmx__ring_rel_push(&p->rel, p->rd + v.size);
	if (seq < 0)
		return rdmx__fail(-EPROTO, "peer overran the window of %u messages",
				  p->win_in);
	fill_recv_msg(c, &v, (uint64_t)seq, m);
	rdmx__bell_woke(&p->bell); /* a later sleep is a new one */
	p->rd += v.size;
	p->imm_ready -= p->imm ? 1 : 0;
	p->st.records_in++;
	return 1;
}

/* A receive timed out: say what it waited for and what the ring shows. */
static int recv_timed_out(rdmx_conn *c, int timeout_ms)
{
	struct wring *p = wr_of(c);

	return rdmx__fail(-ETIMEDOUT, "%s: no record at ring offset %llu within %d ms (%llu taken; notify %s: tail word %llu, doorbells %llu, sleeps published %llu; head updates sent %llu)",
			  c->proto->name, (unsigned long long)p->rd, timeout_ms,
			  (unsigned long long)p->st.records_in,
			  rdmx__wring_notify_name(p->notify),
			  (unsigned long long)p->tail_seen,
			  (unsigned long long)p->st.doorbells_recv,
			  (unsigned long long)p->bell.gen,
			  (unsigned long long)p->st.updates_sent);
}

int rdmx__wring_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct wring *p = wr_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (unsigned i = 0;; i++) {
		/* Polling mode finds records without the CQs: poll those (and
		 * answer the peer) every few spins only. A failure marks the
		 * connection down. */
		if (p->imm || !(i % 16) || d.parking || c->state == RDMX__CONN_DOWN)
			rdmx__wring_progress(c);
		rc = take(c, m);
		if (rc > 0)
			return 0;
		if (rc < 0)
			return rdmx__conn_down(c, rc, "%s: %s", c->proto->name,
					       rdmx__last());
		if ((rc = rdmx__recv_idle(c, &d)))
			return rc == -ETIMEDOUT ? recv_timed_out(c, timeout_ms) : rc;
	}
}

/* The first message as rdmx__wring_recv takes it, then the records
 * already complete; the CQs are polled once more when none is left. */
int rdmx__wring_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			  int timeout_ms, int *later)
{
	int n = 1, polled = 0, rc = rdmx__wring_recv(c, m, timeout_ms);

	if (rc)
		return rc;
	while (n < max) {
		rc = take(c, &m[n]);
		if (rc > 0) {
			n++;
			continue;
		}
		if (rc < 0)
			*later = rdmx__conn_down(c, rc, "%s: %s", c->proto->name,
						 rdmx__last());
		if (rc < 0 || polled++)
			break;
		rdmx__wring_progress(c); /* a failure marks the connection down */
	}
	return n;
}

/* Give back @m without telling the peer: 1 if the released prefix grew,
 * 0, or -EINVAL. */
static int release_one(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);

	return rdmx__one_buf_release(c, &p->ob, &p->rel, m);
}

/* The released prefix grew: publish it (ack READ) or report it. */
static int released(rdmx_conn *c)
{
	struct wring *p = wr_of(c);

	if (p->ack_read)
		__atomic_store_n(&p->ctl->released, p->rel.released, __ATOMIC_RELEASE);
	return rdmx__wring_maybe_update(c);
}

int rdmx__wring_release(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc = release_one(c, m);

	return rc > 0 ? released(c) : rc;
}

/* One publication or report for the whole vector. */
int rdmx__wring_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	int first = 0, grew = 0;

	for (int i = 0; i < n; i++) {
		int rc = release_one(c, &m[i]);

		grew |= rc > 0;
		if (rc < 0 && !first)
			first = rc;
	}
	if (grew) {
		int rc = released(c);

		first = first ? first : rc;
	}
	return first;
}

/*
 * ops->sleep_announce (a receiver with a doorbell): WRITE our next sleep
 * count into the peer's sleep_gen, once per sleep (core/doorbell.h). A
 * record the peer's WRITE placed after our last look completes at the
 * peer after our count is there, and its reap rings (write_ring_conn.c,
 * "Sleeping receivers"): no record is missed by a sleep.
 */
int rdmx__wring_sleep_announce(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	const struct rdmx__wr wr = {
		.wr_id = TAG_ASK << TAG_SHIFT | SUB_GEN,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->ctl->gen_src,
		.len = sizeof(uint64_t),
		.lkey = p->ctl_mr->lkey,
		.remote_addr = p->peer_ctl + offsetof(struct ctl, sleep_gen),
		.rkey = p->peer_ctl_rkey,
	};
	int rc;

	if (!rdmx__wring_has_doorbell(p) || c->state != RDMX__CONN_UP)
		return 0;
	rc = rdmx__wring_progress(c); /* takes our count's completion */
	return rc < 0 ? rc : rdmx__bell_announce(c, &p->bell, &p->ctl->gen_src, &wr);
}
