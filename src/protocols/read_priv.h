/* SPDX-License-Identifier: MIT */
/*
 * The read protocol's private state, shared by its files, bottom first:
 * read.c (the design at its top, and the wire formats of read.h),
 * read_ack.c (acks: the receiver's ack WRITEs, the sender taking them in),
 * read_recv.c (descriptors in, READs and eager copies, completions,
 * receives and releases), read_send.c (descriptors out, the send pool's
 * hooks) and read_conn.c (set-up, hello and the tables). Not for other
 * protocols.
 */
#ifndef RDMX_PROTOCOLS_READ_PRIV_H
#define RDMX_PROTOCOLS_READ_PRIV_H

#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/opts.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/qp.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "core/sendpool.h"
#include "protocols/read.h"

#define SLOT_ALIGN 64
#define DESC_OFF (SLOT_ALIGN - RDMX__READ_DESC_SIZE) /* in a send buffer */
#define DATA_OFF SLOT_ALIGN
#define NO_BUF UINT32_MAX

enum { RB_FREE, RB_BUSY, RB_HELD };     /* receive buffer */
enum { M_WAIT, M_READING, M_READY };    /* descriptor received */
enum { WR_DESC = 1, WR_READ, WR_ACK, WR_RX }; /* wr_id >> 32 */

struct tx {
	uint32_t gen;
	uint8_t eager;
	uint8_t acked;  /* ack seen (credit back); SEND completed: the pool's */
};

struct rmsg {
	struct rdmx__read_desc d;
	uint32_t rx;    /* descriptor receive holding it */
	uint32_t buf;   /* receive buffer, NO_BUF before one is taken */
	uint8_t state;
};

struct ackreq {
	uint32_t slot, gen;
};

struct rd {
	/* sending */
	struct rdmx__sendpool sp;  /* send buffers, held until acked */
	uint32_t nsend;
	struct tx *tx;
	uint32_t *posted, nposted; /* buffers posted, not given back */
	uint32_t unacked;          /* posted, not acked: with sp.nalloc, the
				    * credits used */
	uint64_t *ack;             /* the peer WRITEs generations here */
	struct rdmx__mr *ackmr;

	/* the peer */
	struct rdmx__read_hello peer;
	uint32_t read_limit;

	/* receiving */
	uint8_t *dbuf;             /* descriptor receives */
	struct rdmx__mr *dmr;
	size_t dstride;
	uint32_t ndesc, eager_cap;
	uint8_t *rbuf;             /* receive buffers */
	struct rdmx__mr *rmr;
	size_t rstride;
	uint32_t nrecv;
	uint8_t *rstate;
	uint32_t *free_rb, nfree_rb;
	struct rmsg *fifo;         /* descriptors in arrival order */
	uint32_t fcap, fhead, fcount;
	uint32_t fstarted;         /* fifo entries from the head under way */
	uint32_t reads;            /* READs in flight */
	struct ackreq *ackq;       /* acks not posted yet, ndesc entries */
	uint32_t aq_head, aq_count;
	uint32_t acks;             /* ack WRITEs in flight */
	uint64_t *acksrc;          /* ack WRITE sources, per peer buffer */
	struct rdmx__mr *acksrcmr;
};

RDMX__SENDPOOL_FIRST(struct rd, sp);

static inline struct rd *rd_of(rdmx_conn *c)
{
	return c->priv;
}

static inline uint64_t wr_id(unsigned kind, uint32_t idx)
{
	return ((uint64_t)kind << 32) | idx;
}

/* read_ack.c */

/* Queue an ack for the peer's buffer @slot (dropped once down). */
int rdmx__read_ack_push(rdmx_conn *c, uint32_t slot, uint32_t gen);
/* Post queued acks: an RDMA WRITE of the generation into the ack slot. */
void rdmx__read_ack_flush(rdmx_conn *c);
/* Take in acks; a buffer is free once acked and its SEND completed. */
void rdmx__read_tx_scan(struct rd *p);

/* read_recv.c */

/* Post descriptor receive @idx. */
int rdmx__read_post_rx(rdmx_conn *c, uint32_t idx);
/* One round of everything, acks out and in as well (the pool's reap). */
int rdmx__read_progress(rdmx_conn *c);
int rdmx__read_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms);
int rdmx__read_release(rdmx_conn *c, struct rdmx_msg *m);

/* read_send.c */

/* The send pool's hooks (core/sendpool.h). */
extern const struct rdmx__sendpool_ops rdmx__read_pool_ops;
int rdmx__read_send(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__read_send_more(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__read_flush(rdmx_conn *c, int timeout_ms);

#endif /* RDMX_PROTOCOLS_READ_PRIV_H */
