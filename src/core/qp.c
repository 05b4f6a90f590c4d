/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: see qp.h for what a protocol declares, what the core adds,
 * who owns what and the cleanup rule.
 */
#include "conn.h"
#include "fabric.h"
#include "live.h"
#include "qp.h"
#include "waitset.h"

/*
 * Small payloads go inline, as perftest's latency tests send them: the
 * provider copies them into the work request, so the device does not
 * fetch them through the memory registration.
 */
#define RDMX__INLINE_WANT 256

/*
 * rxe never counts down a transport retry_cnt of 7 (rxe_comp.c): it retries
 * forever, so a dead peer would never fail a keepalive. The IB spec gives 7
 * no such meaning (only rnr_retry 7 is "forever"); 6 is the most retries
 * that end on every provider.
 */
#define RDMX__RETRY_FINITE_MAX 6

/* The QP on @c's ep with @caps (CQs set), asking for RDMX__INLINE_WANT
 * bytes of inline data (and again without, if the device refuses);
 * c->max_inline is what the QP got. */
static int qp_create(rdmx_conn *c, struct rdmx__qp_caps *caps)
{
	int rc;

	caps->max_inline = RDMX__INLINE_WANT;
	rc = c->f->create_qp(c->ep, caps);
	if (rc) {
		caps->max_inline = 0;
		rc = c->f->create_qp(c->ep, caps);
	}
	c->max_inline = rc ? 0 : caps->max_inline;
	return rc;
}

/* @w's caps with the core's share: keepalive and one-sided slots, the
 * connection's retries and the ACK timeout its liveness bound asks for. */
static struct rdmx__qp_caps qp_caps(const rdmx_conn *c,
				    const struct rdmx__qp_want *w)
{
	struct rdmx__qp_caps caps = {
		.srq = w->shared ? w->shared->srq : NULL,
		.max_send_wr = w->send_wr + RDMX__KA_WRS,
		.max_recv_wr = w->shared ? 0 : w->recv_wr,
		.rnr_retry = c->opts.rnr_retry,
		.retry_count = c->opts.retry_count,
		.rd_atomic = w->rd_atomic,
	};

	if (caps.retry_count > RDMX__RETRY_FINITE_MAX)
		caps.retry_count = RDMX__RETRY_FINITE_MAX;
	caps.ack_timeout = rdmx__live_ack_timeout(c->opts.liveness_ms,
						  caps.retry_count);
	return caps;
}

int rdmx__qp_make(rdmx_conn *c, const struct rdmx__qp_want *w)
{
	struct rdmx__qp_caps caps = qp_caps(c, w);
	uint32_t send_cqe = (w->send_cqe ? w->send_cqe : w->send_wr) + RDMX__KA_WRS;
	struct rdmx__cq *scq, *rcq = NULL;
	int rc;

	rc = c->f->create_cq(c->ep, (int)send_cqe, &scq);
	if (rc)
		return rc;
	if (!w->shared) {
		rc = c->f->create_cq(c->ep, (int)w->recv_wr, &rcq);
		if (rc)
			goto destroy_scq;
	}
	caps.send_cq = scq;
	caps.recv_cq = w->shared ? w->shared->rcq : rcq;
	rc = qp_create(c, &caps);
	if (rc)
		goto destroy_rcq;
	c->qp = (struct rdmx__qp){ .scq = scq, .rcq = caps.recv_cq,
				   .own_rcq = rcq != NULL };
	c->live.scq = scq;
	rdmx__conn_watch(c, scq, 0);
	rdmx__conn_watch(c, caps.recv_cq, RDMX__WATCH_RECV);
	return 0;

destroy_rcq:
	if (rcq)
		c->f->destroy_cq(rcq);
destroy_scq:
	c->f->destroy_cq(scq);
	return rc;
}

void rdmx__qp_unmake(rdmx_conn *c)
{
	if (c->qp.own_rcq)
		c->f->destroy_cq(c->qp.rcq);
	if (c->qp.scq)
		c->f->destroy_cq(c->qp.scq);
	c->qp = (struct rdmx__qp){ 0 };
}

int rdmx__qp_shared_make(rdmx_conn *c, uint32_t depth,
			 struct rdmx__qp_shared *s)
{
	struct rdmx__srq *srq;
	struct rdmx__cq *rcq;
	int rc;

	rc = c->f->create_srq(c->ep, (int)depth, &srq);
	if (rc)
		return rc;
	rc = c->f->create_cq(c->ep, (int)depth, &rcq);
	if (rc)
		goto destroy_srq;
	*s = (struct rdmx__qp_shared){ .srq = srq, .rcq = rcq };
	return 0;

destroy_srq:
	c->f->destroy_srq(srq);
	return rc;
}

void rdmx__qp_shared_unmake(const struct rdmx__fabric_ops *f,
			    struct rdmx__qp_shared *s)
{
	if (s->rcq)
		f->destroy_cq(s->rcq);
	if (s->srq)
		f->destroy_srq(s->srq);
	*s = (struct rdmx__qp_shared){ 0 };
}
