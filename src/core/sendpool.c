/* SPDX-License-Identifier: MIT */
/*
 * The send-buffer pool: see sendpool.h for what it is, how a protocol
 * uses it, and where per-send tokens and selective signaling go.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "live.h"
#include "pack.h"
#include "post.h"
#include "protocol.h"
#include "sendpool.h"
#include "sendvec.h"
#include "wait.h"
#include "waitset.h"

#define WC_BATCH 16

/* Slot arrays and free stack (all slots free). */
static int pool_alloc(struct rdmx__sendpool *sp)
{
	sp->buf = rdmx__alloc_buf(sp->stride * sp->n);
	sp->free_stack = calloc(sp->n, sizeof(*sp->free_stack));
	sp->state = calloc(sp->n, 1);
	sp->seq = sp->hold ? calloc(sp->n, sizeof(*sp->seq)) : NULL;
	sp->fifo = calloc(sp->n, sizeof(*sp->fifo));
	sp->nmsg = calloc(sp->n, sizeof(*sp->nmsg));
	sp->held_max = sp->n < RDMX__SP_CHAIN_MAX ? sp->n : RDMX__SP_CHAIN_MAX;
	sp->held = calloc(sp->held_max, sizeof(*sp->held));
	if (!sp->buf || !sp->free_stack || !sp->state || (sp->hold && !sp->seq) ||
	    !sp->fifo || !sp->held || !sp->nmsg)
		return rdmx__fail(-ENOMEM, "%s: out of memory for %u send buffers of %zu bytes",
				  sp->who, sp->n, sp->stride);
	for (uint32_t i = 0; i < sp->n; i++)
		sp->free_stack[i] = sp->n - 1 - i;
	sp->nfree = sp->n;
	return 0;
}

/* One signaled work request per this many: the connection's signal_every
 * (checked by conn.c: 1 or up to n / 2), else the default. */
static uint32_t signal_every(const rdmx_conn *c, const struct rdmx__sendpool *sp)
{
	uint32_t every = c->opts.signal_every;

	if (every)
		return every;
	every = sp->n / 2 < RDMX__SP_SIGNAL_DEFAULT ? sp->n / 2 : RDMX__SP_SIGNAL_DEFAULT;
	return every ? every : 1;
}

int rdmx__sendpool_make(rdmx_conn *c, struct rdmx__sendpool *sp,
			unsigned access)
{
	int rc = pool_alloc(sp);

	if (rc)
		return rc;
	sp->every = signal_every(c, sp);
	return c->f->reg_mr(c->ep, sp->buf, sp->stride * sp->n, access, &sp->mr);
}

/* After the QP is gone; copes with a half-made pool. */
void rdmx__sendpool_unmake(rdmx_conn *c, struct rdmx__sendpool *sp)
{
	if (sp->mr)
		c->f->dereg_mr(sp->mr);
	free(sp->buf);
	free(sp->free_stack);
	free(sp->state);
	free(sp->seq);
	free(sp->fifo);
	free(sp->held);
	free(sp->nmsg);
	sp->nmsg = NULL;
	sp->seq = NULL;
	sp->fifo = NULL;
	sp->held = NULL;
	sp->nheld = 0;
	sp->mr = NULL;
	sp->buf = NULL;
	sp->free_stack = NULL;
	sp->state = NULL;
}

/* 1 when a message may be handed out now, 0 not yet, or -errno. */
static int may_alloc(rdmx_conn *c, struct rdmx__sendpool *sp)
{
	if (!sp->nfree)
		return 0;
	return sp->ops->room ? sp->ops->room(c) : 1;
}

/* 1 once nothing sent is unflushed, else 0. */
static int flushed(rdmx_conn *c, struct rdmx__sendpool *sp)
{
	return !(sp->ops->unflushed ? sp->ops->unflushed(c) : sp->inflight);
}

/*
 * The pool's wait, once @until said 0: reap, ask @until again, and when
 * the reap found nothing take the one wait step; until @until says 1
 * (or -errno). The deadline starts here, on the slow path: a call that
 * needs no wait pays nothing for it.
 */
static int pool_wait(rdmx_conn *c, struct rdmx__sendpool *sp, int timeout_ms,
		     int (*until)(rdmx_conn *, struct rdmx__sendpool *))
{
	struct rdmx__deadline d;
	int n, rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		n = sp->ops->reap(c);
		if (n < 0)
			return n;
		rc = until(c, sp);
		if (rc)
			return rc < 0 ? rc : 0;
		if (n == 0 && (rc = rdmx__conn_wait(c, &d)))
			return rc;
	}
}

/* Hand slot @idx to the user in @m. */
static void fill_msg(rdmx_conn *c, struct rdmx__sendpool *sp, uint32_t idx,
		     struct rdmx_msg *m)
{
	sp->state[idx] = RDMX__SP_ALLOC;
	sp->nalloc++;
	m->data = rdmx__sendpool_at(sp, idx) + sp->data_off;
	m->cap = c->max_msg;
	m->len = 0;
	m->imm = 0;
	m->flags = 0;
	rdmx__msg_set(m, c, RDMX__MSG_SEND, idx);
}

/*
 * Must an alloc that would wait ring what is held first? Yes, unless it
 * waits for a slot while posted sends are out: each of them is freed by a
 * signaled completion already posted (the tail of every doorbell is), so
 * the wait ends without the held ones, which the next sends of the burst
 * keep packing into. A sender that outruns its receiver waits for a slot
 * at nearly every alloc: ringing there split bursts (rdmx bench --fabric
 * fake -k 128 --batch 16: 7% of them went as a frame of 1 and one of 15).
 */
static int push_before_wait(const struct rdmx__sendpool *sp)
{
	return sp->nfree || !sp->fcount;
}

/* A free slot (and room) within @timeout_ms, in @m: the way with a wait,
 * apart so the way without one sets up no deadline (bench/profile). */
static __attribute__((noinline)) int pool_alloc_wait(rdmx_conn *c,
						     struct rdmx__sendpool *sp,
						     struct rdmx_msg *m,
						     int timeout_ms)
{
	int rc = may_alloc(c, sp);

	if (rc < 0)
		return rc;
	if (!rc && push_before_wait(sp) && (rc = rdmx__sendpool_push(c, sp)))
		return rc;
	if (!rc && (rc = pool_wait(c, sp, timeout_ms, may_alloc)))
		return rc;
	fill_msg(c, sp, sp->free_stack[--sp->nfree], m);
	return 0;
}

static int pool_alloc_msg(rdmx_conn *c, struct rdmx__sendpool *sp,
			  struct rdmx_msg *m, int timeout_ms)
{
	if (!sp->nfree || sp->ops->room)
		return pool_alloc_wait(c, sp, m, timeout_ms);
	fill_msg(c, sp, sp->free_stack[--sp->nfree], m);
	return 0;
}

int rdmx__sendpool_post_failed(rdmx_conn *c, const struct rdmx__sendpool *sp,
			       int rc)
{
	return rdmx__conn_down(c, rc, "posting %s: %s", sp->post_what, rdmx__last());
}

int rdmx__sendpool_reap(rdmx_conn *c, struct rdmx__sendpool *sp,
			struct rdmx__cq *cq)
{
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, cq, wc, WC_BATCH);

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++) {
		if (wc[i].status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, &wc[i], "send");
		rdmx__sendpool_sent(sp, (uint32_t)wc[i].wr_id);
	}
	return n;
}

/* Wait until nothing is unflushed. */
static int pool_flush(rdmx_conn *c, struct rdmx__sendpool *sp, int timeout_ms)
{
	int rc = rdmx__sendpool_push(c, sp);

	if (!rc && !flushed(c, sp))
		rc = pool_wait(c, sp, timeout_ms, flushed);
	return rc == -EAGAIN ? -ETIMEDOUT : rc;
}

int rdmx__sendpool_flush(rdmx_conn *c, struct rdmx__sendpool *sp,
			 int timeout_ms)
{
	return pool_flush(c, sp, timeout_ms);
}

/* Every slot holds max_msg bytes: @size (checked by the core) is met. */
int rdmx__sendpool_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			     int timeout_ms)
{
	(void)size;
	return pool_alloc_msg(c, c->priv, m, timeout_ms);
}

int rdmx__sendpool_conn_flush(rdmx_conn *c, int timeout_ms)
{
	return pool_flush(c, c->priv, timeout_ms);
}

/*
 * Ring the chain: one work request in sp->every signaled, and the last
 * (sendpool.h: the send queue's tail is always signaled); the slots enter
 * the post order.
 */
int rdmx__sendpool_push(rdmx_conn *c, struct rdmx__sendpool *sp)
{
	uint32_t n = sp->nheld;
	int rc;

	if (!n)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		if (rdmx__wr_may_inline(c, &sp->held[i])) /* rdmx__post_send
							  * inlines a lone one */
			sp->held[i].flags |= RDMX__WR_INLINE;
		if ((i + 1) % sp->every == 0 || i + 1 == n)
			sp->held[i].flags |= RDMX__WR_SIGNALED;
		rdmx__sendpool_fifo_push(sp, (uint32_t)sp->held[i].wr_id);
	}
	sp->nheld = 0;
	rc = rdmx__post_send(c, sp->held, (int)n);
	return rc ? rdmx__sendpool_post_failed(c, sp, rc) : 0;
}

/* The last held send is a packed frame. */
static int held_frame(const struct rdmx__wr *w)
{
	return w->op == RDMX__OP_SEND_IMM && w->imm == RDMX__PACK_IMM;
}

/* The length held send @w would have as a frame, or 0 when it cannot be
 * one (too large, not a SEND). */
static uint32_t frame_len(const struct rdmx__sendpool *sp,
			  const struct rdmx__wr *w)
{
	if (held_frame(w))
		return w->len;
	if (w->len > sp->pack_small || (w->op != RDMX__OP_SEND && w->op != RDMX__OP_SEND_IMM))
		return 0;
	return RDMX__PACK_OVERHEAD + rdmx__pack_pad(w->len);
}

/*
 * Pack @m (slot @idx, ALLOC) into the last held send, making it a frame
 * if it is not one: 1 when packed (@idx free again, @m spent), 0 when it
 * does not fit (too large, no held send, frame full).
 */
static int pack_held(struct rdmx__sendpool *sp, uint32_t idx,
		     struct rdmx_msg *m)
{
	uint32_t len = (uint32_t)m->len, fidx, flen;
	int has_imm = !!(m->flags & RDMX_MSG_IMM);
	struct rdmx__wr *w;
	uint8_t *f;

	if (len > sp->pack_small || !sp->nheld ||
	    (has_imm && m->imm == RDMX__PACK_IMM)) /* framed */
		return 0;
	w = &sp->held[sp->nheld - 1];
	fidx = (uint32_t)w->wr_id;
	flen = frame_len(sp, w);
	if (!flen || sp->nmsg[fidx] >= RDMX__PACK_MAX ||
	    rdmx__pack_grown(flen, len) > sp->pack_cap)
		return 0;
	f = rdmx__sendpool_at(sp, fidx);
	if (!held_frame(w)) {
		w->len = rdmx__pack_start(f, w->len, w->op == RDMX__OP_SEND_IMM, w->imm);
		w->op = RDMX__OP_SEND_IMM;
		w->imm = RDMX__PACK_IMM;
	}
	w->len = rdmx__pack_add(f, w->len, m->data, len, has_imm, m->imm);
	rdmx__sendpool_put(sp, idx);
	sp->nalloc--;
	sp->inflight++;
	sp->nmsg[fidx]++;
	rdmx__msg_spend(m);
	return 1;
}

/* @m was packed: ring the chain unless more may follow. */
static int packed(rdmx_conn *c, struct rdmx__sendpool *sp, int more)
{
	return more && sp->nheld < sp->held_max ? 0 : rdmx__sendpool_push(c, sp);
}

/* Hold @wr (slot @idx, which @m names) in the chain; ring it unless
 * more may follow. */
static int chain_add(rdmx_conn *c, struct rdmx__sendpool *sp, uint32_t idx,
		     const struct rdmx__wr *wr, struct rdmx_msg *m, int more)
{
	struct rdmx__wr *w = &sp->held[sp->nheld++];
	int rc;

	*w = *wr;
	w->wr_id = ((uint64_t)sp->wr_kind << 32) | idx;
	w->flags &= ~(unsigned)(RDMX__WR_SIGNALED | RDMX__WR_INLINE);
	w->lkey = sp->mr->lkey;
	rdmx__sendpool_mark(c, sp, idx);
	if (!more || sp->nheld == sp->held_max) {
		rc = rdmx__sendpool_push(c, sp);
		if (rc) { /* the connection is down; the handle stays the user's */
			sp->state[idx] = RDMX__SP_ALLOC;
			sp->nalloc++;
			sp->inflight--;
			return rc;
		}
	}
	rdmx__msg_spend(m);
	return 0;
}

int rdmx__sendpool_post_chain(rdmx_conn *c, struct rdmx__sendpool *sp,
			      uint32_t idx, const struct rdmx__wr *wr,
			      struct rdmx_msg *m, int more)
{
	if (sp->pack_small && pack_held(sp, idx, m))
		return packed(c, sp, more);
	return chain_add(c, sp, idx, wr, m, more);
}

/*
 * The two-sided send. A small message of a burst is packed into the held
 * frame first, before any work request is made for it: that is most
 * messages of a burst (bench/profile-burst).
 */
static int conn_send(rdmx_conn *c, struct rdmx_msg *m, int more)
{
	struct rdmx__sendpool *sp = c->priv;
	int64_t idx = rdmx__sendpool_slot(c, sp, m);
	struct rdmx__wr wr;

	if (idx < 0)
		return rdmx__fail(-EINVAL, "%s: not a message from rdmx_msg_alloc on this connection",
				  sp->who);
	if (sp->nheld && sp->pack_small && pack_held(sp, (uint32_t)idx, m))
		return packed(c, sp, more);
	wr = (struct rdmx__wr){
		.op = RDMX__OP_SEND,
		.len = (uint32_t)m->len,
		.addr = rdmx__sendpool_at(sp, (uint32_t)idx),
	};
	if (m->flags & RDMX_MSG_IMM) {
		wr.op = RDMX__OP_SEND_IMM;
		wr.imm = m->imm;
		if (m->imm == RDMX__PACK_IMM && sp->pack_cap) /* a frame of one */
			wr.len = rdmx__pack_start(wr.addr, wr.len, 1, m->imm);
	}
	if (more || sp->nheld)
		return chain_add(c, sp, (uint32_t)idx, &wr, m, more);
	return rdmx__sendpool_post_more(c, sp, (uint32_t)idx, &wr, m, 0);
}

int rdmx__sendpool_conn_send(rdmx_conn *c, struct rdmx_msg *m)
{
	return conn_send(c, m, 0);
}

int rdmx__sendpool_conn_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	return conn_send(c, m, 1);
}

/* Zero copy: never packed nor held (what is held goes first), so the
 * chain's slots keep their own bytes and this SEND is the caller's. */
int rdmx__sendpool_conn_send_from(rdmx_conn *c, struct rdmx_msg *m,
				  const void *from, uint32_t lkey)
{
	struct rdmx__sendpool *sp = c->priv;
	int64_t idx = rdmx__sendpool_slot(c, sp, m);
	struct rdmx__wr wr = {
		.op = RDMX__OP_SEND,
		.len = (uint32_t)m->len,
		.addr = (void *)(uintptr_t)from,
		.lkey = lkey,
	};
	int rc;

	if (idx < 0)
		return rdmx__fail(-EINVAL, "%s: not a message from rdmx_msg_alloc on this connection",
				  sp->who);
	rc = rdmx__sendpool_push(c, sp);
	if (rc)
		return rc;
	return rdmx__sendpool_post_lone(c, sp, (uint32_t)idx, &wr, m);
}

/*
 * Fill slot @idx from @iov (@n messages left): a packed frame of the run
 * of small messages that fits, when there are two or more, else a copy of
 * the first message. Sets @wr (op, addr, len); how many messages it holds.
 */
static int slot_fill(const struct rdmx__sendpool *sp, uint32_t idx,
		     const struct iovec *iov, int n, struct rdmx__wr *wr)
{
	uint8_t *f = rdmx__sendpool_at(sp, idx);
	uint32_t flen = RDMX__PACK_HDR;
	int k = 0;

	if (sp->pack_small && n > 1 && iov[0].iov_len <= sp->pack_small &&
	    iov[1].iov_len <= sp->pack_small) {
		rdmx__pack_put32(f, 0);
		rdmx__pack_put32(f + 4, 0);
		for (; k < n && k < RDMX__PACK_MAX && iov[k].iov_len <= sp->pack_small &&
		       rdmx__pack_grown(flen, (uint32_t)iov[k].iov_len) <= sp->pack_cap; k++)
			flen = rdmx__pack_add(f, flen, iov[k].iov_base, (uint32_t)iov[k].iov_len,
					      0, 0);
	}
	if (k > 1) {
		*wr = (struct rdmx__wr){ .op = RDMX__OP_SEND_IMM, .imm = RDMX__PACK_IMM,
					 .addr = f, .len = flen };
		return k;
	}
	if (iov[0].iov_len)
		memcpy(f + sp->data_off, iov[0].iov_base, iov[0].iov_len);
	*wr = (struct rdmx__wr){ .op = RDMX__OP_SEND, .addr = f + sp->data_off,
				 .len = (uint32_t)iov[0].iov_len };
	return 1;
}

/*
 * rdmx_sendv on the two-sided protocols (core/sendvec.c): a run of small
 * messages goes straight from the iovec into one slot as a packed frame
 * (no handle, check or lock per message), any other message into a slot
 * of its own. Each slot comes from the protocol's msg_alloc (srq: a
 * credit a frame) and joins the chain, rung at the end, when full, or by
 * an alloc that waits. How many messages were sent, or -errno for none.
 */
int rdmx__sendpool_conn_sendv(rdmx_conn *c, const struct iovec *iov, int n,
			      int timeout_ms)
{
	struct rdmx__sendpool *sp = c->priv;
	struct rdmx__deadline d;
	int i = 0, k, rc = 0;

	rdmx__deadline_start(&d, timeout_ms);
	while (i < n) {
		struct rdmx__wr wr;
		struct rdmx_msg m;
		uint32_t idx;

		rc = rdmx__sendv_alloc(c, iov[i].iov_len, &m, &d, timeout_ms);
		if (rc)
			break;
		idx = (uint32_t)rdmx__sendpool_slot(c, sp, &m);
		k = slot_fill(sp, idx, iov + i, n - i, &wr);
		rc = chain_add(c, sp, idx, &wr, &m, i + k < n);
		if (rc) {
			c->data_ops->release(c, &m);
			break;
		}
		sp->nmsg[idx] = (uint32_t)k; /* @inflight counts sends */
		sp->inflight += (uint32_t)k - 1;
		i += k;
	}
	if (i && i < n && (k = rdmx__sendpool_push(c, sp)))
		rc = k;
	return i ? i : rc;
}

/* Sends complete: those before the first one still out. A hold pool's
 * slots come back in any order, so it looks at each slot. */
static uint64_t pool_done(const rdmx_conn *c, const struct rdmx__sendpool *sp)
{
	uint64_t done = rdmx__sends(c);

	if (!sp->hold)
		return done - sp->inflight;
	for (uint32_t i = 0; i < sp->n; i++)
		if ((sp->state[i] == RDMX__SP_POSTED || sp->state[i] == RDMX__SP_SENT) &&
		    sp->seq[i] <= done)
			done = sp->seq[i] - 1;
	return done;
}

int rdmx__sendpool_conn_sends_done(rdmx_conn *c, uint64_t *done)
{
	struct rdmx__sendpool *sp = c->priv;
	int n = rdmx__sendpool_push(c, sp); /* a token wait rings what is held */

	if (!n)
		n = sp->ops->reap(c);
	*done = pool_done(c, sp);
	return n;
}
