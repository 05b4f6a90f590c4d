/* SPDX-License-Identifier: MIT */
/*
 * srq credits (srq_credit.c): per-connection flow control into a shared
 * receive queue. The design argument is at the top of srq_conn.c.
 */
#ifndef RDMX_PROTOCOLS_SRQ_CREDIT_H
#define RDMX_PROTOCOLS_SRQ_CREDIT_H

#include "core/fabric.h"
#include "core/sendpool.h"
#include "core/wait.h"

struct rdmx__sendpool;

/* Send-queue slots (and send-CQ entries) the credit WRITEs take beside
 * the connection's send buffers and the core's keepalive/one-sided ones. */
#define SRQ_CREDIT_WRS 2u
#define SRQ_CREDIT_WRID UINT64_C(0xfffffffffffc4352)
/* Bytes of the credit part of the srq protocol block (see srq_conn.c). */
#define SRQ_CREDIT_BLOCK 16

struct srq_credit {
	/* One registered area: w[0..1] the peer's credit word (it WRITEs
	 * there), w[2 + 2k..] the sources of our own credit WRITEs. */
	uint32_t *w;
	struct rdmx__mr *mr;
	/* Sending (c->lock): what the peer granted us. */
	uint32_t peer_depth;     /* its SRQ: no grant can exceed it */
	uint32_t base;           /* granted in its hello */
	uint32_t granted;        /* total granted, validated */
	uint32_t spent;          /* taken by rdmx_msg_alloc */
	uint64_t raddr;          /* the peer's credit word */
	uint32_t rkey;
	/* Receiving (g->lock): what we granted the peer. */
	uint32_t given;          /* total granted */
	uint32_t gbase;          /* of which in our hello */
	uint32_t recvd;          /* messages received from the peer */
	uint32_t held;           /* of those, queued or held by the user */
	uint32_t writes;         /* credit WRITEs posted, ever */
	int dirty;               /* given changed since the last WRITE */
	int inflight;            /* atomic: credit WRITEs not completed */
};

/* Register the credit area on @c's device; undone by _teardown(). */
int rdmx__srq_credit_setup(rdmx_conn *c, struct srq_credit *cr);
void rdmx__srq_credit_teardown(rdmx_conn *c, struct srq_credit *cr);

/* Our part of the hello: grant the peer @grant credits, say where our
 * credit word is (SRQ_CREDIT_BLOCK bytes at @b). */
void rdmx__srq_credit_hello_out(struct srq_credit *cr, uint32_t grant,
				uint8_t *b);
/* The peer's part, checked against its SRQ depth: 0 or -EPROTO. */
int rdmx__srq_credit_hello_in(struct srq_credit *cr, const uint8_t *b,
			      uint32_t peer_depth);

/* Sending: take one credit within @d (0, -ETIMEDOUT, or the connection's
 * error: a malformed grant takes it down with -EPROTO); give back one
 * taken for a message that was released unsent. */
int rdmx__srq_credit_take(rdmx_conn *c, struct srq_credit *cr,
			  struct rdmx__deadline *d);
void rdmx__srq_credit_untake(struct srq_credit *cr);
/* rdmx_send (@more: RDMX_SEND_MORE) through @c's pool @sp: a message the
 * pool packed into a held frame (its slot free at once) travels in the
 * frame's SRQ buffer, so its credit goes back. */
int rdmx__srq_credit_send(rdmx_conn *c, struct rdmx__sendpool *sp,
			  struct srq_credit *cr, struct rdmx_msg *m, int more);

/* Receiving, all under g->lock. A message of @c arrived (0, or -EPROTO
 * with @c down: it had no credit for it). */
int rdmx__srq_credit_arrived(rdmx_conn *c, struct srq_credit *cr);
/* @n of @c's buffers went back to the SRQ: top it up to @share. The
 * caller holds c->lock (rdmx_msg_release). */
void rdmx__srq_credit_freed(rdmx_conn *c, struct srq_credit *cr, uint32_t n,
			    uint32_t share);
/* Grant @c up to @share credits outstanding plus held, and send them;
 * @owner: the caller holds c->lock. */
void rdmx__srq_credit_top_up(rdmx_conn *c, struct srq_credit *cr,
			     uint32_t share, int owner);
/* Send grants not sent yet (all credit WRITE slots were busy); the
 * caller holds c->lock, not g->lock. */
void rdmx__srq_credit_kick(rdmx_conn *c, struct srq_credit *cr);

/* The protocol's own_wc hook: 1 if @wc was a credit WRITE's. */
int rdmx__srq_credit_wc(rdmx_conn *c, struct srq_credit *cr,
			const struct rdmx__wc *wc);

#endif /* RDMX_PROTOCOLS_SRQ_CREDIT_H */
