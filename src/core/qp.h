/* SPDX-License-Identifier: MIT */
/*
 * Queue pairs: a connection's completion queues and its RC QP, made by the
 * core from what the protocol declares (struct rdmx__qp_want), watched in
 * the connection's wait set, recorded in c->qp, and taken down in one place.
 *
 * A protocol's setup() fills a want and calls rdmx__qp_make() once, after
 * what the QP needs exists (a shared receive side) and before it posts
 * receives. The core adds what it needs beside the protocol's: the
 * keepalive's and the one-sided operations' RDMX__KA_WRS send-queue slots
 * and send-CQ entries; the retries (the connection's rnr_retry and
 * retry_count, the ACK timeout timed from its liveness bound); the inline
 * size (RDMX__INLINE_WANT bytes asked for, none if the device refuses:
 * c->max_inline is what the QP got). Access rights are not the QP's here:
 * rdma_cm gives an RC QP remote read and write, and a protocol grants them
 * per registration (reg_mr).
 *
 * Who owns what:
 *  - the connection (c->qp) owns its send CQ, and its receive CQ when the
 *    want names no shared receive side; the QP lives with the ep.
 *    rdmx__qp_unmake() destroys the CQs; the core calls it in conn_free()
 *    after the ep (and with it the QP) is gone and before the protocol's
 *    teardown(), so a QP never outlives a CQ it completes on;
 *  - a shared receive side (struct rdmx__qp_shared: an SRQ and the CQ its
 *    receives complete on) is owned by whoever made it: the listener
 *    group's shared part (srq, write_atomic), or a connection's private
 *    data (write_atomic's dialer); it is unmade in the group's
 *    shared_teardown() or the protocol's teardown(), both after every QP
 *    on it is gone. c->qp.rcq then points at its CQ and is not destroyed
 *    with the connection.
 *
 * The cleanup rule: rdmx__qp_make() and rdmx__qp_shared_make() make all or
 * nothing (a failure unwinds what they made, goto labels named for what
 * they undo); after a success the unmake call undoes it, and is a no-op on
 * what was never made. So a setup that fails halfway leaves nothing for
 * the protocol's teardown() to know about its queues.
 *
 * struct rdmx__qp, embedded in the connection, is laid out with it in
 * conn.h. Floor (src/core/README.md): above waits (rdmx__conn_watch) and
 * liveness (the ACK timeout, c->live.scq), below connections (open.c's
 * conn_free calls rdmx__qp_unmake).
 */
#ifndef RDMX_CORE_QP_H
#define RDMX_CORE_QP_H

#include <stdint.h>

#include <rdmx/rdmx.h>

#include "conn.h"
#include "fabric.h"

/* An SRQ and the CQ its receives complete on, shared by several QPs. */
struct rdmx__qp_shared {
	struct rdmx__srq *srq;
	struct rdmx__cq *rcq;
};

/* What a protocol's QP needs (the core adds its own, above). */
struct rdmx__qp_want {
	uint32_t send_wr;        /* send-queue slots for the protocol's WRs */
	uint32_t send_cqe;       /* send-CQ entries for them (its signaled
				  * ones); 0: send_wr */
	uint32_t recv_wr;        /* own receive queue, and its CQ's entries;
				  * unused with @shared */
	const struct rdmx__qp_shared *shared; /* receives go to its SRQ and
				  * complete on its CQ; NULL: the QP's own */
	uint8_t rd_atomic;       /* READs/atomics outstanding, 0: device max */
};

/*
 * Make @c's send CQ, its receive CQ (unless @w shares one) and its QP on
 * c->ep; watch both CQs in @c's wait set (receives complete on rcq); record
 * them in c->qp. 0, or -errno with a message and nothing made.
 */
int rdmx__qp_make(rdmx_conn *c, const struct rdmx__qp_want *w);
/* Destroy the CQs @c owns: after the QP (the ep) is gone. Idempotent. */
void rdmx__qp_unmake(rdmx_conn *c);

/* An SRQ of @depth receives and a receive CQ of @depth entries on @c's
 * device, into @s: 0, or -errno with a message and nothing made. */
int rdmx__qp_shared_make(rdmx_conn *c, uint32_t depth,
			 struct rdmx__qp_shared *s);
/* Destroy what @s holds (made by @f), after every QP on it is gone;
 * clears @s. A no-op on what was never made. */
void rdmx__qp_shared_unmake(const struct rdmx__fabric_ops *f,
			    struct rdmx__qp_shared *s);

#endif /* RDMX_CORE_QP_H */
