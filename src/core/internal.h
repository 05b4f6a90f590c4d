/* SPDX-License-Identifier: MIT */
/*
 * Core internals: the objects behind the public handles (the protocol
 * contract every src/protocols/<name>.c fills is protocol.h), and the
 * helpers the protocols share (connection-down handling, counted posts;
 * the deadline is clock.h's, the wait step wait.h's).
 */
#ifndef RDMX_CORE_INTERNAL_H
#define RDMX_CORE_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include <rdmx/rdmx.h>

#include "clock.h"
#include "errors.h"
#include "fabric.h"
#include "protocol.h"
#include "qp.h"
#include "ring.h"
#include "wait.h"
#include "wire.h"

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
	uint64_t mem;            /* their proto->conn->mem_estimate() bytes */
	uint8_t wait_mode;       /* the listener's, resolved (wait.c) */
	uint32_t spin_us;
	int epfd;                /* waitset.c: the members' wait sets and
				  * @kick, -1 until a listener wait parks */
	int kick;                /* an eventfd in @epfd: shutdown */
};

/* -ESHUTDOWN with a message once the group's listener is shut down. */
int rdmx__group_shut(struct rdmx__group *g);

struct rdmx__pending; /* below */

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
	struct rdmx__pending *pending;   /* handshakes in progress */
	size_t npending, pcap;
	int epfd;                /* rdmx_listener_fd(), -1 until asked for */
	int parkfd;              /* epfd and the group's: what a
				  * rdmx_listener_next() sleeps on, -1 until
				  * it first parks */
};

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
/* Send-queue slots / send-CQ entries the core takes beside the protocol's:
 * the keepalive's one and the one-sided operations' (onesided.c). */
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

/*
 * One-sided operations in flight (onesided.c): RDMX__OS_WRS slots, each
 * posted with wr_id RDMX__OS_WRID(slot); rdmx__poll_cq() takes their
 * completions out of the send CQ like the keepalive's and records them
 * here. A token is (gen << 8 | slot). @lock guards the arrays.
 */
#define RDMX__OS_WRID_BASE UINT64_C(0xfffffffffffd0000)
#define RDMX__OS_WRID(slot) (RDMX__OS_WRID_BASE | (uint64_t)(slot))
#define RDMX__OS_IS_WRID(id) (((id) & ~UINT64_C(0xff)) == RDMX__OS_WRID_BASE)
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
	void *priv;              /* proto->conn->priv_size bytes, zeroed */
	struct rdmx__os os;      /* one-sided operations in flight */
	uint16_t tok_tag;        /* this connection's mark in its tokens */
	void *user;              /* rdmx_conn_set_user() */
	struct rdmx_conn_stats stats; /* counters, __atomic relaxed adds */
	struct rdmx__waitset ws;  /* waitset.c */
};

/* conn.c: option checks for the protocols' check_opts(). */
/* -EINVAL with "@what V out of range LO..HI" unless @lo <= @v <= @hi. */
int rdmx__check_range(const char *what, uint32_t v, uint32_t lo, uint32_t hi);
/* The ring protocols' ring_size (a power of two in RDMX__RING_SIZE_MIN..
 * RDMX__RING_SIZE_MAX) and notify (an enum rdmx_notify value). */
#define RDMX__RING_SIZE_MIN 4096u
#define RDMX__RING_SIZE_MAX (1u << 30)
int rdmx__check_ring_opts(const struct rdmx_conn_opts *o);

/*
 * Message handles: the one encoding of struct rdmx_msg's priv_ for every
 * protocol. priv_[0] is the protocol's value (a slot index, a ring
 * offset, a record's sequence number); priv_[1] is the connection with
 * the handle's kind in its low bits (a connection is at least 8-byte
 * aligned), 0 once the handle is spent. rdmx_msg_conn() masks the kind
 * off. A handle is user memory: rdmx__msg_get() reads it once and checks
 * connection and kind; the protocol then checks the value (in range, in
 * the right state) before it uses it.
 */
enum rdmx__msg_kind {
	RDMX__MSG_CONN = 0,   /* names a connection, holds nothing */
	RDMX__MSG_SEND = 1,   /* an allocated send buffer */
	RDMX__MSG_RECV = 2,   /* a received message */
};
#define RDMX__MSG_KIND_MASK UINT64_C(7)
_Static_assert(_Alignof(struct rdmx_conn) > RDMX__MSG_KIND_MASK,
	       "a connection's low bits carry a handle's kind");

static inline void rdmx__msg_set(struct rdmx_msg *m, rdmx_conn *c,
				 enum rdmx__msg_kind kind, uint64_t val)
{
	m->priv_[0] = val;
	m->priv_[1] = (uintptr_t)c | (uint64_t)kind;
}

/* 0 with the handle's value in *@val if @m is a live @kind handle of @c,
 * else -EINVAL (no message formatted). */
static inline int rdmx__msg_get(const struct rdmx_msg *m, const rdmx_conn *c,
				enum rdmx__msg_kind kind, uint64_t *val)
{
	uint64_t tag = m->priv_[1], v = m->priv_[0];

	if (tag != ((uintptr_t)c | (uint64_t)kind))
		return -EINVAL;
	*val = v;
	return 0;
}

/* The handle's connection (NULL once spent). */
static inline rdmx_conn *rdmx__msg_conn(const struct rdmx_msg *m)
{
	return (rdmx_conn *)(uintptr_t)(m->priv_[1] & ~RDMX__MSG_KIND_MASK);
}

static inline void rdmx__msg_spend(struct rdmx_msg *m)
{
	m->priv_[1] = 0;
}

/*
 * One send buffer at a time (the write rings, buffered_read): the buffer
 * rdmx_msg_alloc handed out, where its record starts and how big it may
 * be. Each buffer gets a new id, so the handle of an earlier one is
 * refused.
 */
struct rdmx__one_buf {
	int live;
	uint64_t id, start;
	size_t cap;
};

/* -EBUSY (with a message) while a buffer is out, else 0. */
int rdmx__one_buf_busy(const rdmx_conn *c, const struct rdmx__one_buf *b);

/* Hand out @data, @cap bytes, for the record at @start, in @m. */
static inline void rdmx__one_buf_give(rdmx_conn *c, struct rdmx__one_buf *b,
				      struct rdmx_msg *m, void *data,
				      uint64_t start, size_t cap)
{
	b->live = 1;
	b->id++;
	b->start = start;
	b->cap = cap;
	m->data = data;
	m->cap = cap;
	m->len = 0;
	m->imm = 0;
	m->flags = 0;
	rdmx__msg_set(m, c, RDMX__MSG_SEND, b->id);
}

/* Is @m the buffer out now? */
static inline int rdmx__one_buf_is(rdmx_conn *c, const struct rdmx__one_buf *b,
				   const struct rdmx_msg *m)
{
	uint64_t id;

	return !rdmx__msg_get(m, c, RDMX__MSG_SEND, &id) && b->live && id == b->id;
}

/*
 * Give back @m, a message of a ring receiver (its one rdmx_msg_alloc
 * buffer @b, or a record held in @rel), without telling the peer: 1 if
 * @rel's released prefix grew (the caller publishes or reports it), 0, or
 * -EINVAL with a message. The release of buffered_read and the write
 * rings; inlined, as it is on every message's path.
 */
RDMX__HOT int rdmx__one_buf_release(rdmx_conn *c, struct rdmx__one_buf *b,
				    struct rdmx__ring_rel *rel, struct rdmx_msg *m)
{
	uint64_t seq;
	int n;

	if (rdmx__one_buf_is(c, b, m)) {
		b->live = 0;
		rdmx__msg_spend(m);
		return 0;
	}
	if (rdmx__msg_get(m, c, RDMX__MSG_RECV, &seq) ||
	    (n = rdmx__ring_rel_release(rel, seq)) < 0)
		return rdmx__fail(-EINVAL, "%s: message not held on this connection",
				  c->proto->name);
	rdmx__msg_spend(m);
	return n > 0;
}

/* An accepted request whose dialer has not completed the handshake. */
struct rdmx__pending {
	rdmx_conn *c;
	struct rdmx__deadline by; /* connect_timeout_ms from the accept */
	int up;                   /* the accept itself saw it established */
};

/*
 * rdmx__recv_idle - the end of a receive loop's turn that found nothing:
 * the connection's error once it is down (after the poll that follows
 * the wait that found the peer gone, so everything the peer wrote before
 * it left is delivered first), else one rdmx__conn_wait() step. Returns 0
 * to poll again, or -errno.
 */
static inline int rdmx__recv_idle(rdmx_conn *c, struct rdmx__deadline *d)
{
	int rc;

	if (c->state == RDMX__CONN_DOWN)
		return rdmx__fail(c->down_rc, "%s", c->err.msg);
	rc = rdmx__conn_wait(c, d);
	return c->state == RDMX__CONN_DOWN ? 0 : rc;
}

/*
 * waitset.c. rdmx__conn_watch: in setup(), a CQ @c's waits depend on;
 * RDMX__WATCH_RECV if its receives complete there. rdmx__conn_park: the
 * park of rdmx__conn_wait (sleeps on the watched CQs and the rdma_cm
 * channel, or a timed park). rdmx__conn_once: a zero-timeout poll found
 * nothing: 0 to poll once more (the CQs were armed only now, for
 * rdmx_conn_fd's user), else -EAGAIN. rdmx__lis_watch: a pending
 * handshake's rdma_cm channel joins (@on) or leaves the listener's fd.
 * The backstop bounds every sleep on a wait set (tests raise it).
 */
#define RDMX__WAIT_BACKSTOP_MS 100
extern int rdmx__wait_backstop_ms;
void rdmx__ws_init(struct rdmx__waitset *w);
void rdmx__ws_fini(struct rdmx__waitset *w);
void rdmx__conn_watch(rdmx_conn *c, struct rdmx__cq *cq, unsigned flags);
void rdmx__conn_park(rdmx_conn *c, struct rdmx__deadline *d);
int rdmx__conn_once(rdmx_conn *c);
void rdmx__lis_watch(rdmx_listener *lis, rdmx_conn *c, int on);
/*
 * Listener-level sleeps (waitset.c): rdmx__group_park is the park of a
 * wait on every member of @g at once (rdmx_listener_recv; with @fd the
 * listener's rdmx__lis_park_fd, rdmx_listener_next: connection requests
 * and handshakes too). It arms each member's wait set as rdmx__conn_park
 * does (CQs, sleep_announce) and sleeps on @g's epoll set of them, bounded
 * by the deadline and the backstop; a member that cannot wake a sleep (no
 * receive CQ: timed parks) makes it a timed park, a member another thread
 * holds bounds it to a millisecond. The caller has run its checks.
 * rdmx__group_arm: one member's part (1: poll again, 0: armed, -EBUSY:
 * held elsewhere, -errno: cannot sleep), rdmx__group_rest its end after
 * the sleep; rdmx__group_unwatch: @c leaves the set (no cursor holds it);
 * rdmx__group_kick: wake every sleeper (shutdown), for good.
 */
void rdmx__group_park(struct rdmx__group *g, int fd, struct rdmx__deadline *d);
/* A sleep's bound: what is left of @d, at most the backstop. */
int rdmx__wait_sleep_bound_ms(struct rdmx__deadline *d);
int rdmx__group_fd(struct rdmx__group *g);
int rdmx__group_arm(struct rdmx__group *g, rdmx_conn *c);
void rdmx__group_rest(rdmx_conn *c);
void rdmx__group_unwatch(struct rdmx__group *g, rdmx_conn *c);
void rdmx__group_kick(struct rdmx__group *g);
void rdmx__group_ws_fini(struct rdmx__group *g);
int rdmx__lis_park_fd(rdmx_listener *lis);
/* Wake @c's sleeping wait: what it waits for came by another path (srq:
 * another connection's poll of the shared CQ queued @c a message). */
void rdmx__conn_kick(rdmx_conn *c);

/* live.c: keepalives. */
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

/* live.c: the connection going down. */
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

/* recvvec.c: c->recv_later, returned once (c->lock held). */
int rdmx__recv_later(rdmx_conn *c);

/* Turn an error completion into the connection going down. */
int rdmx__conn_wc_error(rdmx_conn *c, const struct rdmx__wc *wc,
			const char *what);

/* Counted posts: the counters show which verbs a side used. */
/* sendvec.c: rdmx_sendv's wait for room for a message of @len: the
 * protocol's msg_alloc(), first without a wait, then within what is left
 * of @d (started with @timeout_ms). */
int rdmx__sendv_alloc(rdmx_conn *c, size_t len, struct rdmx_msg *m,
		      struct rdmx__deadline *d, int timeout_ms);

/* conn.c: 0 if @c may be used, else its error (-EINVAL for NULL, the
 * reason it went down). */
int rdmx__conn_usable(rdmx_conn *c);

/* conn.c: rdmx_send_tok() of @m (from rdmx_msg_alloc on @c, m->len set)
 * through the protocol's send_from hook (which it must have): its bytes
 * are @from's, registered with @lkey (rdmx_send_mr_tok). */
int rdmx__send_from(rdmx_conn *c, struct rdmx_msg *m, const void *from,
		    uint32_t lkey, rdmx_token *tok);

/* Post @n send work requests; a lone SEND or WRITE of at most
 * c->max_inline bytes goes inline (the device copies it at post time). */
int rdmx__post_send(rdmx_conn *c, const struct rdmx__wr *wr, int n);
/* @wr, not yet inline, may go inline: a SEND or WRITE of 1..max_inline
 * bytes. A caller that sets RDMX__WR_INLINE itself spares
 * rdmx__post_send its copy of a lone request. */
static inline int rdmx__wr_may_inline(const rdmx_conn *c,
				      const struct rdmx__wr *wr)
{
	return !(wr->flags & RDMX__WR_INLINE) && wr->len && wr->len <= c->max_inline &&
	       (wr->op == RDMX__OP_SEND || wr->op == RDMX__OP_SEND_IMM ||
		wr->op == RDMX__OP_WRITE || wr->op == RDMX__OP_WRITE_IMM);
}
int rdmx__post_recv(rdmx_conn *c, const struct rdmx__wr *wr, int n);

/* group.c: listener groups. */
int rdmx__group_create(const struct rdmx_protocol_ops *proto,
		       struct rdmx__group **out);
void rdmx__group_put(struct rdmx__group *g);
/* Take a reference for @c (before setup) / list it (once it is up). */
void rdmx__group_join(struct rdmx__group *g, rdmx_conn *c);
int rdmx__group_add(struct rdmx__group *g, rdmx_conn *c);
/* Unlist @c and wait until no listener cursor holds it (rdmx_conn_close,
 * first thing: after it the listener never touches @c). Idempotent. */
void rdmx__group_unlist(rdmx_conn *c);
/* rdmx__group_join() within the caps of @lo (0: uncapped), charging
 * @c->mem_charge bytes; -EAGAIN with a message saying which cap is full.
 * rdmx__group_leave() gives the share back. */
int rdmx__group_admit(struct rdmx__group *g, rdmx_conn *c,
		      const struct rdmx_listener_opts *lo);
/* One step of rdmx_accept() that never waits: 0 with a connection that is
 * up in *@out, -EAGAIN (no message formatted) or an error. */
int rdmx__accept_step(rdmx_listener *lis, rdmx_conn **out);
/* @c, still pending, has shown it is established (a message came from
 * it): list it as up now. 0, -ENOENT (not pending) or an error. */
int rdmx__accept_promote(rdmx_listener *lis, rdmx_conn *c);
/* Unlist @c and drop its reference (from conn_free). */
void rdmx__group_leave(rdmx_conn *c);
int rdmx__group_recv(struct rdmx__group *g, struct rdmx_msg *m,
		     int timeout_ms);
/* Look for a departed peer on every member not yet reported gone and
 * not held by another thread (trylock). */
void rdmx__group_check_peers(struct rdmx__group *g);

/* Page-aligned zeroed allocation for registered buffers. */
void *rdmx__alloc_buf(size_t len);

/* mem.c: application memory. @mr registered on @c's domain (made on the
 * first use there). */
int rdmx__mr_on(rdmx_conn *c, rdmx_mr *mr, const struct rdmx__mr **out);
/* 0 if [off, off+len) lies inside @mr, else -EINVAL with a message. */
int rdmx__mr_range(const rdmx_mr *mr, size_t off, size_t len);
unsigned rdmx__mr_access(const rdmx_mr *mr);
int rdmx__slab_create(rdmx_ctx *ctx);
void rdmx__slab_destroy(rdmx_ctx *ctx);

/* info.c: connection information, option sizes. */
/* Count @bytes of one message or operation in @counter of c->stats. */
#define RDMX__COUNT(c, field, n) \
	__atomic_fetch_add(&(c)->stats.field, (uint64_t)(n), __ATOMIC_RELAXED)
/* Load the caller's @in into @out by its size (defaults for what it does
 * not know); -EINVAL with a message for a bad size or src_addr. */
int rdmx__conn_opts_copy(const struct rdmx_conn_opts *in,
			 struct rdmx_conn_opts *out);
int rdmx__ctx_opts_copy(const struct rdmx_ctx_opts *in,
			struct rdmx_ctx_opts *out);

/* token.c: send tokens. A send token has bit 63 set (one-sided tokens
 * never do), the connection's tok_tag in bits 47-62 and the send's
 * sequence (rdmx__sends() after it) in bits 0-46. */
#define RDMX__TOK_SEND (UINT64_C(1) << 63)
#define RDMX__TOK_SEQ_BITS 47
#define RDMX__TOK_IS_SEND(tok) (((tok) & RDMX__TOK_SEND) != 0)
static inline rdmx_token rdmx__tok_make(const rdmx_conn *c, uint64_t seq)
{
	return RDMX__TOK_SEND | (uint64_t)c->tok_tag << RDMX__TOK_SEQ_BITS |
	       (seq & ((UINT64_C(1) << RDMX__TOK_SEQ_BITS) - 1));
}
/* The connection's send sequence: the sends that succeeded so far, the
 * last one's number (stats.msgs_sent, counted under c->lock). */
static inline uint64_t rdmx__sends(const rdmx_conn *c)
{
	return __atomic_load_n(&c->stats.msgs_sent, __ATOMIC_RELAXED);
}
/* A fresh tok_tag for a new connection (never 0). */
uint16_t rdmx__tok_tag_next(void);
/* rdmx_wait() of send token @tok (c->lock held). */
int rdmx__send_wait(rdmx_conn *c, rdmx_token tok, int timeout_ms);

/* onesided.c */
void rdmx__os_init(rdmx_conn *c);
void rdmx__os_fini(rdmx_conn *c);
/* Record the completion of a one-sided operation (RDMX__OS_IS_WRID). */
void rdmx__os_done(rdmx_conn *c, const struct rdmx__wc *wc);
/* live.c: poll @c's send CQ now for the core's completions (keepalive,
 * one-sided), stashing the protocol's; a failed protocol send says why the
 * connection died. Returns the connection's error once it is down, else
 * -ENOBUFS when the stash is full (the protocol must poll first), else 0. */
int rdmx__live_reap(rdmx_conn *c);

#endif /* RDMX_CORE_INTERNAL_H */
