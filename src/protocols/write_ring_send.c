/* SPDX-License-Identifier: MIT */
/*
 * The ring engine's send side (see write_ring_conn.c for the design, the set
 * up and the receive side): waiting for room at the peer (flow control:
 * the peer's released head, asks, head READs), rdmx_msg_alloc in the
 * staging mirror, placing a record (pads, notify's extra work requests,
 * held records of a burst) and posting it, flush and per-send completion
 * counts.
 */
#include <errno.h>
#include <stddef.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/msg.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/ring.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "write_ring_priv.h"

/* ---------------------------------------------------------------- sends */

/* Room at the peer for @rsize bytes: window and released head. */
static int peer_room(const struct wring *p, uint64_t rsize)
{
	return p->sent - p->acked < p->win_out &&
	       rdmx__wring_fits(p, p->head, rsize);
}

/* Room here: staging bytes whose WRITEs completed, a send slot. */
static int local_room(const rdmx_conn *c, uint64_t rsize)
{
	const struct wring *p = wr_of(c);

	return p->data_out < c->opts.send_depth &&
	       rdmx__ring_fits(&p->sgeo, p->tail, p->done, rsize);
}

/* The smallest released count that makes room for @rsize bytes. */
static uint64_t ask_target(const struct wring *p, uint64_t rsize)
{
	uint64_t k = p->acked + 1;

	if (p->sent + 1 > p->win_out && k < p->sent + 1 - p->win_out)
		k = p->sent + 1 - p->win_out;
	for (; k < p->sent; k++)
		if (rdmx__wring_fits(p, p->ends[(k - 1) % (p->win_out + 1)], rsize))
			break;
	return k;
}

/* Blocked by the peer: ask for an update (simplex) or read its head. */
static int request_room(rdmx_conn *c, uint64_t rsize)
{
	struct wring *p = wr_of(c);
	struct rdmx__wr wr = {
		.flags = RDMX__WR_SIGNALED,
		.len = sizeof(uint64_t),
		.lkey = p->ctl_mr->lkey,
		.rkey = p->peer_ctl_rkey,
	};
	uint64_t t;

	if (p->ack_read) {
		if (p->read_out)
			return 0;
		wr.wr_id = TAG_READ << TAG_SHIFT;
		wr.op = RDMX__OP_READ;
		wr.addr = &p->ctl->read_dst;
		wr.remote_addr = p->peer_ctl + offsetof(struct ctl, released);
		p->read_out = 1;
		p->st.head_reads++;
	} else {
		t = ask_target(p, rsize);
		if (p->ask_out || t <= p->asked)
			return 0;
		p->ctl->ask_src = t;
		wr.wr_id = TAG_ASK << TAG_SHIFT;
		wr.op = RDMX__OP_WRITE;
		wr.addr = &p->ctl->ask_src;
		wr.remote_addr = p->peer_ctl + offsetof(struct ctl, ask);
		p->asked = t;
		p->ask_out = 1;
		p->st.asks++;
	}
	if (rdmx__post_send(c, &wr, 1))
		return rdmx__conn_down(c, -EIO, "asking the peer for its head: %s",
				       rdmx__last());
	return rdmx__wring_ring_if_asleep(c); /* a sleeping peer must see the ask */
}

/*
 * Post what place() staged since the last post, [burst.from, tail): ONE
 * signaled data WRITE (wr_id: its end), after an unsignaled one up to a
 * pad's header or the ring's end where the span breaks there (notify POLL
 * only: nothing is held in the other modes).
 */
static int push_held(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	struct rdmx__wburst_seg seg[2];
	struct rdmx__wr wr[2];
	int n, rc;

	if (!p->burst.held)
		return 0;
	n = rdmx__wburst_segs(&p->burst, &p->sgeo, p->tail, seg);
	for (int i = 0; i < n; i++)
		wr[i] = (struct rdmx__wr){
			.op = RDMX__OP_WRITE,
			.addr = p->stage + (seg[i].off & p->sgeo.mask),
			.len = (uint32_t)seg[i].len,
			.lkey = p->stage_mr->lkey,
			.remote_addr = p->peer_ring + (seg[i].off & p->sgeo.mask),
			.rkey = p->peer_ring_rkey,
		};
	wr[n - 1].wr_id = p->tail;
	wr[n - 1].flags = RDMX__WR_SIGNALED;
	rc = rdmx__post_send(c, wr, n);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a ring write: %s", rdmx__last());
	p->data_out++;
	rdmx__wburst_posted(&p->burst, p->tail, n);
	return rdmx__wring_ring_if_asleep(c);
}

/* Waiting for room timed out: what for, and what each side showed. */
static int room_timed_out(rdmx_conn *c, uint64_t rsize, int timeout_ms)
{
	struct wring *p = wr_of(c);

	return rdmx__fail(-ETIMEDOUT, "%s: no room for a record of %llu bytes within %d ms: %s (sent %llu, peer released %llu, asked for %llu%s, head updates in %llu, head reads %llu; %u WRITEs in flight here)",
			  c->proto->name, (unsigned long long)rsize, timeout_ms,
			  !peer_room(p, rsize) ? "the peer has not released enough" :
			  "this side's WRITEs have not completed",
			  (unsigned long long)p->sent, (unsigned long long)p->acked,
			  (unsigned long long)p->asked, p->ask_out ? ", ask in flight" : "",
			  (unsigned long long)p->st.updates_recv,
			  (unsigned long long)p->st.head_reads, p->data_out);
}

/* Wait until a record of @rsize bytes may be written. */
static int wait_room(rdmx_conn *c, uint64_t rsize, int timeout_ms)
{
	struct wring *p = wr_of(c);
	struct rdmx__deadline d;
	int rc, counted = 0;

	rdmx__deadline_start(&d, timeout_ms);
	d.timed = p->ack_read; /* room is READ: no completion announces it */
	for (;;) {
		rc = rdmx__wring_progress(c);
		if (rc < 0)
			return rc;
		if (peer_room(p, rsize) && local_room(c, rsize))
			return 0;
		if ((rc = push_held(c))) /* what the peer must see to free room */
			return rc;
		if (!peer_room(p, rsize) && (rc = request_room(c, rsize)))
			return rc;
		if (!counted++)
			p->st.blocked++;
		rc = rdmx__conn_wait(c, &d);
		if (rc)
			return rc == -ETIMEDOUT ? room_timed_out(c, rsize, timeout_ms) : rc;
	}
}

int rdmx__wring_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			  int timeout_ms)
{
	struct wring *p = wr_of(c);
	uint64_t rsize = rdmx__wring_rec_size(p, size), pad, start, at;
	int rc;

	rc = rdmx__one_buf_busy(c, &p->ob);
	if (!rc)
		rc = wait_room(c, rsize, timeout_ms);
	if (rc)
		return rc;
	start = rdmx__ring_place(&p->sgeo, p->tail, rsize, &pad);
	at = rdmx__wring_at(p, &p->sgeo, start, rsize);
	if (p->notify != RDMX_NOTIFY_REV)
		at += RDMX__RING_HDR;
	rdmx__one_buf_give(c, &p->ob, m, p->stage + at, start, size);
	return 0;
}

/* A pad WRITE (unsignaled) for the bytes between the tail and @start,
 * with what the notify mode posts before it; returns the WRs put. */
static int pad_wrs(rdmx_conn *c, uint64_t start, struct rdmx__wr *wr)
{
	struct wring *p = wr_of(c);
	uint64_t at = p->tail & p->sgeo.mask, len = RDMX__RING_HDR;
	int n = rdmx__wring_notify_pre(c, start, wr);

	if (p->notify == RDMX_NOTIFY_REV) { /* its trailer, at the slot's top */
		rdmx__ring_rev_put(p->stage, (uint32_t)(start - p->tail), 0, 0,
				   RDMX__RING_REC_PAD);
		at = start - p->tail - RDMX__RING_REV_TRL;
		len = RDMX__RING_REV_TRL;
	} else {
		rdmx__ring_put_pad(p->stage + at, p->sseed, p->tail);
	}
	wr[n] = (struct rdmx__wr){
		.op = RDMX__OP_WRITE,
		.addr = p->stage + at,
		.len = (uint32_t)len,
		.lkey = p->stage_mr->lkey,
		.remote_addr = p->peer_ring + at,
		.rkey = p->peer_ring_rkey,
	};
	p->st.pads++;
	p->st.pad_bytes += start - p->tail;
	return n + 1;
}

/* The record's bytes around the payload in the staging ring and its
 * WRITE (signaled, tagged with its end offset): the placement step. */
static void rec_wr(rdmx_conn *c, const struct rdmx_msg *m, uint64_t start,
		   uint64_t rsize, struct rdmx__wr *wr)
{
	struct wring *p = wr_of(c);
	uint64_t at = rdmx__wring_at(p, &p->sgeo, start, rsize);
	uint16_t flags = (m->flags & RDMX_MSG_IMM) ? RDMX__RING_REC_IMM : 0;

	if (at + rsize > p->sgeo.size)
		p->st.crossings++;
	if (p->notify == RDMX_NOTIFY_REV)
		rdmx__ring_rev_put(p->stage + at, (uint32_t)rsize, (uint32_t)m->len,
				   m->imm, flags);
	else
		rdmx__ring_put_rec(p->stage + at, p->sseed, start, (uint32_t)m->len,
				   m->imm, flags);
	*wr = (struct rdmx__wr){
		.wr_id = start + rsize,
		.op = p->imm ? RDMX__OP_WRITE_IMM : RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = p->stage + at,
		.len = (uint32_t)rsize,
		.lkey = p->stage_mr->lkey,
		.remote_addr = p->peer_ring + at,
		.rkey = p->peer_ring_rkey,
		.imm = (uint32_t)p->sent,
	};
}

/* The bytes the record of @m takes: REV keeps the allocated slot (the
 * payload sits at its bottom), the others shrink to the length sent. */
static uint64_t send_size(const struct wring *p, const struct rdmx_msg *m)
{
	return rdmx__wring_rec_size(p, p->notify == RDMX_NOTIFY_REV ? p->ob.cap : m->len);
}

/* @m is the buffer rdmx_msg_alloc handed out, its length within it. */
static int send_check(rdmx_conn *c, const struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);

	if (!rdmx__wring_live_alloc(c, m))
		return rdmx__fail(-EINVAL, "%s: not the buffer from rdmx_msg_alloc on this connection",
				  c->proto->name);
	if (m->len > p->ob.cap)
		return rdmx__fail(-EMSGSIZE, "%s: %zu bytes in a buffer of %zu",
				  c->proto->name, m->len, p->ob.cap);
	return 0;
}

/* The record of @m, ending at @end, is sent: the sender's counts. */
static void sent_one(rdmx_conn *c, struct rdmx_msg *m, uint64_t end)
{
	struct wring *p = wr_of(c);

	p->ends[p->sent % (p->win_out + 1)] = end;
	p->sent++;
	p->tail = end;
	p->ob.live = 0;
	p->st.records_out++;
	rdmx__msg_spend(m);
}

/* Place @m's record in the staging ring (a pad before it when it skips to
 * the lap start) and count it sent; posting is push_held()'s. Notify POLL
 * (the only mode that holds records). */
static int place(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);
	uint64_t start = p->ob.start, rsize = rdmx__ring_rec_size(m->len);
	uint64_t at = start & p->sgeo.mask;
	int rc = send_check(c, m);

	if (rc)
		return rc;
	if (start != p->tail) {
		rdmx__ring_put_pad(p->stage + (p->tail & p->sgeo.mask), p->sseed,
				   p->tail);
		p->st.pads++;
		p->st.pad_bytes += start - p->tail;
	}
	if (at + rsize > p->sgeo.size)
		p->st.crossings++;
	rdmx__ring_put_rec(p->stage + at, p->sseed, start, (uint32_t)m->len,
			   m->imm, (m->flags & RDMX_MSG_IMM) ? RDMX__RING_REC_IMM : 0);
	rdmx__wburst_add(&p->burst, p->tail, start, start + rsize);
	sent_one(c, m, start + rsize);
	return 0;
}

/* One record in its own WRITE, with what the notify mode adds. */
static int send_one(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);
	uint64_t start = p->ob.start, rsize;
	struct rdmx__wr wr[WRING_WRS_MAX];
	int n = 0, rc = send_check(c, m);

	if (rc)
		return rc;
	rsize = send_size(p, m);
	if (start != p->tail)
		n += pad_wrs(c, start, wr);
	n += rdmx__wring_notify_pre(c, start + rsize, wr + n);
	rec_wr(c, m, start, rsize, &wr[n++]);
	n += rdmx__wring_notify_post(c, start + rsize, wr, n);
	rc = rdmx__post_send(c, wr, n);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a ring write: %s", rdmx__last());
	rdmx__wburst_add(&p->burst, p->tail, start, start + rsize);
	rdmx__wburst_posted(&p->burst, start + rsize, 1);
	sent_one(c, m, start + rsize);
	p->data_out++;
	return rdmx__wring_ring_if_asleep(c);
}

int rdmx__wring_send(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc;

	if (!wr_of(c)->burst.on)
		return send_one(c, m);
	rc = place(c, m);
	return rc ? rc : push_held(c);
}

/* ops->send_more: hold the record (write_ring_burst.h) up to the bound. */
int rdmx__wring_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);
	int rc;

	if (!p->burst.on)
		return send_one(c, m);
	rc = place(c, m);
	if (!rc && rdmx__wburst_full(&p->burst, p->tail))
		rc = push_held(c);
	return rc;
}

int rdmx__wring_flush(rdmx_conn *c, int timeout_ms)
{
	struct wring *p = wr_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	if ((rc = push_held(c)))
		return rc;
	while (p->data_out) {
		rc = rdmx__wring_progress(c);
		if (rc < 0)
			return rc;
		if (rc == 0 && (rc = rdmx__conn_wait(c, &d)))
			return rc == -EAGAIN ? -ETIMEDOUT : rc;
	}
	return 0;
}

/* Sends complete: data WRITEs complete in post order (records each: the
 * burst's FIFO). */
int rdmx__wring_sends_done(rdmx_conn *c, uint64_t *done)
{
	struct wring *p = wr_of(c);
	int rc = push_held(c); /* a wait on a held send must not stall */

	if (!rc)
		rc = rdmx__wring_progress(c);
	*done = p->burst.recs_done;
	return rc;
}
