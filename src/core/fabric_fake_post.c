/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's data path: posting work requests, executing them at
 * post time under the one lock (RNR, a silent peer, the errors that put a
 * QP in ERR), and the completions they leave, reaped by poll_cq(). The
 * model is described at the top of fabric_fake.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "fabric_fake_base.h"
#include "fabric_fake_post.h"

/* ----------------------------------------------------------- completions */

static void cq_push(struct rdmx__cq *cq, const struct rdmx__wc *wc,
		    struct rdmx__ep *owner, uint32_t slots)
{
	if (!cq)
		return; /* destroyed under a live QP: reported then */
	if (cq->count == cq->cap) {
		if (!cq->overflow)
			fprintf(stderr, "rdmx fake fabric: completion queue of depth %u overflowed\n",
				cq->cap);
		cq->overflow = 1;
		return;
	}
	cq->ring[(cq->head + cq->count++) % cq->cap] = (struct cqe){ *wc, owner, slots };
	if (cq->notify) { /* a completion channel's event */
		cq->notify = 0;
		(void)!write(cq->efd, &(uint64_t){ 1 }, 8);
	}
}

/* Successful unsignaled WRs complete silently; errors always report. */
static void send_done(struct rdmx__ep *qp, const struct rdmx__wr *wr,
		      enum rdmx__wc_status st, int vs)
{
	struct rdmx__wc wc = {
		.wr_id = wr->wr_id,
		.op = wr->op,
		.status = st,
		.byte_len = wr->op == RDMX__OP_FETCH_ADD ? 8 : wr->len,
		.qp_num = qp->qpn,
		.vendor_status = vs,
	};

	if (st == RDMX__WC_OK && !(wr->flags & RDMX__WR_SIGNALED)) {
		qp->unsig++;
		return;
	}
	cq_push(qp->caps.send_cq, &wc, qp, qp->unsig + 1);
	qp->unsig = 0;
}

static void recv_done(struct rdmx__ep *qp, const struct rdmx__wr *r,
		      struct rdmx__wc *wc)
{
	wc->wr_id = r->wr_id;
	wc->qp_num = qp->qpn;
	cq_push(qp->caps.recv_cq, wc, NULL, 0);
}

/* ---------------------------------------------------------------- queues */

static struct rq *recv_queue(struct rdmx__ep *qp)
{
	return qp->caps.srq ? &qp->caps.srq->rq : &qp->rq;
}

static int rq_push(struct rq *q, const struct rdmx__wr *wr)
{
	if (q->count == q->cap)
		return rdmx__fail(-ENOMEM, "fake: receive queue full (%u posted)", q->cap);
	q->w[(q->head + q->count++) % q->cap] = *wr;
	return 0;
}

static struct rdmx__wr rq_pop(struct rq *q)
{
	struct rdmx__wr w = q->w[q->head];

	q->head = (q->head + 1) % q->cap;
	q->count--;
	return w;
}

static void rq_flush(struct rdmx__ep *qp)
{
	while (qp->rq.count) {
		struct rdmx__wr r = rq_pop(&qp->rq);
		struct rdmx__wc wc = { .op = RDMX__OP_RECV, .status = RDMX__WC_FLUSHED,
				       .vendor_status = VS_FLUSH };

		recv_done(qp, &r, &wc);
	}
}

/* Queue @wr; INLINE data is copied now and the WR pointed at the copy. */
static void sq_push(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	uint32_t i = (qp->sq_head + qp->sq_count++) % qp->caps.max_send_wr;
	uint8_t *copy = qp->inl + (size_t)i * qp->caps.max_inline;

	qp->sq[i] = (struct pend){ .wr = *wr };
	if ((wr->flags & RDMX__WR_INLINE) && wr->len) {
		memcpy(copy, wr->addr, wr->len);
		qp->sq[i].wr.addr = copy;
	}
}

static struct rdmx__wr sq_pop(struct rdmx__ep *qp)
{
	struct rdmx__wr wr = qp->sq[qp->sq_head].wr;

	qp->sq_head = (qp->sq_head + 1) % qp->caps.max_send_wr;
	qp->sq_count--;
	return wr;
}

void rdmx__fake_qp_error(struct rdmx__ep *qp)
{
	if (qp->qp != QP_INIT && qp->qp != QP_RTS)
		return;
	qp->qp = QP_ERR;
	while (qp->sq_count) {
		struct rdmx__wr wr = sq_pop(qp);

		send_done(qp, &wr, RDMX__WC_FLUSHED, VS_FLUSH);
	}
	rq_flush(qp);
}

/* ------------------------------------------------------------- execution */

/* Complete @wr in error; the requester's QP, and the responder's if
 * @both, go to ERR. */
static void wr_fail(struct rdmx__ep *qp, const struct rdmx__wr *wr,
		    enum rdmx__wc_status st, int vs, int both)
{
	struct rdmx__ep *peer = qp->peer;

	send_done(qp, wr, st, vs);
	rdmx__fake_qp_error(qp);
	if (both && peer)
		rdmx__fake_qp_error(peer);
}

static int wr_local_ok(const struct rdmx__wr *wr)
{
	if (wr->flags & RDMX__WR_INLINE)
		return 1;
	if (wr->op == RDMX__OP_FETCH_ADD || wr->op == RDMX__OP_CMP_SWAP)
		return local_write_ok(wr->lkey, wr->addr, 8);
	if (wr->op == RDMX__OP_READ)
		return local_write_ok(wr->lkey, wr->addr, wr->len);
	return local_ok(wr->lkey, wr->addr, wr->len);
}

/* SEND/SEND_IMM: fill the responder's oldest receive (there is one). */
static void run_send(struct rdmx__ep *qp, struct rdmx__ep *peer,
		     const struct rdmx__wr *wr)
{
	struct rdmx__wr r = rq_pop(recv_queue(peer));
	struct rdmx__wc wc = { .op = RDMX__OP_RECV, .byte_len = wr->len };

	if (wr->op == RDMX__OP_SEND_IMM) {
		wc.has_imm = 1;
		wc.imm = wr->imm;
	}
	if (wr->len > r.len) {
		wc.status = RDMX__WC_LOCAL_LENGTH;
		wc.vendor_status = VS_LOC_LEN;
	} else if (!local_write_ok(r.lkey, r.addr, wr->len)) {
		wc.status = RDMX__WC_OTHER;
		wc.vendor_status = VS_LOC_PROT;
	} else {
		mem_copy(r.addr, wr->addr, wr->len);
	}
	recv_done(peer, &r, &wc);
	if (wc.status == RDMX__WC_OK)
		send_done(qp, wr, RDMX__WC_OK, 0);
	else
		wr_fail(qp, wr, RDMX__WC_OTHER, wc.status == RDMX__WC_LOCAL_LENGTH ?
			VS_REM_INV_REQ : VS_REM_OP, 1);
}

/* WRITE/WRITE_IMM: the data lands before the receive completes. */
static void run_write(struct rdmx__ep *qp, struct rdmx__ep *peer,
		      const struct rdmx__wr *wr)
{
	struct rdmx__wc wc = { .op = RDMX__OP_RECV_IMM, .byte_len = wr->len,
			       .has_imm = 1, .imm = wr->imm };
	struct rdmx__wr r;

	if (!remote_ok(wr, peer->qpn, wr->len, RDMX__ACCESS_WRITE)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	remote_store(wr->remote_addr, wr->addr, wr->len);
	if (wr->op == RDMX__OP_WRITE_IMM) {
		r = rq_pop(recv_queue(peer));
		recv_done(peer, &r, &wc);
	}
	send_done(qp, wr, RDMX__WC_OK, 0);
}

static void run_read(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	if (!remote_ok(wr, qp->peer->qpn, wr->len, RDMX__ACCESS_READ)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	remote_load(wr->addr, wr->remote_addr, wr->len);
	send_done(qp, wr, RDMX__WC_OK, 0);
}

unsigned rdmx__fake_stale_faa;

static void run_fetch_add(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	uint64_t old, seen;

	if (wr->remote_addr % 8) {
		wr_fail(qp, wr, RDMX__WC_OTHER, VS_REM_INV_REQ, 1);
		return;
	}
	if (!remote_ok(wr, qp->peer->qpn, 8, RDMX__ACCESS_ATOMIC)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	old = __atomic_fetch_add((uint64_t *)(uintptr_t)wr->remote_addr, wr->add,
				 __ATOMIC_SEQ_CST);
	seen = old;
	if (++qp->nfaa > 1 && rdmx__fake_stale_faa &&
	    qp->nfaa % rdmx__fake_stale_faa == 0)
		seen = qp->last_faa;
	qp->last_faa = old;
	memcpy(wr->addr, &seen, sizeof(seen));
	send_done(qp, wr, RDMX__WC_OK, 0);
}

static void run_cmp_swap(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	uint64_t old = wr->compare;

	if (wr->remote_addr % 8) {
		wr_fail(qp, wr, RDMX__WC_OTHER, VS_REM_INV_REQ, 1);
		return;
	}
	if (!remote_ok(wr, qp->peer->qpn, 8, RDMX__ACCESS_ATOMIC)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	__atomic_compare_exchange_n((uint64_t *)(uintptr_t)wr->remote_addr, &old,
				    wr->swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	memcpy(wr->addr, &old, sizeof(old));
	send_done(qp, wr, RDMX__WC_OK, 0);
}

static void sq_progress(struct rdmx__ep *qp);

/* A window bind (rdmx__fake_bind_post): its window is the fmr whose
 * pending bind carries this wr_id; gone (deallocated): it completes OK,
 * binding nothing. */
static void run_bind(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	for (struct fmr *w = G.mrs; w; w = w->next) {
		if (!w->is_mw || w->bind.ep != qp || w->bind.wr_id != wr->wr_id)
			continue;
		w->pub.addr = w->bind.addr;
		w->pub.len = w->bind.len;
		w->access = w->bind.access;
		w->parent = (const struct fmr *)(const void *)w->bind.mr;
		w->qpn = qp->qpn;
		w->mw.rkey = w->pub.rkey = rdmx__fake_rkey_new();
		w->bind.ep = NULL;
		break;
	}
	send_done(qp, wr, RDMX__WC_OK, 0);
}

int rdmx__fake_bind_post(struct rdmx__ep *ep, struct fmr *w, const struct rdmx__mw_bind *b)
{
	struct rdmx__wr wr = { .wr_id = b->wr_id, .op = RDMX__OP_BIND_MW,
			       .flags = RDMX__WR_SIGNALED };

	if (ep->qp != QP_RTS)
		return rdmx__fail(-EINVAL, "fake: window bind on QP %u, not connected", ep->qpn);
	if (ep->sq_used >= ep->caps.max_send_wr)
		return rdmx__fail(-ENOMEM, "fake: window bind: send queue of QP %u full", ep->qpn);
	w->bind = *b;
	ep->sq_used++;
	ep->signaled++;
	sq_push(ep, &wr);
	ep->posts++;
	sq_progress(ep);
	return 0;
}

static void wr_run(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	struct rdmx__ep *peer = qp->peer;

	if (qp->qp != QP_RTS)
		send_done(qp, wr, RDMX__WC_FLUSHED, VS_FLUSH);
	else if (!peer || peer->qp != QP_RTS)
		wr_fail(qp, wr, RDMX__WC_RETRY, VS_RETRY, 0);
	else if (!wr_local_ok(wr))
		wr_fail(qp, wr, RDMX__WC_OTHER, VS_LOC_PROT, 0);
	else if (wr->op == RDMX__OP_SEND || wr->op == RDMX__OP_SEND_IMM)
		run_send(qp, peer, wr);
	else if (wr->op == RDMX__OP_WRITE || wr->op == RDMX__OP_WRITE_IMM)
		run_write(qp, peer, wr);
	else if (wr->op == RDMX__OP_READ)
		run_read(qp, wr);
	else if (wr->op == RDMX__OP_CMP_SWAP)
		run_cmp_swap(qp, wr);
	else if (wr->op == RDMX__OP_FETCH_ADD)
		run_fetch_add(qp, wr);
	else
		run_bind(qp, wr); /* RDMX__OP_BIND_MW (rdmx__fake_bind_post) */
}

/* RNR: @wr needs a receive and the responder has none posted. */
static int wr_blocked(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	struct rdmx__ep *peer = qp->peer;

	if (wr->op != RDMX__OP_SEND && wr->op != RDMX__OP_SEND_IMM &&
	    wr->op != RDMX__OP_WRITE_IMM)
		return 0;
	if (qp->qp != QP_RTS || !peer || peer->qp != QP_RTS || !wr_local_ok(wr))
		return 0; /* fails in wr_run() */
	return recv_queue(peer)->count == 0;
}

static int64_t rnr_deadline(const struct rdmx__ep *qp)
{
	if (qp->caps.rnr_retry >= RNR_INFINITE)
		return INT64_MAX;
	return now_ns() + (qp->caps.rnr_retry + 1) * RNR_STEP_NS;
}

/* (retry_count + 1) local ACK timeouts of 4.096 us * 2^ack_timeout. */
static int64_t retry_deadline(const struct rdmx__ep *qp)
{
	int t = qp->caps.ack_timeout ? qp->caps.ack_timeout : 17;

	if (qp->caps.retry_count >= 7)
		return INT64_MAX; /* rxe: forever */
	return now_ns() + (qp->caps.retry_count + 1) * (4096LL << t);
}

/* The peer is silent: @head waits for its transport retries to run out. */
static void head_unanswered(struct rdmx__ep *qp, struct pend *head)
{
	if (head->retry)
		return;
	head->retry = 1;
	head->deadline = retry_deadline(qp);
}

/* Execute @qp's queued WRs in order, up to one that meets RNR or a silent
 * peer. A silent QP runs nothing. */
static void sq_progress(struct rdmx__ep *qp)
{
	while (qp->sq_count && !qp->silent) {
		struct pend *head = &qp->sq[qp->sq_head];
		struct rdmx__wr wr;
		int retry = head->retry;

		if (head->deadline && now_ns() >= head->deadline) {
			wr = sq_pop(qp);
			wr_fail(qp, &wr, retry ? RDMX__WC_RETRY : RDMX__WC_RNR_RETRY,
				retry ? VS_RETRY : VS_RNR_RETRY, 0);
			continue;
		}
		if (qp->qp == QP_RTS && qp->peer && qp->peer->silent) {
			head_unanswered(qp, head);
			return;
		}
		if (wr_blocked(qp, &head->wr)) {
			if (!head->deadline)
				head->deadline = rnr_deadline(qp);
			return;
		}
		wr = sq_pop(qp);
		wr_run(qp, &wr);
	}
}

/* ---------------------------------------------------------- data path ops */

static int send_check(const struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	if ((unsigned)wr->op > RDMX__OP_CMP_SWAP)
		return rdmx__fail(-EINVAL, "fake: bad send opcode %d", wr->op);
	if (qp->sq_used >= qp->caps.max_send_wr)
		return rdmx__fail(-ENOMEM, "fake: send queue full: %u WRs outstanding "
				  "(max_send_wr %u; poll the send CQ, signal now and then)",
				  qp->sq_used, qp->caps.max_send_wr);
	if (!(wr->flags & RDMX__WR_INLINE))
		return 0;
	if (wr->op == RDMX__OP_READ || wr->op == RDMX__OP_FETCH_ADD ||
	    wr->op == RDMX__OP_CMP_SWAP)
		return rdmx__fail(-EINVAL, "fake: INLINE on a READ or an atomic");
	if (wr->len > qp->caps.max_inline)
		return rdmx__fail(-EINVAL, "fake: %u bytes inline exceed max_inline %u",
				  wr->len, qp->caps.max_inline);
	return 0;
}

int rdmx__fake_post_send(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n)
{
	int rc = 0;

	lock();
	if (ep->qp != QP_RTS && ep->qp != QP_ERR)
		rc = rdmx__fail(-EINVAL, "fake: post_send on a QP that was never connected");
	for (int i = 0; i < n && !rc; i++) {
		rc = send_check(ep, &wr[i]);
		if (rc)
			break;
		ep->sq_used++;
		ep->signaled += !!(wr[i].flags & RDMX__WR_SIGNALED);
		sq_push(ep, &wr[i]);
	}
	ep->posts++;
	sq_progress(ep);
	unlock();
	return rc;
}

void rdmx__fake_sq_counts(struct rdmx__ep *ep, unsigned long *posts,
			  unsigned long *signaled)
{
	lock();
	*posts = ep->posts;
	*signaled = ep->signaled;
	unlock();
}

static int post_recvs(struct rq *q, const struct rdmx__wr *wr, int n)
{
	int rc = 0;

	q->posts++;
	for (int i = 0; i < n && !rc; i++)
		rc = rq_push(q, &wr[i]);
	return rc;
}

void rdmx__fake_rq_posts(struct rdmx__ep *ep, unsigned long *posts)
{
	lock();
	*posts = ep->caps.srq ? ep->caps.srq->rq.posts : ep->rq.posts;
	unlock();
}

int rdmx__fake_post_recv(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n)
{
	int rc;

	lock();
	if (ep->qp == QP_NONE || ep->caps.srq)
		rc = rdmx__fail(-EINVAL, "fake: post_recv needs a QP with its own receive queue");
	else
		rc = post_recvs(&ep->rq, wr, n);
	if (ep->qp == QP_ERR)
		rq_flush(ep);
	else if (ep->peer && ep->qp == QP_RTS)
		sq_progress(ep->peer);
	unlock();
	return rc;
}

/* Senders to any QP on the SRQ may be waiting for these receives. */
int rdmx__fake_post_srq_recv(struct rdmx__srq *srq,
			      const struct rdmx__wr *wr, int n)
{
	int rc;

	lock();
	rc = post_recvs(&srq->rq, wr, n);
	for (struct rdmx__ep *qp = G.qps; qp && srq->rq.count; qp = qp->qnext)
		if (qp->caps.srq == srq && qp->qp == QP_RTS && qp->peer)
			sq_progress(qp->peer);
	unlock();
	return rc;
}

int rdmx__fake_poll_cq(struct rdmx__cq *cq, struct rdmx__wc *wc, int n)
{
	int got = 0;

	lock();
	for (struct rdmx__ep *qp = G.qps; qp; qp = qp->qnext)
		if (qp->caps.send_cq == cq && qp->sq_count)
			sq_progress(qp); /* RNR deadlines */
	if (cq->overflow) {
		unlock();
		return rdmx__fail(-EOVERFLOW, "fake: completion queue overflow: more than "
				  "%u completions were outstanding", cq->cap);
	}
	for (; got < n && cq->count; got++) {
		struct cqe *e = &cq->ring[cq->head];

		wc[got] = e->wc;
		if (e->owner)
			e->owner->sq_used -= e->slots;
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	unlock();
	return got;
}

/* ------------------------------- for fabric_fake_dgram.c (UD, UC QPs) */

void rdmx__fake_cq_push(struct rdmx__cq *cq, const struct rdmx__wc *wc,
			struct rdmx__ep *owner, uint32_t slots)
{
	cq_push(cq, wc, owner, slots);
}
