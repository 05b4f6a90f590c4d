/* SPDX-License-Identifier: MIT */
/*
 * srq's shared receive side (the design is at the top of srq_conn.c): the SRQ's
 * buffers, the list of the connections on it, and the completion queues
 * that file each receive completion under its connection. srq_conn.c makes it
 * and lists members (set-up), srq_recv.c polls it and hands messages out.
 * Everything here runs under g->lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "srq_priv.h"

/* ------------------------------------------------------- shared buffers */

/* Give buffer @idx back to the SRQ; @c (may be NULL) is charged for it. */
int rdmx__srq_buf_post(struct srq_shared *sh, rdmx_conn *c,
		       uint32_t idx)
{
	struct rdmx__wr wr = recv_wr(sh, idx);

	sh->rb[idx].state = BUF_POSTED;
	sh->rb[idx].owner = NULL;
	sh->posted++;
	if (c)
		c->posted_recv++;
	return sh->f->post_srq_recv(sh->rx.srq, &wr, 1);
}

/* Free what rdmx__srq_shared_make() made; copes with a half-made state. */
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
int rdmx__srq_shared_make(rdmx_conn *c, struct srq_shared *sh)
{
	int rc = shared_alloc(c, sh);

	if (!rc)
		rc = c->f->reg_mr(c->ep, sh->buf, sh->slot * sh->depth,
				  RDMX__ACCESS_LOCAL, &sh->mr);
	if (!rc)
		rc = rdmx__qp_shared_make(c, sh->depth, &sh->rx);
	for (uint32_t i = 0; !rc && i < sh->depth; i++)
		rc = rdmx__srq_buf_post(sh, c, i);
	if (rc) {
		shared_unmake(sh);
		return rc;
	}
	sh->made = 1;
	return 0;
}

void rdmx__srq_shared_teardown(struct rdmx__group *g)
{
	struct srq_shared *sh = sh_of(g);

	if (sh->made)
		shared_unmake(sh);
}

/* ------------------------------------------------------------- members */

int rdmx__srq_member_add(struct srq_shared *sh, rdmx_conn *c,
			 uint32_t qpn)
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

void rdmx__srq_member_del(struct srq_shared *sh, rdmx_conn *c)
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
uint32_t rdmx__srq_queue_pop(struct srq_shared *sh, rdmx_conn *c)
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
		return rdmx__srq_buf_post(sh, NULL, idx);
	sh->rb[idx].wc = *wc;
	queue_push(sh, c, idx);
	rdmx__conn_kick(c); /* it may sleep on the CQ whose event we took */
	return 1;
}

/*
 * Poll the shared CQ until it is empty or something was queued. Returns
 * the number queued (>= 0) or -errno. Call with g->lock held.
 */
int rdmx__srq_poll_shared(struct srq_shared *sh)
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
