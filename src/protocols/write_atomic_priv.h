/* SPDX-License-Identifier: MIT */
/*
 * write_atomic internals shared by its files, bottom first:
 * write_atomic_imm.c (announcements and holes), write_atomic_ring.c (the
 * receive ring: scanning, handing out, releasing, rdmx_listener_recv),
 * write_atomic_send.c (sending), write_atomic_conn.c (set-up, hellos; the
 * design at its top) and write_atomic_ops.c (the tables).
 */
#ifndef RDMX_PROTOCOLS_WRITE_ATOMIC_PRIV_H
#define RDMX_PROTOCOLS_WRITE_ATOMIC_PRIV_H

#include "core/conn.h"
#include "core/fabric.h"
#include "core/qp.h"
#include "core/sendpool.h"
#include "protocols/write_atomic_rec.h"

#define CTRL_BYTES 4096
#define HEAD_OFF 64          /* head word: this far after the tail word */
#define DOWN_POLLS 100000u

enum { K_WRITE = 1, K_PAD, K_FAA, K_READ }; /* wr_id >> 32 of our sends */

/* A growable FIFO of 64-bit virtual offsets. */
struct vq {
	uint64_t *v;
	uint32_t cap, head, n;
};

/*
 * The receiver's own record of one scanned record or pad, kept outside
 * the peer-writable ring (one per WA_ALIGN bytes of ring, indexed by
 * (v & mask) / WA_ALIGN): made once from the validated header copy, then
 * used for delivery, release and head advance, so a member rewriting a
 * header after it was scanned changes nothing the receiver does.
 */
struct wa_meta {
	uint64_t v;               /* virtual offset it describes */
	uint32_t span;            /* ring bytes it covers */
	uint32_t len, imm, sender;
	uint16_t flags;           /* WA_F_* of the copy, plus receiver bits */
	/* the announcement (WRITE_WITH_IMM completion) of this slot, if any */
	uint64_t a_v;             /* the virtual offset it announced */
	uint32_t a_span;          /* ring bytes, from the immediate */
	uint32_t a_id;            /* its writer's sender id + 1; 0: none */
};

/* The receive side: a ring that senders write into. */
struct wa_ring {
	pthread_mutex_t lock;
	int made;
	const struct rdmx__fabric_ops *f;
	uint8_t *buf;
	uint64_t *ctrl;           /* ctrl[0]: tail, ctrl[HEAD_OFF / 8]: head */
	struct rdmx__mr *ring_mr, *tail_mr, *head_mr;
	uint64_t size, salt;
	uint32_t max_msg;         /* bound for records of members gone */
	uint64_t scan;            /* next reservation to look at */
	uint64_t pub;             /* head: all below it released */
	struct wa_meta *meta;     /* per WA_ALIGN slot: see struct wa_meta */
	rdmx_conn **members;      /* by sender id; NULL once closed */
	uint32_t *qpns;           /* by sender id: the member's QP number */
	uint32_t nmembers, cap_members;
	/* announcements: one zero-length receive per WRITE_WITH_IMM */
	struct rdmx__qp_shared ann; /* an SRQ of them and its CQ, where
				   * qp_num names the writer */
	uint32_t rdepth, rposted;
	/* holes: reservations that stay unwritten */
	uint32_t hole_ms;         /* skipped after this long (opts.liveness_ms) */
	uint64_t max_rec;         /* largest record of any member */
	int64_t hole_t0;          /* ms when the hole timer started; 0: off */
	uint64_t hole_tail;       /* the tail then: reservations that existed */
	uint64_t holes, hole_bytes; /* skipped so far */
};

/* A message of a burst (RDMX_SEND_MORE) held before its reservation. */
struct wa_held {
	uint32_t idx;             /* its send slot (ALLOC, the handle spent) */
	uint32_t len, imm, flags; /* the message's, flags: RDMX_MSG_IMM */
};

/* Per connection: its sending state and its place in a ring. */
struct wa {
	struct rdmx__sendpool sp; /* send buffers: header, payload, trailer */
	struct wa_ring own;       /* dialer: the ring it receives on */
	struct wa_ring *rx;       /* own, or the listener's shared ring */
	uint32_t rx_id;           /* the peer's sender id on rx */
	int joined;               /* rx_id is ours in rx's member table */
	int leaving;              /* rdmx_conn_close began (rx->lock): the
				   * listener no longer touches it */
	struct vq parked;         /* records on rx waiting for this conn */
	int down_seen;            /* the listener saw it down (rx->lock) */
	/* sending */
	struct rdmx__mr *scratch_mr;
	uint64_t *scratch;        /* [0] FETCH_ADD result, [1] head, [2..] pad */
	uint32_t pads;            /* pad WRITEs in flight (not from sp) */
	int faa_done, read_done;
	struct vq outs;           /* ends of my records not yet consumed */
	uint32_t credits;         /* peer recv_depth + send_depth */
	uint64_t cached_head;
	uint64_t last_end;        /* end of my last reservation */
	uint64_t stale_faa;       /* stale FETCH_ADD results recovered */
	uint64_t lost_faa;        /* reservations lost to them (holes left) */
	int64_t reserved_ms;      /* when the last reservation was asked for */
	/* a burst held (write_atomic_conn.c, "Bursts"): counted in sp.nalloc,
	 * so in the credits */
	struct wa_held held[RDMX__SP_CHAIN_MAX];
	uint32_t nheld;
	uint64_t held_rec;        /* their records' bytes, at most sp.stride */
	/* the peer's ring */
	uint64_t r_ring, r_tail, r_size, r_salt;
	uint32_t r_ring_rkey, r_tail_rkey, r_head_rkey, tx_id;
	uint32_t r_hole_ms;       /* the peer skips a hole after this long */
};

RDMX__SENDPOOL_FIRST(struct wa, sp);

static inline struct wa *wa_of(rdmx_conn *c)
{
	return c->priv;
}

/* The receiver's record of the slot at @v (see struct wa_meta). */
static inline struct wa_meta *wa_meta_at(struct wa_ring *r, uint64_t v)
{
	return &r->meta[(v & (r->size - 1)) / WA_ALIGN];
}

/* The member with sender id @id, or NULL (never joined, or gone). */
static inline rdmx_conn *wa_member(struct wa_ring *r, uint32_t id)
{
	return id < r->nmembers ? r->members[id] : NULL;
}

/* FIFO of virtual offsets: push is 0 or -ENOMEM. */
int rdmx__wa_vq_push(struct vq *q, uint64_t x);
uint64_t rdmx__wa_vq_front(const struct vq *q);
uint64_t rdmx__wa_vq_pop(struct vq *q);
void rdmx__wa_vq_free(struct vq *q);


/* Rings: make (registered on @c's device), free, enter and leave. */
int rdmx__wa_ring_make(struct wa_ring *r, rdmx_conn *c, uint64_t size);
void rdmx__wa_ring_unmake(struct wa_ring *r);
int rdmx__wa_ring_join(struct wa_ring *r, rdmx_conn *c, uint32_t *id);
void rdmx__wa_ring_leave(struct wa_ring *r, rdmx_conn *c, uint32_t id);
/* The group_unlist hook: rdmx_conn_close(@c) began. */
void rdmx__wa_group_unlist(rdmx_conn *c);

/* Announcements and holes (write_atomic_imm.c); all called locked. */
int rdmx__wa_ann_make(struct wa_ring *r, rdmx_conn *c);
void rdmx__wa_ann_unmake(struct wa_ring *r);
void rdmx__wa_ann_poll(struct wa_ring *r);
/* At an unannounced scan cursor: 1 when a hole was skipped, else 0. */
int rdmx__wa_hole_check(struct wa_ring *r);

/* The receive side of the protocol operations. */
int rdmx__wa_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms);
int rdmx__wa_release_rx(struct wa_ring *r, rdmx_conn *c, uint64_t v);
int rdmx__wa_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
			int timeout_ms);

/* The send side (write_atomic_send.c): the send pool's hooks and the
 * protocol operations. */
extern const struct rdmx__sendpool_ops rdmx__wa_pool_ops;
int rdmx__wa_send(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__wa_send_more(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__wa_flush(rdmx_conn *c, int timeout_ms);
int rdmx__wa_sends_done(rdmx_conn *c, uint64_t *done);
int rdmx__wa_release(rdmx_conn *c, struct rdmx_msg *m);

/* Set-up and hellos (write_atomic_conn.c). */
int rdmx__wa_check_opts(const struct rdmx_protocol_ops *proto,
			const struct rdmx_conn_opts *o, uint32_t max_msg);
int rdmx__wa_setup(rdmx_conn *c);
void rdmx__wa_teardown(rdmx_conn *c);
void rdmx__wa_shared_teardown(struct rdmx__group *g);
int rdmx__wa_hello_out(rdmx_conn *c, uint8_t *block, size_t cap, size_t *len);
int rdmx__wa_hello_in(rdmx_conn *c, const uint8_t *block, size_t len);
uint64_t rdmx__wa_mem_estimate(const rdmx_conn *c);

#endif /* RDMX_PROTOCOLS_WRITE_ATOMIC_PRIV_H */
