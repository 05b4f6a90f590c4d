/* SPDX-License-Identifier: MIT */
/*
 * srq: two-sided messaging into a shared receive queue. The connections
 * accepted on one listener share one SRQ of recv_depth receive buffers of
 * max_msg bytes (and a frame's overhead, at least RDMX__PACK_FRAME_MIN:
 * core/pack.h) and one receive CQ (c->group->shared); a dialed connection
 * has an SRQ of its own (a group of one, same code). Every message is one
 * SEND (SEND_WITH_IMM with immediate data) from one of send_depth
 * registered send buffers per connection (the core's send pool,
 * core/sendpool.h), filled in place. The receiver learns the connection
 * from the completion's QP number.
 *
 * recv_depth is the depth of the whole listener, sized once by its first
 * connection: receive memory is recv_depth x max_msg per listener however
 * many connections it has (send_recv: per connection).
 *
 * Receiving: rdmx_listener_recv() takes messages in arrival order;
 * rdmx_recv() on one member takes that member's. Whoever polls the shared
 * CQ files each completion under its member (a FIFO per member, linked in
 * one arrival-order list too); both are bounded by the SRQ depth since
 * each entry holds an SRQ buffer. A buffer goes back to the SRQ on
 * release. Everything shared is guarded by g->lock.
 *
 * Flow control is by credits, one per SRQ buffer: the design argument
 * (the grants, why it is fair, why it cannot deadlock) is at the top of
 * srq_credit.c.
 *
 * A member's QP has no receives of its own, so a peer that leaves flushes
 * nothing: its departure is noticed through rdma_cm
 * (rdmx__conn_check_peer) and reported after everything it sent was
 * delivered.
 *
 * Bursts: small messages of a burst go several to a SEND as a packed
 * frame (core/unpack.h, as send_recv) to a peer whose hello said it splits
 * them. A frame takes one SRQ buffer and one credit (the sender gives
 * back the credits of the messages packed into it, rdmx__srq_credit_send);
 * a malformed one fails
 * its connection only (-EPROTO). Released buffers go back in chains
 * (repost()).
 *
 * Limits: every member of a listener must be on the device of the first
 * (one SRQ lives on one device); a member that holds its messages holds
 * its share of the buffers, not more.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/group.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/pack.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/qp.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "core/repost.h"
#include "core/sendpool.h"
#include "core/unpack.h"
#include "srq.h"
#include "srq_credit.h"

enum { BUF_POSTED = 1, BUF_QUEUED, BUF_HELD };

#define WC_BATCH 16
#define NIL UINT32_MAX
#define NOTHING 1            /* internal: nothing to hand out */
#define PEER_CHECK_IDLE 64   /* zero-timeout polls between peer checks */
#define BLOCK_VERSION 2
#define BLOCK_LEN (12 + SRQ_CREDIT_BLOCK)

/* One SRQ receive buffer and, once consumed, its completion. */
struct rbuf {
	struct rdmx__wc wc;
	rdmx_conn *owner;        /* queued for / held by */
	uint32_t gprev, gnext;   /* arrival order among all queued */
	uint32_t mnext;          /* the owner's queue */
	uint8_t state;           /* BUF_* */
	uint64_t mask;           /* held: its messages not released */
};

struct member {
	uint32_t qpn;
	rdmx_conn *c;
};

/* A listener's (or a dialer's) receive side: c->group->shared, g->lock. */
struct srq_shared {
	int made;
	const struct rdmx__fabric_ops *f;
	struct rdmx__qp_shared rx; /* the SRQ and its receive CQ */
	struct rdmx__mr *mr;
	uint8_t *buf;
	size_t slot;             /* bytes between buffers */
	uint32_t buf_bytes;      /* bytes a buffer holds */
	uint32_t depth;
	struct rbuf *rb;
	uint32_t ghead, gtail;   /* queued completions, oldest first */
	struct member *mem;      /* every connection with a QP on the SRQ */
	size_t nmem, capmem;
	unsigned idle;           /* empty zero-timeout listener polls */
	uint64_t posted;         /* receives posted to the SRQ, ever */
	rdmx_conn *fconn;        /* whose frame the listener hands out */
	struct rdmx__wc wc[WC_BATCH];
};

/* Per connection: the send side, and its queue of received messages. */
struct srq_conn {
	struct rdmx__sendpool sp;
	uint32_t mhead, mtail;   /* queued for this connection (g->lock) */
	unsigned idle;
	struct srq_credit cr;    /* flow control, both directions */
	int peer_packs;          /* its hello said it splits (and packs) */
	struct rdmx__repost rp;  /* its buffers released, not yet reposted
				  * (g->lock) */
	struct rdmx__unpack fr;  /* its frame being handed out (g->lock) */
};
RDMX__SENDPOOL_FIRST(struct srq_conn, sp);

static struct srq_conn *sc_of(rdmx_conn *c)
{
	return c->priv;
}

static int reap_sends(rdmx_conn *c);

static const struct rdmx__sendpool_ops srq_pool_ops = {
	.reap = reap_sends,
};

static struct srq_shared *sh_of(const struct rdmx__group *g)
{
	return g->shared;
}

/* Credits each member may have outstanding plus held (g->lock). */
static uint32_t share_of(const struct srq_shared *sh)
{
	uint32_t s = sh->depth / (uint32_t)(sh->nmem ? sh->nmem : 1);

	return s ? s : 1;
}

/* Top every member up to the share (it grew: one left). g->lock. */
static void top_up_all(struct srq_shared *sh)
{
	for (size_t i = 0; i < sh->nmem; i++)
		rdmx__srq_credit_top_up(sh->mem[i].c, &sc_of(sh->mem[i].c)->cr,
					share_of(sh), 0);
}

/* ------------------------------------------------------- shared buffers */

/* Buffer @idx's receive. */
static struct rdmx__wr recv_wr(const struct srq_shared *sh, uint32_t idx)
{
	return (struct rdmx__wr){
		.wr_id = idx,
		.op = RDMX__OP_RECV,
		.addr = sh->buf + (size_t)idx * sh->slot,
		.len = sh->buf_bytes,
		.lkey = sh->mr->lkey,
	};
}

/* Give buffer @idx back to the SRQ; @c (may be NULL) is charged for it. */
static int buf_post(struct srq_shared *sh, rdmx_conn *c, uint32_t idx)
{
	struct rdmx__wr wr = recv_wr(sh, idx);

	sh->rb[idx].state = BUF_POSTED;
	sh->rb[idx].owner = NULL;
	sh->posted++;
	if (c)
		c->posted_recv++;
	return sh->f->post_srq_recv(sh->rx.srq, &wr, 1);
}

/* Free what shared_make() made; copes with a half-made state. */
static void shared_unmake(struct srq_shared *sh)
{
	rdmx__qp_shared_unmake(sh->f, &sh->rx);
	if (sh->mr)
		sh->f->dereg_mr(sh->mr);
	free(sh->buf);
	free(sh->rb);
	free(sh->mem);
	*sh = (struct srq_shared){ 0 };
}

static int shared_alloc(rdmx_conn *c, struct srq_shared *sh)
{
	sh->f = c->f;
	sh->depth = c->opts.recv_depth;
	sh->slot = rdmx__pack_slot(c->opts.max_msg_size);
	sh->buf_bytes = (uint32_t)sh->slot;
	sh->ghead = sh->gtail = NIL;
	sh->buf = rdmx__alloc_buf(sh->slot * sh->depth);
	sh->rb = calloc(sh->depth, sizeof(*sh->rb));
	if (!sh->buf || !sh->rb)
		return rdmx__fail(-ENOMEM, "srq: out of memory for %u shared buffers of %zu bytes",
				  sh->depth, sh->slot);
	return 0;
}

/* The SRQ, its buffers (all posted) and the receive CQ, on @c's device. */
static int shared_make(rdmx_conn *c, struct srq_shared *sh)
{
	int rc = shared_alloc(c, sh);

	if (!rc)
		rc = c->f->reg_mr(c->ep, sh->buf, sh->slot * sh->depth,
				  RDMX__ACCESS_LOCAL, &sh->mr);
	if (!rc)
		rc = rdmx__qp_shared_make(c, sh->depth, &sh->rx);
	for (uint32_t i = 0; !rc && i < sh->depth; i++)
		rc = buf_post(sh, c, i);
	if (rc) {
		shared_unmake(sh);
		return rc;
	}
	sh->made = 1;
	return 0;
}

static void srq_shared_teardown(struct rdmx__group *g)
{
	struct srq_shared *sh = sh_of(g);

	if (sh->made)
		shared_unmake(sh);
}

/* ------------------------------------------------------------- members */

static int member_add(struct srq_shared *sh, rdmx_conn *c, uint32_t qpn)
{
	if (sh->nmem == sh->capmem) {
		size_t cap = sh->capmem ? 2 * sh->capmem : 8;
		struct member *v = realloc(sh->mem, cap * sizeof(*v));

		if (!v)
			return rdmx__fail(-ENOMEM, "srq: out of memory listing a connection");
		sh->mem = v;
		sh->capmem = cap;
	}
	sh->mem[sh->nmem++] = (struct member){ qpn, c };
	return 0;
}

static void member_del(struct srq_shared *sh, rdmx_conn *c)
{
	for (size_t i = 0; i < sh->nmem; i++) {
		if (sh->mem[i].c != c)
			continue;
		sh->mem[i] = sh->mem[--sh->nmem];
		return;
	}
}

static rdmx_conn *member_find(struct srq_shared *sh, uint32_t qpn)
{
	for (size_t i = 0; i < sh->nmem; i++)
		if (sh->mem[i].qpn == qpn)
			return sh->mem[i].c;
	return NULL;
}

/* ---------------------------------------------------- completion queues */

/* File the completion of buffer @idx under @c: its queue and the list. */
static void queue_push(struct srq_shared *sh, rdmx_conn *c, uint32_t idx)
{
	struct srq_conn *p = sc_of(c);
	struct rbuf *b = &sh->rb[idx];

	b->state = BUF_QUEUED;
	b->owner = c;
	b->mnext = NIL;
	b->gnext = NIL;
	b->gprev = sh->gtail;
	if (sh->gtail == NIL)
		sh->ghead = idx;
	else
		sh->rb[sh->gtail].gnext = idx;
	sh->gtail = idx;
	if (p->mtail == NIL)
		p->mhead = idx;
	else
		sh->rb[p->mtail].mnext = idx;
	p->mtail = idx;
}

/* Take @c's oldest queued completion (NIL if none). */
static uint32_t queue_pop(struct srq_shared *sh, rdmx_conn *c)
{
	struct srq_conn *p = sc_of(c);
	uint32_t idx = p->mhead;
	struct rbuf *b;

	if (idx == NIL)
		return NIL;
	b = &sh->rb[idx];
	p->mhead = b->mnext;
	if (p->mhead == NIL)
		p->mtail = NIL;
	if (b->gprev == NIL)
		sh->ghead = b->gnext;
	else
		sh->rb[b->gprev].gnext = b->gnext;
	if (b->gnext == NIL)
		sh->gtail = b->gprev;
	else
		sh->rb[b->gnext].gprev = b->gprev;
	return idx;
}

/* One completion off the CQ: to its member's queue (1), or straight back
 * to the SRQ when its connection is gone (0); or -errno. */
static int route(struct srq_shared *sh, const struct rdmx__wc *wc)
{
	uint32_t idx = (uint32_t)wc->wr_id;
	rdmx_conn *c;

	if (idx >= sh->depth || sh->rb[idx].state != BUF_POSTED)
		return rdmx__fail(-EIO, "srq: completion for buffer %u that was not posted", idx);
	c = member_find(sh, wc->qp_num);
	if (!c || (wc->status == RDMX__WC_OK &&
		   rdmx__srq_credit_arrived(c, &sc_of(c)->cr)))
		return buf_post(sh, NULL, idx);
	sh->rb[idx].wc = *wc;
	queue_push(sh, c, idx);
	rdmx__conn_kick(c); /* it may sleep on the CQ whose event we took */
	return 1;
}

/*
 * Poll the shared CQ until it is empty or something was queued. Returns
 * the number queued (>= 0) or -errno. Call with g->lock held.
 */
static int poll_shared(struct srq_shared *sh)
{
	int n, queued = 0, rc;

	do {
		n = sh->f->poll_cq(sh->rx.rcq, sh->wc, WC_BATCH);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			rc = route(sh, &sh->wc[i]);
			if (rc < 0)
				return rc;
			queued += rc;
		}
	} while (n == WC_BATCH && !queued);
	return queued;
}

/* ---------------------------------------------------------------- setup */

/* A dialed connection is a group of one: its own SRQ, same code. */
static int join_group(rdmx_conn *c)
{
	if (c->group)
		return 0;
	return rdmx__group_create(c->proto, &c->group);
}

/* Make the shared receive side if this is the group's first connection. */
static int shared_join(rdmx_conn *c)
{
	struct rdmx__group *g = c->group;
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	if (!sh_of(g)->made)
		rc = shared_make(c, sh_of(g));
	pthread_mutex_unlock(&g->lock);
	return rc;
}

static int create_qp(rdmx_conn *c)
{
	struct srq_shared *sh = sh_of(c->group);
	struct srq_conn *p = sc_of(c);
	struct rdmx__qp_want w = {
		.send_wr = p->sp.n + SRQ_CREDIT_WRS,
		.shared = &sh->rx,
	};

	rdmx__repost_init(&p->rp, sh->depth);
	return rdmx__qp_make(c, &w);
}

static int list_member(rdmx_conn *c)
{
	struct rdmx__group *g = c->group;
	int rc;

	pthread_mutex_lock(&g->lock);
	rc = member_add(sh_of(g), c, c->f->qp_num(c->ep));
	pthread_mutex_unlock(&g->lock);
	return rc;
}

/* On failure the core destroys the ep and the send CQ (qp.h) first, then
 * calls srq_teardown(), which copes with a half-made setup. */
static int srq_setup(rdmx_conn *c)
{
	struct srq_conn *p = sc_of(c);
	int rc;

	p->mhead = p->mtail = NIL;
	p->sp = (struct rdmx__sendpool){
		.ops = &srq_pool_ops,
		.who = "srq",
		.post_what = "a send",
		.n = c->opts.send_depth,
		.stride = rdmx__pack_slot(c->max_msg),
	};
	rc = join_group(c);
	if (!rc)
		rc = rdmx__sendpool_make(c, &p->sp, RDMX__ACCESS_LOCAL);
	if (!rc)
		rc = rdmx__srq_credit_setup(c, &p->cr);
	if (!rc)
		rc = shared_join(c);
	if (!rc)
		rc = create_qp(c);
	if (!rc)
		rc = list_member(c);
	return rc;
}

/* Unlist @c and give back every shared buffer it had queued or held.
 * Under g->lock; also the group_unlist hook (closing a member), after
 * which the listener routes nothing more to @c. */
static void shared_leave_locked(rdmx_conn *c)
{
	struct srq_shared *sh = sh_of(c->group);
	uint32_t idx;

	if (!sh->made)
		return;
	member_del(sh, c);
	sc_of(c)->fr.next = sc_of(c)->fr.count = 0;
	sc_of(c)->rp.n = 0; /* its buffers are HELD: posted below */
	if (sh->fconn == c)
		sh->fconn = NULL;
	while ((idx = queue_pop(sh, c)) != NIL)
		buf_post(sh, NULL, idx);
	for (uint32_t i = 0; i < sh->depth; i++)
		if (sh->rb[i].state == BUF_HELD && sh->rb[i].owner == c)
			buf_post(sh, NULL, i);
	top_up_all(sh);
}

static void shared_leave(rdmx_conn *c)
{
	struct rdmx__group *g = c->group;

	pthread_mutex_lock(&g->lock);
	shared_leave_locked(c);
	pthread_mutex_unlock(&g->lock);
}

static void srq_teardown(rdmx_conn *c)
{
	struct srq_conn *p = sc_of(c);

	if (c->group && sh_of(c->group)->made)
		shared_leave(c);
	rdmx__sendpool_unmake(c, &p->sp);
	rdmx__srq_credit_teardown(c, &p->cr);
}

/*
 * Protocol block (28 bytes, little-endian):
 *   off size field
 *     0  u8  block version (2: credits; 1 was RNR flow control)
 *     1  u8  flags: bit 0 this side splits packed frames (core/unpack.h:
 *            the peer packs small messages of bursts toward it); 2..3 0
 *     4  u32 shared receive depth of this side (its SRQ, for all
 *            connections), equal to the hello's receive depth
 *     8  u32 bytes each of its shared receive buffers holds, >= max_msg
 *            (+ a frame's overhead when it splits)
 *    12  u32 credits granted to the peer by this hello, 1..depth
 *    16  u32 rkey of this side's credit word (srq_credit.c)
 *    20  u64 address of this side's credit word, 8-aligned
 * A peer with another version (an rdmx before credits) is refused at
 * connect with the version in the reason.
 */
static int srq_hello_out(rdmx_conn *c, uint8_t *block, size_t cap, size_t *len)
{
	struct rdmx__group *g = c->group;
	struct srq_shared *sh = sh_of(g);

	if (cap < BLOCK_LEN)
		return rdmx__fail(-EMSGSIZE, "srq: no room for the protocol block");
	block[0] = BLOCK_VERSION;
	block[1] = RDMX__UNPACK_SPLITS;
	block[2] = block[3] = 0;
	rdmx__put_u32(block + 4, sh->depth);
	rdmx__put_u32(block + 8, sh->buf_bytes);
	pthread_mutex_lock(&g->lock);
	rdmx__srq_credit_hello_out(&sc_of(c)->cr, share_of(sh), block + 12);
	pthread_mutex_unlock(&g->lock);
	*len = BLOCK_LEN;
	return 0;
}

static int srq_hello_in(rdmx_conn *c, const uint8_t *block, size_t len)
{
	uint32_t depth, bytes;

	if (len >= 1 && block[0] != BLOCK_VERSION)
		return rdmx__fail(-EPROTO, "srq: protocol block version %u, expected %d "
				  "(credit flow control)", block[0], BLOCK_VERSION);
	if (len != BLOCK_LEN)
		return rdmx__fail(-EPROTO, "srq: protocol block of %zu bytes, expected %d",
				  len, BLOCK_LEN);
	depth = rdmx__get_u32(block + 4);
	bytes = rdmx__get_u32(block + 8);
	if (depth == 0 || depth != c->peer_recv_depth)
		return rdmx__fail(-EPROTO, "srq: peer's shared receive depth %u does not match the %u in its hello",
				  depth, c->peer_recv_depth);
	if (bytes < c->max_msg)
		return rdmx__fail(-EPROTO, "srq: peer's shared receive buffers hold %u bytes, less than the negotiated max message %u",
				  bytes, c->max_msg);
	if (block[1] & RDMX__UNPACK_SPLITS) {
		sc_of(c)->peer_packs = 1;
		rdmx__unpack_peer_splits(c, &sc_of(c)->sp, bytes);
	}
	return rdmx__srq_credit_hello_in(&sc_of(c)->cr, block + 12, depth);
}

/* ---------------------------------------------------------------- sends */

static int reap_sends(rdmx_conn *c)
{
	struct srq_conn *p = sc_of(c);

	return rdmx__sendpool_reap(c, &p->sp, c->qp.scq);
}

/* What is left of @d for a second wait in the same call: the caller's
 * -1 (forever) and 0 (poll once) as they were, all of it when the first
 * did not wait (the deadline is armed by a wait: no clock read for a
 * credit that was there), else the milliseconds left. */
static int timeout_left(struct rdmx__deadline *d, int timeout_ms)
{
	return timeout_ms <= 0 || !d->armed ? timeout_ms : rdmx__deadline_left_ms(d);
}

/* rdmx_msg_alloc: a credit from the peer first (srq_credit.c), then a slot
 * of the send pool, both within @timeout_ms; the credit goes back if no
 * slot came. */
static int srq_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			 int timeout_ms)
{
	struct srq_conn *p = sc_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	/* held sends hold credits: ring them before a credit wait */
	if (p->cr.granted == p->cr.spent && (rc = rdmx__sendpool_push(c, &p->sp)))
		return rc;
	rc = rdmx__srq_credit_take(c, &p->cr, &d);
	if (rc)
		return rc;
	rc = rdmx__sendpool_msg_alloc(c, size, m, timeout_left(&d, timeout_ms));
	if (rc)
		rdmx__srq_credit_untake(&p->cr);
	return rc;
}

static int srq_send(rdmx_conn *c, struct rdmx_msg *m)
{
	return rdmx__srq_credit_send(c, &sc_of(c)->sp, &sc_of(c)->cr, m, 0);
}

static int srq_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	return rdmx__srq_credit_send(c, &sc_of(c)->sp, &sc_of(c)->cr, m, 1);
}

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

		buf_post(sh, NULL, idx);
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
		rc = poll_shared(sh);
	idx = queue_pop(sh, c);
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

static int srq_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
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

static int srq_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	int later = 0, rc = srq_recv_many(c, m, 1, timeout_ms, &later);

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
static int srq_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
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

static int srq_release(rdmx_conn *c, struct rdmx_msg *m)
{
	return srq_release_many(c, m, 1);
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
		rc = poll_shared(sh);
	if (rc < 0) {
		rdmx__fail(rc, "polling the shared receive CQ: %s", rdmx__last());
		goto unlock;
	}
	if (sh->ghead == NIL) {
		rc = report_gone(g, m);
		goto unlock;
	}
	c = sh->rb[sh->ghead].owner;
	rc = deliver(sh, c, queue_pop(sh, c), m);
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

static int srq_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
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

uint32_t rdmx__srq_posted(rdmx_conn *c)
{
	struct rdmx__group *g = c->group;
	struct srq_shared *sh;
	uint32_t n = 0;

	if (!g || c->proto->conn->setup != srq_setup) /* not an srq connection */
		return 0;
	sh = sh_of(g);
	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; sh->made && i < sh->depth; i++)
		n += sh->rb[i].state == BUF_POSTED;
	pthread_mutex_unlock(&g->lock);
	return n;
}

uint8_t *rdmx__srq_credit_word(rdmx_conn *c)
{
	return (uint8_t *)sc_of(c)->cr.w;
}

/* Registered per connection: its send slots (the SRQ is the listener's). */
static uint64_t srq_mem_estimate(const rdmx_conn *c)
{
	return (uint64_t)rdmx__pack_slot(c->max_msg) * c->opts.send_depth;
}

/* The core's hook for the completions of credit WRITEs. */
static int srq_own_wc(rdmx_conn *c, const struct rdmx__wc *wc)
{
	return rdmx__srq_credit_wc(c, &sc_of(c)->cr, wc);
}

static const struct rdmx__conn_ops srq_conn_ops = {
	.priv_size = sizeof(struct srq_conn),
	.check_opts = rdmx__default_check_opts,
	.mem_estimate = srq_mem_estimate,
	.setup = srq_setup,
	.hello_out = srq_hello_out,
	.hello_in = srq_hello_in,
	.teardown = srq_teardown,
};

static const struct rdmx__data_ops srq_data_ops = {
	.msg_alloc = srq_msg_alloc,
	.send = srq_send,
	.send_more = srq_send_more,
	.send_from = rdmx__sendpool_conn_send_from,
	.sendv = rdmx__sendpool_conn_sendv,
	.flush = rdmx__sendpool_conn_flush,
	.sends_done = rdmx__sendpool_conn_sends_done,
	.recv = srq_recv,
	.recv_many = srq_recv_many,
	.release = srq_release,
	.release_many = srq_release_many,
	.own_wc = srq_own_wc,
	.sleep_announce = rdmx__default_sleep_announce,
};

static const struct rdmx__group_ops srq_group_ops = {
	.shared_size = sizeof(struct srq_shared),
	.shared_teardown = srq_shared_teardown,
	.group_recv = srq_group_recv,
	.group_unlist = shared_leave_locked,
};

const struct rdmx_protocol_ops rdmx__proto_srq = {
	.name = "srq",
	.id = RDMX__PROTO_SRQ,
	.conn = &srq_conn_ops,
	.data = &srq_data_ops,
	.group = &srq_group_ops,
};
