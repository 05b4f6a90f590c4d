/* SPDX-License-Identifier: MIT */
/*
 * send_recv: two-sided messaging. Each side posts recv_depth receive buffers
 * of max_msg bytes; every message is one SEND (SEND_WITH_IMM when the
 * message carries immediate data) from one of send_depth registered send
 * buffers, which the sender fills in place (zero copy). The receiver reads
 * the message in its receive buffer and reposts it on release.
 *
 * Flow control is the hardware's: a SEND that finds no receive posted is
 * retried by the responder's RNR NAK (rnr_retry, 7 = forever); when the
 * retries run out the connection goes down with an RNR error, nothing is
 * dropped silently. A SEND's completion (or a later signaled one's) frees
 * its slot. The send buffers are the core's send pool (core/sendpool.h),
 * which also chains, selectively signals and packs bursts
 * (RDMX_SEND_MORE).
 *
 * Packing (core/pack.h): small messages of a burst travel several to a
 * SEND as a packed frame when the peer said in its hello that it splits
 * them (a one-byte block, bit 0; every send_recv does) and coalesce is not
 * OFF. A frame's messages are handed out in place, one per rdmx_recv; its
 * buffer goes back once all of them are released (@rmask). A malformed
 * frame fails this connection (-EPROTO). Buffers hold max_msg plus a
 * frame's overhead, so a message whose immediate data is the frame marker
 * travels as a frame of one, and at least RDMX__PACK_FRAME_MIN bytes, so
 * that a burst packs when max_msg is small (rdmx__pack_slot; the hello's
 * bits 1 and 2 say so; a peer with bit 1 alone has the older, smaller
 * floor RDMX__PACK_FRAME_MIN_V1).
 *
 * Released receive buffers are reposted in chains of up to recv_depth / 4
 * (at most RDMX__REPOST_MAX, core/repost.h): one doorbell for several. A receiver never waits
 * with buffers unposted (sr_recv reposts them before it idles), and the
 * sender always has three quarters of the buffers to send into.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
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

enum { SLOT_FREE, SLOT_POSTED, SLOT_HELD }; /* receive buffers */

#define WC_BATCH 16

struct sr {
	struct rdmx__sendpool sp; /* send buffers */
	uint8_t *rbuf;
	struct rdmx__mr *rmr;
	size_t slot;              /* bytes per buffer */
	uint32_t nrecv;
	uint8_t *rstate;          /* SLOT_* per receive buffer */
	struct rdmx__wc wc[WC_BATCH]; /* receive completions not handed out */
	int wc_n, wc_i;
	struct rdmx__repost rp;   /* released, not yet reposted */
	uint64_t *rmask;          /* per buffer: its messages not released */
	struct rdmx__unpack fr;   /* the frame being handed out */
};
RDMX__SENDPOOL_FIRST(struct sr, sp);

static struct sr *sr_of(rdmx_conn *c)
{
	return c->priv;
}

static int reap_sends(rdmx_conn *c);

static const struct rdmx__sendpool_ops sr_pool_ops = {
	.reap = reap_sends,
};

/* ---------------------------------------------------------------- setup */

/* Receive buffer @idx's work request. */
static struct rdmx__wr recv_wr(const struct sr *p, uint32_t idx)
{
	return (struct rdmx__wr){
		.wr_id = idx,
		.op = RDMX__OP_RECV,
		.addr = p->rbuf + (size_t)idx * p->slot,
		.len = (uint32_t)p->slot,
		.lkey = p->rmr->lkey,
	};
}

static int post_one_recv(rdmx_conn *c, uint32_t idx)
{
	struct sr *p = sr_of(c);
	struct rdmx__wr wr = recv_wr(p, idx);

	p->rstate[idx] = SLOT_POSTED;
	return rdmx__post_recv(c, &wr, 1);
}

static int alloc_recv(struct sr *p)
{
	p->rbuf = rdmx__alloc_buf(p->slot * p->nrecv);
	p->rstate = calloc(p->nrecv, 1);
	p->rmask = calloc(p->nrecv, sizeof(*p->rmask));
	if (!p->rbuf || !p->rstate || !p->rmask)
		return rdmx__fail(-ENOMEM, "send_recv: out of memory for %u receive buffers of %zu bytes",
				  p->nrecv, p->slot);
	return 0;
}

static int create_queues(rdmx_conn *c)
{
	struct sr *p = sr_of(c);
	struct rdmx__qp_want w = { .send_wr = p->sp.n, .recv_wr = p->nrecv };

	return rdmx__qp_make(c, &w);
}

static void sr_teardown(rdmx_conn *c)
{
	struct sr *p = sr_of(c);

	if (p->rmr)
		c->f->dereg_mr(p->rmr);
	free(p->rbuf);
	free(p->rstate);
	free(p->rmask);
	rdmx__sendpool_unmake(c, &p->sp);
}

/* On failure the core destroys the ep (and QP) and its CQs first, then
 * calls sr_teardown(), which copes with a half-made setup. */
static int sr_setup(rdmx_conn *c)
{
	struct sr *p = sr_of(c);
	int rc;

	p->slot = rdmx__pack_slot(c->max_msg);
	p->nrecv = c->opts.recv_depth;
	rdmx__repost_init(&p->rp, p->nrecv);
	p->sp = (struct rdmx__sendpool){
		.ops = &sr_pool_ops,
		.who = "send_recv",
		.post_what = "a send",
		.n = c->opts.send_depth,
		.stride = p->slot,
	};
	rc = rdmx__sendpool_make(c, &p->sp, RDMX__ACCESS_LOCAL);
	if (!rc)
		rc = alloc_recv(p);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->rbuf, p->slot * p->nrecv,
				  RDMX__ACCESS_LOCAL, &p->rmr);
	if (!rc)
		rc = create_queues(c);
	for (uint32_t i = 0; !rc && i < p->nrecv; i++)
		rc = post_one_recv(c, i);
	return rc;
}

static int sr_hello_out(rdmx_conn *c, uint8_t *block, size_t cap, size_t *len)
{
	(void)c;
	if (cap < 1)
		return rdmx__fail(-EINVAL, "send_recv: no room for the protocol block");
	block[0] = RDMX__UNPACK_SPLITS | RDMX__UNPACK_FRAME_MIN | RDMX__UNPACK_FRAME_FULL;
	*len = 1;
	return 0;
}

/* The peer's block: empty, or one byte of flags (unknown bits ignored).
 * A peer that splits gets small messages of bursts packed. */
static int sr_hello_in(rdmx_conn *c, const uint8_t *block, size_t len)
{
	struct sr *p = sr_of(c);
	size_t bytes;

	if (len > 1)
		return rdmx__fail(-EPROTO, "send_recv: unexpected %zu-byte protocol block", len);
	if (!len || !(block[0] & RDMX__UNPACK_SPLITS))
		return 0;
	/* the peer's buffers hold the negotiated max_msg and a frame's
	 * overhead (its sr_setup ran with a max_msg at least as large), and
	 * with RDMX__UNPACK_FRAME_MIN at least the floor of its version */
	bytes = (size_t)c->max_msg + RDMX__PACK_OVERHEAD;
	if (block[0] & RDMX__UNPACK_FRAME_FULL)
		bytes = rdmx__pack_slot(c->max_msg);
	else if (block[0] & RDMX__UNPACK_FRAME_MIN)
		bytes = rdmx__pack_slot_min(c->max_msg, RDMX__PACK_FRAME_MIN_V1);
	rdmx__unpack_peer_splits(c, &p->sp, (uint32_t)bytes);
	return 0;
}

/* ---------------------------------------------------------------- sends */

static int reap_sends(rdmx_conn *c)
{
	struct sr *p = sr_of(c);

	return rdmx__sendpool_reap(c, &p->sp, c->qp.scq);
}

/* The receive buffer a handle refers to (its message @ent of the buffer
 * in *@ent), or -EINVAL. */
RDMX__HOT int64_t recv_slot(rdmx_conn *c, const struct rdmx_msg *m, uint32_t *ent)
{
	struct sr *p = sr_of(c);
	int64_t idx = rdmx__unpack_handle(c, m, p->nrecv, ent);

	if (idx < 0 || p->rstate[idx] != SLOT_HELD || !(p->rmask[idx] >> *ent & 1))
		return -EINVAL;
	return idx;
}

/* ------------------------------------------------------------- receives */

/* A packed frame arrived in buffer @idx: parse it (read once, checked)
 * and hand out its first message. */
static int frame_in(rdmx_conn *c, uint32_t idx, uint32_t len, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);
	int rc = rdmx__unpack_start(c, &p->fr, "send_recv", p->rbuf + (size_t)idx * p->slot,
				    idx, len, &p->rmask[idx]);

	if (rc)
		return rc;
	p->rstate[idx] = SLOT_HELD;
	rdmx__unpack_next(c, &p->fr, m);
	return 0;
}

static int deliver(rdmx_conn *c, const struct rdmx__wc *wc, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);
	uint32_t idx = (uint32_t)wc->wr_id;

	if (wc->status == RDMX__WC_FLUSHED)
		return rdmx__conn_flushed(c);
	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "receive");
	if (rdmx__unpack_is_frame(wc))
		return frame_in(c, idx, wc->byte_len, m);
	p->rstate[idx] = SLOT_HELD;
	p->rmask[idx] = 1;
	rdmx__unpack_fill(c, m, p->rbuf + (size_t)idx * p->slot, wc->byte_len, wc->has_imm,
			  wc->imm, idx);
	return 0;
}

/* One look for a message: 1 with it in @m, 0 none yet, or -errno. */
static int take_one(rdmx_conn *c, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);
	int rc;

	if (rdmx__unpack_more(&p->fr)) {
		rdmx__unpack_next(c, &p->fr, m);
		return 1;
	}
	if (p->wc_i == p->wc_n) {
		rc = c->f->poll_cq(c->qp.rcq, p->wc, WC_BATCH);
		if (rc < 0)
			return rdmx__conn_down(c, rc, "polling receive completions: %s",
					       rdmx__last());
		p->wc_n = rc;
		p->wc_i = 0;
	}
	if (p->wc_i == p->wc_n)
		return 0;
	rc = deliver(c, &p->wc[p->wc_i++], m);
	return rc ? rc : 1;
}

/* The deadline starts at the first look that found nothing: a message
 * already in costs no clock and no deadline (bench/profile). */
static int sr_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct sr *p = sr_of(c);
	struct rdmx__deadline d;
	int rc = take_one(c, m);

	if (rc)
		return rc < 0 ? rc : 0;
	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		if ((rc = rdmx__repost_flush(c, &p->rp, NULL)) ||
		    (rc = rdmx__recv_idle(c, &d)))
			return rc;
		rc = take_one(c, m);
		if (rc)
			return rc < 0 ? rc : 0;
	}
}

/* The first message as sr_recv takes it, then those already in: one
 * CQ poll per WC_BATCH, no clock, no wait. */
static int sr_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			int timeout_ms, int *later)
{
	struct sr *p = sr_of(c);
	int n = 1, rc = sr_recv(c, m, timeout_ms);

	if (rc)
		return rc;
	while (n < max) {
		while (n < max && rdmx__unpack_more(&p->fr)) /* a frame's rest */
			rdmx__unpack_next(c, &p->fr, &m[n++]);
		if (n == max || (rc = take_one(c, &m[n])) <= 0)
			break;
		n++;
	}
	if (rc < 0)
		*later = rc;
	return n;
}

/* Every message of receive buffer @idx was released: repost it. */
static int recv_done(rdmx_conn *c, uint32_t idx)
{
	struct sr *p = sr_of(c);
	struct rdmx__wr wr;

	if (c->state == RDMX__CONN_DOWN) {
		p->rstate[idx] = SLOT_FREE;
		return 0;
	}
	p->rstate[idx] = SLOT_POSTED;
	wr = recv_wr(p, idx);
	return rdmx__repost_add(&p->rp, &wr) ? rdmx__repost_flush(c, &p->rp, NULL) : 0;
}

/* A received message first: the common release. Inline in
 * sr_release_many's loop. */
RDMX__HOT int release_one(rdmx_conn *c, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);
	uint32_t ent = 0;
	int64_t idx = recv_slot(c, m, &ent);
	int rc;

	if (idx < 0) {
		if (!rdmx__sendpool_release(c, &p->sp, m))
			return 0;
		return rdmx__fail(-EINVAL, "send_recv: message not held on this connection");
	}
	p->rmask[idx] &= ~(UINT64_C(1) << ent);
	if (!p->rmask[idx] && (rc = recv_done(c, (uint32_t)idx)))
		return rc; /* other messages of its frame may still be out */
	rdmx__msg_spend(m);
	return 0;
}

static int sr_release(rdmx_conn *c, struct rdmx_msg *m)
{
	return release_one(c, m);
}

static int sr_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	int first = 0;

	for (int i = 0; i < n; i++) {
		int rc = release_one(c, &m[i]);

		first = first ? first : rc;
	}
	return first;
}

/* Registered per connection: send_depth + recv_depth slots of max_msg
 * (at least a frame's worth, rdmx__pack_slot). */
static uint64_t sr_mem_estimate(const rdmx_conn *c)
{
	return (uint64_t)rdmx__pack_slot(c->max_msg) *
	       ((uint64_t)c->opts.send_depth + c->opts.recv_depth);
}

static const struct rdmx__conn_ops sr_conn_ops = {
	.priv_size = sizeof(struct sr),
	.check_opts = rdmx__default_check_opts,
	.mem_estimate = sr_mem_estimate,
	.setup = sr_setup,
	.hello_out = sr_hello_out,
	.hello_in = sr_hello_in,
	.teardown = sr_teardown,
};

static const struct rdmx__data_ops sr_data_ops = {
	.msg_alloc = rdmx__sendpool_msg_alloc,
	.send = rdmx__sendpool_conn_send,
	.send_more = rdmx__sendpool_conn_send_more,
	.send_from = rdmx__sendpool_conn_send_from,
	.sendv = rdmx__sendpool_conn_sendv,
	.flush = rdmx__sendpool_conn_flush,
	.sends_done = rdmx__sendpool_conn_sends_done,
	.recv = sr_recv,
	.recv_many = sr_recv_many,
	.release = sr_release,
	.release_many = sr_release_many,
	.own_wc = rdmx__default_own_wc,
	.sleep_announce = rdmx__default_sleep_announce,
};

const struct rdmx_protocol_ops rdmx__proto_send_recv = {
	.name = "send_recv",
	.id = RDMX__PROTO_SEND_RECV,
	.conn = &sr_conn_ops,
	.data = &sr_data_ops,
	.group = &rdmx__group_none,
};
