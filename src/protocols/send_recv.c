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
 * dropped silently. Every SEND is signaled; its completion frees the slot.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/internal.h"

enum { SLOT_FREE, SLOT_ALLOC, SLOT_POSTED, SLOT_HELD };
enum { KIND_SEND = 1, KIND_RECV = 2 };

#define WC_BATCH 16
#define SLOT_ALIGN 64

struct sr {
	struct rdmx__cq *scq, *rcq;
	uint8_t *sbuf, *rbuf;
	struct rdmx__mr *smr, *rmr;
	size_t slot;              /* bytes per buffer */
	uint32_t nsend, nrecv;
	uint32_t *free_stack;     /* free send slots */
	uint32_t nfree;
	uint8_t *sstate, *rstate; /* SLOT_* per send / receive buffer */
	uint32_t inflight;        /* posted sends not completed */
	struct rdmx__wc wc[WC_BATCH]; /* receive completions not handed out */
	int wc_n, wc_i;
};

static struct sr *sr_of(rdmx_conn *c)
{
	return c->priv;
}

/* ---------------------------------------------------------------- setup */

static int post_one_recv(rdmx_conn *c, uint32_t idx)
{
	struct sr *p = sr_of(c);
	struct rdmx__wr wr = {
		.wr_id = idx,
		.op = RDMX__OP_RECV,
		.addr = p->rbuf + (size_t)idx * p->slot,
		.len = (uint32_t)p->slot,
		.lkey = p->rmr->lkey,
	};

	p->rstate[idx] = SLOT_POSTED;
	return rdmx__post_recv(c, &wr, 1);
}

static int alloc_slots(struct sr *p)
{
	p->sbuf = rdmx__alloc_buf(p->slot * p->nsend);
	p->rbuf = rdmx__alloc_buf(p->slot * p->nrecv);
	p->free_stack = calloc(p->nsend, sizeof(*p->free_stack));
	p->sstate = calloc(p->nsend, 1);
	p->rstate = calloc(p->nrecv, 1);
	if (!p->sbuf || !p->rbuf || !p->free_stack || !p->sstate || !p->rstate)
		return rdmx__fail(-ENOMEM, "send_recv: out of memory for %u+%u buffers of %zu bytes",
				  p->nsend, p->nrecv, p->slot);
	for (uint32_t i = 0; i < p->nsend; i++)
		p->free_stack[i] = p->nsend - 1 - i;
	p->nfree = p->nsend;
	return 0;
}

static void free_slots(struct sr *p)
{
	free(p->sbuf);
	free(p->rbuf);
	free(p->free_stack);
	free(p->sstate);
	free(p->rstate);
}

static int create_queues(rdmx_conn *c)
{
	struct sr *p = sr_of(c);
	struct rdmx__qp_caps caps = {
		.max_send_wr = p->nsend,
		.max_recv_wr = p->nrecv,
		.rnr_retry = c->opts.rnr_retry,
		.retry_count = c->opts.retry_count,
	};
	int rc;

	rc = c->f->create_cq(c->ep, (int)(p->nsend + RDMX__KA_WRS), &p->scq);
	if (rc)
		return rc;
	rc = c->f->create_cq(c->ep, (int)p->nrecv, &p->rcq);
	if (rc)
		return rc;
	caps.send_cq = p->scq;
	caps.recv_cq = p->rcq;
	return rdmx__conn_create_qp(c, &caps);
}

static void sr_teardown(rdmx_conn *c)
{
	struct sr *p = sr_of(c);

	if (p->rcq)
		c->f->destroy_cq(p->rcq);
	if (p->scq)
		c->f->destroy_cq(p->scq);
	if (p->rmr)
		c->f->dereg_mr(p->rmr);
	if (p->smr)
		c->f->dereg_mr(p->smr);
	free_slots(p);
}

/* On failure the caller destroys the ep (and QP) first, then calls
 * sr_teardown(), which copes with a half-made setup. */
static int sr_setup(rdmx_conn *c)
{
	struct sr *p = sr_of(c);
	int rc;

	p->slot = ((size_t)c->max_msg + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
	p->nsend = c->opts.send_depth;
	p->nrecv = c->opts.recv_depth;
	rc = alloc_slots(p);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->sbuf, p->slot * p->nsend,
				  RDMX__ACCESS_LOCAL, &p->smr);
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
	(void)block;
	(void)cap;
	*len = 0;
	return 0;
}

static int sr_hello_in(rdmx_conn *c, const uint8_t *block, size_t len)
{
	(void)c;
	(void)block;
	if (len)
		return rdmx__fail(-EPROTO, "send_recv: unexpected %zu-byte protocol block", len);
	return 0;
}

/* ---------------------------------------------------------------- sends */

static int reap_sends(rdmx_conn *c)
{
	struct sr *p = sr_of(c);
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, p->scq, wc, WC_BATCH);

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++) {
		uint32_t idx = (uint32_t)wc[i].wr_id;

		if (wc[i].status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, &wc[i], "send");
		p->sstate[idx] = SLOT_FREE;
		p->free_stack[p->nfree++] = idx;
		p->inflight--;
	}
	return n;
}

static void fill_send_msg(rdmx_conn *c, uint32_t idx, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);

	p->sstate[idx] = SLOT_ALLOC;
	m->data = p->sbuf + (size_t)idx * p->slot;
	m->cap = c->max_msg;
	m->len = 0;
	m->imm = 0;
	m->flags = 0;
	m->priv_[0] = ((uint64_t)KIND_SEND << 32) | idx;
	m->priv_[1] = (uintptr_t)c;
}

static int sr_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			int timeout_ms)
{
	struct sr *p = sr_of(c);
	struct rdmx__deadline d;
	int rc;

	(void)size; /* every slot holds max_msg bytes */
	rdmx__deadline_start(&d, timeout_ms);
	while (!p->nfree) {
		rc = reap_sends(c);
		if (rc < 0)
			return rc;
		if (rc == 0 && (rc = rdmx__conn_wait(c, &d)))
			return rc;
	}
	fill_send_msg(c, p->free_stack[--p->nfree], m);
	return 0;
}

/* The slot a message handle refers to, or -EINVAL. */
static int64_t msg_slot(rdmx_conn *c, const struct rdmx_msg *m, int kind,
			uint8_t want)
{
	struct sr *p = sr_of(c);
	uint32_t idx = (uint32_t)m->priv_[0];
	uint32_t n = kind == KIND_SEND ? p->nsend : p->nrecv;
	uint8_t *state = kind == KIND_SEND ? p->sstate : p->rstate;

	if (m->priv_[1] != (uintptr_t)c || (m->priv_[0] >> 32) != (uint64_t)kind ||
	    idx >= n || state[idx] != want)
		return -EINVAL;
	return idx;
}

static int sr_send(rdmx_conn *c, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);
	int64_t idx = msg_slot(c, m, KIND_SEND, SLOT_ALLOC);
	struct rdmx__wr wr = {
		.op = RDMX__OP_SEND,
		.flags = RDMX__WR_SIGNALED,
		.len = (uint32_t)m->len,
		.lkey = p->smr->lkey,
	};
	int rc;

	if (idx < 0)
		return rdmx__fail(-EINVAL, "send_recv: not a message from rdmx_msg_alloc on this connection");
	wr.wr_id = (uint64_t)idx;
	wr.addr = p->sbuf + (size_t)idx * p->slot;
	if (m->flags & RDMX_MSG_IMM) {
		wr.op = RDMX__OP_SEND_IMM;
		wr.imm = m->imm;
	}
	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a send: %s", rdmx__last());
	p->sstate[idx] = SLOT_POSTED;
	p->inflight++;
	m->priv_[1] = 0; /* the handle is spent */
	return 0;
}

static int sr_flush(rdmx_conn *c, int timeout_ms)
{
	struct sr *p = sr_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	while (p->inflight) {
		rc = reap_sends(c);
		if (rc < 0)
			return rc;
		if (rc == 0 && (rc = rdmx__conn_wait(c, &d)))
			return rc == -EAGAIN ? -ETIMEDOUT : rc;
	}
	return 0;
}

/* ------------------------------------------------------------- receives */

static int deliver(rdmx_conn *c, const struct rdmx__wc *wc, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);
	uint32_t idx = (uint32_t)wc->wr_id;

	if (wc->status == RDMX__WC_FLUSHED)
		return rdmx__conn_flushed(c);
	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "receive");
	p->rstate[idx] = SLOT_HELD;
	m->data = p->rbuf + (size_t)idx * p->slot;
	m->len = wc->byte_len;
	m->cap = wc->byte_len;
	m->imm = wc->has_imm ? wc->imm : 0;
	m->flags = wc->has_imm ? RDMX_MSG_IMM : 0;
	m->priv_[0] = ((uint64_t)KIND_RECV << 32) | idx;
	m->priv_[1] = (uintptr_t)c;
	return 0;
}

static int sr_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct sr *p = sr_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		if (p->wc_i == p->wc_n) {
			rc = c->f->poll_cq(p->rcq, p->wc, WC_BATCH);
			if (rc < 0)
				return rdmx__conn_down(c, rc, "polling receive completions: %s",
						       rdmx__last());
			p->wc_n = rc;
			p->wc_i = 0;
		}
		if (p->wc_i < p->wc_n)
			return deliver(c, &p->wc[p->wc_i++], m);
		if (c->state == RDMX__CONN_DOWN)
			return rdmx__fail(c->down_rc, "%s", c->err.msg);
		rc = rdmx__conn_wait(c, &d);
		if (rc && c->state != RDMX__CONN_DOWN)
			return rc; /* timeout; a peer that left gets one more poll */
	}
}

static int sr_release(rdmx_conn *c, struct rdmx_msg *m)
{
	struct sr *p = sr_of(c);
	int64_t idx;

	if ((idx = msg_slot(c, m, KIND_SEND, SLOT_ALLOC)) >= 0) {
		p->sstate[idx] = SLOT_FREE;
		p->free_stack[p->nfree++] = (uint32_t)idx;
	} else if ((idx = msg_slot(c, m, KIND_RECV, SLOT_HELD)) >= 0) {
		if (c->state == RDMX__CONN_DOWN)
			p->rstate[idx] = SLOT_FREE;
		else if (post_one_recv(c, (uint32_t)idx))
			return rdmx__conn_down(c, -EIO, "reposting a receive: %s",
					       rdmx__last());
	} else {
		return rdmx__fail(-EINVAL, "send_recv: message not held on this connection");
	}
	m->priv_[1] = 0;
	return 0;
}

/* Registered per connection: send_depth + recv_depth slots of max_msg. */
static uint64_t sr_mem_estimate(const rdmx_conn *c)
{
	uint64_t slot = ((uint64_t)c->max_msg + SLOT_ALIGN - 1) & ~(uint64_t)(SLOT_ALIGN - 1);

	return slot * ((uint64_t)c->opts.send_depth + c->opts.recv_depth);
}

const struct rdmx_protocol_ops rdmx__proto_send_recv = {
	.name = "send_recv",
	.id = RDMX__PROTO_SEND_RECV,
	.priv_size = sizeof(struct sr),
	.setup = sr_setup,
	.hello_out = sr_hello_out,
	.hello_in = sr_hello_in,
	.teardown = sr_teardown,
	.msg_alloc = sr_msg_alloc,
	.send = sr_send,
	.flush = sr_flush,
	.recv = sr_recv,
	.release = sr_release,
	.mem_estimate = sr_mem_estimate,
};
