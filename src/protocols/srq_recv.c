/* SPDX-License-Identifier: MIT */
/*
 * srq's receive side (the design is at the top of srq_conn.c): a connection's
 * receives, the releases that give buffers back to the SRQ, and the
 * listener's receive in arrival order over all its members. The shared
 * buffers and the completion queues below it are in srq_shared.c.
 */
#include <errno.h>

#include "srq_priv.h"

#define NOTHING 1            /* internal: nothing to hand out */
#define PEER_CHECK_IDLE 64   /* zero-timeout polls between peer checks */

/* ------------------------------------------------------------- receives */

/* A packed frame from @c arrived in buffer @idx (HELD): parse it (read
 * once, checked; a malformed one fails @c) and hand out its first message.
 * Under g->lock. */
static int frame_in(struct srq_shared *sh, rdmx_conn *c, uint32_t idx,
		    struct rdmx_msg *m)
{
	struct srq_conn *p = sc_of(c);
	int rc = rdmx__unpack_start(c, &p->fr, "srq", sh->buf + (size_t)idx * sh->slot, idx,
				    sh->rb[idx].wc.byte_len, &sh->rb[idx].mask);

	if (rc)
		return rc; /* @c is down; leaving the group gives the buffer back */
	sh->fconn = c;
	rdmx__unpack_next(c, &p->fr, m);
	return 0;
}

/* Hand buffer @idx, queued for @c, out in @m. Under g->lock. */
static int deliver(struct srq_shared *sh, rdmx_conn *c, uint32_t idx,
		   struct rdmx_msg *m)
{
	const struct rdmx__wc *wc = &sh->rb[idx].wc;

	if (wc->status != RDMX__WC_OK) {
		struct rdmx__wc bad = *wc;

		rdmx__srq_buf_post(sh, NULL, idx);
		return rdmx__conn_wc_error(c, &bad, "receive");
	}
	sh->rb[idx].state = BUF_HELD;
	if (sc_of(c)->peer_packs && rdmx__unpack_is_frame(wc))
		return frame_in(sh, c, idx, m);
	sh->rb[idx].mask = 1;
	rdmx__unpack_fill(c, m, sh->buf + (size_t)idx * sh->slot, wc->byte_len, wc->has_imm,
			  wc->imm, idx);
	return 0;
}

/* @c's oldest message, polling the shared CQ if none is queued: 0,
 * NOTHING, or -errno. Under g->lock. */
static int take_locked(struct srq_shared *sh, rdmx_conn *c, struct rdmx_msg *m)
{
	uint32_t idx;
	int rc = 0;

	if (rdmx__unpack_more(&sc_of(c)->fr)) {
		rdmx__unpack_next(c, &sc_of(c)->fr, m);
		return 0;
	}
	if (sc_of(c)->mhead == NIL)
		rc = rdmx__srq_poll_shared(sh);
	idx = rdmx__srq_queue_pop(sh, c);
	if (rc < 0)
		return rdmx__conn_down(c, rc, "polling the shared receive CQ: %s", rdmx__last());
	return idx == NIL ? NOTHING : deliver(sh, c, idx, m);
}

/* Up to @max of @c's messages under one g->lock: how many (an error
 * after the first in *@later), 0 for none yet, or -errno. */
static int recv_once(rdmx_conn *c, struct rdmx_msg *m, int max, int *later)
{
	struct rdmx__group *g = c->group;
	int n = 0, rc = NOTHING;

	pthread_mutex_lock(&g->lock);
	while (n < max && !(rc = take_locked(sh_of(g), c, &m[n])))
		n++;
	pthread_mutex_unlock(&g->lock);
	if (n && rc < 0)
		*later = rc;
	return n ? n : rc == NOTHING ? 0 : rc;
}

/* Like rdmx__conn_wait(), but a zero-timeout poller learns now and then
 * that the peer left (no flushed receive tells it, the SRQ keeps them). */
static int recv_wait(rdmx_conn *c, struct rdmx__deadline *d)
{
	struct srq_conn *p = sc_of(c);

	if (d->once && ++p->idle % PEER_CHECK_IDLE == 0)
		rdmx__conn_check_peer(c);
	rdmx__srq_credit_kick(c, &p->cr);
	return rdmx__conn_wait(c, d);
}

int rdmx__srq_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			int timeout_ms, int *later)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		rc = recv_once(c, m, max, later);
		if (rc)
			return rc;
		if (c->state == RDMX__CONN_DOWN)
			return rdmx__fail(c->down_rc, "%s", c->err.msg);
		rc = recv_wait(c, &d);
		if (rc && c->state != RDMX__CONN_DOWN)
			return rc; /* timeout; a peer that left gets one more poll */
	}
}

int rdmx__srq_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	int later = 0, rc = rdmx__srq_recv_many(c, m, 1, timeout_ms, &later);

	return rc < 0 ? rc : 0;
}

/* Post @c's chain of released buffers to the SRQ in one post, and grant
 * @c the credits they free. g->lock, c->lock. */
static int repost_flush(struct srq_shared *sh, rdmx_conn *c)
{
	struct srq_conn *p = sc_of(c);
	uint32_t n = p->rp.n;
	int rc;

	for (uint32_t i = 0; i < n; i++) {
		struct rbuf *b = &sh->rb[(uint32_t)p->rp.wr[i].wr_id];

		b->state = BUF_POSTED;
		b->owner = NULL;
	}
	sh->posted += n;
	rc = rdmx__repost_flush(c, &p->rp, sh->rx.srq);
	rdmx__srq_credit_freed(c, &p->cr, n, share_of(sh));
	return rc;
}

/* The last message of @c's buffer @idx was released: its receive joins
 * @c's chain, posted when full (at most a quarter of @c's share: its
 * sender keeps three quarters of its credits) or once nothing of @c is
 * queued (its sender may wait for the credits). A buffer of a connection
 * that is down stays HELD until it leaves the group, which posts it.
 * g->lock, c->lock. */
static int repost(struct srq_shared *sh, rdmx_conn *c, uint32_t idx)
{
	struct srq_conn *p = sc_of(c);
	struct rdmx__wr wr = recv_wr(sh, idx);

	if (c->state == RDMX__CONN_DOWN)
		return 0;
	if (!rdmx__repost_add(&p->rp, &wr) && p->rp.n < share_of(sh) / 4 &&
	    (p->mhead != NIL || rdmx__unpack_more(&p->fr)))
		return 0;
	return repost_flush(sh, c);
}

/* @c's received message @m given back: 0, -EINVAL (not one held), or
 * the repost's error. Under g->lock. */
static int release_locked(struct srq_shared *sh, rdmx_conn *c, struct rdmx_msg *m)
{
	uint32_t ent = 0;
	int64_t idx = rdmx__unpack_handle(c, m, sh->depth, &ent);
	struct rbuf *b = idx < 0 ? NULL : &sh->rb[idx];
	int rc;

	if (!b || b->state != BUF_HELD || b->owner != c || !(b->mask >> ent & 1))
		return -EINVAL;
	b->mask &= ~(UINT64_C(1) << ent);
	if (!b->mask && (rc = repost(sh, c, (uint32_t)idx)))
		return rc; /* the last message of its buffer */
	rdmx__msg_spend(m);
	return 0;
}

/* Unsent buffers and received messages, the latter under one g->lock. */
int rdmx__srq_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	struct srq_conn *p = sc_of(c);
	struct rdmx__group *g = c->group;
	int first = 0, locked = 0, rc;

	for (int i = 0; i < n; i++) {
		if (!rdmx__sendpool_release(c, &p->sp, &m[i])) {
			rdmx__srq_credit_untake(&p->cr);
			continue;
		}
		if (!locked++)
			pthread_mutex_lock(&g->lock);
		rc = release_locked(sh_of(g), c, &m[i]);
		if (rc == -EINVAL)
			rc = rdmx__fail(-EINVAL, "srq: message not held on this connection");
		first = first ? first : rc;
	}
	if (locked)
		pthread_mutex_unlock(&g->lock);
	return first;
}

int rdmx__srq_release(rdmx_conn *c, struct rdmx_msg *m)
{
	return rdmx__srq_release_many(c, m, 1);
}

/* ------------------------------------------------------ listener receive */

/*
 * A listed member whose connection is down and whose messages were all
 * handed out is reported once (its down_rc, rdmx_msg_conn names it);
 * -ENOTCONN when no member is left unreported; else NOTHING. Under g->lock
 * and only after a poll found the CQ empty.
 */
static int report_gone(struct rdmx__group *g, struct rdmx_msg *m)
{
	int live = 0;

	for (size_t i = 0; i < g->n; i++) {
		rdmx_conn *c = g->conns[i];

		if (c->reset_reported)
			continue;
		if (c->state != RDMX__CONN_DOWN || sc_of(c)->mhead != NIL ||
		    rdmx__unpack_more(&sc_of(c)->fr)) {
			live = 1;
			continue;
		}
		c->reset_reported = 1;
		*m = (struct rdmx_msg){ 0 };
		rdmx__msg_set(m, c, RDMX__MSG_CONN, 0);
		return rdmx__fail(c->down_rc, "%s", c->err.msg);
	}
	return live ? NOTHING : rdmx__fail(-ENOTCONN, "no open connection on this listener");
}

/* The oldest message of any member, a member gone, or NOTHING. */
static int group_once(struct rdmx__group *g, struct rdmx_msg *m)
{
	struct srq_shared *sh = sh_of(g);
	rdmx_conn *c;
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	if (!sh->made) {
		rc = g->n ? NOTHING : rdmx__fail(-ENOTCONN, "no open connection on this listener");
		goto unlock;
	}
	if (sh->fconn && rdmx__unpack_more(&sc_of(sh->fconn)->fr)) {
		rdmx__unpack_next(sh->fconn, &sc_of(sh->fconn)->fr, m);
		goto unlock;
	}
	if (sh->ghead == NIL)
		rc = rdmx__srq_poll_shared(sh);
	if (rc < 0) {
		rdmx__fail(rc, "polling the shared receive CQ: %s", rdmx__last());
		goto unlock;
	}
	if (sh->ghead == NIL) {
		rc = report_gone(g, m);
		goto unlock;
	}
	c = sh->rb[sh->ghead].owner;
	rc = deliver(sh, c, rdmx__srq_queue_pop(sh, c), m);
	if (rc) {
		c->reset_reported = 1;
		rdmx__msg_set(m, c, RDMX__MSG_CONN, 0);
	}
unlock:
	pthread_mutex_unlock(&g->lock);
	return rc;
}

/* Ask rdma_cm about every member not known to be down; 1 if one left.
 * Grants not sent yet go out on the way. */
static int check_peers(struct rdmx__group *g)
{
	int left = 0;

	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < g->n; i++) {
		rdmx_conn *c = g->conns[i];

		if (c->state != RDMX__CONN_DOWN && rdmx__conn_check_peer(c))
			left = 1;
		rdmx__srq_credit_top_up(c, &sc_of(c)->cr, share_of(sh_of(g)), 0);
	}
	pthread_mutex_unlock(&g->lock);
	return left;
}

/* 0 to poll again, or -EAGAIN / -ETIMEDOUT. A member that just left is
 * worth one more poll (its last messages are in the CQ by now). */
static int group_wait(struct rdmx__group *g, struct rdmx__deadline *d)
{
	struct srq_shared *sh = sh_of(g);
	unsigned idle;

	if (d->once) {
		pthread_mutex_lock(&g->lock);
		idle = ++sh->idle;
		pthread_mutex_unlock(&g->lock);
		if (idle % PEER_CHECK_IDLE == 0 && check_peers(g))
			return 0;
		return rdmx__again();
	}
	if (!rdmx__wait_idle(d))
		return 0;
	if (check_peers(g))
		return 0;
	if (rdmx__group_shut(g))
		return -ESHUTDOWN;
	if (rdmx__deadline_passed(d))
		return -ETIMEDOUT;
	rdmx__wait_park(d);
	return 0;
}

int rdmx__srq_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
			 int timeout_ms)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	rdmx__deadline_mode(&d, g->wait_mode, g->spin_us);
	for (;;) {
		rc = group_once(g, m);
		if (rc != NOTHING)
			return rc;
		rc = group_wait(g, &d);
		if (rc)
			return rc;
	}
}
