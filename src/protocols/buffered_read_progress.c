/* SPDX-License-Identifier: MIT */
/*
 * buffered_read's completions (the design: buffered_read_conn.c): posting, the
 * send CQ reaped (tail and section READs, reports, progress READs,
 * doorbells), the receiver's reports and the doorbell receives.
 */
#include <stddef.h>

#include "core/wire.h"
#include "buffered_read_priv.h"

#define WC_BATCH 8

/* A receive for one doorbell SEND (0 bytes; a landing of 8). */
int rdmx__br_post_bell_recv(rdmx_conn *c, uint32_t i)
{
	struct br *p = br_of(c);
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_BELL << 32 | i,
		.op = RDMX__OP_RECV,
		.addr = &p->ctl->bell[i],
		.len = sizeof(uint64_t),
		.lkey = p->ctl_mr->lkey,
	};

	return rdmx__post_recv(c, &wr, 1);
}

int rdmx__br_post(rdmx_conn *c, uint32_t kind, enum rdmx__op op, void *local,
		uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)kind << 32,
		.op = op,
		.flags = RDMX__WR_SIGNALED,
		.addr = local,
		.len = len,
		.lkey = lkey,
		.remote_addr = raddr,
		.rkey = rkey,
	};
	int rc = rdmx__post_send(c, &wr, 1);

	if (rc)
		return rdmx__conn_down(c, rc, "buffered_read: posting a %s: %s",
				       op == RDMX__OP_READ ? "read" : "write", rdmx__last());
	return 0;
}

/* Tell the sender what we fetched and released. Each report in flight
 * has a source of its own (a WRITE reading words we rewrite could carry
 * bytes of two values); with every one busy it goes out when one comes
 * back. */
int rdmx__br_report(rdmx_conn *c)
{
	struct br *p = br_of(c);
	uint8_t *src;
	int rc;

	if (p->rep_out == RDMX__BR_REPS && (rc = rdmx__br_reap(c)) < 0)
		return rc;
	if (p->rep_out == RDMX__BR_REPS) {
		p->rep_again = 1;
		return 0;
	}
	src = (uint8_t *)p->ctl->rep_src[p->rep_next];
	p->rep_next = (p->rep_next + 1) % RDMX__BR_REPS;
	rdmx__put_u64(src, rdmx__cword((uint32_t)p->fetched));
	rdmx__put_u64(src + 8, rdmx__cword((uint32_t)p->rel.head));
	rdmx__put_u64(src + 16, rdmx__cword((uint32_t)p->rel.released));
	p->rep_head = p->rel.head;
	p->rep_released = p->rel.released;
	p->rep_again = 0;
	p->rep_out++;
	return rdmx__br_post(c, K_REP, RDMX__OP_WRITE, src, p->ctl_mr->lkey, 24,
		    p->peer_ctl + offsetof(struct rdmx__br_ctl, rep), p->peer_ctl_rkey);
}

/* READ the section [fetched, t) into the mirror: one READ, or two where
 * a ring is not double-mapped and it crosses the end. */
static int read_section(rdmx_conn *c, uint64_t t)
{
	struct br *p = br_of(c);
	uint64_t from = p->fetched, n = t - from, first = n, off;
	int rc = 0;

	if (!(p->peer_magic && p->mirror_magic)) {
		off = from & p->pgeo.mask;
		if (off + n > p->pgeo.size)
			first = p->pgeo.size - off;
	}
	p->target = t;
	p->rd_state = RD_DATA;
	for (uint64_t done = 0, len = first; !rc && done < n; done += len, len = n - done) {
		off = (from + done) & p->pgeo.mask;
		rc = rdmx__br_post(c, K_DATA, RDMX__OP_READ, p->mirror + off, p->mirror_mr->lkey,
			  (uint32_t)len, p->peer_ring + off, p->peer_ring_rkey);
		p->data_out += !rc;
	}
	return rc;
}

/* The tail READ is in: READ the new section, or go idle. */
static int on_tail(rdmx_conn *c)
{
	struct br *p = br_of(c);
	uint64_t w = __atomic_load_n(&p->ctl->rd_tail, __ATOMIC_ACQUIRE), t;
	uint64_t lim = p->rel.head + p->pgeo.size;
	uint32_t lo;

	p->rd_state = RD_IDLE;
	if (rdmx__cword_get(w, &lo))
		return 0; /* torn: read again (the next pull) */
	t = p->fetched + (uint32_t)(lo - (uint32_t)p->fetched);
	t &= ~(uint64_t)(RDMX__RING_ALIGN - 1);
	if (t > lim)
		t = lim; /* torn or hostile: the records will tell */
	return t > p->fetched ? read_section(c, t) : 0;
}

static int repost_bell(rdmx_conn *c, uint64_t wr_id)
{
	return rdmx__br_post_bell_recv(c, (uint32_t)wr_id % RDMX__BR_BELLS);
}

/* Take in the doorbells that came and repost their receives: 0 or
 * -errno (connection down). */
static int reap_bells(rdmx_conn *c)
{
	struct br *p = br_of(c);
	int n = rdmx__bell_reap(c, &p->bell, c->qp.rcq, repost_bell);

	if (n > 0) {
		woke(p);
		p->bells_recv += (uint64_t)n;
	}
	return n < 0 ? n : 0;
}


/*
 * The end of the whole records of the section [@from, @to) now in the
 * mirror: what may be published as fetched. A section READ ahead of its
 * records (a tail beyond what was written: torn, stale or a lie) is
 * taken only as far as its records check out, and the rest is read
 * again; publishing @to instead would let the sender's rdmx_flush
 * return, and its close lose the records the receiver then had to read
 * again (test_tail_is_a_hint). A malformed record is left in, for take()
 * to fail the connection with. The mirror is ours once the READ
 * completed: take() peeking again reads nothing the peer can still
 * change.
 */
static uint64_t whole_upto(const rdmx_conn *c, const struct br *p, uint64_t from,
			   uint64_t to)
{
	struct rdmx__ring_rec_view v;

	while (from < to) {
		int rc = rdmx__ring_peek(&p->pgeo, p->mirror + (from & p->pgeo.mask), p->pseed,
					 from, c->max_msg, 1, &v);

		if (rc < 0)
			return to;
		if (rc == 0 || from + v.size > to)
			break;
		from += v.size;
	}
	return from;
}

/* Take in the send CQ; 1 if a section came in (something to take) or a
 * READ of ours is still out (its completion comes without the sender:
 * poll again rather than sleep), 0 when the tail showed nothing new (the
 * one time a receiver waits), or -errno. */
int rdmx__br_reap(rdmx_conn *c)
{
	struct br *p = br_of(c);
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, c->qp.scq, wc, WC_BATCH), rc = 0, got = 0;

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; !rc && i < n; i++) {
		uint32_t kind = (uint32_t)(wc[i].wr_id >> 32);

		if (wc[i].status == RDMX__WC_FLUSHED)
			return rdmx__conn_flushed(c);
		if (wc[i].status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, &wc[i], kind == K_REP ? "report write" :
						   kind == K_TAIL ? "tail read" : "section read");
		if (kind == K_TAIL) {
			rc = on_tail(c);
		} else if (kind == K_DATA && !--p->data_out) {
			p->fetched = whole_upto(c, p, p->fetched, p->target);
			p->rd_state = RD_IDLE;
			got = 1;
			publish(p);
		} else if (kind == K_PUB) {
			p->pub_out = 0;
		} else if (kind == K_REP) {
			p->rep_out--;
			rc = p->rep_again ? rdmx__br_report(c) : 0;
		} else if (kind == K_BELL) {
			p->bells_out--;
		} else if (kind == K_GEN) {
			rdmx__bell_gen_done(&p->bell);
		}
	}
	if (!rc)
		rc = reap_bells(c);
	return rc < 0 ? rc : got || p->rd_state != RD_IDLE;
}
