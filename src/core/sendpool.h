/* SPDX-License-Identifier: MIT */
/*
 * The send-buffer pool (sendpool.c): the registered send slots of one
 * connection, which rdmx_msg_alloc hands out and rdmx_send posts. Every
 * protocol that sends from slots of its own (send_recv, srq, read,
 * write_atomic) uses this one pool; the protocol keeps only what really
 * differs: what it posts from a slot (a SEND, a descriptor SEND, a
 * WRITE_WITH_IMM), what else a message needs before it may be allocated
 * (credits, ring space: the room hook), what a completion means (reap
 * hook) and what "flushed" means (unflushed hook).
 *
 * Life of a slot: FREE (on the free stack) -> ALLOC (handed to the user
 * by rdmx__sendpool_msg_alloc, a SEND handle in the message) -> POSTED
 * (rdmx__sendpool_post, the handle spent; or back to FREE by
 * rdmx__sendpool_release) -> FREE when the protocol's reap sees the
 * post's completion (rdmx__sendpool_sent). A pool with @hold set keeps a
 * completed slot SENT until the protocol gives it back with
 * rdmx__sendpool_put (read: the buffer is the sender's until the
 * receiver acknowledged it); the protocol asks the pool whether a slot's
 * post completed (rdmx__sendpool_done) and keeps no flag of its own. Every wait (alloc, flush) is the one wait
 * step, rdmx__conn_wait, bounded by the caller's timeout.
 *
 * The message handle (msg.h, rdmx__msg_set) of a slot is its index
 * with kind RDMX__MSG_SEND; rdmx__sendpool_slot checks a handle (user
 * memory) before anything uses it: its connection, its kind, the index in
 * range and the slot ALLOC. The post's wr_id is wr_kind << 32 | slot.
 *
 * Per-send completion tokens (issue 9 section 2, core/token.c) count on
 * the connection's send sequence, rdmx__sends() (a successful send is one
 * pool post; the core counts it once the protocol's send returned). The
 * pool's sends_done hook (rdmx__sendpool_conn_sends_done) says how many
 * sends are complete: rdmx__sends() - @inflight, as a send queue completes
 * in post order; in a hold pool, whose slots the protocol gives back in
 * any order (read: as the receiver acknowledges), the prefix of sends
 * whose slots are back, from the sequence each slot's post had (@seq,
 * kept by hold pools only). A failed completion takes the connection
 * down, so a pending token then ends with the connection's error.
 * Protocols change nothing: every completion of a pool post already
 * reaches the pool through _sent / _put. (The design first sketched here,
 * a token of slot and per-slot generation, gave way to the sequence: no
 * table look-up, a set of sends is its last token, and a signaled
 * completion that retires several posts advances the count by all of
 * them, as @inflight drops by that many.)
 *
 * Bursts (issue 10): doorbell batching and selective signaling live in
 * the pool and nowhere else. A send marked RDMX_SEND_MORE
 * (rdmx__sendpool_post_more with @more: send_recv, srq and read's
 * send_more) is held: its work request is copied
 * into the pool's chain (@held), the slot is POSTED and the handle spent,
 * but nothing is rung. The chain goes out as one rdmx__post_send (one
 * doorbell) with the next post without @more, with rdmx__sendpool_push,
 * or once it is @held_max long; the pool pushes it itself before any wait
 * of its own (an alloc that would wait - but not one that waits for a
 * slot while posted sends are out: their completions free one, and the
 * burst keeps packing -, flush) and from sends_done (a
 * token wait: the pool does not know which send is waited for, so any
 * token wait rings what is held). srq pushes before it waits for a
 * credit (a held send holds one).
 *
 * Packing (core/pack.h): with sp->pack_small set, a small send is copied
 * into the last held send's slot, which becomes a packed frame (or grows),
 * and its own slot is free at once; the frame's slot counts its sends
 * (@nmsg), so @inflight and the tokens still count sends.
 *
 * Signaling: within a chain one work request in @every is signaled, and
 * the last one of every doorbell always is. So the send queue's tail is
 * always signaled: a flush, an alloc or a token wait never needs an
 * extra signaled post (the zero-length one rdma_bench's scheme needs when
 * the tail went unsignaled), and an unbatched send (a chain of one) is
 * signaled as before: latency at low load does not change. The posted
 * slots are kept in post order (@fifo); _sent, told of a signaled
 * completion, retires every slot up to it, since a send queue completes
 * in post order. The protocols' own work requests on the same queue
 * (acks, READs, credit WRITEs, keepalives) stay signaled and are not the
 * pool's. The send queue never holds more pool work requests than slots
 * (an unsignaled slot is not free until the signaled one after it
 * completed), and @every <= n / 2 (conn.c) keeps two batches in flight.
 * Default @every: RDMX__SP_SIGNAL_DEFAULT (16) or n / 2 if smaller: the
 * completions saved beyond 16 are under one in 16 per message, while a
 * slot waits for its batch's completion before it is free again, so a
 * larger batch only ties up more of the send queue.
 */
#ifndef RDMX_CORE_SENDPOOL_H
#define RDMX_CORE_SENDPOOL_H

#include <stddef.h>

#include "conn.h"
#include "fabric.h"
#include "msg.h"
#include "post.h"
#include "token.h"

enum rdmx__sp_state {
	RDMX__SP_FREE,
	RDMX__SP_ALLOC,
	RDMX__SP_POSTED,
	RDMX__SP_SENT,            /* hold pools: completed, not yet put */
};

struct rdmx__sendpool_ops {
	/* Take in @c's send completions, calling rdmx__sendpool_sent() for
	 * the pool's posts: how many were seen (>= 0), or -errno with the
	 * connection down. */
	int (*reap)(rdmx_conn *c);
	/* Optional: besides a free slot, what one more message needs
	 * (credits, ring space): 1 there is room, 0 not yet, or -errno. */
	int (*room)(rdmx_conn *c);
	/* Optional: messages sent but not yet where rdmx_flush wants them
	 * (default: posts whose completion is not in). */
	uint32_t (*unflushed)(rdmx_conn *c);
};

struct rdmx__sendpool {
	/* set by the protocol before rdmx__sendpool_make() */
	const struct rdmx__sendpool_ops *ops;
	const char *who;          /* the protocol's name, for messages */
	const char *post_what;    /* "a send": "posting a send: ..." */
	uint32_t n;               /* slots (send_depth) */
	size_t stride;            /* bytes between two slots */
	size_t data_off;          /* the user's bytes in a slot */
	uint32_t wr_kind;         /* wr_id of a post: wr_kind << 32 | slot */
	int hold;                 /* completed slots stay until _put() */
	/* the pool's */
	uint8_t *buf;             /* n * stride registered bytes */
	struct rdmx__mr *mr;
	uint32_t *free_stack;
	uint32_t nfree;
	uint8_t *state;           /* enum rdmx__sp_state per slot */
	uint32_t nalloc;          /* handed out, neither posted nor released */
	uint32_t inflight;        /* posted, completion not seen */
	uint64_t *seq;            /* hold pools, per slot: the send sequence
				   * (rdmx__sends) of its last post */
	/* bursts (issue 10; see above) */
	uint32_t *fifo;           /* posted slots in post order, a ring of n */
	uint32_t fhead, fcount;   /* its oldest entry, how many */
	struct rdmx__wr *held;    /* the chain not yet rung (counted in
				   * @inflight, its slots POSTED) */
	uint32_t nheld, held_max;
	uint32_t every;           /* one signaled work request per @every */
	uint32_t *nmsg;           /* per slot: the sends its post carries (a
				   * packed frame: several; @inflight counts
				   * sends) */
	/* packing (core/pack.h), set by the protocol once the peer said it
	 * splits frames: */
	uint32_t pack_cap;        /* largest frame (0: the peer does not split) */
	uint32_t pack_small;      /* largest message packed (0: none) */
};

#define RDMX__SP_SIGNAL_DEFAULT 16
#define RDMX__SP_CHAIN_MAX 32

/* Allocate and register (@access: RDMX__ACCESS_*) the slots; on failure
 * rdmx__sendpool_unmake() frees what was made. */
int rdmx__sendpool_make(rdmx_conn *c, struct rdmx__sendpool *sp,
			unsigned access);
void rdmx__sendpool_unmake(rdmx_conn *c, struct rdmx__sendpool *sp);


/* rdmx__sendpool_post failed with @rc: the connection goes down. */
int rdmx__sendpool_post_failed(rdmx_conn *c, const struct rdmx__sendpool *sp,
			       int rc);

/* The reap hook of a pool whose CQ carries nothing but its posts. */
int rdmx__sendpool_reap(rdmx_conn *c, struct rdmx__sendpool *sp,
			struct rdmx__cq *cq);

/* rdmx_flush: wait until nothing is unflushed; -ETIMEDOUT or the
 * connection's error. */
int rdmx__sendpool_flush(rdmx_conn *c, struct rdmx__sendpool *sp,
			 int timeout_ms);

/*
 * The msg_alloc and flush operations of a protocol whose per-connection
 * state (c->priv) begins with its pool (RDMX__SENDPOOL_FIRST).
 */
int rdmx__sendpool_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			     int timeout_ms);
int rdmx__sendpool_conn_flush(rdmx_conn *c, int timeout_ms);
/* The sends_done operation (protocol.h) of those protocols: one reap. */
int rdmx__sendpool_conn_sends_done(rdmx_conn *c, uint64_t *done);
/* The send operation of the two-sided protocols (send_recv, srq): the
 * slot's bytes as one SEND, SEND_WITH_IMM when @m carries immediate data. */
int rdmx__sendpool_conn_send(rdmx_conn *c, struct rdmx_msg *m);
/* Their send_more operation: the same, held for a chain (RDMX_SEND_MORE). */
int rdmx__sendpool_conn_send_more(rdmx_conn *c, struct rdmx_msg *m);
/* Their send_from operation (rdmx_send_mr_tok, zero copy): one SEND of
 * @from's m->len bytes (@lkey), rung alone after what is held; the slot
 * @m names only accounts for it (credit, completion, token). */
int rdmx__sendpool_conn_send_from(rdmx_conn *c, struct rdmx_msg *m,
				  const void *from, uint32_t lkey);
/* Their sendv operation (rdmx_sendv): runs of small messages packed
 * straight from @iov into one frame per slot, the rest a slot each, all
 * in one chain. */
int rdmx__sendpool_conn_sendv(rdmx_conn *c, const struct iovec *iov, int n,
			      int timeout_ms);
#define RDMX__SENDPOOL_FIRST(type, member) \
	_Static_assert(offsetof(type, member) == 0, \
		       #type "'s send pool comes first (rdmx__sendpool_msg_alloc)")

/*
 * The per-message steps below are inline: they are a few instructions
 * each, on every message's path, and a call into another object of the
 * library costs as much again (bench/profile).
 */

/* Start of slot @idx. */
static inline uint8_t *rdmx__sendpool_at(const struct rdmx__sendpool *sp,
					 uint32_t idx)
{
	return sp->buf + (size_t)idx * sp->stride;
}

/* The ALLOC slot @m names on @c, or -EINVAL (no message formatted). */
static inline int64_t rdmx__sendpool_slot(rdmx_conn *c,
					  const struct rdmx__sendpool *sp,
					  const struct rdmx_msg *m)
{
	uint64_t idx;

	if (rdmx__msg_get(m, c, RDMX__MSG_SEND, &idx) || idx >= sp->n ||
	    sp->state[idx] != RDMX__SP_ALLOC)
		return -EINVAL;
	return (int64_t)idx;
}

/* Slot @idx is posted (or held): POSTED, in flight, and last in @fifo
 * once rung. */
static inline void rdmx__sendpool_mark(rdmx_conn *c, struct rdmx__sendpool *sp,
				       uint32_t idx)
{
	sp->state[idx] = RDMX__SP_POSTED;
	sp->nalloc--;
	sp->inflight++;
	sp->nmsg[idx] = 1;
	if (sp->hold) /* this send's sequence, once rdmx_send counts it */
		sp->seq[idx] = rdmx__sends(c) + 1;
}

/* Slot @idx was rung: last in post order. */
static inline void rdmx__sendpool_fifo_push(struct rdmx__sendpool *sp,
					    uint32_t idx)
{
	uint32_t at = sp->fhead + sp->fcount++;

	sp->fifo[at >= sp->n ? at - sp->n : at] = idx;
}

/* rdmx__sendpool_post with held sends or @more: the chain (sendpool.c). */
int rdmx__sendpool_post_chain(rdmx_conn *c, struct rdmx__sendpool *sp,
			      uint32_t idx, const struct rdmx__wr *wr,
			      struct rdmx_msg *m, int more);
/* Ring what is held (nothing held: 0); on failure the connection goes
 * down. */
int rdmx__sendpool_push(rdmx_conn *c, struct rdmx__sendpool *sp);

/* Ring @wr (its lkey the caller's) alone for slot @idx, which @m names,
 * nothing being held: wr_id and signaling are the pool's. Marks the slot
 * POSTED and spends @m; on failure the connection goes down. */
static inline int rdmx__sendpool_post_lone(rdmx_conn *c,
					   struct rdmx__sendpool *sp,
					   uint32_t idx, struct rdmx__wr *wr,
					   struct rdmx_msg *m)
{
	int rc;

	wr->wr_id = ((uint64_t)sp->wr_kind << 32) | idx;
	wr->flags |= RDMX__WR_SIGNALED;
	if (rdmx__wr_may_inline(c, wr)) /* spares rdmx__post_send a copy */
		wr->flags |= RDMX__WR_INLINE;
	rc = rdmx__post_send(c, wr, 1);
	if (rc)
		return rdmx__sendpool_post_failed(c, sp, rc);
	rdmx__sendpool_mark(c, sp, idx);
	rdmx__sendpool_fifo_push(sp, idx);
	rdmx__msg_spend(m);
	return 0;
}

/* Post @wr (op, addr, len and the rest filled by the caller) for slot
 * @idx, which @m names: wr_id, lkey and signaling are the pool's. Marks
 * the slot POSTED and spends @m; on failure the connection goes down.
 * With @more (RDMX_SEND_MORE) the pool may hold it to ring it with the
 * next ones; a post without @more rings what is held, itself last. */
static inline int rdmx__sendpool_post_more(rdmx_conn *c,
					   struct rdmx__sendpool *sp,
					   uint32_t idx, struct rdmx__wr *wr,
					   struct rdmx_msg *m, int more)
{
	if (more || sp->nheld)
		return rdmx__sendpool_post_chain(c, sp, idx, wr, m, more);
	wr->lkey = sp->mr->lkey;
	return rdmx__sendpool_post_lone(c, sp, idx, wr, m);
}

static inline int rdmx__sendpool_post(rdmx_conn *c, struct rdmx__sendpool *sp,
				      uint32_t idx, struct rdmx__wr *wr,
				      struct rdmx_msg *m)
{
	return rdmx__sendpool_post_more(c, sp, idx, wr, m, 0);
}

/* A hold pool: the protocol is done with posted slot @idx. Also the
 * pool's own way to free a slot. */
static inline void rdmx__sendpool_put(struct rdmx__sendpool *sp, uint32_t idx)
{
	sp->state[idx] = RDMX__SP_FREE;
	sp->free_stack[sp->nfree++] = idx;
}

/* The completion of slot @idx's post came in (OK status): it, and the
 * unsignaled posts before it, are done (a send queue completes in post
 * order). */
static inline void rdmx__sendpool_sent(struct rdmx__sendpool *sp, uint32_t idx)
{
	uint32_t j;

	while (sp->fcount) {
		j = sp->fifo[sp->fhead];
		sp->fhead = sp->fhead + 1 == sp->n ? 0 : sp->fhead + 1;
		sp->fcount--;
		sp->inflight -= sp->nmsg[j];
		if (sp->hold)
			sp->state[j] = RDMX__SP_SENT;
		else
			rdmx__sendpool_put(sp, j);
		if (j == idx)
			break;
	}
}

/* A hold pool: 1 once the post of slot @idx completed. */
static inline int rdmx__sendpool_done(const struct rdmx__sendpool *sp,
				      uint32_t idx)
{
	return sp->state[idx] == RDMX__SP_SENT;
}

/* rdmx_msg_release of an allocated, unsent slot: 0, or -EINVAL (no
 * message formatted) when @m is not one of them. */
static inline int rdmx__sendpool_release(rdmx_conn *c,
					 struct rdmx__sendpool *sp,
					 struct rdmx_msg *m)
{
	int64_t idx = rdmx__sendpool_slot(c, sp, m);

	if (idx < 0)
		return -EINVAL;
	rdmx__sendpool_put(sp, (uint32_t)idx);
	sp->nalloc--;
	rdmx__msg_spend(m);
	return 0;
}

#endif /* RDMX_CORE_SENDPOOL_H */
