/* SPDX-License-Identifier: MIT */
/*
 * write_atomic's announcements and holes (the argument is at the top of
 * write_atomic_conn.c, "Attribution" and "Holes").
 *
 * Announcements. Every record and pad is written with one WRITE_WITH_IMM
 * whose immediate is wa_imm(V, span). Its completion consumes one of the
 * zero-length receives of the ring's SRQ and lands on the ring's receive
 * CQ with the qp_num of the QP it came in on, which names the member that
 * wrote it: no member can announce in another's name. The receiver keeps
 * the announcement in its own record of the slot (struct wa_meta, a_*)
 * until the scan reaches it; a record is delivered only when announced.
 *
 * Holes. A reservation that stays unannounced while a record of any
 * member would fit there is skipped after hole_ms: the scan moves to the
 * next announced reservation among those that existed when the wait
 * began, the range is marked WA_F_SKIPPED and released. A late writer of
 * a skipped range is failed when its announcement arrives (and the
 * sender itself checks the head before a late write: write_atomic_conn.c).
 */
#include <errno.h>

#include "core/conn.h"
#include "core/fabric.h"
#include "protocols/write_atomic_priv.h"

#define RECV_BATCH 16u
#define RECV_DEPTH_MAX 4096u
#define WC_POLL 32

/* Post zero-length receives until the SRQ holds rdepth. */
static int ann_post(struct wa_ring *r)
{
	struct rdmx__wr wr[RECV_BATCH];
	int rc;

	while (r->rdepth - r->rposted >= RECV_BATCH) {
		for (uint32_t i = 0; i < RECV_BATCH; i++)
			wr[i] = (struct rdmx__wr){ .op = RDMX__OP_RECV,
						   .addr = r->ctrl,
						   .lkey = r->tail_mr->lkey };
		rc = r->f->post_srq_recv(r->ann.srq, wr, RECV_BATCH);
		if (rc)
			return rc;
		r->rposted += RECV_BATCH;
	}
	return 0;
}

/* The SRQ, its receive CQ and the first receives, on @c's device. */
int rdmx__wa_ann_make(struct wa_ring *r, rdmx_conn *c)
{
	uint64_t slots = r->size / WA_ALIGN;
	int rc;

	r->rdepth = slots < RECV_DEPTH_MAX ? (uint32_t)slots : RECV_DEPTH_MAX;
	rc = rdmx__qp_shared_make(c, r->rdepth, &r->ann);
	if (!rc)
		rc = ann_post(r);
	return rc;
}

void rdmx__wa_ann_unmake(struct wa_ring *r)
{
	rdmx__qp_shared_unmake(r->f, &r->ann);
}

/* The sender id of the member on QP @qpn, or UINT32_MAX. */
static uint32_t member_by_qpn(struct wa_ring *r, uint32_t qpn)
{
	for (uint32_t i = 0; i < r->nmembers; i++)
		if (r->members[i] && r->qpns[i] == qpn)
			return i;
	return UINT32_MAX;
}

/* An announcement for a slot the scan has passed: a late or bogus one. */
static void ann_behind(struct wa_ring *r, rdmx_conn *c, uint64_t v)
{
	struct wa_meta *e = wa_meta_at(r, v);

	if ((e->flags & WA_F_SKIPPED) && e->v == v)
		rdmx__conn_down(c, -ETIMEDOUT, "write_atomic: this member's record at ring offset %llu arrived after the receiver had skipped its reservation (unwritten for %u ms)",
				(unsigned long long)v, r->hole_ms);
	else
		rdmx__conn_down(c, -EPROTO, "write_atomic: the peer announced a record at ring offset %llu, which the receiver had already passed",
				(unsigned long long)v);
}

/* Note one completion of the receive CQ. */
static void ann_one(struct wa_ring *r, const struct rdmx__wc *wc)
{
	uint32_t id = member_by_qpn(r, wc->qp_num);
	uint64_t off, span, v, max;
	struct wa_meta *e;
	rdmx_conn *c;

	if (wc->status != RDMX__WC_OK || !wc->has_imm || id == UINT32_MAX)
		return;
	c = r->members[id];
	max = wa_rec_size(c->max_msg);
	wa_imm_get(wc->imm, r->size, &off, &span);
	if (!span || span > max) {
		rdmx__conn_down(c, -EPROTO, "write_atomic: the peer announced a record of %llu bytes at ring offset %llu (at most %llu)",
				(unsigned long long)span, (unsigned long long)off,
				(unsigned long long)max);
		return;
	}
	v = r->scan + ((off - r->scan) & (r->size - 1));
	if (v >= r->pub + r->size)
		return ann_behind(r, c, v - r->size);
	e = wa_meta_at(r, v);
	if (e->a_id) {
		rdmx__conn_down(c, -EPROTO, "write_atomic: the peer announced ring offset %llu, already announced by sender %u",
				(unsigned long long)v, e->a_id - 1);
		return;
	}
	e->a_v = v;
	e->a_span = (uint32_t)span;
	e->a_id = id + 1;
}

/* Take what the receive CQ holds and replenish the SRQ. Locked. */
void rdmx__wa_ann_poll(struct wa_ring *r)
{
	struct rdmx__wc wc[WC_POLL];
	int n;

	do {
		n = r->f->poll_cq(r->ann.rcq, wc, WC_POLL);
		for (int i = 0; i < n; i++)
			ann_one(r, &wc[i]);
		if (n > 0)
			r->rposted -= (uint32_t)n;
	} while (n == WC_POLL);
	/* A failed post leaves the SRQ short: senders see RNR, not loss. */
	(void)ann_post(r);
}

/* The end of the hole at @v: the next announced reservation, at most
 * @limit. */
static uint64_t hole_end(struct wa_ring *r, uint64_t v, uint64_t limit)
{
	for (uint64_t w = v + WA_ALIGN; w < limit; w += WA_ALIGN) {
		struct wa_meta *e = wa_meta_at(r, w);

		if (e->a_id && e->a_v == w)
			return w;
	}
	return limit;
}

/* Skip [v, end): released, marked as a hole for a late announcement. */
static void hole_skip(struct wa_ring *r, uint64_t v, uint64_t end)
{
	for (uint64_t w = v; w < end; w += WA_ALIGN) {
		struct wa_meta *e = wa_meta_at(r, w);

		e->v = w;
		e->span = WA_ALIGN;
		e->len = 0;
		e->sender = UINT32_MAX;
		e->flags = WA_F_SKIPPED | WA_F_RELEASED;
	}
	r->scan = end;
	r->holes++;
	r->hole_bytes += end - v;
}

/*
 * The scan cursor is reserved but not announced. Its timer runs while a
 * record of any member would fit there (before that a live writer may
 * be waiting for space); reservations that existed when it started share
 * it. Past hole_ms the hole is skipped, up to the next announced record,
 * the tail when the timer started, and the last offset where any
 * record fits. Locked.
 */
int rdmx__wa_hole_check(struct wa_ring *r)
{
	uint64_t v = r->scan, fit = r->pub + r->size - r->max_rec + WA_ALIGN;
	uint64_t tail = __atomic_load_n(r->ctrl, __ATOMIC_ACQUIRE), limit;
	int64_t now;

	if (tail <= v || v >= fit) {
		r->hole_t0 = 0;
		return 0;
	}
	now = rdmx__now_ms() + 1; /* never 0: hole_t0's "off" */
	if (!r->hole_t0 || v >= r->hole_tail) {
		r->hole_t0 = now;
		r->hole_tail = tail;
		return 0;
	}
	if (now - r->hole_t0 < (int64_t)r->hole_ms)
		return 0;
	limit = r->hole_tail < fit ? r->hole_tail : fit;
	hole_skip(r, v, hole_end(r, v, limit));
	return 1;
}
