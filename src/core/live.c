/* SPDX-License-Identifier: MIT */
/*
 * Liveness: a peer whose host dies without a disconnect (power gone, link
 * cut) is found within the connection's bound (opts.liveness_ms).
 *
 * While a call waits on a connection, the core posts a keepalive every
 * quarter of the bound: a signaled zero-length RDMA WRITE, which needs no
 * valid address or rkey (IB spec C9-88) and which the peer's NIC answers
 * without its process. Its completion proves the peer alive; a dead host
 * lets the transport retry ((retry_count + 1) local ACK timeouts, the
 * timeout chosen from the bound when the QP is made) and then fail it
 * with RETRY: the connection goes down with -ECONNRESET, "peer stopped
 * answering", and every call waiting on it returns that.
 *
 * The verdict is the transport's alone: there is no software timer on an
 * outstanding keepalive. A live peer that posts no receives holds our
 * SENDs in RNR retry (rnr_retry 7 retries forever) and a keepalive queued
 * behind them with them; its NIC answers every retry with an RNR NAK, so
 * that connection is alive, and it is not declared dead. A dead host
 * answers nothing, so the SEND ahead of the keepalive fails with RETRY in
 * the same time the keepalive would.
 *
 * Here too, the completions of the send CQ are sorted into the core's
 * (keepalive, one-sided) and the protocol's. The QP is made with the
 * transport's timing chosen from the bound (rdmx__live_ack_timeout) and
 * the keepalive's and the one-sided operations' send-queue slots beside
 * the protocol's by qp.c; the connection going down is conn.c's.
 */
#include <errno.h>
#include <string.h>

#include "clock.h"
#include "conn.h"
#include "errors.h"
#include "fabric.h"
#include "live.h"
#include "opslots.h"
#include "protocol.h"

#define KA_DEFAULT_TIMEOUT 17 /* rdma_cm's for RoCE: 4.096 us * 2^17 = 0.54 s */

void rdmx__live_init(rdmx_conn *c)
{
	pthread_mutex_init(&c->live.lock, NULL);
	c->live.posted_ms = rdmx__now_coarse_ms();
}

void rdmx__live_fini(rdmx_conn *c)
{
	pthread_mutex_destroy(&c->live.lock);
}

/*
 * The transport gives up after (retry_count + 1) timeouts; let that take at
 * most 3/5 of the bound, so that with a keepalive every quarter of it a
 * peer that dies just after answering one is found inside the bound. The
 * default bound (10 s) keeps rdma_cm's 0.54 s: a short timer on a loaded
 * emulated host retries spuriously; 1 s gets 67 ms.
 */
uint8_t rdmx__live_ack_timeout(uint32_t bound_ms, uint8_t retry_count)
{
	uint64_t budget_us = (uint64_t)bound_ms * 1000 * 3 / 5;
	uint8_t t = KA_DEFAULT_TIMEOUT;

	while (t > 1 && (uint64_t)(retry_count + 1) * ((4096ull << t) / 1000) > budget_us)
		t--;
	return t;
}

/* The keepalive completed (locked). */
static void ka_done(rdmx_conn *c, const struct rdmx__wc *wc)
{
	c->live.out = 0;
	if (wc->status == RDMX__WC_OK || wc->status == RDMX__WC_FLUSHED)
		return; /* alive; or down already, for another reason */
	if (wc->status == RDMX__WC_RETRY)
		rdmx__conn_down(c, -ECONNRESET,
				"peer stopped answering: a keepalive got no acknowledgement "
				"within the transport's retries (liveness bound %u ms)",
				c->opts.liveness_ms);
	else
		rdmx__conn_down(c, -EIO, "keepalive failed: %s (status %d)",
				rdmx__wc_status_name(wc->status), wc->vendor_status);
}

/* Take the core's completions (keepalive, one-sided, the protocol's
 * own_wc) out of @wc[0..n), keeping the order. */
static int ka_filter(rdmx_conn *c, struct rdmx__wc *wc, int n)
{
	int kept = 0;

	for (int i = 0; i < n; i++) {
		if (RDMX__OS_IS_WRID(wc[i].wr_id)) {
			rdmx__os_done(c, &wc[i]);
			continue;
		}
		if (c->data_ops->own_wc != rdmx__default_own_wc &&
		    c->data_ops->own_wc(c, &wc[i]))
			continue;
		if (wc[i].wr_id != RDMX__KA_WRID) {
			if (kept != i)
				wc[kept] = wc[i];
			kept++;
			continue;
		}
		pthread_mutex_lock(&c->live.lock);
		ka_done(c, &wc[i]);
		pthread_mutex_unlock(&c->live.lock);
	}
	return kept;
}

/* Hand out up to @n stashed completions, oldest first. */
static int stash_take(struct rdmx__live *l, struct rdmx__wc *wc, int n)
{
	int got;

	pthread_mutex_lock(&l->lock);
	got = l->stashed < n ? l->stashed : n;
	memcpy(wc, l->stash, (size_t)got * sizeof(*wc));
	memmove(l->stash, l->stash + got, (size_t)(l->stashed - got) * sizeof(*wc));
	__atomic_store_n(&l->stashed, l->stashed - got, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&l->lock);
	return got;
}

int rdmx__poll_cq(rdmx_conn *c, struct rdmx__cq *cq, struct rdmx__wc *wc,
		  int n)
{
	int got = 0, k;

	if (cq == c->live.scq && __atomic_load_n(&c->live.stashed, __ATOMIC_ACQUIRE))
		got = stash_take(&c->live, wc, n);
	while (got < n) {
		k = c->f->poll_cq(cq, wc + got, n - got);
		if (k <= 0)
			return got ? got : k;
		k = ka_filter(c, wc + got, k);
		got += k;
		if (!k)
			continue; /* only the core's: look again */
		break;
	}
	return got;
}

/* Poll the send CQ for the core's completions (keepalive, one-sided),
 * stashing the protocol's (locked). -ENOBUFS: the stash is full. */
static int ka_reap(rdmx_conn *c)
{
	struct rdmx__live *l = &c->live;
	struct rdmx__wc wc[RDMX__KA_STASH];
	int n = RDMX__KA_STASH - l->stashed;

	if (n <= 0)
		return -ENOBUFS;
	n = c->f->poll_cq(l->scq, wc, n);
	for (int i = 0; i < n; i++) {
		if (wc[i].wr_id == RDMX__KA_WRID) {
			ka_done(c, &wc[i]);
			continue;
		}
		if (RDMX__OS_IS_WRID(wc[i].wr_id)) {
			rdmx__os_done(c, &wc[i]);
			continue;
		}
		if (c->data_ops->own_wc != rdmx__default_own_wc &&
		    c->data_ops->own_wc(c, &wc[i]))
			continue;
		/* A protocol WR ahead of the keepalive failed (RETRY on a cut
		 * link): the keepalive behind it is only flushed, and the
		 * caller may be waiting on the other CQ, so this is the
		 * verdict. The protocol still gets the completion. */
		if (wc[i].status != RDMX__WC_OK && wc[i].status != RDMX__WC_FLUSHED)
			rdmx__conn_wc_error(c, &wc[i], "a posted send");
		l->stash[l->stashed++] = wc[i];
	}
	__atomic_store_n(&l->stashed, l->stashed, __ATOMIC_RELEASE);
	return 0;
}


/* Post a keepalive (locked). Not counted in c->posted: it is not the
 * protocol's traffic. A failed post is tried again next time. */
static void ka_post(rdmx_conn *c, int64_t now)
{
	struct rdmx__wr wr = {
		.wr_id = RDMX__KA_WRID,
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_SIGNALED,
	};

	c->live.posted_ms = now;
	if (!c->f->post_send(c->ep, &wr, 1))
		c->live.out = 1;
}

int rdmx__live_tick(rdmx_conn *c)
{
	struct rdmx__live *l = &c->live;
	int64_t now;

	if (c->state != RDMX__CONN_UP || !l->scq)
		return c->state == RDMX__CONN_DOWN ? c->down_rc : 0;
	if (pthread_mutex_trylock(&l->lock))
		return 0; /* another thread is at it */
	if (l->out)
		ka_reap(c);
	now = rdmx__now_coarse_ms(); /* read from every wait's checks */
	if (!l->out && c->state == RDMX__CONN_UP &&
	    now - l->posted_ms >= (int64_t)c->opts.liveness_ms / 4)
		ka_post(c, now);
	pthread_mutex_unlock(&l->lock);
	return c->state == RDMX__CONN_DOWN ? c->down_rc : 0;
}

int rdmx__live_reap(rdmx_conn *c)
{
	int rc = 0;

	if (c->live.scq) {
		pthread_mutex_lock(&c->live.lock);
		rc = ka_reap(c);
		pthread_mutex_unlock(&c->live.lock);
	}
	return c->state == RDMX__CONN_DOWN ? c->down_rc : rc;
}

int rdmx__conn_flushed(rdmx_conn *c)
{
	int rc = rdmx__live_reap(c);

	if (rc && rc != -ENOBUFS)
		return rc;
	return rdmx__conn_down(c, -ECONNRESET, "connection closed by peer");
}

int rdmx__conn_check_peer(rdmx_conn *c)
{
	int rc;

	if (c->state == RDMX__CONN_DOWN)
		return rdmx__conn_down_reason(c);
	rc = rdmx__live_tick(c); /* first: a failed send says why */
	if (rc)
		return rc;
	if (c->f->check_event(c->ep) != -ECONNRESET)
		return 0;
	/* rxe reports a disconnect as soon as its retries fail a send: the
	 * send's completion, already queued, names the dead peer. */
	rc = rdmx__live_reap(c);
	if (rc && rc != -ENOBUFS)
		return rc;
	return rdmx__conn_down(c, -ECONNRESET, "connection closed by peer");
}
