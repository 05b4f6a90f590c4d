/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's queues: completion queues (with their completion
 * channel), shared receive queues, and the making and unmaking of an RC
 * QP's rings. The model is described at the top of fabric_fake.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "errors.h"
#include "fabric_fake_base.h"
#include "fabric_fake_qp.h"

/* ------------------------------------------------------------- resources */

int rdmx__fake_create_cq(struct rdmx__ep *ep, int depth, struct rdmx__cq **out)
{
	struct rdmx__cq *cq;

	(void)ep;
	if (depth <= 0)
		return rdmx__fail(-EINVAL, "fake: CQ depth %d", depth);
	cq = calloc(1, sizeof(*cq) + (size_t)depth * sizeof(cq->ring[0]));
	if (!cq)
		return rdmx__fail(-ENOMEM, "fake: out of memory for a CQ of %d", depth);
	cq->cap = (uint32_t)depth;
	cq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cq->efd < 0) {
		free(cq);
		return rdmx__fail(-errno, "fake: no eventfd for a completion channel: %s",
				  strerror(errno));
	}
	*out = cq;
	return 0;
}

int rdmx__fake_cq_fd(struct rdmx__cq *cq)
{
	return cq->efd;
}

/* As the verbs' completion channel: take the notifications that came,
 * then arm the CQ unless it still is (see fabric.h). */
int rdmx__fake_cq_arm(struct rdmx__cq *cq)
{
	uint64_t n;
	int rc = 0;

	lock();
	if (read(cq->efd, &n, sizeof(n)) == (ssize_t)sizeof(n))
		cq->armed = 0;
	if (!cq->armed) {
		cq->armed = cq->notify = 1;
		rc = 1;
	}
	unlock();
	return rc;
}

int rdmx__fake_create_srq(struct rdmx__ep *ep, int depth,
			  struct rdmx__srq **out)
{
	struct rdmx__srq *srq;

	(void)ep;
	if (depth <= 0)
		return rdmx__fail(-EINVAL, "fake: SRQ depth %d", depth);
	srq = calloc(1, sizeof(*srq) + (size_t)depth * sizeof(srq->ring[0]));
	if (!srq)
		return rdmx__fail(-ENOMEM, "fake: out of memory for an SRQ of %d", depth);
	srq->rq = (struct rq){ .w = srq->ring, .cap = (uint32_t)depth };
	*out = srq;
	return 0;
}

/* Destroying a CQ or SRQ still in use is a caller bug (verbs refuses with
 * EBUSY): say so, detach it from its QPs, and free it. */
static void destroy_queue(void *res, const char *what)
{
	if (!res)
		return;
	lock();
	for (struct rdmx__ep *qp = G.qps; qp; qp = qp->qnext) {
		struct rdmx__qp_caps *c = &qp->caps;

		if (c->send_cq != res && c->recv_cq != res && (void *)c->srq != res)
			continue;
		fprintf(stderr, "rdmx fake fabric: %s destroyed while QP %u uses it\n",
			what, qp->qpn);
		c->send_cq = c->send_cq == res ? NULL : c->send_cq;
		c->recv_cq = c->recv_cq == res ? NULL : c->recv_cq;
		c->srq = (void *)c->srq == res ? NULL : c->srq;
	}
	unlock();
	free(res);
}

void rdmx__fake_destroy_cq(struct rdmx__cq *cq)
{
	if (cq)
		close(cq->efd);
	destroy_queue(cq, "CQ");
}

void rdmx__fake_destroy_srq(struct rdmx__srq *srq)
{
	destroy_queue(srq, "SRQ");
}

void rdmx__fake_qp_free_rings(struct rdmx__ep *ep)
{
	free(ep->rq.w);
	free(ep->sq);
	free(ep->inl);
	ep->rq.w = NULL;
	ep->sq = NULL;
	ep->inl = NULL;
}

static int qp_alloc_rings(struct rdmx__ep *ep, const struct rdmx__qp_caps *caps)
{
	size_t nsend = caps->max_send_wr ? caps->max_send_wr : 1;
	size_t nrecv = caps->srq || !caps->max_recv_wr ? 1 : caps->max_recv_wr;

	ep->sq = calloc(nsend, sizeof(*ep->sq));
	ep->inl = calloc(nsend, caps->max_inline ? caps->max_inline : 1);
	ep->rq.w = calloc(nrecv, sizeof(*ep->rq.w));
	if (ep->sq && ep->inl && ep->rq.w)
		return 0;
	rdmx__fake_qp_free_rings(ep);
	return rdmx__fail(-ENOMEM, "fake: out of memory for a QP (send %u, recv %u)",
			  caps->max_send_wr, caps->max_recv_wr);
}

int rdmx__fake_create_qp(struct rdmx__ep *ep, struct rdmx__qp_caps *caps)
{
	int rc;

	if (!caps || !caps->send_cq || !caps->recv_cq)
		return rdmx__fail(-EINVAL, "fake: create_qp needs a send and a receive CQ");
	if (ep->kind == EP_LISTENER)
		return rdmx__fail(-EINVAL, "fake: create_qp on a listening ep");
	lock();
	rc = ep->qp == QP_NONE ? qp_alloc_rings(ep, caps) :
	     rdmx__fail(-EEXIST, "fake: the ep already has a QP");
	if (!rc) {
		ep->caps = *caps;
		ep->rq.cap = caps->srq ? 0 : caps->max_recv_wr;
		ep->qpn = G.next_qpn++;
		ep->qp = QP_INIT;
		ep->qnext = G.qps;
		G.qps = ep;
	}
	unlock();
	return rc;
}

/* Destroy the QP: its completions still queued no longer free slots. */
void rdmx__fake_qp_release(struct rdmx__ep *qp)
{
	struct rdmx__cq *cq = qp->caps.send_cq;
	struct rdmx__ep **pp;

	if (qp->qp == QP_NONE)
		return;
	for (pp = &G.qps; *pp != qp; pp = &(*pp)->qnext)
		;
	*pp = qp->qnext;
	for (uint32_t i = 0; cq && i < cq->count; i++)
		if (cq->ring[(cq->head + i) % cq->cap].owner == qp)
			cq->ring[(cq->head + i) % cq->cap].owner = NULL;
	qp->qp = QP_NONE;
}

uint32_t rdmx__fake_qp_num(const struct rdmx__ep *ep)
{
	return ep->qpn;
}
