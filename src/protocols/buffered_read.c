/* SPDX-License-Identifier: MIT */
/*
 * buffered_read: the receiver pulls. No verbs on the send path.
 *
 * The sender copies nothing and posts nothing: rdmx_msg_alloc hands out
 * the next record's payload bytes in the sender's own ring (ring_size
 * bytes, double-mapped when the system allows, registered for remote
 * READ), rdmx_send stamps header and footer around them (the ring
 * protocols' record format, core/ring.h) and publishes the new tail with
 * a release store into its control block. The receiver RDMA-READs the
 * sender's tail word, then the whole new section [fetched, tail) in ONE
 * READ (two where a ring is not double-mapped and the section crosses the
 * end) into its mirror ring at the same offsets, and hands the records out
 * in place. Its progress (bytes fetched, bytes and records released) it
 * publishes in its own control block, and writes back into the sender's
 * with one 24-byte RDMA WRITE now and then: when the released bytes since
 * the last report reach a third of the ring or the released records half
 * the sender's window (the receiver's recv_depth). A sender that would
 * block (no room, or rdmx_flush) does not wait for a report: it RDMA-READs
 * the receiver's published progress itself, so it never depends on the
 * receiving application calling in.
 *
 * Trust. The tail, the records and the progress words are written by the
 * peer and read once. rxe reads memory with a byte copy, so a tail READ
 * racing the sender's store can return a value mixing old and new bytes:
 * the tail word carries its complement, as the progress words do
 * (buffered_read.h), and a torn one is read again - never taken, as a
 * mixed value can run past what was written, and the receiver would
 * report as fetched records it read before they were there (the sender's
 * rdmx_flush would return and a close lose them). The receiver widens the
 * low 32 bits against what it fetched. A tail is still only a hint of how
 * much to READ: every record is taken only when its stamps (a hash of its
 * offset and the sender's seed) match, and a record that does not match
 * below the tail makes the receiver read the tail again from that record
 * on. A tail beyond what the ring can hold is clamped to it. A record with a length above max_msg, or
 * more records unreleased than the window, fails the connection. Progress
 * words carry their complement (buffered_read.h): a torn copy is not
 * taken, and a count behind what the sender knew is ignored.
 *
 * Sleeping receivers. The sender posts nothing, so a receiver that sleeps
 * on its wait set (wait modes block and adaptive, rdmx_conn_fd) is woken
 * by a doorbell (core/doorbell.h): before it sleeps it WRITEs its sleep
 * count into the sender's control block and, once that completed, READs
 * the tail once more; the sender, after its release store of a new tail,
 * reads that word once (a full fence between) and posts a 0-byte SEND
 * into one of the RDMX__BR_BELLS receives the receiver keeps posted when
 * it holds a count not rung for. The tail store comes before the read and
 * the count's placement before the receiver's last tail READ, so either
 * that READ sees the tail or the sender sees the count; the sender need
 * not call again. A sender waiting for room or for rdmx_flush READs the
 * receiver's progress in timed steps (nothing rings for it).
 *
 * Costs: receiving pays a READ round trip (two READs when something is
 * there) where the push protocols pay none: small-message latency is the
 * worst of the set. Many small messages go out with no work request at
 * all and come in a whole section per READ: implicit batching, the best
 * small-message rate. rdmx_flush waits until the receiver has fetched
 * everything sent (it needs a receiving peer); after that the sender may
 * close without losing a message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/doorbell.h"
#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/opts.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/qp.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/ring.h"
#include "core/wire.h"
#include "buffered_read.h"

#define BLOCK_LEN 40
#define HELLO_MAGIC 0x1
#define WC_BATCH 8
#define BUSY_TURNS 64
#define K_TAIL 1u
#define K_DATA 2u
#define K_REP 3u
#define K_PUB 4u
#define K_BELL 5u
#define K_GEN 6u
#define N_WRS (5 + RDMX__BR_REPS + RDMX__BR_BELLS) /* tail READ, two data
				   * READs, a progress READ, reports, our
				   * count's WRITE, doorbells */

enum { RD_IDLE, RD_TAIL, RD_DATA };

struct br {
	struct rdmx__br_ctl *ctl;  /* registered: the peer READs and WRITEs it */
	struct rdmx__mr *ctl_mr, *ring_mr, *mirror_mr;
	uint8_t *ring, *mirror;
	int ring_magic, mirror_magic;
	struct rdmx__ring_geo geo;        /* our ring */
	uint64_t seed;
	/* sender */
	uint64_t tail, sent;
	int pub_out;                      /* our READ of the peer's progress */
	uint64_t p_fetched, p_head, p_released; /* the peer's last report */
	uint32_t win_out;                 /* the peer's recv_depth */
	struct rdmx__one_buf ob;          /* the buffer rdmx_msg_alloc handed out */
	uint32_t bells_out;               /* our doorbell SENDs in flight */
	uint64_t bells_sent, bells_recv;  /* rdmx__br_bells() */
	int looked;                       /* the last look of a sleep is out */
	struct rdmx__bell bell;           /* our sleeps, the peer's we rang for */
	/* receiver */
	struct rdmx__ring_geo pgeo;       /* the peer's ring */
	uint64_t pseed, peer_ring, peer_ctl;
	uint32_t peer_ring_rkey, peer_ctl_rkey;
	int peer_magic;
	uint64_t rd, fetched, target;
	int rd_state, data_out;
	struct rdmx__ring_rel rel;
	int rep_out, rep_next, rep_again;
	uint64_t rep_head, rep_released;  /* what the last report said */
};

static struct br *br_of(const rdmx_conn *c)
{
	return c->priv;
}

/* ---------------------------------------------------------------- setup */

static int map_rings(rdmx_conn *c, struct br *p)
{
	size_t size = c->opts.ring_size;
	int rc;

	p->ring = rdmx__ring_map(size, 1);
	p->ring_magic = p->ring != NULL;
	if (!p->ring)
		p->ring = rdmx__ring_map(size, 0);
	p->mirror = p->ring ? rdmx__ring_map(size, 1) : NULL;
	p->mirror_magic = p->mirror != NULL;
	if (p->ring && !p->mirror)
		p->mirror = rdmx__ring_map(size, 0);
	if (!p->mirror)
		return -ENOMEM;
	rc = c->f->reg_mr(c->ep, p->ring, p->ring_magic ? 2 * size : size,
			  RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ, &p->ring_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->mirror, p->mirror_magic ? 2 * size : size,
				  RDMX__ACCESS_LOCAL, &p->mirror_mr);
	return rc;
}

/* A receive for one doorbell SEND (0 bytes; a landing of 8). */
static int post_bell_recv(rdmx_conn *c, uint32_t i)
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

static int create_queues(rdmx_conn *c)
{
	/* receives: the doorbells */
	struct rdmx__qp_want w = { .send_wr = N_WRS, .recv_wr = RDMX__BR_BELLS };
	int rc = rdmx__qp_make(c, &w);

	for (uint32_t i = 0; !rc && i < RDMX__BR_BELLS; i++)
		rc = post_bell_recv(c, i);
	return rc;
}

static void br_teardown(rdmx_conn *c)
{
	struct br *p = br_of(c);
	size_t size = c->opts.ring_size;

	if (p->ctl_mr)
		c->f->dereg_mr(p->ctl_mr);
	if (p->mirror_mr)
		c->f->dereg_mr(p->mirror_mr);
	if (p->ring_mr)
		c->f->dereg_mr(p->ring_mr);
	rdmx__ring_unmap(p->mirror, size, p->mirror_magic);
	rdmx__ring_unmap(p->ring, size, p->ring_magic);
	free(p->ctl);
	rdmx__ring_rel_free(&p->rel);
}

/* On failure the core destroys the ep (and QP) and its CQs first, then
 * calls br_teardown(), which copes with a half-made setup. */
static int br_setup(rdmx_conn *c)
{
	struct br *p = br_of(c);
	int rc;

	p->seed = rdmx__ring_seed();
	p->ctl = rdmx__alloc_buf(sizeof(*p->ctl));
	if (!p->ctl || rdmx__ring_rel_init(&p->rel, c->opts.recv_depth))
		return rdmx__fail(-ENOMEM, "buffered_read: out of memory");
	p->ctl->tail = rdmx__cword((uint32_t)0);
	rc = map_rings(c, p);
	if (!rc)
		rc = rdmx__ring_geo_init(&p->geo, c->opts.ring_size, p->ring_magic);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->ctl, sizeof(*p->ctl),
				  RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ |
				  RDMX__ACCESS_WRITE, &p->ctl_mr);
	if (!rc)
		rc = create_queues(c);
	return rc;
}

/* Block: ring address (8), rkey (4), size (4), seed (8), control block
 * address (8), rkey (4), flags (1), 3 zero bytes. */
static int br_hello_out(rdmx_conn *c, uint8_t *b, size_t cap, size_t *len)
{
	struct br *p = br_of(c);

	if (cap < BLOCK_LEN)
		return -ENOSPC;
	memset(b, 0, BLOCK_LEN);
	rdmx__put_u64(b, (uintptr_t)p->ring);
	rdmx__put_u32(b + 8, p->ring_mr->rkey);
	rdmx__put_u32(b + 12, c->opts.ring_size);
	rdmx__put_u64(b + 16, p->seed);
	rdmx__put_u64(b + 24, (uintptr_t)p->ctl);
	rdmx__put_u32(b + 32, p->ctl_mr->rkey);
	b[36] = p->ring_magic ? HELLO_MAGIC : 0;
	*len = BLOCK_LEN;
	return 0;
}

static int br_hello_in(rdmx_conn *c, const uint8_t *b, size_t len)
{
	struct br *p = br_of(c);
	uint32_t size;

	if (len != BLOCK_LEN)
		return rdmx__fail(-EPROTO, "buffered_read: %zu-byte protocol block, expected %d",
				  len, BLOCK_LEN);
	size = rdmx__get_u32(b + 12);
	p->peer_magic = b[36] & HELLO_MAGIC;
	if (rdmx__ring_geo_init(&p->pgeo, size, p->peer_magic) ||
	    size != c->opts.ring_size)
		return rdmx__fail(-EPROTO, "buffered_read: the peer's ring is %u bytes, ours %u",
				  size, c->opts.ring_size);
	p->peer_ring = rdmx__get_u64(b);
	p->peer_ring_rkey = rdmx__get_u32(b + 8);
	p->pseed = rdmx__get_u64(b + 16);
	p->peer_ctl = rdmx__get_u64(b + 24);
	p->peer_ctl_rkey = rdmx__get_u32(b + 32);
	p->win_out = c->peer_recv_depth ? c->peer_recv_depth : 1;
	return 0;
}

static int br_check_opts(const struct rdmx_protocol_ops *proto,
			 const struct rdmx_conn_opts *o, uint32_t max_msg)
{
	uint64_t rec = rdmx__ring_rec_size(max_msg);
	int rc = rdmx__check_ring_opts(o);

	if (rc)
		return rc;
	if (max_msg && 2 * rec > o->ring_size)
		return rdmx__fail(-EINVAL, "%s: ring_size %u cannot hold two records of max_msg_size %u (needs %llu bytes)",
				  proto->name, o->ring_size, max_msg,
				  (unsigned long long)(2 * rec));
	if (o->notify > RDMX_NOTIFY_POLL || o->ack != RDMX_ACK_DEFAULT)
		return rdmx__fail(-EINVAL, "%s: the receiver pulls whole sections by READ: notify %u / ack %u do not apply (only notify poll, ack default)",
				  proto->name, o->notify, o->ack);
	return 0;
}

/* ------------------------------------------------------------- receiver */

static int post(rdmx_conn *c, uint32_t kind, enum rdmx__op op, void *local,
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

static int reap(rdmx_conn *c);

/* Tell the sender what we fetched and released. Each report in flight
 * has a source of its own (a WRITE reading words we rewrite could carry
 * bytes of two values); with every one busy it goes out when one comes
 * back. */
static int report(rdmx_conn *c)
{
	struct br *p = br_of(c);
	uint8_t *src;
	int rc;

	if (p->rep_out == RDMX__BR_REPS && (rc = reap(c)) < 0)
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
	return post(c, K_REP, RDMX__OP_WRITE, src, p->ctl_mr->lkey, 24,
		    p->peer_ctl + offsetof(struct rdmx__br_ctl, rep), p->peer_ctl_rkey);
}

/* Our progress where the sender READs it. */
static void publish(struct br *p)
{
	__atomic_store_n(&p->ctl->pub[0], rdmx__cword((uint32_t)p->fetched), __ATOMIC_RELEASE);
	__atomic_store_n(&p->ctl->pub[1], rdmx__cword((uint32_t)p->rel.head), __ATOMIC_RELEASE);
	__atomic_store_n(&p->ctl->pub[2], rdmx__cword((uint32_t)p->rel.released), __ATOMIC_RELEASE);
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
		rc = post(c, K_DATA, RDMX__OP_READ, p->mirror + off, p->mirror_mr->lkey,
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

/* A doorbell came or a record was taken: pull again, a later sleep is a
 * new one. */
static void woke(struct br *p)
{
	rdmx__bell_woke(&p->bell);
	p->looked = 0;
}

static int repost_bell(rdmx_conn *c, uint64_t wr_id)
{
	return post_bell_recv(c, (uint32_t)wr_id % RDMX__BR_BELLS);
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

/* ops->sleep_announce: publish our sleep (core/doorbell.h). The last look
 * is a tail READ posted after our count completed: with a READ of ours
 * out, sleep (its completion wakes us) and decide after it. */
static int br_sleep_announce(rdmx_conn *c)
{
	struct br *p = br_of(c);
	const struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_GEN << 32,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->ctl->gen_src,
		.len = sizeof(uint64_t),
		.lkey = p->ctl_mr->lkey,
		.remote_addr = p->peer_ctl + offsetof(struct rdmx__br_ctl, sleep),
		.rkey = p->peer_ctl_rkey,
	};
	int rc = reap(c);

	if (rc < 0 || p->rd_state != RD_IDLE)
		return rc < 0 ? rc : 0;
	return rdmx__bell_announce(c, &p->bell, &p->ctl->gen_src, &wr);
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
static int reap(rdmx_conn *c)
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
			rc = p->rep_again ? report(c) : 0;
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

/* Read the peer's tail once nothing fetched is left to take. Once our
 * sleep is published, only once: the last look after our count is in
 * the peer's memory (core/doorbell.h); then the doorbell says when. */
static int pull(rdmx_conn *c)
{
	struct br *p = br_of(c);

	if (p->rd_state != RD_IDLE || p->rd < p->fetched)
		return 0;
	if (p->bell.announced) {
		if (p->bell.announced != RDMX__BELL_PLACED || p->looked)
			return 0;
		p->looked = 1;
	}
	p->rd_state = RD_TAIL;
	return post(c, K_TAIL, RDMX__OP_READ, &p->ctl->rd_tail, p->ctl_mr->lkey, 8,
		    p->peer_ctl + offsetof(struct rdmx__br_ctl, tail), p->peer_ctl_rkey);
}

/* 1 with the next record in @m, 0 none fetched, -EPROTO. */
static int take(rdmx_conn *c, struct rdmx_msg *m)
{
	struct br *p = br_of(c);
	struct rdmx__ring_rec_view v;
	int64_t seq;
	int rc;

	for (;;) {
		if (p->rd >= p->fetched)
			return 0;
		rc = rdmx__ring_peek(&p->pgeo, p->mirror + (p->rd & p->pgeo.mask),
				     p->pseed, p->rd, c->max_msg, 1, &v);
		if (rc < 0)
			return rc;
		if (rc == 0 || p->rd + v.size > p->fetched) {
			p->fetched = p->rd; /* a torn tail: read it again */
			return 0;
		}
		if (!(v.flags & RDMX__RING_REC_PAD))
			break;
		p->rd += v.size;
	}
	seq = rdmx__ring_rel_push(&p->rel, p->rd + v.size);
	if (seq < 0)
		return rdmx__fail(-EPROTO, "buffered_read: the peer overran the window of %u messages",
				  p->rel.cap);
	m->data = p->mirror + ((p->rd + RDMX__RING_HDR) & p->pgeo.mask);
	m->len = v.len;
	m->cap = v.len;
	m->imm = (v.flags & RDMX__RING_REC_IMM) ? v.imm : 0;
	m->flags = (v.flags & RDMX__RING_REC_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(m, c, RDMX__MSG_RECV, (uint64_t)seq);
	p->rd += v.size;
	woke(p); /* a later sleep is a new one */
	return 1;
}

/* Pull, take in completions; as reap(). */
static int progress(rdmx_conn *c)
{
	int rc = pull(c);

	return rc ? rc : reap(c);
}

/* The wait step with a READ of ours out: it completes within a round
 * trip, so nap as short as a park goes rather than sleep on the wait set
 * and pay a wake-up for it (nothing out: the idle step sleeps, a doorbell
 * wakes it); the naps do not lengthen the idle step's parks. */
static int nap(rdmx_conn *c, struct rdmx__deadline *d)
{
	unsigned park_us = d->park_us;
	int rc;

	d->timed = 1;
	d->park_us = 0;
	rc = rdmx__recv_idle(c, d);
	d->timed = 0;
	d->park_us = park_us;
	return rc;
}

static int br_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct br *p = br_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (unsigned i = 1;; i++) {
		rc = take(c, m);
		if (rc > 0)
			return 0;
		if (rc < 0)
			return rdmx__conn_down(c, rc, "%s", rdmx__last());
		rc = progress(c);
		/* a section came in: take it before any error or check of the
		 * peer. Its progress is published, so the sender's rdmx_flush
		 * may return and its close come at once, and the same poll
		 * may hold the flushed completions that the close caused:
		 * returning that error first said "closed by peer" with every
		 * message fetched (conformance's peer close under TSan, 2 runs
		 * in 16, 0 of 40 delivered) */
		if (p->rd < p->fetched)
			continue;
		if (rc < 0)
			return rc;
		/* a READ of ours out: poll again, but every BUSY_TURNS the wait
		 * step runs (the deadline, the peer's liveness: a tail that
		 * keeps promising records that never check out must not spin
		 * past the caller's timeout) */
		if (rc > 0 && i % BUSY_TURNS)
			continue;
		if ((rc = rc > 0 ? nap(c, &d) : rdmx__recv_idle(c, &d)))
			return rc;
	}
}

/* After a release: report when a third of the ring or half the sender's
 * window was released since the last report. */
static int maybe_report(rdmx_conn *c)
{
	struct br *p = br_of(c);

	publish(p);
	if (3 * (p->rel.head - p->rep_head) >= p->pgeo.size ||
	    2 * (p->rel.released - p->rep_released) >= p->rel.cap)
		return report(c);
	return 0;
}

/* --------------------------------------------------------------- sender */

/* Widen progress word @w against our 64-bit total @ours into *@v: kept
 * when torn (halves disagree) or behind what we knew. */
static void widen(uint64_t w, uint64_t ours, uint64_t *v)
{
	uint32_t n, behind;
	uint64_t full;

	if (rdmx__cword_get(w, &n))
		return;
	behind = (uint32_t)ours - n;
	if (behind > UINT32_MAX / 2)
		return; /* ahead of what we sent: not a count of ours */
	full = ours - behind;
	if (full > *v)
		*v = full;
}

/* Take in the peer's progress, as reported (rep) and as read (rd_pub),
 * each word once. */
static void refresh(struct br *p)
{
	for (int i = 0; i < 2; i++) {
		const uint64_t *w = i ? p->ctl->rd_pub : p->ctl->rep;

		widen(__atomic_load_n(&w[0], __ATOMIC_ACQUIRE), p->tail, &p->p_fetched);
		widen(__atomic_load_n(&w[1], __ATOMIC_ACQUIRE), p->tail, &p->p_head);
		widen(__atomic_load_n(&w[2], __ATOMIC_ACQUIRE), p->sent, &p->p_released);
	}
}

static int has_room(const struct br *p, uint64_t rsize)
{
	return p->sent - p->p_released < p->win_out &&
	       rdmx__ring_fits(&p->geo, p->tail, p->p_head, rsize);
}

static int fetched_all(const struct br *p, uint64_t rsize)
{
	(void)rsize;
	return p->p_fetched >= p->tail;
}

/* READ the peer's published progress (one READ at a time). */
static int read_progress(rdmx_conn *c)
{
	struct br *p = br_of(c);

	if (p->pub_out)
		return 0;
	p->pub_out = 1;
	return post(c, K_PUB, RDMX__OP_READ, p->ctl->rd_pub, p->ctl_mr->lkey, 24,
		    p->peer_ctl + offsetof(struct rdmx__br_ctl, pub), p->peer_ctl_rkey);
}

/* Wait until @until holds, READing the receiver's progress meanwhile;
 * bounded by @timeout_ms and the connection's health. */
static int wait_for(rdmx_conn *c, uint64_t rsize, int timeout_ms,
		    int (*until)(const struct br *, uint64_t))
{
	struct br *p = br_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	d.timed = 1; /* progress is READ: no completion announces it */
	for (;;) {
		refresh(p);
		if (until(p, rsize))
			return 0;
		rc = read_progress(c);
		if (!rc)
			rc = reap(c);
		if (rc < 0)
			return rc;
		if (c->state == RDMX__CONN_DOWN)
			return rdmx__fail(c->down_rc, "%s", c->err.msg);
		if ((rc = rdmx__conn_wait(c, &d)))
			return rc;
	}
}

static int br_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			int timeout_ms)
{
	struct br *p = br_of(c);
	uint64_t rsize = rdmx__ring_rec_size(size), pad, start;
	int rc = rdmx__one_buf_busy(c, &p->ob);

	if (rc)
		return rc;
	refresh(p);
	if (!has_room(p, rsize) && (rc = wait_for(c, rsize, timeout_ms, has_room)))
		return rc;
	start = rdmx__ring_place(&p->geo, p->tail, rsize, &pad);
	rdmx__one_buf_give(c, &p->ob, m, p->ring + ((start + RDMX__RING_HDR) & p->geo.mask),
			   start, size);
	return 0;
}

static int live_alloc(rdmx_conn *c, const struct rdmx_msg *m)
{
	return rdmx__one_buf_is(c, &br_of(c)->ob, m);
}

/* The receiver published a sleep we did not ring for: a doorbell. With
 * every doorbell in flight even after a reap, the next send rings. */
static int ring_if_asleep(rdmx_conn *c)
{
	struct br *p = br_of(c);
	const struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_BELL << 32,
		.op = RDMX__OP_SEND,
		.flags = RDMX__WR_SIGNALED,
	};
	int rc;

	if (p->bells_out >= RDMX__BR_BELLS && (rc = reap(c)) < 0)
		return rc;
	if (p->bells_out >= RDMX__BR_BELLS)
		return 0;
	rc = rdmx__bell_ring(c, &p->bell, &p->ctl->sleep, &wr);
	p->bells_out += rc > 0;
	p->bells_sent += rc > 0;
	return rc < 0 ? rc : 0;
}

static int br_send(rdmx_conn *c, struct rdmx_msg *m)
{
	struct br *p = br_of(c);
	uint64_t start = p->ob.start;

	if (!live_alloc(c, m))
		return rdmx__fail(-EINVAL, "buffered_read: not a message from rdmx_msg_alloc on this connection");
	if (m->len > p->ob.cap)
		return rdmx__fail(-EMSGSIZE, "buffered_read: %zu bytes in a %zu-byte buffer",
				  (size_t)m->len, p->ob.cap);
	if (start != p->tail)
		rdmx__ring_put_pad(p->ring + (p->tail & p->geo.mask), p->seed, p->tail);
	rdmx__ring_put_rec(p->ring + (start & p->geo.mask), p->seed, start,
			   (uint32_t)m->len, m->imm,
			   (m->flags & RDMX_MSG_IMM) ? RDMX__RING_REC_IMM : 0);
	p->tail = start + rdmx__ring_rec_size(m->len);
	p->sent++;
	p->ob.live = 0;
	/* seq_cst: the tail is visible before we read the sleep word */
	__atomic_store_n(&p->ctl->tail, rdmx__cword((uint32_t)p->tail), __ATOMIC_SEQ_CST);
	rdmx__msg_spend(m);
	(void)ring_if_asleep(c); /* down on failure: the next call says */
	return 0;
}

static int br_flush(rdmx_conn *c, int timeout_ms)
{
	struct br *p = br_of(c);

	refresh(p);
	if (fetched_all(p, 0))
		return 0;
	return wait_for(c, 0, timeout_ms, fetched_all);
}

/* A send is complete once the receiver fetched it: all of them when its
 * progress shows everything, else (conservatively) those it released.
 * One step: take in reports, READ the receiver's progress if none is
 * out, reap. */
static int br_sends_done(rdmx_conn *c, uint64_t *done)
{
	struct br *p = br_of(c);
	int rc;

	refresh(p);
	*done = p->p_fetched >= p->tail ? p->sent : p->p_released;
	if (*done == p->sent)
		return 0;
	rc = read_progress(c);
	return rc ? rc : reap(c);
}

/* The first message as br_recv takes it, then the records already
 * fetched; no READ is waited for. */
static int br_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			int timeout_ms, int *later)
{
	int n = 1, rc = br_recv(c, m, timeout_ms);

	if (rc)
		return rc;
	while (n < max && (rc = take(c, &m[n])) > 0)
		n++;
	if (rc < 0)
		*later = rdmx__conn_down(c, rc, "%s", rdmx__last());
	return n;
}

/* Give back @m without reporting: 1 if the released prefix grew, 0, or
 * -EINVAL. */
static int release_one(rdmx_conn *c, struct rdmx_msg *m)
{
	struct br *p = br_of(c);

	return rdmx__one_buf_release(c, &p->ob, &p->rel, m);
}

/* A report that cannot go out took the connection down: the next call
 * says so; the messages are released either way. */
static void released(rdmx_conn *c)
{
	if (c->state != RDMX__CONN_DOWN)
		(void)maybe_report(c);
}

static int br_release(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc = release_one(c, m);

	if (rc > 0)
		released(c);
	return rc < 0 ? rc : 0;
}

/* One report (or none) for the whole vector. */
static int br_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	int first = 0, grew = 0;

	for (int i = 0; i < n; i++) {
		int rc = release_one(c, &m[i]);

		grew |= rc > 0;
		if (rc < 0 && !first)
			first = rc;
	}
	if (grew)
		released(c);
	return first;
}

struct rdmx__br_ctl *rdmx__br_ctl_of(rdmx_conn *c)
{
	return br_of(c)->ctl;
}

void rdmx__br_bells(rdmx_conn *c, uint64_t *sent, uint64_t *recv)
{
	*sent = br_of(c)->bells_sent;
	*recv = br_of(c)->bells_recv;
}

uint8_t *rdmx__br_ring(rdmx_conn *c, uint64_t *seed)
{
	*seed = br_of(c)->seed;
	return br_of(c)->ring;
}

/* Registered per connection: two rings (the mirror and ours). */
static uint64_t br_mem_estimate(const rdmx_conn *c)
{
	return 2 * (uint64_t)c->opts.ring_size + sizeof(struct rdmx__br_ctl);
}

static const struct rdmx__conn_ops br_conn_ops = {
	.priv_size = sizeof(struct br),
	.check_opts = br_check_opts,
	.mem_estimate = br_mem_estimate,
	.setup = br_setup,
	.hello_out = br_hello_out,
	.hello_in = br_hello_in,
	.teardown = br_teardown,
};

static const struct rdmx__data_ops br_data_ops = {
	.msg_alloc = br_msg_alloc,
	.send = br_send,
	.send_more = rdmx__default_send_more,
	.send_from = rdmx__default_send_from,
	.sendv = rdmx__default_sendv,
	.flush = br_flush,
	.sends_done = br_sends_done,
	.recv = br_recv,
	.recv_many = br_recv_many,
	.release = br_release,
	.release_many = br_release_many,
	.own_wc = rdmx__default_own_wc,
	.sleep_announce = br_sleep_announce,
};

const struct rdmx_protocol_ops rdmx__proto_buffered_read = {
	.name = "buffered_read",
	.id = RDMX__PROTO_BUFFERED_READ,
	.conn = &br_conn_ops,
	.data = &br_data_ops,
	.group = &rdmx__group_none,
};
