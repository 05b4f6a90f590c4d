/* SPDX-License-Identifier: MIT */
/*
 * The read protocol's receive side (the design is at the top of read.c):
 * descriptors in, READs and eager copies into receive buffers, the
 * completions of both queues, and rdmx_recv / rdmx_msg_release.
 */
#include <errno.h>
#include <string.h>

#include "read_priv.h"

#define WC_BATCH 16

int rdmx__read_post_rx(rdmx_conn *c, uint32_t idx)
{
	struct rd *p = rd_of(c);
	struct rdmx__wr wr = {
		.wr_id = wr_id(WR_RX, idx),
		.op = RDMX__OP_RECV,
		.addr = p->dbuf + (size_t)idx * p->dstride,
		.len = (uint32_t)p->dstride,
		.lkey = p->dmr->lkey,
	};

	return rdmx__post_recv(c, &wr, 1);
}

/* ------------------------------------------------------------ receiving */

static struct rmsg *fifo_at(struct rd *p, uint32_t i)
{
	return &p->fifo[(p->fhead + i) % p->fcap];
}

static uint32_t rb_take(struct rd *p)
{
	uint32_t b = p->free_rb[--p->nfree_rb];

	p->rstate[b] = RB_BUSY;
	return b;
}

static void rb_free(struct rd *p, uint32_t b)
{
	p->rstate[b] = RB_FREE;
	p->free_rb[p->nfree_rb++] = b;
}

/* Check a descriptor against what this side allowed the peer. */
static int desc_parse(rdmx_conn *c, const uint8_t *buf, uint32_t byte_len,
		      struct rdmx__read_desc *d)
{
	struct rd *p = rd_of(c);
	int eager;

	if (byte_len < RDMX__READ_DESC_SIZE)
		return rdmx__fail(-EPROTO, "read: %u-byte descriptor", byte_len);
	if (rdmx__read_desc_decode(buf, d))
		return -EPROTO;
	eager = d->type == RDMX__READ_DESC_EAGER;
	if (d->slot >= p->peer.send_depth)
		return rdmx__fail(-EPROTO, "read: descriptor for buffer %u of a peer with %u",
				  d->slot, p->peer.send_depth);
	if (d->len > c->max_msg || (eager && d->len > p->eager_cap))
		return rdmx__fail(-EPROTO, "read: %s descriptor of %u bytes exceeds %u",
				  eager ? "eager" : "READ", d->len,
				  eager ? p->eager_cap : c->max_msg);
	if (byte_len != RDMX__READ_DESC_SIZE + (eager ? d->len : 0))
		return rdmx__fail(-EPROTO, "read: descriptor of %u bytes arrived in %u",
				  d->len, byte_len);
	return 0;
}

/* A descriptor arrived: queue it in arrival order. A READ descriptor's
 * receive is reposted at once; an eager one's once its payload is copied. */
static int on_desc(rdmx_conn *c, const struct rdmx__wc *wc)
{
	struct rd *p = rd_of(c);
	uint32_t rx = (uint32_t)wc->wr_id;
	struct rdmx__read_desc d;
	struct rmsg *m;

	if (wc->status == RDMX__WC_FLUSHED)
		return rdmx__conn_flushed(c);
	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "descriptor receive");
	if (desc_parse(c, p->dbuf + (size_t)rx * p->dstride, wc->byte_len, &d))
		return rdmx__conn_down(c, -EPROTO, "%s", rdmx__last());
	if (p->fcount == p->fcap)
		return rdmx__conn_down(c, -EPROTO, "read: peer sent more descriptors than allowed");
	m = fifo_at(p, p->fcount++);
	*m = (struct rmsg){ .d = d, .rx = rx, .buf = NO_BUF, .state = M_WAIT };
	if (d.type == RDMX__READ_DESC_READ && c->state != RDMX__CONN_DOWN &&
	    rdmx__read_post_rx(c, rx))
		return rdmx__conn_down(c, -EIO, "read: reposting a receive: %s", rdmx__last());
	return 0;
}

static int reap_rq(rdmx_conn *c)
{
	struct rdmx__wc wc[WC_BATCH];
	int n = c->f->poll_cq(c->qp.rcq, wc, WC_BATCH), err = 0, rc;

	if (n < 0)
		return rdmx__conn_down(c, n, "polling receive completions: %s", rdmx__last());
	for (int i = 0; i < n; i++)
		if ((rc = on_desc(c, &wc[i])) && !err)
			err = rc;
	return err;
}

/* An eager payload: copy it out of its descriptor receive, repost that. */
static void rx_eager(rdmx_conn *c, struct rmsg *m)
{
	struct rd *p = rd_of(c);

	m->buf = rb_take(p);
	memcpy(p->rbuf + (size_t)m->buf * p->rstride,
	       p->dbuf + (size_t)m->rx * p->dstride + RDMX__READ_DESC_SIZE, m->d.len);
	m->state = M_READY;
	if (c->state != RDMX__CONN_DOWN && rdmx__read_post_rx(c, m->rx))
		rdmx__conn_down(c, -EIO, "read: reposting a receive: %s", rdmx__last());
	rdmx__read_ack_push(c, m->d.slot, m->d.gen);
}

/* Start the READ of @m (fifo entry @i); nonzero when it cannot start now. */
static int rx_read(rdmx_conn *c, struct rmsg *m, uint32_t i)
{
	struct rd *p = rd_of(c);
	struct rdmx__wr wr = {
		.wr_id = wr_id(WR_READ, (p->fhead + i) % p->fcap),
		.op = RDMX__OP_READ,
		.flags = RDMX__WR_SIGNALED,
		.len = m->d.len,
		.lkey = p->rmr->lkey,
		.remote_addr = m->d.addr,
		.rkey = m->d.rkey,
	};

	if (c->state == RDMX__CONN_DOWN || p->reads >= p->read_limit)
		return 1;
	m->buf = rb_take(p);
	wr.addr = p->rbuf + (size_t)m->buf * p->rstride;
	if (rdmx__post_send(c, &wr, 1)) {
		rb_free(p, m->buf);
		m->buf = NO_BUF;
		rdmx__conn_down(c, -EIO, "read: posting an RDMA READ: %s", rdmx__last());
		return 1;
	}
	p->reads++;
	m->state = M_READING;
	return 0;
}

/* Give waiting descriptors a receive buffer, in arrival order. */
static void rx_start(rdmx_conn *c)
{
	struct rd *p = rd_of(c);

	while (p->fstarted < p->fcount && p->nfree_rb) {
		struct rmsg *m = fifo_at(p, p->fstarted);

		if (m->d.type == RDMX__READ_DESC_EAGER)
			rx_eager(c, m);
		else if (rx_read(c, m, p->fstarted))
			return;
		p->fstarted++;
	}
}

/* Hand the oldest descriptor's buffer to the user once its data is in. */
static int rx_deliver(rdmx_conn *c, struct rdmx_msg *out)
{
	struct rd *p = rd_of(c);
	struct rmsg *m = fifo_at(p, 0);

	if (!p->fcount || m->state != M_READY)
		return 0;
	p->rstate[m->buf] = RB_HELD;
	out->data = p->rbuf + (size_t)m->buf * p->rstride;
	out->len = m->d.len;
	out->cap = m->d.len;
	out->imm = (m->d.flags & RDMX__READ_DESC_IMM) ? m->d.imm : 0;
	out->flags = (m->d.flags & RDMX__READ_DESC_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(out, c, RDMX__MSG_RECV, m->buf);
	p->fhead = (p->fhead + 1) % p->fcap;
	p->fcount--;
	p->fstarted--;
	return 1;
}

/* ---------------------------------------------------------- completions */

static int on_read_done(rdmx_conn *c, const struct rdmx__wc *wc, uint32_t idx)
{
	struct rd *p = rd_of(c);
	struct rmsg *m = &p->fifo[idx];

	p->reads--;
	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "RDMA READ of a payload");
	m->state = M_READY;
	return rdmx__read_ack_push(c, m->d.slot, m->d.gen);
}

static int on_send_wc(rdmx_conn *c, const struct rdmx__wc *wc)
{
	struct rd *p = rd_of(c);
	uint32_t idx = (uint32_t)wc->wr_id;

	switch (wc->wr_id >> 32) {
	case WR_DESC:
		if (wc->status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, wc, "descriptor send");
		rdmx__sendpool_sent(&p->sp, idx);
		return 0;
	case WR_READ:
		return on_read_done(c, wc, idx);
	default:
		p->acks--;
		if (wc->status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, wc, "ack write");
		return 0;
	}
}

static int reap_sq(rdmx_conn *c)
{
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, c->qp.scq, wc, WC_BATCH), err = 0, rc;

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++)
		if ((rc = on_send_wc(c, &wc[i])) && !err)
			err = rc;
	return err;
}

/* Completions and descriptors in, READs and eager copies started. */
static int poll_all(rdmx_conn *c)
{
	int rc = reap_sq(c), rc2 = reap_rq(c);

	rx_start(c);
	return rc ? rc : rc2;
}

/* One round of everything, acks out and in as well. */
int rdmx__read_progress(rdmx_conn *c)
{
	int rc = poll_all(c);

	rdmx__read_ack_flush(c);
	rdmx__read_tx_scan(rd_of(c));
	return rc;
}

/* ------------------------------------------------ receives and releases */

/* The receive buffer a handle refers to, or -EINVAL. */
static int64_t rb_slot(rdmx_conn *c, const struct rdmx_msg *m)
{
	struct rd *p = rd_of(c);
	uint64_t idx;

	if (rdmx__msg_get(m, c, RDMX__MSG_RECV, &idx) || idx >= p->nrecv ||
	    p->rstate[idx] != RB_HELD)
		return -EINVAL;
	return (int64_t)idx;
}

/* Messages whose data arrived before the peer left are still delivered. */
int rdmx__read_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		poll_all(c); /* a failure marks the connection down */
		if (rx_deliver(c, m))
			return 0; /* its ack goes at the next call */
		rdmx__read_ack_flush(c);
		rdmx__read_tx_scan(rd_of(c));
		if ((rc = rdmx__recv_idle(c, &d)))
			return rc;
	}
}

int rdmx__read_release(rdmx_conn *c, struct rdmx_msg *m)
{
	struct rd *p = rd_of(c);
	int64_t idx;

	if (!rdmx__sendpool_release(c, &p->sp, m))
		return 0;
	if ((idx = rb_slot(c, m)) >= 0) {
		rb_free(p, (uint32_t)idx);
		rx_start(c); /* a waiting descriptor may take it now */
		rdmx__read_ack_flush(c);
	} else {
		return rdmx__fail(-EINVAL, "read: message not held on this connection");
	}
	rdmx__msg_spend(m);
	return 0;
}

