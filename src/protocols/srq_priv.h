/* SPDX-License-Identifier: MIT */
/*
 * srq's private state, shared by its files, bottom first: srq_shared.c
 * (the SRQ's buffers, the member list, the completion queues),
 * srq_recv.c (receives, releases, the listener's receive) and srq_conn.c
 * (set-up, hello, sends and the tables; the design at its top). The
 * credits have their own header, srq_credit.h. Not for other protocols.
 */
#ifndef RDMX_PROTOCOLS_SRQ_PRIV_H
#define RDMX_PROTOCOLS_SRQ_PRIV_H

#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/group.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/pack.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/qp.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "core/repost.h"
#include "core/sendpool.h"
#include "core/unpack.h"
#include "srq_credit.h"

enum { BUF_POSTED = 1, BUF_QUEUED, BUF_HELD };

#define WC_BATCH 16
#define NIL UINT32_MAX

/* One SRQ receive buffer and, once consumed, its completion. */
struct rbuf {
	struct rdmx__wc wc;
	rdmx_conn *owner;        /* queued for / held by */
	uint32_t gprev, gnext;   /* arrival order among all queued */
	uint32_t mnext;          /* the owner's queue */
	uint8_t state;           /* BUF_* */
	uint64_t mask;           /* held: its messages not released */
};

struct member {
	uint32_t qpn;
	rdmx_conn *c;
};

/* A listener's (or a dialer's) receive side: c->group->shared, g->lock. */
struct srq_shared {
	int made;
	const struct rdmx__fabric_ops *f;
	struct rdmx__qp_shared rx; /* the SRQ and its receive CQ */
	struct rdmx__mr *mr;
	uint8_t *buf;
	size_t slot;             /* bytes between buffers */
	uint32_t buf_bytes;      /* bytes a buffer holds */
	uint32_t depth;
	struct rbuf *rb;
	uint32_t ghead, gtail;   /* queued completions, oldest first */
	struct member *mem;      /* every connection with a QP on the SRQ */
	size_t nmem, capmem;
	unsigned idle;           /* empty zero-timeout listener polls */
	uint64_t posted;         /* receives posted to the SRQ, ever */
	rdmx_conn *fconn;        /* whose frame the listener hands out */
	struct rdmx__wc wc[WC_BATCH];
};

/* Per connection: the send side, and its queue of received messages. */
struct srq_conn {
	struct rdmx__sendpool sp;
	uint32_t mhead, mtail;   /* queued for this connection (g->lock) */
	unsigned idle;
	struct srq_credit cr;    /* flow control, both directions */
	int peer_packs;          /* its hello said it splits (and packs) */
	struct rdmx__repost rp;  /* its buffers released, not yet reposted
				  * (g->lock) */
	struct rdmx__unpack fr;  /* its frame being handed out (g->lock) */
};
RDMX__SENDPOOL_FIRST(struct srq_conn, sp);

static inline struct srq_conn *sc_of(rdmx_conn *c)
{
	return c->priv;
}

static inline struct srq_shared *sh_of(const struct rdmx__group *g)
{
	return g->shared;
}

/* Credits each member may have outstanding plus held (g->lock). */
static inline uint32_t share_of(const struct srq_shared *sh)
{
	uint32_t s = sh->depth / (uint32_t)(sh->nmem ? sh->nmem : 1);

	return s ? s : 1;
}

/* Buffer @idx's receive. */
static inline struct rdmx__wr recv_wr(const struct srq_shared *sh, uint32_t idx)
{
	return (struct rdmx__wr){
		.wr_id = idx,
		.op = RDMX__OP_RECV,
		.addr = sh->buf + (size_t)idx * sh->slot,
		.len = sh->buf_bytes,
		.lkey = sh->mr->lkey,
	};
}

/* srq_shared.c; all under g->lock. */

/* Give buffer @idx back to the SRQ; @c (may be NULL) is charged for it. */
int rdmx__srq_buf_post(struct srq_shared *sh, rdmx_conn *c, uint32_t idx);
/* The SRQ, its buffers (all posted) and the receive CQ, on @c's device. */
int rdmx__srq_shared_make(rdmx_conn *c, struct srq_shared *sh);
/* The group's shared_teardown hook: frees what _make() made. */
void rdmx__srq_shared_teardown(struct rdmx__group *g);
/* List @c, whose QP is @qpn, on the SRQ; unlist it. */
int rdmx__srq_member_add(struct srq_shared *sh, rdmx_conn *c, uint32_t qpn);
void rdmx__srq_member_del(struct srq_shared *sh, rdmx_conn *c);
/* Take @c's oldest queued completion (NIL if none). */
uint32_t rdmx__srq_queue_pop(struct srq_shared *sh, rdmx_conn *c);
/* Poll the shared CQ until it is empty or something was queued: the
 * number queued (>= 0) or -errno. */
int rdmx__srq_poll_shared(struct srq_shared *sh);

/* srq_recv.c: the data-path and group hooks of receiving. */
int rdmx__srq_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms);
int rdmx__srq_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			int timeout_ms, int *later);
int rdmx__srq_release(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__srq_release_many(rdmx_conn *c, struct rdmx_msg *m, int n);
int rdmx__srq_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
			 int timeout_ms);

#endif /* RDMX_PROTOCOLS_SRQ_PRIV_H */
