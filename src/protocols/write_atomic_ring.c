/* SPDX-License-Identifier: MIT */
/*
 * write_atomic's receive ring: making and registering it, finding complete
 * records at the scan cursor by their stamps, handing them out in place
 * (to their own connection, parking the others'), out-of-order release
 * with the head advanced over the released prefix and published, and
 * rdmx_listener_recv(). The design, and the argument about stale bytes
 * and WRITE placement order, are at the top of write_atomic_conn.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/group.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/post.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "protocols/write_atomic_priv.h"

/* ----------------------------------------------------------- vq helpers */

int rdmx__wa_vq_push(struct vq *q, uint64_t x)
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

uint64_t rdmx__wa_vq_front(const struct vq *q)
{
	return q->v[q->head];
}

uint64_t rdmx__wa_vq_pop(struct vq *q)
{
	uint64_t x = q->v[q->head];

	q->head = (q->head + 1) % q->cap;
	q->n--;
	return x;
}

void rdmx__wa_vq_free(struct vq *q)
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

/* The clock here is entropy for a salt, not a bound: the wall clock, which
 * (unlike the monotonic one) does not start over at every boot. */
static uint64_t new_salt(const void *where)
{
	return wa_mix((uint64_t)rdmx__wall_ns() ^ (uintptr_t)where) | 1;
}

/* Allocate and register a ring of @size bytes on @c's device. */
int rdmx__wa_ring_make(struct wa_ring *r, rdmx_conn *c, uint64_t size)
{
	int rc;

	r->f = c->f;
	r->size = size;
	r->max_msg = c->max_msg;
	r->max_rec = wa_rec_size(c->max_msg);
	r->hole_ms = c->opts.liveness_ms;
	r->salt = new_salt(r);
	r->buf = rdmx__alloc_buf(size);
	r->ctrl = rdmx__alloc_buf(CTRL_BYTES);
	r->meta = calloc(size / WA_ALIGN, sizeof(*r->meta));
	if (!r->buf || !r->ctrl || !r->meta)
		return rdmx__fail(-ENOMEM, "write_atomic: out of memory for a %llu-byte ring",
				  (unsigned long long)size);
	rc = c->f->reg_mr(c->ep, r->buf, size, RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE,
			  &r->ring_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, tail_word(r), 8,
				  RDMX__ACCESS_LOCAL | RDMX__ACCESS_ATOMIC | RDMX__ACCESS_READ,
				  &r->tail_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, head_word(r), 8,
				  RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ, &r->head_mr);
	if (!rc)
		rc = rdmx__wa_ann_make(r, c);
	if (!rc && pthread_mutex_init(&r->lock, NULL))
		rc = rdmx__fail(-ENOMEM, "write_atomic: cannot create a mutex");
	if (!rc)
		r->made = 1;
	return rc;
}

/* Free what rdmx__wa_ring_make() made, even half of it. */
void rdmx__wa_ring_unmake(struct wa_ring *r)
{
	rdmx__wa_ann_unmake(r);
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
	free(r->qpns);
	free(r->meta);
	memset(r, 0, sizeof(*r));
}

/* Enter @c (its QP made) in the member table; its sender id comes back
 * in *id. */
int rdmx__wa_ring_join(struct wa_ring *r, rdmx_conn *c, uint32_t *id)
{
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	if (r->nmembers == r->cap_members) {
		uint32_t cap = r->cap_members ? 2 * r->cap_members : 8;
		rdmx_conn **v = realloc(r->members, cap * sizeof(*v));
		uint32_t *q = v ? realloc(r->qpns, cap * sizeof(*q)) : NULL;

		if (v)
			r->members = v;
		if (!q) {
			rc = rdmx__fail(-ENOMEM, "write_atomic: out of memory for a member");
			goto unlock;
		}
		r->qpns = q;
		r->cap_members = cap;
	}
	*id = r->nmembers;
	r->qpns[r->nmembers] = c->f->qp_num(c->ep);
	r->members[r->nmembers++] = c;
	if (wa_rec_size(c->max_msg) > r->max_rec)
		r->max_rec = wa_rec_size(c->max_msg);
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
	return wa_meta_at(r, v)->flags;
}

static void rec_set_flags(struct wa_ring *r, uint64_t v, uint16_t flags)
{
	wa_meta_at(r, v)->flags = flags;
}

/* Ring bytes the scanned record or pad at @v covers (never 0). */
static uint64_t rec_span(struct wa_ring *r, uint64_t v)
{
	return wa_meta_at(r, v)->span;
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
 * An announced record that cannot be: fail the member that wrote it (the
 * QP its announcement came on) and report -EPROTO; the scan moves past
 * it by the announced span. Locked.
 */
static int malformed(struct wa_ring *r, uint32_t id, const struct wa_hdr *h,
		     uint64_t v, const char *what)
{
	rdmx_conn *owner = wa_member(r, id);

	if (owner)
		rdmx__conn_down(owner, -EPROTO, "write_atomic: the peer wrote a malformed record at ring offset %llu: %s (len %u, flags 0x%x, sender %u)",
				(unsigned long long)v, what, h->len, h->flags, h->sender);
	return -EPROTO;
}

/*
 * Validate the header copy @h of the reservation at @v that member @id
 * announced with span @span. It must name its writer; a pad is only ever
 * written for a reservation that crosses the ring's end, and a
 * reservation is at most one record of its writer's max_msg.
 */
static int check_hdr(struct wa_ring *r, uint32_t id, uint64_t span,
		     const struct wa_hdr *h, uint64_t v)
{
	rdmx_conn *owner = wa_member(r, id);
	uint64_t off = v & (r->size - 1);
	uint64_t max = owner ? wa_rec_size(owner->max_msg) : r->max_rec;

	if (h->sender != id)
		return malformed(r, id, h, v, "it names another sender than its writer");
	if (h->flags & WA_F_PAD) {
		if (h->len != span || h->len > max)
			return malformed(r, id, h, v, "pad size");
		if (off + h->len <= r->size)
			return malformed(r, id, h, v, "pad that does not cross the ring end");
		return 0;
	}
	if (wa_rec_size(h->len) > max)
		return malformed(r, id, h, v, "longer than the negotiated max_msg");
	if (wa_rec_size(h->len) != span)
		return malformed(r, id, h, v, "length differs from the announced span");
	if (off + span > r->size)
		return malformed(r, id, h, v, "record crosses the ring end");
	return 0;
}

/*
 * Check the reservation at the scan cursor. It is there once announced
 * (the WRITE_WITH_IMM completed: every byte is placed); the header is
 * copied once into *h and only the copy is validated and used, the
 * stamps rule out bytes of an earlier lap. Returns 1 when a complete
 * record or pad is there, 0 when it is not announced, or -EPROTO for a
 * malformed one (its writer failed).
 */
static int rec_ready(struct wa_ring *r, struct wa_hdr *h)
{
	uint64_t v = r->scan;
	struct wa_meta *e = wa_meta_at(r, v);
	uint8_t *p = rec_at(r, v);
	uint32_t id = e->a_id - 1;
	int rc;

	if (!e->a_id || e->a_v != v)
		return 0;
	wa_get_hdr(p, h);
	if (wa_load_stamp(p + WA_STAMP_OFF) != wa_hstamp(r->salt, v))
		return malformed(r, id, h, v, "header stamp");
	rc = check_hdr(r, id, e->a_span, h, v);
	if (rc || (h->flags & WA_F_PAD))
		return rc ? rc : 1;
	if (wa_load_stamp(p + wa_trailer_off(h->len)) != wa_tstamp(r->salt, v))
		return malformed(r, id, h, v, "trailer stamp");
	return 1;
}

/* Record what was scanned at @v (announced by @id, @span bytes) from
 * the validated copy @h, or from nothing for a malformed one. Locked. */
static void note_rec(struct wa_ring *r, uint64_t v, uint32_t id,
		     uint32_t span, const struct wa_hdr *h)
{
	struct wa_meta *e = wa_meta_at(r, v);

	e->v = v;
	e->span = span;
	e->len = h && !(h->flags & WA_F_PAD) ? h->len : 0;
	e->imm = h ? h->imm : 0;
	e->sender = id;
	e->flags = h ? h->flags & (WA_F_IMM | WA_F_PAD) : WA_F_RELEASED;
	e->a_id = 0;
}

/*
 * Take the next message at the scan cursor, skipping pads, malformed
 * records (their writers failed), records of members that are gone and
 * holes past their bound. Returns 1 with *v and *owner, 0 when none is
 * ready, or -errno. Locked.
 */
static int ring_take(struct wa_ring *r, uint64_t *v, rdmx_conn **owner)
{
	struct wa_meta *e;
	struct wa_hdr h;
	int rc;

	rdmx__wa_ann_poll(r);
	for (;;) {
		rc = rec_ready(r, &h);
		if (rc == 0 && !rdmx__wa_hole_check(r))
			return 0;
		*v = r->scan;
		e = wa_meta_at(r, *v);
		if (rc) {
			note_rec(r, *v, e->a_id - 1, e->a_span, rc > 0 ? &h : NULL);
			r->scan += rec_span(r, *v);
			*owner = wa_member(r, h.sender);
			if (rc > 0 && !(h.flags & WA_F_PAD) && *owner)
				return 1;
			rec_set_flags(r, *v, rec_flags(r, *v) | WA_F_RELEASED);
		}
		ring_advance(r);
	}
}

/* Hand the record at @v out to its connection @c. Locked. */
static void deliver(struct wa_ring *r, rdmx_conn *c, uint64_t v,
		    struct rdmx_msg *m)
{
	struct wa_meta *e = wa_meta_at(r, v);

	e->flags = (uint16_t)((e->flags & ~WA_F_PARKED) | WA_F_HELD);
	m->data = rec_at(r, v) + WA_HDR;
	m->len = e->len;
	m->cap = e->len;
	m->imm = (e->flags & WA_F_IMM) ? e->imm : 0;
	m->flags = (e->flags & WA_F_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(m, c, RDMX__MSG_RECV, v);
}

/* Park the record at @v for @owner (another member). Locked. */
static int park(struct wa_ring *r, rdmx_conn *owner, uint64_t v)
{
	int rc;

	rec_set_flags(r, v, rec_flags(r, v) | WA_F_PARKED);
	rc = rdmx__wa_vq_push(&wa_of(owner)->parked, v);
	rdmx__conn_kick(owner); /* it may sleep on the CQ whose event we took */
	return rc;
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
		deliver(r, c, rdmx__wa_vq_pop(&p->parked), m);
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

		if (c && !wa_of(c)->leaving && wa_of(c)->parked.n &&
		    rdmx__wa_vq_front(&wa_of(c)->parked) < bv) {
			best = c;
			bv = rdmx__wa_vq_front(&wa_of(c)->parked);
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
		deliver(r, owner, rdmx__wa_vq_pop(&wa_of(owner)->parked), m);
		rc = 1;
	} else {
		rc = ring_take(r, &v, &owner);
		if (rc > 0 && wa_of(owner)->leaving) {
			rec_set_flags(r, v, rec_flags(r, v) | WA_F_RELEASED); /* nobody to take it */
			ring_advance(r);
			rc = 0;
		} else if (rc > 0) {
			deliver(r, owner, v, m);
		}
	}
	*drained = ring_drained(r);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* rdmx_conn_close(@c) began (the group's unlist, before its QP goes): from
 * now on the listener's receive neither delivers @c's records nor looks
 * at its connection. */
void rdmx__wa_group_unlist(rdmx_conn *c)
{
	struct wa *p = wa_of(c);

	if (!p->joined)
		return;
	pthread_mutex_lock(&p->rx->lock);
	p->leaving = 1;
	pthread_mutex_unlock(&p->rx->lock);
}

/* Release @c's records still in the ring and forget @c (its QP is
 * destroyed: no announcement of it comes after this). */
void rdmx__wa_ring_leave(struct wa_ring *r, rdmx_conn *c, uint32_t id)
{
	struct wa_meta *e;

	pthread_mutex_lock(&r->lock);
	rdmx__wa_ann_poll(r); /* its announcements still in the CQ: attributed */
	if (id < r->nmembers && r->members[id] == c)
		r->members[id] = NULL;
	for (uint64_t v = r->pub; v < r->scan; v += e->span) {
		e = wa_meta_at(r, v);
		if (e->sender == id && !(e->flags & (WA_F_PAD | WA_F_RELEASED)))
			e->flags |= WA_F_RELEASED;
	}
	rdmx__wa_vq_free(&wa_of(c)->parked);
	ring_advance(r);
	pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------- receiving */

/*
 * After an empty poll: 0 to poll again, or what to return. A connection
 * that went down is polled until its ring is drained (what its peer wrote
 * before leaving is delivered), DOWN_POLLS times at most.
 */
static int recv_wait(rdmx_conn *c, struct rdmx__deadline *d, int drained)
{
	int rc;

	if (c->state == RDMX__CONN_DOWN) {
		if (drained || d->once || ++d->spins > DOWN_POLLS)
			return rdmx__fail(c->down_rc, "%s", c->err.msg);
		return 0;
	}
	/* A wait that finds the peer gone polls once more (the branch
	 * above then decides): what the peer wrote before it left, between
	 * the last poll and the check, is delivered first. */
	rc = rdmx__conn_wait(c, d);
	return rc && c->state == RDMX__CONN_DOWN && !d->once ? 0 : rc;
}

int rdmx__wa_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
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
	struct wa_meta *e = wa_meta_at(r, v);

	if (v < r->pub || v >= r->scan || v % WA_ALIGN || e->v != v ||
	    (e->flags & (WA_F_HELD | WA_F_RELEASED)) != WA_F_HELD ||
	    wa_member(r, e->sender) != c)
		return -EINVAL;
	e->flags |= WA_F_RELEASED;
	ring_advance(r);
	return 0;
}

/* Check and release a message handed out to @c from @r. */
int rdmx__wa_release_rx(struct wa_ring *r, rdmx_conn *c, uint64_t v)
{
	int rc;

	pthread_mutex_lock(&r->lock);
	rc = release_rec(r, c, v);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* ------------------------------------------------- rdmx_listener_recv */

/*
 * A member whose peer is gone and whose messages were all handed out:
 * reported once with -ECONNRESET. Sets *live when a member is unreported.
 * Locked. @drained is from the poll before this call, so a member is
 * reported only once it was seen down at an earlier call (down_seen):
 * the peer's records, placed before it left, were all visible to that
 * poll; one that went down after the poll may have records it missed.
 */
static rdmx_conn *gone_member(struct wa_ring *r, int drained, int check,
			      int *live)
{
	*live = 0;
	for (uint32_t i = 0; i < r->nmembers; i++) {
		rdmx_conn *c = r->members[i];

		if (!c || c->reset_reported || wa_of(c)->leaving)
			continue;
		*live = 1;
		if (check && c->state == RDMX__CONN_UP)
			rdmx__conn_check_peer(c);
		if (c->state != RDMX__CONN_DOWN)
			continue;
		if (drained && wa_of(c)->down_seen && !wa_of(c)->parked.n)
			return c;
		wa_of(c)->down_seen = 1;
	}
	return NULL;
}

/* After an empty poll: 0 to poll again, or what to return. Locked. */
static int group_idle(struct wa_ring *r, struct rdmx_msg *m,
		      struct rdmx__deadline *d, int drained)
{
	int check = d->once || rdmx__wait_idle(d), live;
	rdmx_conn *gone = gone_member(r, drained, check, &live);

	if (gone) {
		gone->reset_reported = 1;
		rdmx__msg_set(m, gone, RDMX__MSG_CONN, 0);
		return rdmx__fail(gone->down_rc, "%s", gone->err.msg);
	}
	if (!live)
		return rdmx__fail(-ENOTCONN, "no open connection on this listener");
	if (d->once)
		return rdmx__again();
	return check ? rdmx__deadline_passed(d) : 0;
}

int rdmx__wa_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
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
	rdmx__deadline_mode(&d, g->wait_mode, g->spin_us);
	for (;;) {
		rc = rx_poll_any(r, m, &drained);
		if (rc)
			return rc > 0 ? 0 : rc;
		pthread_mutex_lock(&r->lock);
		rc = group_idle(r, m, &d, drained);
		pthread_mutex_unlock(&r->lock);
		if (!rc)
			rc = rdmx__group_shut(g);
		if (rc)
			return rc;
		rdmx__group_park(g, -1, &d); /* after group_idle's checks, unlocked */
	}
}
