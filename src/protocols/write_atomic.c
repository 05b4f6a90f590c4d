/* SPDX-License-Identifier: MIT */
/*
 * write_atomic: one receive ring shared by many senders.
 *
 * The receiving side owns a ring of opts.ring_size bytes (a power of two)
 * registered for remote WRITE, a 64-bit tail counter registered for remote
 * ATOMIC and, 64 bytes after it, a 64-bit head word registered for remote
 * READ. Every connection accepted on one listener writes into the
 * listener's single ring (c->group->shared); a dialer owns a ring of its
 * own (a group of one) that the accepted side writes its replies into, so
 * every connection carries messages both ways with the same protocol.
 * Addresses, keys, the ring size, a salt and the sender id the receiver
 * gave the connection travel in the hello blocks (see ring_encode()).
 *
 * Sending one message (record layout in write_atomic_rec.h):
 *   1. FETCH_ADD the remote tail by the record size; the old value, a
 *      64-bit virtual offset V, lands in a registered 8-byte buffer.
 *   2. If [V, V + size) crosses the ring's end, write a pad record at V
 *      (header only, "skip size bytes") and go back to 1.
 *   3. Wait until V + size - head <= ring_size: the cached head first, an
 *      RDMA READ of the head word only when it shows too little room.
 *      Nothing is ever overwritten.
 *   4. ONE RDMA WRITE of header, payload and trailer.
 * So a message costs the sender a FETCH_ADD round trip and a WRITE (plus
 * a READ now and then); the receiver's CPU posts nothing at all.
 *
 * Receiving: records are consumed strictly in reservation order. At its
 * scan cursor the receiver waits until the header stamp AND the trailer
 * stamp of that offset are there (acquire loads); a slot reserved but not
 * yet written makes it wait, it never reads torn data. Messages are handed
 * out in place (zero copy) and may be released in any order; the head
 * advances over the contiguous released prefix and is published with a
 * release store into the head word, which senders READ.
 *
 * Stale data. The ring is never cleared: a new record's bytes land over
 * those of earlier laps. A record at V is accepted only if the 8 bytes at
 * its header stamp equal wa_hstamp(salt, V) and the 8 bytes at its
 * trailer (found from the length in that header) equal wa_tstamp(salt, V).
 * Both are a bijection of the full 64-bit V mixed with a per-ring random
 * salt, so a header or trailer a sender wrote for any other reservation
 * (an earlier lap at the same place, a record elsewhere) never matches,
 * and zeroed memory never does (a stamp is never 0). Only payload bytes of
 * an earlier message could, by containing both salted stamps exactly where
 * they are looked for: 2^-128 for data not built to do so. Zeroing
 * consumed headers would add a cache-line store per message and guard
 * only against that same case, so it is not done.
 *
 * Placement order. Within one WRITE the receiver relies on the bytes being
 * placed in increasing address order, so that a visible trailer (the
 * highest address written) means header and payload are there, and a
 * visible header stamp means the header fields are. rxe and the HCAs we
 * know place a WRITE this way (and the fake fabric does, with release
 * stores under ThreadSanitizer), but the InfiniBand spec does not promise
 * it; only the completion of a WRITE_WITH_IMM would. RDMX_NOTIFY_IMM,
 * which would lift the assumption, is not implemented: setup rejects it.
 *
 * Flow control. Besides ring space, a sender may have at most
 * peer recv_depth + own send_depth messages that the receiver has not
 * consumed (the head has not passed them): rdmx_msg_alloc waits for that,
 * and for a free local buffer, up to its timeout (-EAGAIN with 0). The
 * wait for ring space in rdmx_send after the FETCH_ADD cannot give up (the
 * reservation must be written or the ring stalls): it ends with the space
 * or with the connection's error. A sender that dies between its
 * FETCH_ADD and its WRITE leaves a hole the receiver cannot skip; the
 * ring stalls for everyone (a known limit of one shared tail).
 *
 * Receiving per connection. rdmx_listener_recv() hands out every record
 * in ring order, naming its connection. rdmx_recv(c) on an accepted
 * connection takes c's records in order; a record of another member met
 * on the way is parked for that member (handed out by its rdmx_recv or
 * by rdmx_listener_recv, still in ring order) and holds the head back
 * until then. So every member of a listener must be received from.
 * Records of a member closed meanwhile are skipped.
 *
 * Threading. Receive state of a ring (scan cursor, head, parked queues,
 * member table) is guarded by the ring's mutex, so rdmx_recv on different
 * members, rdmx_listener_recv and rdmx_msg_release may run on different
 * threads. The sending state is per connection (one thread at a time).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "protocols/write_atomic_rec.h"

#define WC_BATCH 16
#define CTRL_BYTES 4096
#define HEAD_OFF 64          /* head word: this far after the tail word */
#define HELLO_RING_LEN 40    /* ring_encode() */
#define HELLO_REPLY_LEN 44   /* ring_encode() + u32 sender id */
#define SEND_TAG (1ull << 63) /* priv_[0] of a send buffer handle */
#define DOWN_POLLS 100000u

enum { K_WRITE = 1, K_PAD, K_FAA, K_READ };
enum { SLOT_FREE, SLOT_ALLOC, SLOT_POSTED };

void (*rdmx__wa_test_reserved)(struct rdmx_conn *c, uint64_t voff,
			       uint64_t rec);

/* A growable FIFO of 64-bit virtual offsets. */
struct vq {
	uint64_t *v;
	uint32_t cap, head, n;
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
	uint64_t scan;            /* next reservation to look at */
	uint64_t pub;             /* head: all below it released */
	rdmx_conn **members;      /* by sender id; NULL once closed */
	uint32_t nmembers, cap_members;
};

/* Per connection: its sending state and its place in a ring. */
struct wa {
	struct wa_ring own;       /* dialer: the ring it receives on */
	struct wa_ring *rx;       /* own, or the listener's shared ring */
	uint32_t rx_id;           /* the peer's sender id on rx */
	struct vq parked;         /* records on rx waiting for this conn */
	/* sending */
	struct rdmx__cq *cq;
	uint8_t *sbuf;
	struct rdmx__mr *smr, *scratch_mr;
	uint64_t *scratch;        /* [0] FETCH_ADD result, [1] head, [2..] pad */
	size_t slot;
	uint32_t nslot, nfree, nalloc, inflight;
	uint32_t *free_stack;
	uint8_t *sstate;
	int faa_done, read_done;
	struct vq outs;           /* ends of my records not yet consumed */
	uint32_t credits;         /* peer recv_depth + send_depth */
	uint64_t cached_head;
	uint64_t last_end;        /* end of my last reservation */
	/* the peer's ring */
	uint64_t r_ring, r_tail, r_size, r_salt;
	uint32_t r_ring_rkey, r_tail_rkey, r_head_rkey, tx_id;
};

static struct wa *wa_of(rdmx_conn *c)
{
	return c->priv;
}

/*
 * Called once per empty poll of a wait loop, after rdmx__conn_wait():
 * every few polls give the CPU away, so that a spinning receiver does
 * not starve the sender it waits for when there are more threads than
 * cores (a spin on ring memory never blocks, unlike a CQ poll).
 */
static void backoff(const struct rdmx__deadline *d)
{
	if ((d->spins & 15) == 15)
		sched_yield();
}

/* rdmx__conn_wait() followed by backoff(). */
static int idle(rdmx_conn *c, struct rdmx__deadline *d)
{
	int rc = rdmx__conn_wait(c, d);

	if (!rc)
		backoff(d);
	return rc;
}

/* ----------------------------------------------------------- vq helpers */

static int vq_push(struct vq *q, uint64_t x)
{
	if (q->n == q->cap) {
		uint32_t cap = q->cap ? 2 * q->cap : 64;
		uint64_t *v = malloc(cap * sizeof(*v));

		if (!v)
			return rdmx__fail(-ENOMEM, "write_atomic: out of memory for a queue");
		for (uint32_t i = 0; i < q->n; i++)
			v[i] = q->v[(q->head + i) % q->cap];
		free(q->v);
		q->v = v;
		q->cap = cap;
		q->head = 0;
	}
	q->v[(q->head + q->n++) % q->cap] = x;
	return 0;
}

static uint64_t vq_front(const struct vq *q)
{
	return q->v[q->head];
}

static uint64_t vq_pop(struct vq *q)
{
	uint64_t x = q->v[q->head];

	q->head = (q->head + 1) % q->cap;
	q->n--;
	return x;
}

static void vq_free(struct vq *q)
{
	free(q->v);
	memset(q, 0, sizeof(*q));
}

/* --------------------------------------------------------------- rings */

static uint64_t *tail_word(struct wa_ring *r)
{
	return r->ctrl;
}

static uint64_t *head_word(struct wa_ring *r)
{
	return r->ctrl + HEAD_OFF / 8;
}

static uint64_t new_salt(const void *where)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return wa_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
		      (uintptr_t)where) | 1;
}

/* Allocate and register a ring of @size bytes on @c's device. */
static int ring_make(struct wa_ring *r, rdmx_conn *c, uint64_t size)
{
	int rc;

	r->f = c->f;
	r->size = size;
	r->salt = new_salt(r);
	r->buf = rdmx__alloc_buf(size);
	r->ctrl = rdmx__alloc_buf(CTRL_BYTES);
	if (!r->buf || !r->ctrl)
		return rdmx__fail(-ENOMEM, "write_atomic: out of memory for a %llu-byte ring",
				  (unsigned long long)size);
	rc = c->f->reg_mr(c->ep, r->buf, size, RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE,
			  &r->ring_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, tail_word(r), 8,
				  RDMX__ACCESS_LOCAL | RDMX__ACCESS_ATOMIC, &r->tail_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, head_word(r), 8,
				  RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ, &r->head_mr);
	if (!rc && pthread_mutex_init(&r->lock, NULL))
		rc = rdmx__fail(-ENOMEM, "write_atomic: cannot create a mutex");
	if (!rc)
		r->made = 1;
	return rc;
}

/* Free what ring_make() made, even half of it. */
static void ring_unmake(struct wa_ring *r)
{
	if (r->head_mr)
		r->f->dereg_mr(r->head_mr);
	if (r->tail_mr)
		r->f->dereg_mr(r->tail_mr);
	if (r->ring_mr)
		r->f->dereg_mr(r->ring_mr);
	if (r->made)
		pthread_mutex_destroy(&r->lock);
	free(r->buf);
	free(r->ctrl);
	free(r->members);
	memset(r, 0, sizeof(*r));
}

/* Enter @c in the member table; its sender id comes back in *id. */
static int ring_join(struct wa_ring *r, rdmx_conn *c, uint32_t *id)
{
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	if (r->nmembers == r->cap_members) {
		uint32_t cap = r->cap_members ? 2 * r->cap_members : 8;
		rdmx_conn **v = realloc(r->members, cap * sizeof(*v));

		if (!v) {
			rc = rdmx__fail(-ENOMEM, "write_atomic: out of memory for a member");
			goto unlock;
		}
		r->members = v;
		r->cap_members = cap;
	}
	*id = r->nmembers;
	r->members[r->nmembers++] = c;
unlock:
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static uint8_t *rec_at(struct wa_ring *r, uint64_t v)
{
	return r->buf + (v & (r->size - 1));
}

static uint16_t rec_flags(struct wa_ring *r, uint64_t v)
{
	uint16_t f;

	memcpy(&f, rec_at(r, v) + 8, 2);
	return le16toh(f);
}

static void rec_set_flags(struct wa_ring *r, uint64_t v, uint16_t flags)
{
	uint16_t f = htole16(flags);

	memcpy(rec_at(r, v) + 8, &f, 2);
}

/* Ring bytes the (verified) record or pad at @v covers. */
static uint64_t rec_span(struct wa_ring *r, uint64_t v)
{
	struct wa_hdr h;

	wa_get_hdr(rec_at(r, v), &h);
	return (h.flags & WA_F_PAD) ? h.len : wa_rec_size(h.len);
}

/* Advance the head over released records and publish it. Locked. */
static void ring_advance(struct wa_ring *r)
{
	uint64_t pub = r->pub;

	while (pub < r->scan && (rec_flags(r, pub) & WA_F_RELEASED))
		pub += rec_span(r, pub);
	if (pub == r->pub)
		return;
	r->pub = pub;
	__atomic_store_n(head_word(r), htole64(pub), __ATOMIC_RELEASE);
}

/* Everything reserved has been scanned (so nothing is on its way). */
static int ring_drained(struct wa_ring *r)
{
	return r->scan == __atomic_load_n(tail_word(r), __ATOMIC_ACQUIRE);
}

/*
 * Check the reservation at the scan cursor. Returns 1 when a complete
 * record or pad is there (*h filled), 0 when it is not written yet, or
 * -EPROTO for a record that cannot be (its stamps matched, its size not).
 */
static int rec_ready(struct wa_ring *r, struct wa_hdr *h)
{
	uint64_t v = r->scan, off = v & (r->size - 1);
	uint8_t *p = rec_at(r, v);

	if (wa_load_stamp(p + WA_STAMP_OFF) != wa_hstamp(r->salt, v))
		return 0;
	wa_get_hdr(p, h);
	if (h->flags & WA_F_PAD) {
		if (h->len < WA_ALIGN || h->len % WA_ALIGN || h->len > r->size)
			return rdmx__fail(-EPROTO, "write_atomic: pad of %u bytes at %llu",
					  h->len, (unsigned long long)v);
		return 1;
	}
	if (off + wa_rec_size(h->len) > r->size)
		return rdmx__fail(-EPROTO, "write_atomic: record of %u bytes at %llu crosses the ring end",
				  h->len, (unsigned long long)v);
	return wa_load_stamp(p + wa_trailer_off(h->len)) == wa_tstamp(r->salt, v);
}

/*
 * Take the next message at the scan cursor, skipping pads and records of
 * members that are gone. Returns 1 with *v and *owner, 0 when none is
 * ready, or -errno. Locked.
 */
static int ring_take(struct wa_ring *r, uint64_t *v, rdmx_conn **owner)
{
	struct wa_hdr h;
	int rc;

	for (;;) {
		rc = rec_ready(r, &h);
		if (rc <= 0)
			return rc;
		*v = r->scan;
		r->scan += (h.flags & WA_F_PAD) ? h.len : wa_rec_size(h.len);
		*owner = h.sender < r->nmembers ? r->members[h.sender] : NULL;
		if (!(h.flags & WA_F_PAD) && *owner)
			return 1;
		rec_set_flags(r, *v, h.flags | WA_F_RELEASED);
		ring_advance(r);
	}
}

/* Hand the record at @v out to its connection @c. Locked. */
static void deliver(struct wa_ring *r, rdmx_conn *c, uint64_t v,
		    struct rdmx_msg *m)
{
	uint8_t *p = rec_at(r, v);
	struct wa_hdr h;

	wa_get_hdr(p, &h);
	rec_set_flags(r, v, (uint16_t)((h.flags & ~WA_F_PARKED) | WA_F_HELD));
	m->data = p + WA_HDR;
	m->len = h.len;
	m->cap = h.len;
	m->imm = (h.flags & WA_F_IMM) ? h.imm : 0;
	m->flags = (h.flags & WA_F_IMM) ? RDMX_MSG_IMM : 0;
	m->priv_[0] = v;
	m->priv_[1] = (uintptr_t)c;
}

/* Park the record at @v for @owner (another member). Locked. */
static int park(struct wa_ring *r, rdmx_conn *owner, uint64_t v)
{
	rec_set_flags(r, v, rec_flags(r, v) | WA_F_PARKED);
	return vq_push(&wa_of(owner)->parked, v);
}

/* One poll for @c's next message. 1: got one, 0: none, <0: error. */
static int rx_poll_conn(struct wa_ring *r, rdmx_conn *c, struct rdmx_msg *m,
			int *drained)
{
	struct wa *p = wa_of(c);
	rdmx_conn *owner;
	uint64_t v;
	int rc;

	pthread_mutex_lock(&r->lock);
	if (p->parked.n) {
		deliver(r, c, vq_pop(&p->parked), m);
		rc = 1;
		goto unlock;
	}
	while ((rc = ring_take(r, &v, &owner)) > 0) {
		if (owner == c) {
			deliver(r, c, v, m);
			break;
		}
		rc = park(r, owner, v);
		if (rc)
			break;
	}
	*drained = ring_drained(r);
unlock:
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* The member whose parked record comes first in the ring, or NULL. */
static rdmx_conn *first_parked(struct wa_ring *r)
{
	rdmx_conn *best = NULL;
	uint64_t bv = UINT64_MAX;

	for (uint32_t i = 0; i < r->nmembers; i++) {
		rdmx_conn *c = r->members[i];

		if (c && wa_of(c)->parked.n && vq_front(&wa_of(c)->parked) < bv) {
			best = c;
			bv = vq_front(&wa_of(c)->parked);
		}
	}
	return best;
}

/* One poll for any member's next message. 1, 0 or <0 as above. */
static int rx_poll_any(struct wa_ring *r, struct rdmx_msg *m, int *drained)
{
	rdmx_conn *owner;
	uint64_t v;
	int rc;

	pthread_mutex_lock(&r->lock);
	owner = first_parked(r);
	if (owner) {
		deliver(r, owner, vq_pop(&wa_of(owner)->parked), m);
		rc = 1;
	} else {
		rc = ring_take(r, &v, &owner);
		if (rc > 0)
			deliver(r, owner, v, m);
	}
	*drained = ring_drained(r);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* Release @c's records still in the ring and forget @c. */
static void ring_leave(struct wa_ring *r, rdmx_conn *c, uint32_t id)
{
	struct wa_hdr h;

	pthread_mutex_lock(&r->lock);
	if (id < r->nmembers && r->members[id] == c)
		r->members[id] = NULL;
	for (uint64_t v = r->pub; v < r->scan; v += rec_span(r, v)) {
		wa_get_hdr(rec_at(r, v), &h);
		if (h.sender == id && !(h.flags & (WA_F_PAD | WA_F_RELEASED)))
			rec_set_flags(r, v, h.flags | WA_F_RELEASED);
	}
	vq_free(&wa_of(c)->parked);
	ring_advance(r);
	pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------- setup */

static int alloc_tx(rdmx_conn *c)
{
	struct wa *p = wa_of(c);

	p->slot = wa_rec_size(c->max_msg);
	p->nslot = c->opts.send_depth;
	p->sbuf = rdmx__alloc_buf(p->slot * p->nslot);
	p->scratch = rdmx__alloc_buf(64);
	p->free_stack = calloc(p->nslot, sizeof(*p->free_stack));
	p->sstate = calloc(p->nslot, 1);
	if (!p->sbuf || !p->scratch || !p->free_stack || !p->sstate)
		return rdmx__fail(-ENOMEM, "write_atomic: out of memory for %u send buffers of %zu bytes",
				  p->nslot, p->slot);
	for (uint32_t i = 0; i < p->nslot; i++)
		p->free_stack[i] = p->nslot - 1 - i;
	p->nfree = p->nslot;
	return 0;
}

static int create_tx(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	struct rdmx__qp_caps caps = {
		.max_send_wr = p->nslot + 4,
		.max_recv_wr = 1,
		.rnr_retry = c->opts.rnr_retry,
		.retry_count = c->opts.retry_count,
	};
	int rc = alloc_tx(c);

	if (!rc)
		rc = c->f->reg_mr(c->ep, p->sbuf, p->slot * p->nslot,
				  RDMX__ACCESS_LOCAL, &p->smr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->scratch, 64, RDMX__ACCESS_LOCAL,
				  &p->scratch_mr);
	if (!rc)
		rc = c->f->create_cq(c->ep, (int)p->nslot + 8, &p->cq);
	if (rc)
		return rc;
	caps.send_cq = p->cq;
	caps.recv_cq = p->cq;
	return c->f->create_qp(c->ep, &caps);
}

/* The ring this connection receives on: the listener's, made once. */
static int join_shared(rdmx_conn *c)
{
	struct wa_ring *r = c->group->shared;
	int rc = 0;

	pthread_mutex_lock(&c->group->lock);
	if (!r->made) {
		rc = ring_make(r, c, c->opts.ring_size);
		if (rc)
			ring_unmake(r); /* the next connection tries again */
	}
	pthread_mutex_unlock(&c->group->lock);
	wa_of(c)->rx = r;
	return rc;
}

static int check_opts(rdmx_conn *c)
{
	uint64_t rec = wa_rec_size(c->max_msg);

	if (c->opts.notify == RDMX_NOTIFY_IMM)
		return rdmx__fail(-EINVAL, "write_atomic: notify=imm is not supported (records are found by their stamps; use the default)");
	if (2 * rec > c->opts.ring_size)
		return rdmx__fail(-EINVAL, "write_atomic: ring_size %u holds fewer than 2 records of max_msg_size %u (%llu bytes each); raise ring_size or lower max_msg_size",
				  c->opts.ring_size, c->max_msg, (unsigned long long)rec);
	return 0;
}

/* On failure the core destroys the ep, then calls wa_teardown(). */
static int wa_setup(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	int rc = check_opts(c);

	if (rc)
		return rc;
	if (c->group) {
		rc = join_shared(c);
	} else {
		rc = ring_make(&p->own, c, c->opts.ring_size);
		p->rx = &p->own;
	}
	if (!rc)
		rc = ring_join(p->rx, c, &p->rx_id);
	if (!rc)
		rc = create_tx(c);
	return rc;
}

static void wa_teardown(rdmx_conn *c)
{
	struct wa *p = wa_of(c);

	if (p->rx && p->rx->made)
		ring_leave(p->rx, c, p->rx_id);
	if (p->cq)
		c->f->destroy_cq(p->cq);
	if (p->scratch_mr)
		c->f->dereg_mr(p->scratch_mr);
	if (p->smr)
		c->f->dereg_mr(p->smr);
	free(p->sbuf);
	free(p->scratch);
	free(p->free_stack);
	free(p->sstate);
	vq_free(&p->outs);
	vq_free(&p->parked);
	if (p->own.made || p->own.buf || p->own.ctrl)
		ring_unmake(&p->own);
}

static void wa_shared_teardown(struct rdmx__group *g)
{
	struct wa_ring *r = g->shared;

	if (r->made || r->buf || r->ctrl)
		ring_unmake(r);
}

/* ------------------------------------------------------------- hellos */

/*
 * Ring block (40 bytes): 0 u8 version 1, 1 u8 log2 ring size, 2 u16 0,
 * 4 u32 ring rkey, 8 u64 ring addr, 16 u64 tail addr (the head word is
 * HEAD_OFF bytes after it), 24 u32 tail rkey, 28 u32 head rkey, 32 u64
 * salt. The accept reply adds 40 u32: the dialer's sender id.
 */
static void ring_encode(const struct wa_ring *r, uint8_t *b)
{
	uint8_t lg = 0;

	while ((1ull << lg) < r->size)
		lg++;
	memset(b, 0, HELLO_RING_LEN);
	b[0] = 1;
	b[1] = lg;
	rdmx__put_u32(b + 4, r->ring_mr->rkey);
	rdmx__put_u64(b + 8, (uintptr_t)r->buf);
	rdmx__put_u64(b + 16, (uintptr_t)r->ctrl);
	rdmx__put_u32(b + 24, r->tail_mr->rkey);
	rdmx__put_u32(b + 28, r->head_mr->rkey);
	rdmx__put_u64(b + 32, r->salt);
}

static int ring_decode(rdmx_conn *c, const uint8_t *b)
{
	struct wa *p = wa_of(c);

	if (b[0] != 1 || b[1] < 12 || b[1] > 30)
		return rdmx__fail(-EPROTO, "write_atomic: peer's ring block version %u, log2 size %u",
				  b[0], b[1]);
	p->r_size = 1ull << b[1];
	if (2 * wa_rec_size(c->max_msg) > p->r_size)
		return rdmx__fail(-EPROTO, "write_atomic: the peer's %llu-byte ring holds fewer than 2 records of %u bytes",
				  (unsigned long long)p->r_size, c->max_msg);
	p->r_ring_rkey = rdmx__get_u32(b + 4);
	p->r_ring = rdmx__get_u64(b + 8);
	p->r_tail = rdmx__get_u64(b + 16);
	p->r_tail_rkey = rdmx__get_u32(b + 24);
	p->r_head_rkey = rdmx__get_u32(b + 28);
	p->r_salt = rdmx__get_u64(b + 32);
	p->credits = (uint32_t)c->peer_recv_depth + c->opts.send_depth;
	return 0;
}

static int wa_hello_out(rdmx_conn *c, uint8_t *block, size_t cap, size_t *len)
{
	struct wa *p = wa_of(c);
	size_t need = c->is_server ? HELLO_REPLY_LEN : HELLO_RING_LEN;

	if (cap < need)
		return rdmx__fail(-EMSGSIZE, "write_atomic: hello block needs %zu bytes, %zu free",
				  need, cap);
	ring_encode(p->rx, block);
	if (c->is_server)
		rdmx__put_u32(block + HELLO_RING_LEN, p->rx_id);
	*len = need;
	return 0;
}

static int wa_hello_in(rdmx_conn *c, const uint8_t *block, size_t len)
{
	struct wa *p = wa_of(c);
	size_t need = c->is_server ? HELLO_RING_LEN : HELLO_REPLY_LEN;

	if (len != need)
		return rdmx__fail(-EPROTO, "write_atomic: %zu-byte protocol block, expected %zu",
				  len, need);
	p->tx_id = c->is_server ? 0 : rdmx__get_u32(block + HELLO_RING_LEN);
	return ring_decode(c, block);
}

/* --------------------------------------------------------------- sending */

/* Poll the send CQ once; returns the completions seen or -errno. */
static int reap(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	struct rdmx__wc wc[WC_BATCH];
	int n = c->f->poll_cq(p->cq, wc, WC_BATCH);

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++) {
		uint32_t kind = (uint32_t)(wc[i].wr_id >> 32);
		uint32_t idx = (uint32_t)wc[i].wr_id;

		if (wc[i].status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, &wc[i], kind == K_FAA ? "fetch-and-add" :
						   kind == K_READ ? "read of the head" : "write");
		if (kind == K_FAA) {
			p->faa_done = 1;
		} else if (kind == K_READ) {
			p->read_done = 1;
		} else {
			p->inflight--;
			if (kind == K_WRITE) {
				p->sstate[idx] = SLOT_FREE;
				p->free_stack[p->nfree++] = idx;
			}
		}
	}
	return n;
}

/* Wait for *@done, set by reap(); bounded by the connection's health. */
static int wait_done(rdmx_conn *c, int *done)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, -1);
	while (!*done) {
		rc = reap(c);
		if (rc < 0)
			return rc;
		if (rc == 0 && (rc = idle(c, &d)))
			return rc;
	}
	return 0;
}

/* FETCH_ADD @add on the peer's tail: the old tail in *@v. */
static int reserve(rdmx_conn *c, uint64_t add, uint64_t *v)
{
	struct wa *p = wa_of(c);
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_FAA << 32,
		.op = RDMX__OP_FETCH_ADD,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->scratch[0],
		.len = 8,
		.lkey = p->scratch_mr->lkey,
		.remote_addr = p->r_tail,
		.rkey = p->r_tail_rkey,
		.add = add,
	};
	int rc;

	p->faa_done = 0;
	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a fetch-and-add: %s", rdmx__last());
	rc = wait_done(c, &p->faa_done);
	if (!rc)
		*v = p->scratch[0];
	return rc;
}

/* RDMA READ the peer's head word into cached_head. */
static int read_head(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_READ << 32,
		.op = RDMX__OP_READ,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->scratch[1],
		.len = 8,
		.lkey = p->scratch_mr->lkey,
		.remote_addr = p->r_tail + HEAD_OFF,
		.rkey = p->r_head_rkey,
	};
	uint64_t head;
	int rc;

	p->read_done = 0;
	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a read: %s", rdmx__last());
	rc = wait_done(c, &p->read_done);
	if (rc)
		return rc;
	head = le64toh(p->scratch[1]);
	if (head > p->cached_head)
		p->cached_head = head;
	return 0;
}

/* Wait until [v, v + len) of the peer's ring is free (never overwrite). */
static int wait_space(rdmx_conn *c, uint64_t v, uint64_t len)
{
	struct wa *p = wa_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, -1);
	while (!wa_fits(v, len, p->cached_head, p->r_size)) {
		rc = read_head(c);
		if (!rc && !wa_fits(v, len, p->cached_head, p->r_size))
			rc = idle(c, &d);
		if (rc)
			return rc;
	}
	return 0;
}

static int post_write(rdmx_conn *c, uint64_t wr_id, void *src, uint32_t lkey,
		      uint64_t v, uint64_t len)
{
	struct wa *p = wa_of(c);
	struct rdmx__wr wr = {
		.wr_id = wr_id,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = src,
		.len = (uint32_t)len,
		.lkey = lkey,
		.remote_addr = p->r_ring + (v & (p->r_size - 1)),
		.rkey = p->r_ring_rkey,
	};
	int rc;

	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a write: %s", rdmx__last());
	p->inflight++;
	return 0;
}

/* Fill the ring's end from @v with a pad record that skips @rec bytes. */
static int write_pad(rdmx_conn *c, uint64_t v, uint64_t rec)
{
	struct wa *p = wa_of(c);
	struct wa_hdr h = { .len = (uint32_t)rec, .sender = p->tx_id,
			    .flags = WA_F_PAD };
	uint8_t *b = (uint8_t *)&p->scratch[2];
	int rc = wait_space(c, v, WA_HDR);

	if (rc)
		return rc;
	wa_put_hdr(b, &h);
	wa_put_stamp(b + WA_STAMP_OFF, wa_hstamp(p->r_salt, v));
	return post_write(c, (uint64_t)K_PAD << 32, b, p->scratch_mr->lkey, v, WA_HDR);
}

/* Reserve @rec bytes that do not cross the ring's end: *@v. */
static int reserve_record(rdmx_conn *c, uint64_t rec, uint64_t *v)
{
	struct wa *p = wa_of(c);
	int rc;

	for (;;) {
		rc = reserve(c, rec, v);
		if (rc)
			return rc;
		p->last_end = *v + rec;
		if (!wa_crosses(*v, rec, p->r_size))
			return 0;
		rc = write_pad(c, *v, rec);
		if (rc)
			return rc;
	}
}

/* Retire the records the peer's head has passed; returns credits in use. */
static uint32_t credits_used(struct wa *p)
{
	while (p->outs.n && vq_front(&p->outs) <= p->cached_head)
		vq_pop(&p->outs);
	return p->outs.n + p->nalloc;
}

/*
 * Room for one more message: a free buffer, a credit, and (as far as this
 * sender knows) ring space for a record and a pad after its last one, so
 * that a lone sender never waits in rdmx_send.
 */
static int has_room(struct wa *p)
{
	return p->nfree > 0 && credits_used(p) < p->credits &&
	       wa_fits(p->last_end, 2 * p->slot, p->cached_head, p->r_size);
}

/* 1 if a message may be allocated, else 0 (after refreshing the head). */
static int can_alloc(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	int rc;

	if (has_room(p))
		return 1;
	if (!p->nfree)
		return 0;
	rc = read_head(c);
	return rc ? rc : has_room(p);
}

static void fill_send_msg(rdmx_conn *c, uint32_t idx, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);

	p->sstate[idx] = SLOT_ALLOC;
	p->nalloc++;
	m->data = p->sbuf + (size_t)idx * p->slot + WA_HDR;
	m->cap = c->max_msg;
	m->len = 0;
	m->imm = 0;
	m->flags = 0;
	m->priv_[0] = SEND_TAG | idx;
	m->priv_[1] = (uintptr_t)c;
}

static int wa_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			int timeout_ms)
{
	struct wa *p = wa_of(c);
	struct rdmx__deadline d;
	int rc;

	(void)size; /* every buffer holds max_msg bytes */
	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		rc = reap(c);
		if (rc < 0)
			return rc;
		rc = can_alloc(c);
		if (rc < 0)
			return rc;
		if (rc)
			break;
		rc = idle(c, &d);
		if (rc)
			return rc;
	}
	fill_send_msg(c, p->free_stack[--p->nfree], m);
	return 0;
}

/* The send buffer a handle refers to, or -EINVAL. */
static int64_t send_slot(rdmx_conn *c, const struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	uint64_t idx = m->priv_[0] & ~SEND_TAG;

	if (m->priv_[1] != (uintptr_t)c || !(m->priv_[0] & SEND_TAG) ||
	    idx >= p->nslot || p->sstate[idx] != SLOT_ALLOC)
		return -EINVAL;
	return (int64_t)idx;
}

/* Header, stamps and trailer around the payload in send buffer @b. */
static void seal(struct wa *p, uint8_t *b, const struct rdmx_msg *m, uint64_t v)
{
	struct wa_hdr h = { .len = (uint32_t)m->len, .sender = p->tx_id };

	if (m->flags & RDMX_MSG_IMM) {
		h.flags = WA_F_IMM;
		h.imm = m->imm;
	}
	wa_put_hdr(b, &h);
	wa_put_stamp(b + WA_STAMP_OFF, wa_hstamp(p->r_salt, v));
	memset(b + WA_HDR + m->len, 0, wa_round8(m->len) - m->len);
	wa_put_stamp(b + wa_trailer_off(m->len), wa_tstamp(p->r_salt, v));
}

static int wa_send(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	int64_t idx = send_slot(c, m);
	uint64_t rec = wa_rec_size(m->len), v = 0;
	uint8_t *b;
	int rc;

	if (idx < 0)
		return rdmx__fail(-EINVAL, "write_atomic: not a message from rdmx_msg_alloc on this connection");
	b = p->sbuf + (size_t)idx * p->slot;
	rc = reserve_record(c, rec, &v);
	if (!rc && rdmx__wa_test_reserved)
		rdmx__wa_test_reserved(c, v, rec);
	if (!rc)
		rc = wait_space(c, v, rec);
	if (rc)
		return rc;
	seal(p, b, m, v);
	rc = post_write(c, ((uint64_t)K_WRITE << 32) | (uint64_t)idx, b,
			p->smr->lkey, v, wa_write_len(m->len));
	if (rc)
		return rc;
	p->sstate[idx] = SLOT_POSTED;
	p->nalloc--;
	m->priv_[1] = 0;
	return vq_push(&p->outs, v + rec);
}

static int wa_flush(rdmx_conn *c, int timeout_ms)
{
	struct wa *p = wa_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	while (p->inflight) {
		rc = reap(c);
		if (rc < 0)
			return rc;
		if (rc == 0 && (rc = idle(c, &d)))
			return rc == -EAGAIN ? -ETIMEDOUT : rc;
	}
	return 0;
}

/* ------------------------------------------------------------- receiving */

/*
 * After an empty poll: 0 to poll again, or what to return. A connection
 * that went down is polled until its ring is drained (what its peer wrote
 * before leaving is delivered), DOWN_POLLS times at most.
 */
static int recv_wait(rdmx_conn *c, struct rdmx__deadline *d, int drained)
{
	if (c->state == RDMX__CONN_DOWN) {
		if (drained || d->once || ++d->spins > DOWN_POLLS)
			return rdmx__fail(c->down_rc, "%s", c->err.msg);
		return 0;
	}
	return idle(c, d);
}

static int wa_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct wa *p = wa_of(c);
	struct rdmx__deadline d;
	int drained = 0, rc;

	if (!p->rx || !p->rx->made)
		return rdmx__fail(-ENOTCONN, "write_atomic: connection not set up");
	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		rc = rx_poll_conn(p->rx, c, m, &drained);
		if (rc)
			return rc > 0 ? 0 : rc;
		rc = recv_wait(c, &d, drained);
		if (rc)
			return rc;
	}
}

/* Check a received handle of @c and mark it released. Locked. */
static int release_rec(struct wa_ring *r, rdmx_conn *c, uint64_t v)
{
	struct wa_hdr h;

	if (v < r->pub || v >= r->scan || v % WA_ALIGN ||
	    wa_load_stamp(rec_at(r, v) + WA_STAMP_OFF) != wa_hstamp(r->salt, v))
		return -EINVAL;
	wa_get_hdr(rec_at(r, v), &h);
	if ((h.flags & (WA_F_HELD | WA_F_RELEASED)) != WA_F_HELD ||
	    h.sender >= r->nmembers || r->members[h.sender] != c)
		return -EINVAL;
	rec_set_flags(r, v, h.flags | WA_F_RELEASED);
	ring_advance(r);
	return 0;
}

static int wa_release(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	int64_t idx = send_slot(c, m);
	int rc = -EINVAL;

	if (idx >= 0) {
		p->sstate[idx] = SLOT_FREE;
		p->free_stack[p->nfree++] = (uint32_t)idx;
		p->nalloc--;
		rc = 0;
	} else if (m->priv_[1] == (uintptr_t)c && !(m->priv_[0] & SEND_TAG) &&
		   p->rx && p->rx->made) {
		pthread_mutex_lock(&p->rx->lock);
		rc = release_rec(p->rx, c, m->priv_[0]);
		pthread_mutex_unlock(&p->rx->lock);
	}
	if (rc)
		return rdmx__fail(-EINVAL, "write_atomic: message not held on this connection");
	m->priv_[1] = 0;
	return 0;
}

/* ------------------------------------------------- rdmx_listener_recv */

/*
 * A member whose peer is gone and whose messages were all handed out:
 * reported once with -ECONNRESET. Sets *live when a member is unreported.
 * Locked.
 */
static rdmx_conn *gone_member(struct wa_ring *r, int drained, int check,
			      int *live)
{
	*live = 0;
	for (uint32_t i = 0; i < r->nmembers; i++) {
		rdmx_conn *c = r->members[i];

		if (!c || c->reset_reported)
			continue;
		*live = 1;
		if (check && c->state == RDMX__CONN_UP)
			rdmx__conn_check_peer(c);
		if (drained && c->state == RDMX__CONN_DOWN && !wa_of(c)->parked.n)
			return c;
	}
	return NULL;
}

/* After an empty poll: 0 to poll again, or what to return. Locked. */
static int group_idle(struct wa_ring *r, struct rdmx_msg *m,
		      struct rdmx__deadline *d, int drained)
{
	int check = d->once || !(++d->spins % 256), live;
	rdmx_conn *gone = gone_member(r, drained, check, &live);

	if (gone) {
		gone->reset_reported = 1;
		m->priv_[1] = (uintptr_t)gone;
		return rdmx__fail(gone->down_rc, "%s", gone->err.msg);
	}
	if (!live)
		return rdmx__fail(-ENOTCONN, "no open connection on this listener");
	if (d->once)
		return rdmx__fail(-EAGAIN, "nothing ready");
	if (check && !d->forever && rdmx__deadline_left_ms(d) == 0)
		return rdmx__fail(-ETIMEDOUT, "timed out");
	backoff(d);
	return 0;
}

static int wa_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
			 int timeout_ms)
{
	struct wa_ring *r = g->shared;
	struct rdmx__deadline d;
	int made, drained = 0, rc;

	pthread_mutex_lock(&g->lock);
	made = r->made;
	pthread_mutex_unlock(&g->lock);
	if (!made)
		return rdmx__fail(-ENOTCONN, "no open connection on this listener");
	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		rc = rx_poll_any(r, m, &drained);
		if (rc)
			return rc > 0 ? 0 : rc;
		pthread_mutex_lock(&r->lock);
		rc = group_idle(r, m, &d, drained);
		pthread_mutex_unlock(&r->lock);
		if (rc)
			return rc;
	}
}

const struct rdmx_protocol_ops rdmx__proto_write_atomic = {
	.name = "write_atomic",
	.id = 7,
	.priv_size = sizeof(struct wa),
	.setup = wa_setup,
	.hello_out = wa_hello_out,
	.hello_in = wa_hello_in,
	.teardown = wa_teardown,
	.msg_alloc = wa_msg_alloc,
	.send = wa_send,
	.flush = wa_flush,
	.recv = wa_recv,
	.release = wa_release,
	.shared_size = sizeof(struct wa_ring),
	.shared_teardown = wa_shared_teardown,
	.group_recv = wa_group_recv,
};
