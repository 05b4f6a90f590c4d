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
 * (repost(), srq_recv.c). The files, bottom first, are listed in srq_priv.h.
 *
 * Limits: every member of a listener must be on the device of the first
 * (one SRQ lives on one device); a member that holds its messages holds
 * its share of the buffers, not more.
 */
#include <errno.h>
#include <stdlib.h>

#include "srq.h"
#include "srq_priv.h"

#define BLOCK_VERSION 2
#define BLOCK_LEN (12 + SRQ_CREDIT_BLOCK)

static int reap_sends(rdmx_conn *c);

static const struct rdmx__sendpool_ops srq_pool_ops = {
	.reap = reap_sends,
};

/* Top every member up to the share (it grew: one left). g->lock. */
static void top_up_all(struct srq_shared *sh)
{
	for (size_t i = 0; i < sh->nmem; i++)
		rdmx__srq_credit_top_up(sh->mem[i].c, &sc_of(sh->mem[i].c)->cr,
					share_of(sh), 0);
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
		rc = rdmx__srq_shared_make(c, sh_of(g));
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
	rc = rdmx__srq_member_add(sh_of(g), c, c->f->qp_num(c->ep));
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
	rdmx__srq_member_del(sh, c);
	sc_of(c)->fr.next = sc_of(c)->fr.count = 0;
	sc_of(c)->rp.n = 0; /* its buffers are HELD: posted below */
	if (sh->fconn == c)
		sh->fconn = NULL;
	while ((idx = rdmx__srq_queue_pop(sh, c)) != NIL)
		rdmx__srq_buf_post(sh, NULL, idx);
	for (uint32_t i = 0; i < sh->depth; i++)
		if (sh->rb[i].state == BUF_HELD && sh->rb[i].owner == c)
			rdmx__srq_buf_post(sh, NULL, i);
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
	.recv = rdmx__srq_recv,
	.recv_many = rdmx__srq_recv_many,
	.release = rdmx__srq_release,
	.release_many = rdmx__srq_release_many,
	.own_wc = srq_own_wc,
	.sleep_announce = rdmx__default_sleep_announce,
};

static const struct rdmx__group_ops srq_group_ops = {
	.shared_size = sizeof(struct srq_shared),
	.shared_teardown = rdmx__srq_shared_teardown,
	.group_recv = rdmx__srq_group_recv,
	.group_unlist = shared_leave_locked,
};

const struct rdmx_protocol_ops rdmx__proto_srq = {
	.name = "srq",
	.id = RDMX__PROTO_SRQ,
	.conn = &srq_conn_ops,
	.data = &srq_data_ops,
	.group = &srq_group_ops,
};
