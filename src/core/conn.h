/* SPDX-License-Identifier: MIT */
/*
 * The objects behind the public handles (context, connection, listener,
 * listener group), laid out here whole so each is one allocation: the
 * parts other modules own (live.c's keepalive, opslots.c's slots,
 * waitset.c's sleeps, qp.c's queues) are embedded. And a connection's state: up, or
 * down with its first reason (conn.c).
 */
#ifndef RDMX_CORE_CONN_H
#define RDMX_CORE_CONN_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <rdmx/rdmx.h>

#include "errors.h"
#include "clock.h"
#include "fabric.h"

/* A helper on every message's path, inlined also where the compiler would
 * make it a call (one used from two places, or one it judged too big):
 * a prologue, an epilogue and a call cost a dozen instructions a message
 * (bench/profile-burst). */
#define RDMX__HOT static inline __attribute__((always_inline))

struct rdmx__slab; /* mem.c: rdmx_alloc's chunks */

struct rdmx_ctx {
	struct rdmx__err err;
	const struct rdmx__fabric_ops *fops;
	struct rdmx__fabric *fab;
	struct rdmx__slab *slab;
	uint8_t wait_mode;         /* resolved: never RDMX_WAIT_DEFAULT */
	uint32_t spin_us;          /* resolved: never 0 */
};

struct rdmx_protocol_ops;
struct rdmx__peer_count; /* admit.c */
struct rdmx__export_node; /* mw.h: an export kept until its connection closes */
#define RDMX__PEER_HOST_LEN 64

/*
 * The connections accepted on one listener: what rdmx_listener_recv()
 * polls, and the receive side that srq and write_atomic share among them
 * (their SRQ or ring lives in @shared). Reference counted: the listener
 * holds one reference and every member connection one, so the shared
 * resources outlive the listener until the last connection is closed;
 * proto->group->shared_teardown() runs when the last reference goes,
 * after every member's QP is gone. Member connections may be used by
 * different threads: @lock guards the member list, every member's @holds,
 * and whatever in @shared the protocol says it guards; @unheld is
 * signalled when a member's holds drop to zero (rdmx__group_unlist waits
 * for it).
 */
struct rdmx__group {
	pthread_mutex_t lock;
	pthread_cond_t unheld;
	unsigned refs;
	const struct rdmx_protocol_ops *proto;
	rdmx_conn **conns;       /* members that are up, in accept order */
	size_t n, cap;
	size_t next;             /* round-robin cursor of rdmx_listener_recv */
	void *shared;            /* proto->group->shared_size bytes, zeroed */
	int shut;                /* atomic: rdmx_listener_shutdown() was called */
	unsigned admitted;       /* connections admitted, not yet freed */
	uint64_t mem;            /* their charges (admit.c): what they pin */
	uint64_t max_mem;        /* the listener's cap, for later charges */
	struct rdmx__peer_count *peers; /* admitted connections by peer host */
	size_t npeers, peers_cap;
	uint8_t wait_mode;       /* the listener's, resolved (opts.c) */
	uint32_t spin_us;
	int epfd;                /* waitset.c: the members' wait sets and
				  * @kick, -1 until a listener wait parks */
	int kick;                /* an eventfd in @epfd: shutdown */
};

/*
 * What a connection's waits sleep on in the kernel (waitset.c): the CQs
 * its protocol named (rdmx__conn_watch) and its ep's rdma_cm channel,
 * gathered in one epoll fd (-1 until first needed). @recv_cq: the
 * protocol's receives complete on a watched CQ, so a wait may sleep on
 * it; @user: rdmx_conn_fd() handed the fd out, so a zero-timeout poll
 * that finds nothing arms the CQs.
 */
#define RDMX__WATCH_MAX 4
#define RDMX__WATCH_RECV 1u
struct rdmx__waitset {
	struct rdmx__cq *cq[RDMX__WATCH_MAX];
	int ncq;
	int recv_cq;
	int epfd;
	int user;
	int kick;      /* an eventfd in epfd: rdmx__conn_kick() */
	int sleeping;  /* a wait armed the CQs and did not wake since */
	int in_group;  /* epfd is in the listener group's (rdmx__group_park) */
};

/* An accepted request whose dialer has not completed the handshake. */
struct rdmx__pending {
	rdmx_conn *c;
	struct rdmx__deadline by; /* connect_timeout_ms from the accept */
	int up;                   /* the accept itself saw it established */
};

struct rdmx_listener {
	struct rdmx__err err;
	rdmx_ctx *ctx;
	struct rdmx__ep *ep;
	struct rdmx_conn_opts opts;
	const struct rdmx_protocol_ops *proto;
	unsigned rejected;
	struct rdmx__group *group;
	int waiters;             /* atomic: threads in accept/listener_recv/next */
	unsigned next_polls;     /* rdmx_listener_next: events since it last
				  * looked for connections */
	int held;                /* rdmx_listener_next: held_ev comes next */
	struct rdmx_event held_ev; /* an event of a connection announced first */
	struct rdmx_listener_opts lopts; /* admission caps */
	uint64_t charge_each;    /* bytes the layer above pins for each
				  * connection (rdmx__listener_charge_each) */
	struct rdmx__pending *pending;   /* handshakes in progress */
	size_t npending, pcap;
	int epfd;                /* rdmx_listener_fd(), -1 until asked for */
	int parkfd;              /* epfd and the group's: what a
				  * rdmx_listener_next() sleeps on, -1 until
				  * it first parks */
};

/*
 * Send-queue slots / send-CQ entries the core takes beside the protocol's:
 * the keepalive's one (live.c) and the one-sided operations' (opslots.c).
 */
#define RDMX__OS_WRS 16u
#define RDMX__KA_WRS (1u + RDMX__OS_WRS)
#define RDMX__KA_STASH 64
struct rdmx__live {
	pthread_mutex_t lock;     /* guards the fields below */
	struct rdmx__cq *scq;     /* the QP's send CQ */
	int out;                  /* a keepalive is posted, not completed */
	int64_t posted_ms;        /* when the last one was posted */
	int stashed;              /* atomic: entries in stash */
	struct rdmx__wc stash[RDMX__KA_STASH];
};

/* One-sided operations in flight (opslots.h). @lock guards the arrays. */
struct rdmx__os {
	pthread_mutex_t lock;
	uint32_t gen[RDMX__OS_WRS];
	uint8_t state[RDMX__OS_WRS];  /* 0 free, 1 posted, 2 completed */
	uint8_t op[RDMX__OS_WRS];     /* enum rdmx__op, for messages */
	int rc[RDMX__OS_WRS];         /* completed: 0 or the error */
};

enum rdmx__conn_state {
	RDMX__CONN_SETUP,
	RDMX__CONN_UP,
	RDMX__CONN_DOWN,
};

/* A connection's queues (c->qp), made and unmade by qp.c (qp.h): NULL
 * until rdmx__qp_make(). */
struct rdmx__qp {
	struct rdmx__cq *scq;    /* the send CQ, the connection's own */
	struct rdmx__cq *rcq;    /* where receives complete: own or shared */
	int own_rcq;             /* rcq was made here (destroyed here) */
};

struct rdmx_conn {
	struct rdmx__err err;
	rdmx_ctx *ctx;
	const struct rdmx__fabric_ops *f;
	struct rdmx__ep *ep;
	const struct rdmx_protocol_ops *proto;
	const struct rdmx__data_ops *data_ops; /* proto->data (protocol.h) */
	struct rdmx_conn_opts opts;
	uint32_t max_msg;        /* negotiated */
	uint16_t peer_recv_depth;
	int is_server;
	/*
	 * Threads (see "Threading" in rdmx.h): @lock serializes the data-path
	 * calls on this connection (the public ones take it; the listener's
	 * member poll only tries it). @state is atomic and may be read
	 * anywhere; the DOWN transition, @down_rc and @err are written under
	 * @down_lock (rdmx__conn_down, rdmx__conn_keep). @holds: listener
	 * cursors using this member (group lock).
	 */
	pthread_mutex_t lock;
	pthread_mutex_t down_lock;
	unsigned holds;
	_Atomic enum rdmx__conn_state state;
	int down_rc;             /* why the connection went down */
	uint64_t posted[RDMX__OP_CMP_SWAP + 1]; /* work requests by op */
	uint64_t posted_recv;
	uint32_t max_inline;      /* the QP's, see rdmx__qp_make() */
	struct rdmx__qp qp;       /* its CQs (qp.h) */
	struct rdmx__group *group; /* accepted: the listener's group, else NULL */
	int reset_reported;      /* rdmx_listener_recv said -ECONNRESET for it */
	int recv_later;          /* an error rdmx_recv_many met after the
				  * messages it returned: the next receive
				  * call returns it (recvvec.c, c->lock) */
	struct rdmx__live live;
	uint64_t mem_charge;     /* admitted: bytes charged to the group */
	int admitted;            /* counted in group->admitted */
	char peer_host[RDMX__PEER_HOST_LEN]; /* accepted: the dialer's address */
	void *priv;              /* proto->conn->priv_size bytes, zeroed */
	struct rdmx__os os;      /* one-sided operations in flight */
	struct rdmx__export_node *exports; /* rdmx_mr_export's windows bound to
				  * this QP, revoked at close (mw.h) */
	uint16_t tok_tag;        /* this connection's mark in its tokens */
	void *user;              /* rdmx_conn_set_user() */
	struct rdmx_conn_stats stats; /* counters, __atomic relaxed adds */
	struct rdmx__waitset ws;  /* waitset.c */
};

/* Count @bytes of one message or operation in @counter of c->stats. */
#define RDMX__COUNT(c, field, n) \
	__atomic_fetch_add(&(c)->stats.field, (uint64_t)(n), __ATOMIC_RELAXED)

/* conn.c: the connection going down. */
/* The reason @c went down, as this thread's error; its down_rc. */
int rdmx__conn_down_reason(rdmx_conn *c);
/* Mark the connection down with @rc and a message (first reason wins). */
int rdmx__conn_down(rdmx_conn *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* rdmx__keep() onto c->err under c->down_lock: 0 or @rc. Inline: every
 * data-path call ends in it, and the success case is one compare. */
int rdmx__conn_keep_err(rdmx_conn *c, int rc);
static inline int rdmx__conn_keep(rdmx_conn *c, int rc)
{
	return rc >= 0 ? rc : rdmx__conn_keep_err(c, rc);
}

/* Turn an error completion into the connection going down. */
int rdmx__conn_wc_error(rdmx_conn *c, const struct rdmx__wc *wc,
			const char *what);

/* 0 if @c may be used, else its error (-EINVAL for NULL, the reason it
 * went down). Inline: every data-path call starts with it. */
static inline int rdmx__conn_usable(rdmx_conn *c)
{
	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	if (c->state == RDMX__CONN_DOWN)
		return rdmx__conn_down_reason(c);
	return 0;
}

#endif /* RDMX_CORE_CONN_H */
