/* SPDX-License-Identifier: MIT */
/*
 * write_atomic's sending (the design, "Bursts" and "Holes" among it, at
 * the top of write_atomic_conn.c): reserving ring space at the peer by
 * FETCH_ADD (and recovering a stale result), waiting for room, writing
 * records (held bursts go out as one chain), the send pool's hooks, and
 * rdmx_msg_release of a send buffer or a received record.
 */
#include <errno.h>
#include <string.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/post.h"
#include "core/sendpool.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "protocols/write_atomic_priv.h"

#define WC_BATCH 16
#define STALE_WAIT_MS 10000  /* recover_stale(): wait for our add to show */

void (*rdmx__wa_test_reserved)(struct rdmx_conn *c, uint64_t voff,
			       uint64_t rec);

/* Poll the send CQ once; returns the completions seen or -errno. */
static int reap(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, c->qp.scq, wc, WC_BATCH);

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++) {
		uint32_t kind = (uint32_t)(wc[i].wr_id >> 32);
		uint32_t idx = (uint32_t)wc[i].wr_id;

		if (wc[i].status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, &wc[i], kind == K_FAA ? "fetch-and-add" :
						   kind == K_READ ? "read of the head" : "write");
		if (kind == K_FAA)
			p->faa_done = 1;
		else if (kind == K_READ)
			p->read_done = 1;
		else if (kind == K_WRITE)
			rdmx__sendpool_sent(&p->sp, idx);
		else
			p->pads--;
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
		if (rc == 0 && (rc = rdmx__conn_wait(c, &d)))
			return rc;
	}
	return 0;
}

/* RDMA READ the 8-byte word at @raddr of the peer into *@out. */
static int read_word(rdmx_conn *c, uint64_t raddr, uint32_t rkey, uint64_t *out)
{
	struct wa *p = wa_of(c);
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_READ << 32,
		.op = RDMX__OP_READ,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->scratch[1],
		.len = 8,
		.lkey = p->scratch_mr->lkey,
		.remote_addr = raddr,
		.rkey = rkey,
	};
	int rc;

	p->read_done = 0;
	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a read: %s", rdmx__last());
	rc = wait_done(c, &p->read_done);
	if (!rc)
		*out = p->scratch[1];
	return rc;
}

/* RDMA READ the peer's head word into cached_head. */
static int read_head(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	uint64_t head;
	int rc = read_word(c, p->r_tail + HEAD_OFF, p->r_head_rkey, &head);

	if (rc)
		return rc;
	head = le64toh(head);
	if (head > p->cached_head)
		p->cached_head = head;
	return 0;
}

/*
 * A FETCH_ADD completed with a value below the end of this sender's
 * previous reservation. The tail only grows, so that value is stale: it
 * is the result of an earlier atomic of ours, replayed. rxe (Linux 6.1)
 * does this when a retransmitted request meets its responder's replay
 * state (seen under 1% packet loss); the add itself is executed once, at
 * the latest when the request is retransmitted. Writing at the stale
 * offset would overwrite a record already there, and the real
 * reservation would stay a hole that stalls the ring, so the real
 * offset is recovered: RDMA READ the tail until it holds our add. If it
 * then equals last_end + @add, nothing else was reserved since our
 * previous reservation ended, so ours starts at last_end. If it is
 * larger, another sender reserved meanwhile and our offset cannot be
 * known: the reservation is left unwritten (a hole the receiver skips
 * after its bound) and 1 returned to reserve again; never an overwrite.
 */
static int recover_stale(rdmx_conn *c, uint64_t add, uint64_t *v)
{
	struct wa *p = wa_of(c);
	uint64_t want = p->last_end + add, tail = 0, stale = *v;
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, STALE_WAIT_MS);
	d.timed = 1; /* the tail is READ: no completion announces it */
	for (;;) {
		rc = read_word(c, p->r_tail, p->r_tail_rkey, &tail);
		if (rc)
			return rc;
		if (tail >= want)
			break;
		rc = rdmx__conn_wait(c, &d);
		if (rc == -ETIMEDOUT || rc == -EAGAIN)
			break;
		if (rc)
			return rc;
	}
	if (tail < want)
		return rdmx__conn_down(c, -EPROTO, "write_atomic: the device returned a stale fetch-and-add result (%llu, below the end %llu of this sender's previous reservation) and the tail (%llu) never showed the real one",
				       (unsigned long long)stale, (unsigned long long)p->last_end,
				       (unsigned long long)tail);
	p->stale_faa++;
	if (tail != want) {
		p->lost_faa++;
		p->last_end = tail;
		return 1;
	}
	*v = p->last_end;
	return 0;
}

/* FETCH_ADD @add on the peer's tail once: the old tail in *@v, or 1 when
 * the reservation was lost (see recover_stale()). */
static int reserve_once(rdmx_conn *c, uint64_t add, uint64_t *v)
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
	if (rc)
		return rc;
	*v = p->scratch[0];
	return *v < p->last_end ? recover_stale(c, add, v) : 0;
}

/* FETCH_ADD @add on the peer's tail: the old tail in *@v. */
static int reserve(rdmx_conn *c, uint64_t add, uint64_t *v)
{
	int rc;

	while ((rc = reserve_once(c, add, v)) == 1)
		;
	return rc;
}

/* The head passed @v, which this sender reserved and has not written:
 * the receiver skipped it as a hole. */
static int skipped(rdmx_conn *c, uint64_t v)
{
	struct wa *p = wa_of(c);

	return rdmx__conn_down(c, -ETIMEDOUT, "write_atomic: the receiver skipped this sender's reservation at ring offset %llu (head %llu) after it stayed unwritten for %u ms",
			       (unsigned long long)v, (unsigned long long)p->cached_head,
			       p->r_hole_ms);
}

/*
 * Before writing at @v: if a quarter of the receiver's hole bound passed
 * since the reservation, READ the head; past @v means it was skipped.
 * (The residual race, a write still in flight when the bound ends, is
 * argued in write_atomic_conn.c's "Holes".)
 */
static int check_skipped(rdmx_conn *c, uint64_t v)
{
	struct wa *p = wa_of(c);
	int rc;

	if (rdmx__now_ms() - p->reserved_ms < (int64_t)p->r_hole_ms / 4)
		return p->cached_head > v ? skipped(c, v) : 0;
	rc = read_head(c);
	if (!rc && p->cached_head > v)
		rc = skipped(c, v);
	return rc;
}

/*
 * Wait until [v, v + len) of the peer's ring is free (never overwrite),
 * at most liveness_ms: then -ETIMEDOUT and the reservation stays a hole
 * (the receiver skips it), the connection up.
 */
static int wait_space(rdmx_conn *c, uint64_t v, uint64_t len)
{
	struct wa *p = wa_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, (int)c->opts.liveness_ms);
	d.timed = 1; /* the head is READ: no completion announces room */
	while (!wa_fits(v, len, p->cached_head, p->r_size)) {
		rc = read_head(c);
		if (!rc && p->cached_head > v)
			return skipped(c, v);
		if (!rc && !wa_fits(v, len, p->cached_head, p->r_size))
			rc = rdmx__conn_wait(c, &d);
		if (rc == -ETIMEDOUT)
			return rdmx__fail(rc, "write_atomic: waited %u ms for %llu bytes of ring space at the peer (reservation at %llu, head %llu); the message was not sent",
					  c->opts.liveness_ms, (unsigned long long)len,
					  (unsigned long long)v, (unsigned long long)p->cached_head);
		if (rc)
			return rc;
	}
	return check_skipped(c, v);
}

/* One WRITE_WITH_IMM of @len bytes from @src at @v, announcing @span
 * ring bytes (wr_id, lkey and signaling are the poster's). */
static struct rdmx__wr write_wr(const struct wa *p, void *src, uint64_t v,
				uint64_t len, uint64_t span)
{
	return (struct rdmx__wr){
		.op = RDMX__OP_WRITE_IMM,
		.imm = wa_imm(v, span, p->r_size),
		.addr = src,
		.len = (uint32_t)len,
		.remote_addr = p->r_ring + (v & (p->r_size - 1)),
		.rkey = p->r_ring_rkey,
	};
}

/* Fill the ring's end from @v with a pad record that skips @rec bytes. */
static int write_pad(rdmx_conn *c, uint64_t v, uint64_t rec)
{
	struct wa *p = wa_of(c);
	struct wa_hdr h = { .len = (uint32_t)rec, .sender = p->tx_id,
			    .flags = WA_F_PAD };
	uint8_t *b = (uint8_t *)&p->scratch[2];
	struct rdmx__wr wr = write_wr(p, b, v, WA_HDR, rec);
	int rc = wait_space(c, v, WA_HDR);

	if (rc)
		return rc;
	wa_put_hdr(b, &h);
	wa_put_stamp(b + WA_STAMP_OFF, wa_hstamp(p->r_salt, v));
	wr.wr_id = (uint64_t)K_PAD << 32;
	wr.flags = RDMX__WR_SIGNALED;
	wr.lkey = p->scratch_mr->lkey;
	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a write: %s", rdmx__last());
	p->pads++;
	return 0;
}

/* Reserve @rec bytes that do not cross the ring's end: *@v. */
static int reserve_record(rdmx_conn *c, uint64_t rec, uint64_t *v)
{
	struct wa *p = wa_of(c);
	int rc;

	p->reserved_ms = rdmx__now_ms();
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
	while (p->outs.n && rdmx__wa_vq_front(&p->outs) <= p->cached_head)
		rdmx__wa_vq_pop(&p->outs);
	return p->outs.n + p->sp.nalloc;
}

/*
 * Room for one more message besides a free buffer: a credit, and (as far
 * as this sender knows) ring space for a record and a pad after its last
 * one, so that a lone sender never waits in rdmx_send.
 */
static int has_room(struct wa *p)
{
	return credits_used(p) < p->credits &&
	       wa_fits(p->last_end, 2 * p->sp.stride, p->cached_head, p->r_size);
}

static int wa_push(rdmx_conn *c, struct rdmx_msg *m);

/* The pool's room hook: 1 if a message may be allocated, else 0 (after
 * refreshing the head), or -errno. */
static int wa_room(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	int rc;

	if (has_room(p))
		return 1;
	if (p->nheld) { /* held messages take credits: write them */
		rc = wa_push(c, NULL);
		if (rc || has_room(p))
			return rc ? rc : 1;
	}
	rc = read_head(c);
	return rc ? rc : has_room(p);
}

/* The pool's unflushed hook: its WRITEs and the pads in flight. */
static uint32_t wa_unflushed(rdmx_conn *c)
{
	struct wa *p = wa_of(c);

	return p->sp.inflight + p->pads;
}

const struct rdmx__sendpool_ops rdmx__wa_pool_ops = {
	.reap = reap,
	.room = wa_room,
	.unflushed = wa_unflushed,
};

/* Header, stamps and trailer around the payload of @h in its slot, for
 * the record at @v; the slot's start. */
static uint8_t *seal(struct wa *p, const struct wa_held *h, uint64_t v)
{
	uint8_t *b = rdmx__sendpool_at(&p->sp, h->idx);
	struct wa_hdr hd = { .len = h->len, .sender = p->tx_id };

	if (h->flags & RDMX_MSG_IMM) {
		hd.flags = WA_F_IMM;
		hd.imm = h->imm;
	}
	wa_put_hdr(b, &hd);
	wa_put_stamp(b + WA_STAMP_OFF, wa_hstamp(p->r_salt, v));
	memset(b + WA_HDR + h->len, 0, wa_round8(h->len) - h->len);
	wa_put_stamp(b + wa_trailer_off(h->len), wa_tstamp(p->r_salt, v));
	return b;
}

/*
 * Reserve @rec bytes for the @n messages at @h and write their records
 * back to back from there, one WRITE_WITH_IMM each, rung as one chain.
 * The last one is @m's when @m is not NULL (spent once posted; the
 * others' handles were spent when they were held).
 */
static int write_records(rdmx_conn *c, const struct wa_held *h, uint32_t n,
			 uint64_t rec, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	struct rdmx_msg spent = { 0 };
	uint64_t v = 0, r;
	int rc = reserve_record(c, rec, &v);

	if (!rc && rdmx__wa_test_reserved)
		rdmx__wa_test_reserved(c, v, rec);
	if (!rc)
		rc = wait_space(c, v, rec);
	for (uint32_t i = 0; !rc && i < n; i++, v += r) {
		struct rdmx__wr wr;
		uint8_t *b;

		r = wa_rec_size(h[i].len);
		/* queued before the post: a send that fails posted nothing
		 * (the reservation is a hole, skipped), one that posted
		 * succeeds */
		rc = rdmx__wa_vq_push(&p->outs, v + r);
		if (rc)
			break;
		b = seal(p, &h[i], v);
		wr = write_wr(p, b, v, wa_write_len(h[i].len), r);
		rc = rdmx__sendpool_post_more(c, &p->sp, h[i].idx, &wr,
					      i + 1 == n && m ? m : &spent, i + 1 < n);
	}
	return rc;
}

/* Write what is held (nothing: 0), the burst's last send @m with it when
 * @m is not NULL; see "Bursts". */
static int wa_push(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	uint32_t n = p->nheld;
	int rc;

	if (!n)
		return 0;
	p->nheld = 0;
	rc = write_records(c, p->held, n, p->held_rec, m);
	p->held_rec = 0;
	if (rc && c->state != RDMX__CONN_DOWN && n > (m ? 1u : 0u))
		rc = rdmx__conn_down(c, rc, "write_atomic: %u held messages of a burst were not written: %s",
				     n - (m ? 1u : 0u), rdmx__last());
	return rc;
}

/* Hold @m (slot @idx) in the burst, unspent. The caller checked it fits
 * (hold_fits). */
static void hold(struct wa *p, uint32_t idx, const struct rdmx_msg *m)
{
	p->held[p->nheld++] = (struct wa_held){
		.idx = idx, .len = (uint32_t)m->len, .imm = m->imm,
		.flags = m->flags & RDMX_MSG_IMM,
	};
	p->held_rec += wa_rec_size(m->len);
}

/* May @len more bytes join the held burst? */
static int hold_fits(const struct wa *p, size_t len)
{
	return p->nheld < p->sp.held_max && p->held_rec + wa_rec_size(len) <= p->sp.stride;
}

/* The slot @m names, or -EINVAL. */
static int64_t send_slot(rdmx_conn *c, const struct rdmx_msg *m)
{
	int64_t idx = rdmx__sendpool_slot(c, &wa_of(c)->sp, m);

	if (idx < 0)
		return rdmx__fail(-EINVAL, "write_atomic: not a message from rdmx_msg_alloc on this connection");
	return idx;
}

int rdmx__wa_send(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	int64_t idx = send_slot(c, m);
	struct wa_held h;
	int rc;

	if (idx < 0)
		return (int)idx;
	if (p->nheld && hold_fits(p, m->len)) {
		hold(p, (uint32_t)idx, m);
		return wa_push(c, m);
	}
	if ((rc = wa_push(c, NULL)))
		return rc;
	h = (struct wa_held){ .idx = (uint32_t)idx, .len = (uint32_t)m->len,
			      .imm = m->imm, .flags = m->flags & RDMX_MSG_IMM };
	return write_records(c, &h, 1, wa_rec_size(m->len), m);
}

/* rdmx_send with RDMX_SEND_MORE: held (see "Bursts"). */
int rdmx__wa_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	int64_t idx = send_slot(c, m);
	int rc;

	if (idx < 0)
		return (int)idx;
	if (p->nheld && !hold_fits(p, m->len) && (rc = wa_push(c, NULL)))
		return rc;
	hold(p, (uint32_t)idx, m);
	rdmx__msg_spend(m);
	/* an alloc finding no free slot waits for completions: not for
	 * slots only this burst holds */
	return p->sp.nfree ? 0 : wa_push(c, NULL);
}

/* rdmx_flush: what is held first. */
int rdmx__wa_flush(rdmx_conn *c, int timeout_ms)
{
	int rc = wa_push(c, NULL);

	return rc ? rc : rdmx__sendpool_conn_flush(c, timeout_ms);
}

/* A token wait: what is held first (a held send is not complete, but
 * the pool counts only what is in flight). */
int rdmx__wa_sends_done(rdmx_conn *c, uint64_t *done)
{
	int rc = wa_push(c, NULL);

	return rc ? rc : rdmx__sendpool_conn_sends_done(c, done);
}

int rdmx__wa_release(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wa *p = wa_of(c);
	uint64_t v;
	int rc = -EINVAL;

	if (!rdmx__sendpool_release(c, &p->sp, m))
		return 0;
	if (!rdmx__msg_get(m, c, RDMX__MSG_RECV, &v) && p->rx && p->rx->made)
		rc = rdmx__wa_release_rx(p->rx, c, v);
	if (rc)
		return rdmx__fail(-EINVAL, "write_atomic: message not held on this connection");
	rdmx__msg_spend(m);
	return 0;
}
