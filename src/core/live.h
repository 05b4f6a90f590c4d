/* SPDX-License-Identifier: MIT */
/*
 * Liveness and the core's completions on a connection's send CQ (live.c).
 */
#ifndef RDMX_CORE_LIVE_H
#define RDMX_CORE_LIVE_H

#include <stdint.h>
#include <rdmx/rdmx.h>

#include "conn.h"
#include "fabric.h"

/*
 * Liveness (live.c): while a call waits on a connection, a signaled
 * zero-length RDMA WRITE (the keepalive) goes out every quarter of the
 * connection's liveness bound. The peer's NIC must acknowledge it; a
 * dead host makes it fail with RETRY once the transport's retries, timed
 * from the bound (rdmx__qp_make, qp.c), are over, and the connection goes
 * down with -ECONNRESET. Its completion carries RDMX__KA_WRID and is taken
 * out by rdmx__poll_cq(), which protocols call on every CQ their sends
 * complete on; completions the core polls while looking for the keepalive
 * are stashed and handed to the protocol's next rdmx__poll_cq().
 */
#define RDMX__KA_WRID UINT64_C(0xfffffffffffe4b41)

/* Down with -ECONNRESET if the peer disconnected; else its
 * down_rc or 0. */
int rdmx__conn_check_peer(rdmx_conn *c);

/* Keepalives. */
void rdmx__live_init(rdmx_conn *c);
void rdmx__live_fini(rdmx_conn *c);
/* The local ACK timeout code that ends @retry_count retries inside half
 * of @bound_ms (at most rdma_cm's default, 17). */
uint8_t rdmx__live_ack_timeout(uint32_t bound_ms, uint8_t retry_count);
/* Called by every wait now and then: post a keepalive when one is due,
 * reap its completion. Returns the connection's down_rc or 0. */
int rdmx__live_tick(rdmx_conn *c);
/* A receive came back flushed: the QP is in ERR, put there by the peer's
 * disconnect or by our own send failing its retries (a dead peer); the
 * send CQ tells which. Marks the connection down; returns its error. */
int rdmx__conn_flushed(rdmx_conn *c);
/* The protocols' poll of a CQ their sends complete on: c->f->poll_cq
 * without keepalive completions, stashed completions first. */
int rdmx__poll_cq(rdmx_conn *c, struct rdmx__cq *cq, struct rdmx__wc *wc,
		  int n);

/* Poll @c's send CQ now for the core's completions (keepalive,
 * one-sided), stashing the protocol's; a failed protocol send says why the
 * connection died. Returns the connection's error once it is down, else
 * -ENOBUFS when the stash is full (the protocol must poll first), else 0. */
int rdmx__live_reap(rdmx_conn *c);

#endif /* RDMX_CORE_LIVE_H */
