/* SPDX-License-Identifier: MIT */
/*
 * buffered_read's private state, shared by its files, bottom first:
 * buffered_read_progress.c (posting, reaping the send CQ, reports,
 * doorbell receives), buffered_read_recv.c (the receiver),
 * buffered_read_send.c (the sender), buffered_read_conn.c (set-up and hello;
 * the design at its top) and buffered_read_ops.c (the tables). Not for
 * other protocols; the tests' face is buffered_read.h.
 */
#ifndef RDMX_PROTOCOLS_BUFFERED_READ_PRIV_H
#define RDMX_PROTOCOLS_BUFFERED_READ_PRIV_H

#include "core/doorbell.h"
#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/opts.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/ring.h"
#include "core/wire.h"
#include "buffered_read_ctl.h"

/* wr_id >> 32 of our work requests */
#define K_TAIL 1u
#define K_DATA 2u
#define K_REP 3u
#define K_PUB 4u
#define K_BELL 5u
#define K_GEN 6u
enum { RD_IDLE, RD_TAIL, RD_DATA };

struct br {
	struct rdmx__br_ctl *ctl;  /* registered: the peer READs and WRITEs it */
	struct rdmx__mr *ctl_mr, *ring_mr, *mirror_mr;
	uint8_t *ring, *mirror;
	int ring_magic, mirror_magic;
	struct rdmx__ring_geo geo;        /* our ring */
	uint64_t seed;
	/* sender */
	uint64_t tail, sent;
	int pub_out;                      /* our READ of the peer's progress */
	uint64_t p_fetched, p_head, p_released; /* the peer's last report */
	uint32_t win_out;                 /* the peer's recv_depth */
	struct rdmx__one_buf ob;          /* the buffer rdmx_msg_alloc handed out */
	uint32_t bells_out;               /* our doorbell SENDs in flight */
	uint64_t bells_sent, bells_recv;  /* rdmx__br_bells() */
	int looked;                       /* the last look of a sleep is out */
	struct rdmx__bell bell;           /* our sleeps, the peer's we rang for */
	/* receiver */
	struct rdmx__ring_geo pgeo;       /* the peer's ring */
	uint64_t pseed, peer_ring, peer_ctl;
	uint32_t peer_ring_rkey, peer_ctl_rkey;
	int peer_magic;
	uint64_t rd, fetched, target;
	int rd_state, data_out;
	struct rdmx__ring_rel rel;
	int rep_out, rep_next, rep_again;
	uint64_t rep_head, rep_released;  /* what the last report said */
};


static inline struct br *br_of(const rdmx_conn *c)
{
	return c->priv;
}

/* A doorbell came or a record was taken: pull again, a later sleep is a
 * new one. */
RDMX__HOT void woke(struct br *p)
{
	rdmx__bell_woke(&p->bell);
	p->looked = 0;
}

/* Our progress where the sender READs it. */
RDMX__HOT void publish(struct br *p)
{
	__atomic_store_n(&p->ctl->pub[0], rdmx__cword((uint32_t)p->fetched), __ATOMIC_RELEASE);
	__atomic_store_n(&p->ctl->pub[1], rdmx__cword((uint32_t)p->rel.head), __ATOMIC_RELEASE);
	__atomic_store_n(&p->ctl->pub[2], rdmx__cword((uint32_t)p->rel.released), __ATOMIC_RELEASE);
}


/* buffered_read_progress.c */
int rdmx__br_post_bell_recv(rdmx_conn *c, uint32_t i);
int rdmx__br_post(rdmx_conn *c, uint32_t kind, enum rdmx__op op, void *local,
		  uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey);
int rdmx__br_report(rdmx_conn *c);
int rdmx__br_reap(rdmx_conn *c);

/* buffered_read_recv.c */
int rdmx__br_sleep_announce(rdmx_conn *c);
int rdmx__br_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms);
int rdmx__br_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
		       int timeout_ms, int *later);
int rdmx__br_release(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__br_release_many(rdmx_conn *c, struct rdmx_msg *m, int n);

/* buffered_read_send.c */
int rdmx__br_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
		       int timeout_ms);
int rdmx__br_send(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__br_flush(rdmx_conn *c, int timeout_ms);
int rdmx__br_sends_done(rdmx_conn *c, uint64_t *done);

/* buffered_read_conn.c */
void rdmx__br_teardown(rdmx_conn *c);
int rdmx__br_setup(rdmx_conn *c);
int rdmx__br_hello_out(rdmx_conn *c, uint8_t *b, size_t cap, size_t *len);
int rdmx__br_hello_in(rdmx_conn *c, const uint8_t *b, size_t len);
int rdmx__br_check_opts(const struct rdmx_protocol_ops *proto,
			const struct rdmx_conn_opts *o, uint32_t max_msg);
uint64_t rdmx__br_mem_estimate(const rdmx_conn *c);

#endif /* RDMX_PROTOCOLS_BUFFERED_READ_PRIV_H */
