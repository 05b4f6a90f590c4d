/* SPDX-License-Identifier: MIT */
/*
 * srq credits: a sender may have as many messages on the way to (or held
 * at) the peer as the peer granted it; the peer grants its connections
 * equal shares of its shared receive queue (the receive side is srq_conn.c).
 *
 * Flow control is by credits, one per SRQ buffer. A sender may have as
 * many messages on the way or held by the receiving user as the receiver
 * granted it; rdmx_msg_alloc takes a credit (waiting
 * for one within its timeout), releasing an unsent message gives it back.
 * The receiver grants each member connection up to its share,
 * share = max(1, SRQ depth / members), counting what the member has
 * outstanding (granted, not yet arrived) plus what it holds (arrived, not
 * yet released): when a message of the member is released, it is topped
 * up to its share again; when a member leaves, every other is (the share
 * grew); a new member gets its share in its hello. Grants travel by RDMA
 * WRITE of a running total into the sender's credit word (format
 * below), so they take no receive buffer and need no credit.
 *
 * Why it is fair: the SRQ no longer decides who gets a freed buffer (with
 * RNR as the flow control, the sender whose retry happened to come first
 * took it, so one sender could take every buffer while another waited out
 * RNR back-offs). Every member has the same window, a member holding its
 * share gets nothing more until it releases, and a buffer a member's
 * message frees returns as that member's credit. Senders that keep their
 * windows full therefore get the receiver's buffers in equal parts, and
 * arrival-order receive serves them in proportion.
 *
 * Why it cannot deadlock: a credit WRITE needs no credit and no receive
 * buffer at the peer; it has SRQ_CREDIT_WRS send-queue slots (and send-CQ
 * entries) of its own beside the send buffers' and beside the core's
 * keepalive and one-sided slots (RDMX__KA_WRS), so neither user sends nor
 * rdmx_read/write/fetch_add/cmp_swap can take its place, and a user send
 * is posted only with a credit, so no SEND ahead of it on the send queue
 * waits in RNR. Its completion is taken out of the send CQ by whoever
 * polls it (the own_wc hook); a grant made while both slots are busy is
 * sent by the next release or by any wait on the receiving side (listener
 * or member receive, and rdmx_msg_alloc of the same connection, so two
 * sides that both send each push the other's credits while they wait).
 * A sender waits for credits only inside its rdmx_msg_alloc timeout and
 * under liveness: a peer that stops granting is -ETIMEDOUT, one that
 * stops answering -ECONNRESET.
 *
 * Sums of shares can exceed the depth for a while (a member keeps the
 * credits of a larger share when another joins; more members than
 * buffers get one each): RNR (rnr_retry) stays as the backstop then.
 * A credit WRITE's completion is taken by the core's reap while its
 * stash of the member's other send completions (RDMX__KA_STASH) has room;
 * a full stash is drained through the protocol's own poll, by the
 * member's owner or, from the listener's thread, when the member's lock
 * is free (else at a later wait).
 * Peers are not trusted: a grant beyond the peer's SRQ depth, or a
 * message beyond the credits we granted, fails that connection (-EPROTO).
 *
 * The wire formats are in srq_conn.c (its hello block) and here:
 *
 * Credit word (8 bytes, 8-aligned, in the sender's memory, written by its
 * peer with one RDMA WRITE from a source the peer does not touch while it
 * is in flight):
 *   off size field
 *     0  u32  W: credits granted beyond those of the hello, mod 2^32
 *     4  u32  ~W (a torn or stray word never reads as a grant)
 * The sender copies the 8 bytes once, ignores a copy whose halves do not
 * match (no news), and takes W only if it keeps the peer's grant within
 * its SRQ depth: base + W - granted-so-far <= depth (grants only grow)
 * and base + W - spent <= depth (never more outstanding than the SRQ
 * holds). Anything else takes the connection down with -EPROTO.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sendpool.h"
#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "srq_credit.h"

#define AREA_BYTES 64

int rdmx__srq_credit_setup(rdmx_conn *c, struct srq_credit *cr)
{
	cr->w = rdmx__alloc_buf(AREA_BYTES);
	if (!cr->w)
		return rdmx__fail(-ENOMEM, "srq: out of memory for the credit word");
	return c->f->reg_mr(c->ep, cr->w, AREA_BYTES,
			    RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE, &cr->mr);
}

void rdmx__srq_credit_teardown(rdmx_conn *c, struct srq_credit *cr)
{
	if (cr->mr)
		c->f->dereg_mr(cr->mr);
	free(cr->w);
	cr->mr = NULL;
	cr->w = NULL;
}

/*
 * Credit part of the protocol block (SRQ_CREDIT_BLOCK bytes):
 *   0 u32 credits granted to the peer by this hello (1..our SRQ depth)
 *   4 u32 rkey of our credit word
 *   8 u64 address of our credit word
 */
void rdmx__srq_credit_hello_out(struct srq_credit *cr, uint32_t grant,
				uint8_t *b)
{
	cr->given = cr->gbase = grant;
	__atomic_store_n(&cr->dirty, 0, __ATOMIC_RELAXED);
	rdmx__put_u32(b, grant);
	rdmx__put_u32(b + 4, cr->mr->rkey);
	rdmx__put_u64(b + 8, (uint64_t)(uintptr_t)cr->w);
}

int rdmx__srq_credit_hello_in(struct srq_credit *cr, const uint8_t *b,
			      uint32_t peer_depth)
{
	uint32_t grant = rdmx__get_u32(b);
	uint64_t addr = rdmx__get_u64(b + 8);

	if (grant == 0 || grant > peer_depth)
		return rdmx__fail(-EPROTO, "srq: peer's hello grants %u credits, expected 1 to its shared receive depth %u",
				  grant, peer_depth);
	if (addr == 0 || addr % 8)
		return rdmx__fail(-EPROTO, "srq: peer's credit word address 0x%llx is not 8-aligned",
				  (unsigned long long)addr);
	cr->peer_depth = peer_depth;
	cr->base = cr->granted = grant;
	cr->spent = 0;
	cr->rkey = rdmx__get_u32(b + 4);
	cr->raddr = addr;
	return 0;
}

/* ------------------------------------------------------------- sending */

/* Read the credit word once and take what it grants; 0, or -EPROTO with
 * the connection down for a grant beyond the peer's SRQ. */
static int credit_read(rdmx_conn *c, struct srq_credit *cr)
{
	uint64_t raw = __atomic_load_n((uint64_t *)(void *)cr->w, __ATOMIC_ACQUIRE);
	uint32_t v, total;

	if (rdmx__cword_get(raw, &v))
		return 0; /* not written yet, or torn: no news */
	total = cr->base + v;
	if (total == cr->granted)
		return 0;
	if (total - cr->granted > cr->peer_depth || total - cr->spent > cr->peer_depth)
		return rdmx__conn_down(c, -EPROTO, "srq: the peer's credit word grants %u in all "
				       "after %u, of which %u are used: more than its shared receive depth %u",
				       total, cr->granted, cr->spent, cr->peer_depth);
	cr->granted = total;
	return 0;
}

int rdmx__srq_credit_take(rdmx_conn *c, struct srq_credit *cr,
			  struct rdmx__deadline *d)
{
	int rc;

	for (;;) {
		rc = credit_read(c, cr);
		if (rc)
			return rc;
		if (cr->granted != cr->spent) {
			cr->spent++;
			return 0;
		}
		rdmx__srq_credit_kick(c, cr); /* the peer may wait for ours */
		d->timed = 1; /* credits are peer-written memory: no completion */
		rc = rdmx__conn_wait(c, d);
		if (rc == -ETIMEDOUT)
			return rdmx__fail(rc, "srq: no credit from the peer within %d ms on the "
					  "connection of QP %u: all it granted are in use (it grants "
					  "one for each of its receive buffers it frees)",
					  d->timeout_ms, c->f->qp_num(c->ep));
		if (rc)
			return rc;
	}
}

void rdmx__srq_credit_untake(struct srq_credit *cr)
{
	cr->spent--;
}

int rdmx__srq_credit_send(rdmx_conn *c, struct rdmx__sendpool *sp,
			  struct srq_credit *cr, struct rdmx_msg *m, int more)
{
	int64_t idx = rdmx__sendpool_slot(c, sp, m);
	int rc = more ? rdmx__sendpool_conn_send_more(c, m) : rdmx__sendpool_conn_send(c, m);

	if (!rc && idx >= 0 && sp->state[idx] == RDMX__SP_FREE) /* packed */
		rdmx__srq_credit_untake(cr);
	return rc;
}

/* ----------------------------------------------------------- receiving */

/* Post one credit WRITE of the current grant (g->lock, a slot free). Its
 * source is one of SRQ_CREDIT_WRS words used in turn: send completions
 * come in order, so a source is reused only once its WRITE completed. */
static void credit_post(rdmx_conn *c, struct srq_credit *cr)
{
	uint32_t *src = cr->w + 2 + 2 * (cr->writes % SRQ_CREDIT_WRS);
	uint32_t v = cr->given - cr->gbase;
	struct rdmx__wr wr = {
		.wr_id = SRQ_CREDIT_WRID,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
		.addr = src,
		.len = 8,
		.lkey = cr->mr->lkey,
		.remote_addr = cr->raddr,
		.rkey = cr->rkey,
	};
	int rc;

	__atomic_store_n((uint64_t *)(void *)src, rdmx__cword(v), __ATOMIC_RELAXED);
	rc = c->f->post_send(c->ep, &wr, 1);
	if (rc) {
		rdmx__conn_down(c, rc, "srq: posting a credit write: %s", rdmx__last());
		return;
	}
	cr->writes++;
	__atomic_store_n(&cr->dirty, 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cr->inflight, 1, __ATOMIC_ACQ_REL);
}

/*
 * Reap the send CQ for credit WRITE completions (the own_wc hook takes
 * them out). They may sit behind the connection's other completions in a
 * stash the core filled: then those are drained through the protocol's
 * own poll first, by @c's owner (@owner: the caller holds c->lock) or,
 * from another thread, if c->lock is free right now (never waited for:
 * g->lock is held, and the owner takes g->lock under c->lock).
 */
static void credit_reap(rdmx_conn *c, struct srq_credit *cr, int owner)
{
	rdmx__live_reap(c);
	if (__atomic_load_n(&cr->inflight, __ATOMIC_ACQUIRE) < (int)SRQ_CREDIT_WRS)
		return;
	if (owner) {
		(void)c->data_ops->flush(c, 0);
	} else if (!pthread_mutex_trylock(&c->lock)) {
		(void)c->data_ops->flush(c, 0);
		pthread_mutex_unlock(&c->lock);
	}
	rdmx__live_reap(c);
}

/* Send the grant if it changed and a credit WRITE slot is free (reaping
 * the send CQ for one if not). g->lock. */
static void credit_push(rdmx_conn *c, struct srq_credit *cr, int owner)
{
	if (!__atomic_load_n(&cr->dirty, __ATOMIC_RELAXED) || c->state != RDMX__CONN_UP)
		return;
	if (__atomic_load_n(&cr->inflight, __ATOMIC_ACQUIRE) >= (int)SRQ_CREDIT_WRS)
		credit_reap(c, cr, owner);
	if (__atomic_load_n(&cr->inflight, __ATOMIC_ACQUIRE) < (int)SRQ_CREDIT_WRS)
		credit_post(c, cr);
}

int rdmx__srq_credit_arrived(rdmx_conn *c, struct srq_credit *cr)
{
	if (cr->recvd == cr->given)
		return rdmx__conn_down(c, -EPROTO, "srq: the peer sent a message with none "
				       "of its credits left (%u granted in all)", cr->given);
	cr->recvd++;
	cr->held++;
	return 0;
}

void rdmx__srq_credit_top_up(rdmx_conn *c, struct srq_credit *cr,
			     uint32_t share, int owner)
{
	uint32_t have = (cr->given - cr->recvd) + cr->held;

	if (have < share) {
		cr->given += share - have;
		__atomic_store_n(&cr->dirty, 1, __ATOMIC_RELAXED);
	}
	credit_push(c, cr, owner);
}

void rdmx__srq_credit_freed(rdmx_conn *c, struct srq_credit *cr, uint32_t n,
			    uint32_t share)
{
	cr->held -= n < cr->held ? n : cr->held;
	rdmx__srq_credit_top_up(c, cr, share, 1);
}

void rdmx__srq_credit_kick(rdmx_conn *c, struct srq_credit *cr)
{
	struct rdmx__group *g = c->group;

	if (!__atomic_load_n(&cr->dirty, __ATOMIC_RELAXED))
		return; /* a hint: a grant made meanwhile is pushed by its maker */
	pthread_mutex_lock(&g->lock);
	credit_push(c, cr, 1);
	pthread_mutex_unlock(&g->lock);
}

int rdmx__srq_credit_wc(rdmx_conn *c, struct srq_credit *cr,
			const struct rdmx__wc *wc)
{
	if (wc->wr_id != SRQ_CREDIT_WRID)
		return 0;
	__atomic_sub_fetch(&cr->inflight, 1, __ATOMIC_ACQ_REL);
	if (wc->status != RDMX__WC_OK && wc->status != RDMX__WC_FLUSHED)
		rdmx__conn_wc_error(c, wc, "a credit write");
	return 1;
}
