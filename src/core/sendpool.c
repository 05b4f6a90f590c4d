/* SPDX-License-Identifier: MIT */
/*
 * The send-buffer pool: see sendpool.h for what it is, how a protocol
 * uses it, and where per-send tokens and selective signaling go.
 */
#include <errno.h>
#include <stdlib.h>

#include "sendpool.h"

#define WC_BATCH 16

/* Slot arrays and free stack (all slots free). */
static int pool_alloc(struct rdmx__sendpool *sp)
{
	sp->buf = rdmx__alloc_buf(sp->stride * sp->n);
	sp->free_stack = calloc(sp->n, sizeof(*sp->free_stack));
	sp->state = calloc(sp->n, 1);
	sp->seq = sp->hold ? calloc(sp->n, sizeof(*sp->seq)) : NULL;
	if (!sp->buf || !sp->free_stack || !sp->state || (sp->hold && !sp->seq))
		return rdmx__fail(-ENOMEM, "%s: out of memory for %u send buffers of %zu bytes",
				  sp->who, sp->n, sp->stride);
	for (uint32_t i = 0; i < sp->n; i++)
		sp->free_stack[i] = sp->n - 1 - i;
	sp->nfree = sp->n;
	return 0;
}

int rdmx__sendpool_make(rdmx_conn *c, struct rdmx__sendpool *sp,
			unsigned access)
{
	int rc = pool_alloc(sp);

	if (rc)
		return rc;
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
	sp->seq = NULL;
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

/* A free slot (and room) within @timeout_ms, in @m. */
static int pool_alloc_msg(rdmx_conn *c, struct rdmx__sendpool *sp,
			  struct rdmx_msg *m, int timeout_ms)
{
	int rc = may_alloc(c, sp);

	if (rc < 0)
		return rc;
	if (!rc && (rc = pool_wait(c, sp, timeout_ms, may_alloc)))
		return rc;
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
	int rc = 0;

	if (!flushed(c, sp))
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

int rdmx__sendpool_conn_send(rdmx_conn *c, struct rdmx_msg *m)
{
	struct rdmx__sendpool *sp = c->priv;
	int64_t idx = rdmx__sendpool_slot(c, sp, m);
	struct rdmx__wr wr = {
		.op = RDMX__OP_SEND,
		.len = (uint32_t)m->len,
	};

	if (idx < 0)
		return rdmx__fail(-EINVAL, "%s: not a message from rdmx_msg_alloc on this connection",
				  sp->who);
	wr.addr = rdmx__sendpool_at(sp, (uint32_t)idx);
	if (m->flags & RDMX_MSG_IMM) {
		wr.op = RDMX__OP_SEND_IMM;
		wr.imm = m->imm;
	}
	return rdmx__sendpool_post(c, sp, (uint32_t)idx, &wr, m);
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
	int n = sp->ops->reap(c);

	*done = pool_done(c, sp);
	return n;
}
