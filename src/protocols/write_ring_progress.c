/* SPDX-License-Identifier: MIT */
/*
 * The ring engine's progress (see write_ring_conn.c for the design): reaping
 * both CQs - our record WRITEs completing, the peer's head updates and
 * doorbells arriving - and answering the peer with head updates of our
 * own. Below the send and receive sides, which both call it; it rings a
 * sleeping peer's doorbell after a record completes (write_ring_notify.c).
 */
#include <errno.h>
#include <stddef.h>

#include "core/conn.h"
#include "core/doorbell.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/qp.h"
#include "core/wire.h"
#include "write_ring_priv.h"

/* Post head-update receive @idx of the control block (set-up, and again
 * after each one arrives). */
int rdmx__wring_post_ctrl_recv(rdmx_conn *c, uint32_t idx)
{
	struct wring *p = wr_of(c);
	struct rdmx__wr wr = {
		.wr_id = idx,
		.op = RDMX__OP_RECV,
		.addr = p->ctl->rbuf[idx],
		.len = sizeof(p->ctl->rbuf[0]),
		.lkey = p->ctl_mr->lkey,
	};

	return rdmx__post_recv(c, &wr, 1);
}


/* The peer released @v records: move the cached head. */
static int apply_acked(rdmx_conn *c, uint64_t v)
{
	struct wring *p = wr_of(c);

	if (v > p->sent)
		return rdmx__conn_down(c, -EPROTO, "%s: peer released %llu records of %llu sent",
				       c->proto->name, (unsigned long long)v,
				       (unsigned long long)p->sent);
	if (v > p->acked) {
		p->acked = v;
		p->head = p->ends[(v - 1) % (p->win_out + 1)];
	}
	return 0;
}

static int send_done(rdmx_conn *c, const struct rdmx__wc *wc)
{
	struct wring *p = wr_of(c);

	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "ring write");
	switch (wc->wr_id >> TAG_SHIFT) {
	case TAG_DATA:
		p->done = wc->wr_id;
		p->data_out--;
		rdmx__wburst_done(&p->burst);
		/* the record is in the peer's memory: a sleep it published
		 * before its last poll is in ours now ("Sleeping receivers") */
		return rdmx__wring_ring_if_asleep(c);
	case TAG_UPD:
		p->upd_out = 0;
		return 0;
	case TAG_ASK:
		if (wc->wr_id & SUB_GEN)
			rdmx__bell_gen_done(&p->bell);
		else if (!(wc->wr_id & SUB_WAKE))
			p->ask_out = 0;
		return 0;
	default:
		p->read_out = 0;
		return apply_acked(c, p->ctl->read_dst);
	}
}

static int reap_sends(rdmx_conn *c)
{
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, c->qp.scq, wc, WC_BATCH), rc;

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++)
		if ((rc = send_done(c, &wc[i])))
			return rc;
	return n;
}

static int recv_done(rdmx_conn *c, const struct rdmx__wc *wc)
{
	struct wring *p = wr_of(c);
	uint32_t idx = (uint32_t)wc->wr_id;
	int rc = 0;

	if (wc->status == RDMX__WC_FLUSHED)
		return rdmx__conn_flushed(c);
	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "head update receive");
	if (wc->op == RDMX__OP_RECV_IMM) {
		p->imm_ready++;
	} else if (!wc->byte_len) {
		p->st.doorbells_recv++; /* woke us: the ring has news */
		rdmx__bell_woke(&p->bell); /* it spent our count */
	} else {
		p->st.updates_recv++;
		rc = apply_acked(c, rdmx__get_u64((uint8_t *)p->ctl->rbuf[idx]));
	}
	if (!rc && rdmx__wring_post_ctrl_recv(c, idx))
		rc = rdmx__conn_down(c, -EIO, "reposting a receive: %s", rdmx__last());
	return rc;
}

static int reap_recvs(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	struct rdmx__wc wc[WC_BATCH];
	int n, rc;

	if (!p->nrecv)
		return 0;
	n = c->f->poll_cq(c->qp.rcq, wc, WC_BATCH);
	if (n < 0)
		return rdmx__conn_down(c, n, "polling receive completions: %s", rdmx__last());
	for (int i = 0; i < n; i++)
		if ((rc = recv_done(c, &wc[i])))
			return rc;
	return n;
}

/*
 * Simplex/magic receiver: send our released count when enough was
 * released since the last update, or the peer asked for it and it is
 * there (see the top). One update in flight at a time.
 */
int rdmx__wring_maybe_update(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	uint64_t n = p->rel.released, ask;
	struct rdmx__wr wr;
	int rc;

	if (p->ack_read || p->upd_out || n == p->reported ||
	    c->state != RDMX__CONN_UP)
		return 0;
	ask = __atomic_load_n(&p->ctl->ask, __ATOMIC_ACQUIRE);
	if (p->rel.head - p->reported_head < p->rgeo.size / 4 &&
	    n - p->reported < (p->win_in + 1) / 2 &&
	    !(ask > p->reported && n >= ask))
		return 0;
	wr = (struct rdmx__wr){ /* made only when sent: once per release */
		.wr_id = TAG_UPD << TAG_SHIFT,
		.op = RDMX__OP_SEND,
		.flags = RDMX__WR_SIGNALED,
		.addr = &p->ctl->upd_src,
		.len = sizeof(p->ctl->upd_src),
		.lkey = p->ctl_mr->lkey,
	};
	rdmx__put_u64((uint8_t *)&p->ctl->upd_src, n);
	rc = rdmx__post_send(c, &wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "posting a head update: %s", rdmx__last());
	p->upd_out = 1;
	p->reported = n;
	p->reported_head = p->rel.head;
	p->st.updates_sent++;
	return 0;
}

/* Poll both CQs and answer the peer; > 0 if anything happened. */
int rdmx__wring_progress(rdmx_conn *c)
{
	int a = reap_sends(c), b, rc;

	if (a < 0)
		return a;
	b = reap_recvs(c);
	if (b < 0)
		return b;
	rc = rdmx__wring_maybe_update(c);
	return rc ? rc : a + b;
}

