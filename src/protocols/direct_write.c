/* SPDX-License-Identifier: MIT */
/*
 * direct_write: zero copy on both sides, no receive work requests.
 *
 * Each side registers recv_depth receive buffers for remote WRITE and a
 * descriptor ring of recv_depth 16-byte entries, also remote-writable.
 * The receiver ADVERTISES a free buffer by writing a descriptor
 * {buffer index, descriptor number} with one (inline) RDMA WRITE into the
 * next entry of the SENDER's descriptor ring; the sender takes the
 * descriptors in order and RDMA-WRITEs each message straight from its
 * send buffer (the core's send pool, filled in place by the user) into the
 * advertised buffer. The message is laid out so that its signal is in the
 * bytes written last: the payload ends where a 24-byte footer {len, imm,
 * flags, reserved, message number} begins, and the footer sits at the
 * buffer's end; the payload starts len rounded up to 8 bytes before it
 * (8-byte aligned for the user). The receiver polls the footer of the
 * buffer it advertised for its next message number, hands the payload out
 * in place, and advertises the buffer again when the user releases it.
 *
 * Why a message number and not a valid mark cleared on release: the
 * buffer's last footer carries an older number, so nothing is cleared and
 * a footer can never be taken for a later message (64 bits do not wrap).
 * The footer's number is its last 8 bytes: RDMA places a WRITE in address
 * order (rxe byte by byte), so once they read as the number wanted the
 * footer and payload before them are in place. Descriptors carry their
 * number last for the same reason, and their buffer index names the
 * buffer instead of an address: the sender checks it against the count
 * the hello gave, and an address is the receiver's base + index * slot.
 *
 * Initial state: both sides know, from the hellos, that buffers
 * 0..n-1 are advertised as descriptors 1..n (n = the receiver's buffers,
 * at most the sender's descriptor ring): no WRITE at connect. Flow control
 * is the descriptors: a sender with none left waits in rdmx_msg_alloc
 * (bounded by its timeout) until the receiver releases a message.
 *
 * Peer-written memory is read once: a descriptor is copied out when its
 * number appears and checked (its index < n) before it goes to the local
 * queue the sender uses; a footer is copied out once its number appears
 * and checked (len <= max_msg, known flags only). A bad one takes this
 * connection down with a message and touches no other.
 *
 * Sleeping waits. Both ends poll memory the peer WRITEs without a
 * completion here: the receiver a footer, a sender out of descriptors
 * its descriptor ring. A wait that sleeps in the kernel (wait modes block
 * and adaptive) is woken by a doorbell (core/doorbell.h, the one
 * mechanism), as write_ring_conn.c's receivers are:
 * before it sleeps on its wait set (ops->sleep_announce) a side WRITEs
 * its sleep count (gen, +1 per sleep) into the peer's sleep word and polls
 * once more; a side that posted a message or a descriptor reads its own
 * sleep word once and, holding a count it has not rung for, posts a 0-byte
 * SEND after that WRITE (RC order: it completes at the peer after the
 * WRITE is placed) into one of the N_BELL receives each side keeps posted.
 * Its completion wakes the sleeper, which reposts it. The words live after
 * the descriptor sources in the same registration (the tail below): the
 * peer's is at its descriptor ring + (its recv_depth + its buffers) * 16.
 * The race (a WRITE crossing the published count in flight) is closed
 * for a peer that keeps calling: the sleeper polls once more only after
 * its count's WRITE completed, i.e. is in the peer's memory, and the peer
 * also reads its word when a WRITE of its completes (in its reap), i.e.
 * is in ours - so either the last poll sees that WRITE or the peer sees
 * the count. A peer that posts and never calls again rings only at post
 * time, which can miss; the sleeper then wakes at its next WRITE or the
 * wait set's backstop (RDMX__WAIT_BACKSTOP_MS). rdmx_conn_fd's contract
 * (rdmx.h) asks the sending side to keep calling, or waiting, on its
 * connection while its sends complete.
 *
 *   tail (after dn + nrecv descriptors)  | offset | written by
 *   sleep word: the peer's sleep count   |  0     | the peer (read once)
 *   source of our count's WRITE          |  8     | us
 *   landing of doorbell SENDs (0 bytes)  | 16     | nobody
 *
 * Bursts: sends marked RDMX_SEND_MORE are chained by the send pool and
 * go out in one post (one doorbell), the doorbell SEND behind them.
 *
 * Costs: a descriptor WRITE per message the receiver releases (one signaled
 * work request; they are queued when the send queue's descriptor slots are
 * busy and go out at the next call on the connection); per connection,
 * recv_depth buffers of max_msg + 24 bytes.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/doorbell.h"
#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/qp.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/sendpool.h"
#include "core/wire.h"
#include "direct_write.h"

#define FOOT RDMX__DW_FOOT   /* len, imm, flags, reserved, message number */
#define FOOT_SEQ 16u
#define DESC RDMX__DW_DESC   /* index, reserved, descriptor number */
#define DESC_SEQ 8u
#define F_IMM 1u
#define BLOCK_LEN 32
#define WC_BATCH 16
#define K_DATA 0u            /* wr_id >> 32 of the pool's data WRITEs */
#define K_DESC 1u            /* of a descriptor WRITE */
#define K_BELL 2u            /* of a doorbell SEND */
#define K_GEN 3u             /* of our sleep count's WRITE */
#define N_BELL 4u            /* doorbell receives posted */
#define TAIL 24u             /* sleep word, its source, the bells' landing */

enum { BUF_ADV, BUF_HELD, BUF_FREE }; /* receive buffers */

struct dw {
	struct rdmx__sendpool sp;  /* send buffers: data WRITEs */
	/* receiver */
	uint8_t *rbuf;             /* nrecv buffers of rslot bytes */
	struct rdmx__mr *rmr;
	size_t rslot;
	uint32_t nrecv;
	uint8_t *rstate;           /* BUF_* per buffer */
	uint32_t *adv;             /* adv[(number - 1) % adv_n]: its buffer */
	uint32_t adv_n;            /* buffers in use: min(nrecv, peer's ring) */
	uint64_t rx_seq;           /* the next message's number */
	uint64_t adv_seq;          /* the next descriptor's number */
	uint32_t *pend;            /* released, descriptor not yet posted */
	uint32_t pend_head, pend_n;
	uint8_t *dsrc;             /* sources of descriptor WRITEs */
	uint32_t desc_out, desc_next;
	/* sender */
	uint8_t *dring;            /* the peer's descriptors for us */
	struct rdmx__mr *dmr;      /* dring and dsrc */
	uint32_t dn;               /* dring entries (our recv_depth) */
	uint32_t *txq;             /* checked buffer indexes, in order */
	uint64_t got;              /* descriptors taken so far */
	uint64_t tx_seq;           /* the next message's number */
	uint32_t tx_n;             /* the peer's buffers in use */
	uint64_t peer_rbuf, peer_dring;
	uint32_t peer_rkey, peer_drkey, peer_nrecv, peer_dn;
	size_t peer_rslot;
	/* sleeping (the tail) */
	uint64_t *tail;            /* sleep word, gen source, landing */
	struct rdmx__bell bell;    /* our sleeps, the peer's we rang for */
	uint32_t bells_out;        /* our doorbell SENDs in flight */
};
RDMX__SENDPOOL_FIRST(struct dw, sp);

static struct dw *dw_of(rdmx_conn *c)
{
	return c->priv;
}

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static int reap(rdmx_conn *c);
static int take_sends(rdmx_conn *c, int *placed);
static int ring_if_asleep(rdmx_conn *c);
static int dw_room(rdmx_conn *c);

static const struct rdmx__sendpool_ops dw_pool_ops = {
	.reap = reap,
	.room = dw_room,
};

/* ---------------------------------------------------------------- setup */

/* Bytes of the descriptor registration: ring, sources, tail. */
static size_t dmr_len(const struct dw *p)
{
	return (size_t)(p->dn + p->nrecv) * DESC + TAIL;
}

static int alloc_recv(rdmx_conn *c, struct dw *p)
{
	int rc;

	p->rbuf = rdmx__alloc_buf(p->rslot * p->nrecv);
	p->rstate = calloc(p->nrecv, 1);
	p->adv = calloc(p->nrecv, sizeof(*p->adv));
	p->pend = calloc(p->nrecv, sizeof(*p->pend));
	p->txq = calloc(p->dn, sizeof(*p->txq));
	/* dring, one descriptor source per receive buffer, the tail */
	p->dring = rdmx__alloc_buf(dmr_len(p));
	if (!p->rbuf || !p->rstate || !p->adv || !p->pend || !p->txq || !p->dring)
		return rdmx__fail(-ENOMEM, "direct_write: out of memory for %u receive buffers of %zu bytes",
				  p->nrecv, p->rslot);
	p->dsrc = p->dring + (size_t)p->dn * DESC;
	p->tail = (uint64_t *)(p->dsrc + (size_t)p->nrecv * DESC);
	rc = c->f->reg_mr(c->ep, p->rbuf, p->rslot * p->nrecv,
			  RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE, &p->rmr);
	if (rc)
		return rc;
	return c->f->reg_mr(c->ep, p->dring, dmr_len(p),
			    RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE, &p->dmr);
}

/* A receive for one doorbell SEND (0 bytes; a landing of 8). */
static int post_bell_recv(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_BELL << 32,
		.op = RDMX__OP_RECV,
		.addr = &p->tail[2],
		.len = sizeof(uint64_t),
		.lkey = p->dmr->lkey,
	};

	return rdmx__post_recv(c, &wr, 1);
}

static int create_queues(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	/* data WRITEs, a descriptor WRITE per buffer, doorbells, our count;
	 * receives: doorbells only */
	uint32_t swr = p->sp.n + p->nrecv + N_BELL + 1;
	struct rdmx__qp_want w = { .send_wr = swr, .recv_wr = N_BELL };
	int rc = rdmx__qp_make(c, &w);

	for (uint32_t i = 0; !rc && i < N_BELL; i++)
		rc = post_bell_recv(c);
	return rc;
}

static void dw_teardown(rdmx_conn *c)
{
	struct dw *p = dw_of(c);

	if (p->dmr)
		c->f->dereg_mr(p->dmr);
	if (p->rmr)
		c->f->dereg_mr(p->rmr);
	free(p->rbuf);
	free(p->rstate);
	free(p->adv);
	free(p->pend);
	free(p->txq);
	free(p->dring);
	rdmx__sendpool_unmake(c, &p->sp);
}

/* On failure the core destroys the ep (and QP) and its CQs first, then
 * calls dw_teardown(), which copes with a half-made setup. */
static int dw_setup(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	int rc;

	p->rslot = round8(c->max_msg) + FOOT;
	p->nrecv = c->opts.recv_depth;
	p->dn = c->opts.recv_depth;
	p->sp = (struct rdmx__sendpool){
		.ops = &dw_pool_ops,
		.who = "direct_write",
		.post_what = "a write",
		.n = c->opts.send_depth,
		.stride = round8(c->max_msg) + FOOT,
		.wr_kind = K_DATA,
	};
	rc = rdmx__sendpool_make(c, &p->sp, RDMX__ACCESS_LOCAL);
	if (!rc)
		rc = alloc_recv(c, p);
	if (!rc)
		rc = create_queues(c);
	return rc;
}

/*
 * Protocol block (32 bytes): receive buffers' address (8), rkey (4),
 * count (4), slot size (4); descriptor ring's address (8), rkey (4).
 * The descriptor ring has recv_depth entries, the hello's recv_depth.
 */
static int dw_hello_out(rdmx_conn *c, uint8_t *b, size_t cap, size_t *len)
{
	struct dw *p = dw_of(c);

	if (cap < BLOCK_LEN)
		return -ENOSPC;
	rdmx__put_u64(b, (uintptr_t)p->rbuf);
	rdmx__put_u32(b + 8, p->rmr->rkey);
	rdmx__put_u32(b + 12, p->nrecv);
	rdmx__put_u32(b + 16, (uint32_t)p->rslot);
	rdmx__put_u64(b + 20, (uintptr_t)p->dring);
	rdmx__put_u32(b + 28, p->dmr->rkey);
	*len = BLOCK_LEN;
	return 0;
}

/* Both sides' view of the first n advertised buffers. */
static void start_window(struct dw *p)
{
	p->adv_n = p->nrecv < p->peer_dn ? p->nrecv : p->peer_dn;
	p->tx_n = p->peer_nrecv < p->dn ? p->peer_nrecv : p->dn;
	for (uint32_t i = 0; i < p->adv_n; i++)
		p->adv[i] = i;
	for (uint32_t i = p->adv_n; i < p->nrecv; i++)
		p->rstate[i] = BUF_FREE; /* never used: the peer's ring is smaller */
	for (uint32_t i = 0; i < p->tx_n; i++)
		p->txq[i] = i;
	p->got = p->tx_n;
	p->rx_seq = 1;
	p->tx_seq = 1;
	p->adv_seq = (uint64_t)p->adv_n + 1;
}

static int dw_hello_in(rdmx_conn *c, const uint8_t *b, size_t len)
{
	struct dw *p = dw_of(c);

	if (len != BLOCK_LEN)
		return rdmx__fail(-EPROTO, "direct_write: %zu-byte protocol block, expected %d",
				  len, BLOCK_LEN);
	p->peer_rbuf = rdmx__get_u64(b);
	p->peer_rkey = rdmx__get_u32(b + 8);
	p->peer_nrecv = rdmx__get_u32(b + 12);
	p->peer_rslot = rdmx__get_u32(b + 16);
	p->peer_dring = rdmx__get_u64(b + 20);
	p->peer_drkey = rdmx__get_u32(b + 28);
	p->peer_dn = c->peer_recv_depth;
	if (!p->peer_nrecv || p->peer_nrecv > UINT16_MAX || !p->peer_dn)
		return rdmx__fail(-EPROTO, "direct_write: the peer offers %u receive buffers and %u descriptors",
				  p->peer_nrecv, p->peer_dn);
	if (p->peer_rslot < round8(c->max_msg) + FOOT)
		return rdmx__fail(-EPROTO, "direct_write: the peer's %zu-byte buffers cannot take %u-byte messages",
				  p->peer_rslot, c->max_msg);
	start_window(p);
	return 0;
}

/* ---------------------------------------------------------- descriptors */

/* Post the descriptor of the next number for buffer @idx. */
static int post_desc(rdmx_conn *c, uint32_t idx)
{
	struct dw *p = dw_of(c);
	uint64_t n = p->adv_seq;
	uint8_t *src = p->dsrc + (size_t)p->desc_next * DESC;
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_DESC << 32,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = src,
		.len = DESC,
		.lkey = p->dmr->lkey,
		.remote_addr = p->peer_dring + ((n - 1) % p->peer_dn) * DESC,
		.rkey = p->peer_drkey,
	};
	int rc;

	rdmx__put_u32(src, idx);
	rdmx__put_u32(src + 4, 0);
	rdmx__put_u64(src + DESC_SEQ, n);
	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a descriptor write: %s", rdmx__last());
	p->adv[(n - 1) % p->adv_n] = idx;
	p->rstate[idx] = BUF_ADV;
	p->adv_seq++;
	p->desc_out++;
	p->desc_next = (p->desc_next + 1) % p->nrecv;
	return ring_if_asleep(c); /* a sender may sleep for it */
}

/* Advertise the released buffers that wait, while the send queue has room. */
static int post_pending(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	int rc;

	while (p->pend_n && p->desc_out < p->nrecv) {
		rc = post_desc(c, p->pend[p->pend_head]);
		if (rc)
			return rc;
		p->pend_head = (p->pend_head + 1) % p->nrecv;
		p->pend_n--;
	}
	return 0;
}

/* rdmx__bell_reap's repost: a doorbell receive again. */
static int repost_bell(rdmx_conn *c, uint64_t wr_id)
{
	(void)wr_id;
	return post_bell_recv(c);
}

/* The peer published a sleep we did not ring for: post a 0-byte SEND
 * after what we wrote (RC order: it completes at the peer after the
 * WRITEs before it are placed; core/doorbell.h). A doorbell that finds
 * every slot in flight, even after a poll of the send CQ, waits for the
 * next WRITE (the sleep word is read then). */
static int ring_if_asleep(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_BELL << 32,
		.op = RDMX__OP_SEND,
		.flags = RDMX__WR_SIGNALED,
	};
	int placed = 0, rc;

	/* every doorbell slot in flight: take their completions (a side
	 * that finds its messages waiting never reaps otherwise) */
	if (p->bells_out >= N_BELL && (rc = take_sends(c, &placed)) < 0)
		return rc;
	if (p->bells_out >= N_BELL)
		return 0;
	rc = rdmx__bell_ring(c, &p->bell, &p->tail[0], &wr);
	if (rc > 0)
		p->bells_out++;
	return rc < 0 ? rc : 0;
}

/* ops->sleep_announce: publish our sleep in the peer's sleep word
 * (rdmx__bell_announce, core/doorbell.h): a message the peer's WRITE
 * placed after our last poll completes there after our count is in
 * place, and its reap rings. 0: sleep. */
static int dw_sleep_announce(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	struct rdmx__wr wr = {
		.wr_id = (uint64_t)K_GEN << 32,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->tail[1],
		.len = sizeof(uint64_t),
		.lkey = p->dmr->lkey,
		.remote_addr = p->peer_dring + ((uint64_t)p->peer_dn + p->peer_nrecv) * DESC,
		.rkey = p->peer_drkey,
	};
	int rc;

	if (c->state != RDMX__CONN_UP)
		return 0;
	rc = reap(c);
	if (rc)
		return rc;
	return rdmx__bell_announce(c, &p->bell, &p->tail[1], &wr);
}

/* Take in the send completions: data WRITEs to the pool, descriptor
 * WRITEs free their slot, doorbells and our count theirs; then the
 * doorbells that came, then post what waits for a slot. */
/* Poll the send CQ once and account what completed; *@placed |= 1 when
 * a message or descriptor WRITE was among it. How many, or -errno. */
static int take_sends(rdmx_conn *c, int *placed)
{
	struct dw *p = dw_of(c);
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, c->qp.scq, wc, WC_BATCH);

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++) {
		uint32_t kind = (uint32_t)(wc[i].wr_id >> 32);

		if (wc[i].status == RDMX__WC_FLUSHED)
			return rdmx__conn_flushed(c);
		if (wc[i].status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, &wc[i], kind == K_DESC ?
						   "descriptor write" : "write");
		*placed |= kind == K_DATA || kind == K_DESC;
		if (kind == K_DESC)
			p->desc_out--;
		else if (kind == K_BELL)
			p->bells_out--;
		else if (kind == K_GEN)
			rdmx__bell_gen_done(&p->bell);
		else
			rdmx__sendpool_sent(&p->sp, (uint32_t)wc[i].wr_id);
	}
	return n;
}

static int reap(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	int placed = 0, n = take_sends(c, &placed), rc;

	if (n < 0)
		return n;
	/* what completed is in the peer's memory: a sleep it published
	 * before its last poll is in ours now (dw_sleep_announce) */
	rc = placed ? ring_if_asleep(c) : 0;
	if (!rc)
		rc = rdmx__bell_reap(c, &p->bell, c->qp.rcq, repost_bell);
	if (rc < 0)
		return rc;
	if (p->pend_n && (rc = post_pending(c)))
		return rc;
	return n;
}

/* Copy out the descriptors the peer wrote since the last look, each once,
 * checked; -EPROTO (connection down) for a bad one. */
static int take_descs(rdmx_conn *c)
{
	struct dw *p = dw_of(c);

	for (;;) {
		const uint8_t *e = p->dring + (p->got % p->dn) * DESC;
		uint64_t n = le64toh(__atomic_load_n((const uint64_t *)(e + DESC_SEQ),
						     __ATOMIC_ACQUIRE));
		uint32_t idx;

		if (n != p->got + 1)
			return 0;
		idx = rdmx__get_u32(e);
		if (idx >= p->tx_n)
			return rdmx__conn_down(c, -EPROTO,
					       "direct_write: descriptor %llu names buffer %u of %u",
					       (unsigned long long)n, idx, p->tx_n);
		p->txq[p->got % p->dn] = idx;
		p->got++;
	}
}

/* The pool's room hook: a descriptor for every message allocated. */
static int dw_room(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	uint64_t want = p->tx_seq + p->sp.nalloc;
	int rc;

	if (p->got >= want)
		return 1;
	rc = take_descs(c);
	if (rc)
		return rc;
	return p->got >= want;
}

/* --------------------------------------------------------------- sending */

/* rdmx_send, held for a chain with @more (RDMX_SEND_MORE: the pool rings
 * the chain with the next send without it, a flush, an alloc that would
 * wait, a token wait, or at its bound; sendpool.h). A doorbell goes
 * behind the chain, once it is rung: rung by the pool on its own, the
 * chain's completion makes the reap ring (ring_if_asleep). */
static int dw_send_with(rdmx_conn *c, struct rdmx_msg *m, int more)
{
	struct dw *p = dw_of(c);
	int64_t idx = rdmx__sendpool_slot(c, &p->sp, m);
	size_t body;
	uint8_t *f;
	uint32_t buf;
	struct rdmx__wr wr = { .op = RDMX__OP_WRITE };
	int rc;

	if (idx < 0)
		return rdmx__fail(-EINVAL, "direct_write: not a message from rdmx_msg_alloc on this connection");
	if (m->len > c->max_msg)
		return rdmx__fail(-EMSGSIZE, "direct_write: %zu bytes, above max_msg %u",
				  (size_t)m->len, c->max_msg);
	if (p->got < p->tx_seq) /* alloc saw a descriptor for it */
		return rdmx__conn_down(c, -EPROTO, "direct_write: no descriptor for message %llu",
				       (unsigned long long)p->tx_seq);
	buf = p->txq[(p->tx_seq - 1) % p->dn];
	body = round8(m->len);
	f = (uint8_t *)m->data + body;
	memset((uint8_t *)m->data + m->len, 0, body - m->len);
	rdmx__put_u32(f, (uint32_t)m->len);
	rdmx__put_u32(f + 4, (m->flags & RDMX_MSG_IMM) ? m->imm : 0);
	rdmx__put_u32(f + 8, (m->flags & RDMX_MSG_IMM) ? F_IMM : 0);
	rdmx__put_u32(f + 12, 0);
	rdmx__put_u64(f + FOOT_SEQ, p->tx_seq);
	wr.addr = m->data;
	wr.len = (uint32_t)(body + FOOT);
	wr.remote_addr = p->peer_rbuf + (uint64_t)buf * p->peer_rslot +
			 p->peer_rslot - FOOT - body;
	wr.rkey = p->peer_rkey;
	p->tx_seq++;
	rc = rdmx__sendpool_post_more(c, &p->sp, (uint32_t)idx, &wr, m, more);
	if (!rc && !p->sp.nheld)
		(void)ring_if_asleep(c); /* down on failure: the next call says */
	return rc;
}

static int dw_send(rdmx_conn *c, struct rdmx_msg *m)
{
	return dw_send_with(c, m, 0);
}

static int dw_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	return dw_send_with(c, m, 1);
}

/* ------------------------------------------------------------- receives */

/* 1 with the next message in @m, 0 not yet, -EPROTO (connection down)
 * for a footer that cannot be. */
static int take(rdmx_conn *c, struct rdmx_msg *m)
{
	struct dw *p = dw_of(c);
	uint32_t idx = p->adv[(p->rx_seq - 1) % p->adv_n];
	uint8_t *end = p->rbuf + (size_t)idx * p->rslot + p->rslot;
	const uint8_t *f = end - FOOT;
	uint64_t n = le64toh(__atomic_load_n((const uint64_t *)(f + FOOT_SEQ),
					     __ATOMIC_ACQUIRE));
	uint32_t len, imm, flags;

	if (n != p->rx_seq)
		return 0;
	len = rdmx__get_u32(f);
	imm = rdmx__get_u32(f + 4);
	flags = rdmx__get_u32(f + 8);
	if (len > c->max_msg || (flags & ~F_IMM))
		return rdmx__conn_down(c, -EPROTO,
				       "direct_write: message %llu says %u bytes, flags 0x%x (max_msg %u)",
				       (unsigned long long)n, len, flags, c->max_msg);
	p->rstate[idx] = BUF_HELD;
	p->rx_seq++;
	m->data = (uint8_t *)f - round8(len);
	m->len = len;
	m->cap = len;
	m->imm = (flags & F_IMM) ? imm : 0;
	m->flags = (flags & F_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(m, c, RDMX__MSG_RECV, idx);
	return 1;
}

static int dw_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (unsigned i = 0;; i++) {
		rc = take(c, m);
		if (rc)
			return rc < 0 ? rc : 0;
		/* the CQs (descriptor slots, doorbells, the peer's liveness) now
		 * and then; a reap that finds the connection down (a doorbell
		 * receive flushed: the peer left) is followed by one more take:
		 * its last messages may have landed since the last one */
		if (!(i % 16) && (rc = reap(c)) < 0 && c->state != RDMX__CONN_DOWN)
			return rc;
		if (rc < 0)
			continue;
		if ((rc = rdmx__recv_idle(c, &d)))
			return rc;
	}
}

/* Advertise buffer @idx again (now, or at the next call if the send
 * queue's descriptor slots are all in flight). */
static int readvertise(rdmx_conn *c, uint32_t idx)
{
	struct dw *p = dw_of(c);
	int rc;

	if (p->desc_out >= p->nrecv && (rc = reap(c)) < 0)
		return rc;
	if (!p->pend_n && p->desc_out < p->nrecv)
		return post_desc(c, idx);
	p->pend[(p->pend_head + p->pend_n) % p->nrecv] = idx;
	p->pend_n++;
	p->rstate[idx] = BUF_FREE;
	return 0;
}

static int dw_release(rdmx_conn *c, struct rdmx_msg *m)
{
	struct dw *p = dw_of(c);
	uint64_t idx;

	if (!rdmx__sendpool_release(c, &p->sp, m))
		return 0;
	if (rdmx__msg_get(m, c, RDMX__MSG_RECV, &idx) || idx >= p->nrecv ||
	    p->rstate[idx] != BUF_HELD)
		return rdmx__fail(-EINVAL, "direct_write: message not held on this connection");
	rdmx__msg_spend(m);
	if (c->state == RDMX__CONN_DOWN) {
		p->rstate[idx] = BUF_FREE;
		return 0;
	}
	/* The message is released either way; a descriptor that cannot go
	 * out took the connection down, which its next call reports. */
	if (readvertise(c, (uint32_t)idx) && c->state != RDMX__CONN_DOWN)
		return -EIO;
	return 0;
}

uint8_t *rdmx__dw_desc_at(rdmx_conn *c, uint64_t n)
{
	struct dw *p = dw_of(c);

	return p->dring + ((n - 1) % p->dn) * DESC;
}

uint8_t *rdmx__dw_next_footer(rdmx_conn *c)
{
	struct dw *p = dw_of(c);
	uint32_t idx = p->adv[(p->rx_seq - 1) % p->adv_n];

	return p->rbuf + (size_t)idx * p->rslot + p->rslot - FOOT;
}

/* Registered per connection: send and receive buffers, the descriptors. */
static uint64_t dw_mem_estimate(const rdmx_conn *c)
{
	uint64_t slot = round8(c->max_msg) + FOOT;

	return slot * ((uint64_t)c->opts.send_depth + c->opts.recv_depth) +
	       (uint64_t)2 * c->opts.recv_depth * DESC + TAIL;
}

static const struct rdmx__conn_ops dw_conn_ops = {
	.priv_size = sizeof(struct dw),
	.check_opts = rdmx__default_check_opts,
	.mem_estimate = dw_mem_estimate,
	.setup = dw_setup,
	.hello_out = dw_hello_out,
	.hello_in = dw_hello_in,
	.teardown = dw_teardown,
};

static const struct rdmx__data_ops dw_data_ops = {
	.msg_alloc = rdmx__sendpool_msg_alloc,
	.send = dw_send,
	.send_more = dw_send_more,
	.send_from = rdmx__default_send_from,
	.sendv = rdmx__default_sendv,
	.flush = rdmx__sendpool_conn_flush,
	.sends_done = rdmx__sendpool_conn_sends_done,
	.recv = dw_recv,
	.recv_many = rdmx__default_recv_many,
	.release = dw_release,
	.release_many = rdmx__default_release_many,
	.own_wc = rdmx__default_own_wc,
	.sleep_announce = dw_sleep_announce,
};

const struct rdmx_protocol_ops rdmx__proto_direct_write = {
	.name = "direct_write",
	.id = RDMX__PROTO_DIRECT_WRITE,
	.conn = &dw_conn_ops,
	.data = &dw_data_ops,
	.group = &rdmx__group_none,
};
