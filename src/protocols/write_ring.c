/* SPDX-License-Identifier: MIT */
/*
 * The engine of the single-sender ring protocols (see write_ring.h and the
 * headers of write_simplex.c, write_magic.c and write_duplex.c).
 *
 * Each side owns a receive ring (opts.ring_size bytes, registered for
 * remote WRITE) and a staging ring of the same size that mirrors the
 * peer's receive ring byte for byte: the record for peer offset o is built
 * at staging[o & mask] - the user writes the payload there in place
 * (rdmx_msg_alloc hands out that spot), rdmx_send adds header and footer
 * around it and ONE RDMA WRITE copies header+payload+footer to the same
 * offset of the peer's ring. A staging byte is reused only once the WRITE
 * that read it completed locally (tracked by `done`) and the peer released
 * the record there (tracked by `head`).
 *
 * Flow control. Two limits bound what a sender may write: bytes (its
 * tail may run at most ring_size ahead of the peer's released head) and
 * messages (at most win records not yet released: the message window,
 * peer recv_depth + own send_depth; with notify IMM every message needs a
 * posted receive, so there win is the peer's recv_depth, what it posts). The receiver reports its head as a count
 * of records released (a contiguous prefix; out-of-order releases wait
 * for the gap to close); the sender turns a count into a byte offset with
 * its table of record end offsets (`ends`, win + 1 entries).
 *
 * How the count travels (opts.ack; the protocol gives the default):
 *  - ack SEND (write_simplex/magic): the receiver SENDs it (8 bytes, into one of the
 *    N_CTRL buffers the sender keeps posted) when the released bytes since
 *    the last update reach ring_size / 4, or the released records reach
 *    win / 2, or when asked. One update is in flight at a time; more are
 *    coalesced (a count is absolute, the latest wins). A sender whose
 *    cached head shows too little room ASKS: it RDMA-WRITEs into the
 *    receiver's ask word the smallest count T that would make room.
 *  - ack READ (write_duplex): the receiver stores the count in a registered word
 *    (release store); a blocked sender RDMA-READs it. The receiver posts
 *    nothing at all on the data path.
 *
 * No deadlock when a sender waits for room (simplex/magic). The sender
 * waits on two things only: completions of its own WRITEs (the hardware
 * delivers them without the peer's software), and a count >= T. It asks
 * for T (T <= records sent) before it waits, and re-asks for a larger T
 * only. The receiver checks the ask word in every call on the connection
 * (recv, wait loops, release, alloc, send, flush) and sends an update as
 * soon as released >= ask; releasing every message it received makes
 * released reach the sender's count, hence T. Its update goes out at once
 * unless one is in flight, and that one completes by hardware (the sender
 * keeps N_CTRL receives posted and reposts them in every poll of its own
 * wait loop). So as long as the receiving application keeps receiving and
 * releasing, a blocked sender is always answered; if it holds messages,
 * the sender waits for exactly those and times out cleanly.
 *
 * Sleeping receivers (notify POLL, OFF or REV). A record lands in the
 * ring by RDMA WRITE and makes no completion at the receiver, so a wait
 * that sleeps in the kernel (wait modes block and adaptive) must be woken
 * by the sender. Before it sleeps on its wait set, the receiver WRITEs
 * its sleep count (gen, +1 per sleep) into the sender's ctl.sleep_gen
 * (ops->sleep_announce), waits for that WRITE to complete (it is then in
 * the sender's memory) and polls its ring once more; the sender reads
 * sleep_gen once after every record WRITE and every ask it posts, and
 * again when a record WRITE completes (it is then in the receiver's
 * memory), and when it holds a count it has not rung for, posts a 0-byte
 * SEND (the doorbell): it lands in one of the receiver's N_CTRL receives
 * (posted for updates with ack SEND, for doorbells alone with ack READ),
 * after the WRITEs before it (RC order), and its completion wakes the
 * receiver, which reposts it. One doorbell per sleep at most; a doorbell
 * for a sleep that ended is a spurious wake. No record is missed: either
 * the record was placed before the count (the last poll sees it) or the
 * sender's read at the record's completion sees the count - as long as
 * the sender takes that completion, i.e. keeps calling or waiting on its
 * connection (a wait of its own sleeps on the send CQ too), which
 * rdmx_conn_fd's contract asks of it. Otherwise the receiver wakes at the
 * next record or the wait set's backstop (RDMX__WAIT_BACKSTOP_MS). With
 * ack READ, a sender out of room READs the head in timed parks (no
 * completion tells it of a release). The doorbell is write_ring_notify.c's.
 *
 * Bursts (rdmx_send_flags RDMX_SEND_MORE, notify POLL): place() stages a
 * record as send does, push_held() posts what is staged in one WRITE (the
 * send side is write_ring_send.c); see write_ring_burst.h. The other notify modes post each record as it is
 * sent (IMM: one completion per record; OFF and REV: the tail word and the
 * pre-clear belong to one record), and count it in the burst's FIFO too,
 * so that sends_done has one count for every mode.
 *
 * Wait loops all go through rdmx__conn_wait(), which sees the peer leave;
 * WRITEs to a peer that left fail with a retry error: never a hang.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "write_ring_priv.h"

#define BLOCK_LEN 40 /* fits the connect private data (56 bytes) */

/* Message handles (internal.h): a SEND handle's value is the alloc id,
 * a RECV handle's the record's sequence number. */

#define HELLO_MAGIC 0x1

/* The variant a table of this engine describes (its .family). */
static const struct rdmx__wring_variant *variant_of(const struct rdmx_protocol_ops *proto)
{
	return proto->family;
}

/* A connection of this engine: its table runs rdmx__wring_setup(). */
static int is_wring(const rdmx_conn *c)
{
	return c && c->proto->setup == rdmx__wring_setup;
}

int rdmx__wring_stats(const rdmx_conn *c, struct rdmx__wring_stats *out)
{
	if (!is_wring(c) || !out)
		return -EINVAL;
	*out = wr_of(c)->st;
	out->coalesced = wr_of(c)->burst.writes;
	out->split = wr_of(c)->burst.splits;
	return 0;
}

/* ---------------------------------------------------------------- setup */

static int post_ctrl_recv(rdmx_conn *c, uint32_t idx)
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

/* Map and register both rings, double-mapped when @magic. */
static int map_rings(rdmx_conn *c, int magic)
{
	struct wring *p = wr_of(c);
	size_t size = c->opts.ring_size, span = magic ? 2 * size : size;
	int rc;

	p->ring = rdmx__ring_map(size, magic);
	p->stage = p->ring ? rdmx__ring_map(size, magic) : NULL;
	if (!p->stage)
		return -ENOMEM;
	p->local_magic = magic;
	rc = c->f->reg_mr(c->ep, p->ring, span,
			  RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE, &p->ring_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->stage, span, RDMX__ACCESS_LOCAL,
				  &p->stage_mr);
	return rc;
}

static void unmap_rings(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	size_t size = c->opts.ring_size;

	if (p->stage_mr)
		c->f->dereg_mr(p->stage_mr);
	if (p->ring_mr)
		c->f->dereg_mr(p->ring_mr);
	p->stage_mr = p->ring_mr = NULL;
	rdmx__ring_unmap(p->stage, size, p->local_magic);
	rdmx__ring_unmap(p->ring, size, p->local_magic);
	p->stage = p->ring = NULL;
}

/*
 * write_magic: try the double mapping; if the mapping or its registration
 * is refused, fall back to skipping to the lap start (pad records) and
 * leave the reason in the connection's error text.
 */
static int make_rings(rdmx_conn *c)
{
	char why[RDMX__ERRMSG_LEN];

	if (!variant_of(c->proto)->double_map)
		return map_rings(c, 0);
	if (!map_rings(c, 1))
		return 0;
	snprintf(why, sizeof(why), "%s", rdmx__last());
	unmap_rings(c);
	rdmx__failo(&c->err, -EOPNOTSUPP,
		    "write_magic: double-mapped ring refused (%s); records skip to the ring start instead",
		    why);
	return map_rings(c, 0);
}

uint64_t rdmx__wring_mem_estimate(const rdmx_conn *c)
{
	uint64_t span = (uint64_t)c->opts.ring_size *
			(variant_of(c->proto)->double_map ? 2 : 1);

	return 2 * span + 4096; /* ring, stage; ctl words fit a page */
}

static int make_ctl(rdmx_conn *c)
{
	struct wring *p = wr_of(c);

	p->ctl_len = sizeof(struct ctl) + (size_t)p->nrecv * sizeof(p->ctl->rbuf[0]);
	p->ctl = rdmx__alloc_buf(p->ctl_len);
	if (!p->ctl)
		return rdmx__fail(-ENOMEM, "%s: out of memory for control words",
				  c->proto->name);
	p->ctl->tail = rdmx__cword(0); /* notify OFF: nothing yet */
	return c->f->reg_mr(c->ep, p->ctl, p->ctl_len,
			    RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE |
			    RDMX__ACCESS_READ, &p->ctl_mr);
}

static int create_queues(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	struct rdmx__qp_caps caps = {
		.max_send_wr = WRING_WRS_MAX * c->opts.send_depth + 8,
		.max_recv_wr = p->nrecv ? p->nrecv : 1,
		.rnr_retry = c->opts.rnr_retry,
		.retry_count = c->opts.retry_count,
	};
	int rc;

	rc = c->f->create_cq(c->ep, (int)(c->opts.send_depth + 8 + RDMX__KA_WRS), &p->scq);
	if (!rc)
		rc = c->f->create_cq(c->ep, (int)caps.max_recv_wr, &p->rcq);
	if (rc)
		return rc;
	caps.send_cq = p->scq;
	caps.recv_cq = p->rcq;
	/* a receive completion wakes a sleeping receiver: with notify IMM
	 * one per record; with POLL, OFF or REV the doorbell of "Sleeping
	 * receivers" above */
	rdmx__conn_watch(c, p->scq, 0);
	rdmx__conn_watch(c, p->rcq, RDMX__WATCH_RECV);
	return rdmx__conn_create_qp(c, &caps);
}

/* Options this engine cannot work with: -EINVAL with the reason. */
int rdmx__wring_check_opts(const struct rdmx_protocol_ops *proto,
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
	return rdmx__wring_check_variant(proto, o);
}

int rdmx__wring_setup(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	int rc;

	p->ack_read = rdmx__wring_ack_of(c->proto, &c->opts) == RDMX_ACK_READ;
	p->notify = rdmx__wring_notify_of(&c->opts);
	p->imm = p->notify == RDMX_NOTIFY_IMM;
	p->rseed = rdmx__ring_seed();
	p->nrecv = N_CTRL; /* updates (ack SEND) and doorbells */
	if (p->imm) /* one receive per message of the window */
		p->nrecv += c->opts.recv_depth;
	rc = make_rings(c);
	if (!rc)
		rc = make_ctl(c);
	if (!rc)
		rc = create_queues(c);
	for (uint32_t i = 0; !rc && i < p->nrecv; i++)
		rc = post_ctrl_recv(c, i);
	if (!rc)
		rc = rdmx__wburst_init(&p->burst, p->notify == RDMX_NOTIFY_POLL &&
				       c->opts.coalesce != RDMX_COALESCE_OFF,
				       c->opts.ring_size, c->opts.send_depth);
	if (!rc && p->notify >= RDMX_NOTIFY_OFF && c->max_inline < sizeof(uint64_t))
		rc = rdmx__fail(-EOPNOTSUPP, "%s: notify %s needs inline WRITEs, which this device refused",
				c->proto->name, rdmx__wring_notify_name(p->notify));
	p->st.imm = p->imm;
	p->st.notify = p->notify;
	p->st.ack_read = p->ack_read;
	return rc;
}

void rdmx__wring_teardown(rdmx_conn *c)
{
	struct wring *p = wr_of(c);

	if (p->rcq)
		c->f->destroy_cq(p->rcq);
	if (p->scq)
		c->f->destroy_cq(p->scq);
	if (p->ctl_mr)
		c->f->dereg_mr(p->ctl_mr);
	unmap_rings(c);
	free(p->ctl);
	free(p->ends);
	rdmx__ring_rel_free(&p->rel);
	rdmx__wburst_free(&p->burst); /* what is held is dropped */
}

/* ---------------------------------------------------------------- hello */

/*
 * The block (40 bytes, both directions):
 *   0 u64 receive ring address     8 u32 its rkey    12 u32 ring size
 *  16 u64 stamp seed of the ring  24 u64 control words address
 *  32 u32 their rkey              36 u16 send_depth
 *  38 u8 notify (enum rdmx_notify) in bits 0-3, ack (enum rdmx_ack; 0:
 *        the protocol's default) in bits 4-7
 *  39 u8 flags (HELLO_MAGIC: both rings of this side are double-mapped)
 */
int rdmx__wring_hello_out(rdmx_conn *c, uint8_t *b, size_t cap, size_t *len)
{
	struct wring *p = wr_of(c);

	if (cap < BLOCK_LEN)
		return rdmx__fail(-EMSGSIZE, "%s: no room for the hello block",
				  c->proto->name);
	rdmx__put_u64(b, (uintptr_t)p->ring);
	rdmx__put_u32(b + 8, p->ring_mr->rkey);
	rdmx__put_u32(b + 12, c->opts.ring_size);
	rdmx__put_u64(b + 16, p->rseed);
	rdmx__put_u64(b + 24, (uintptr_t)p->ctl);
	rdmx__put_u32(b + 32, p->ctl_mr->rkey);
	rdmx__put_u16(b + 36, (uint16_t)c->opts.send_depth);
	b[38] = (uint8_t)(p->notify | (p->ack_read ? RDMX_ACK_READ : RDMX_ACK_SEND) << 4);
	b[39] = p->local_magic ? HELLO_MAGIC : 0;
	*len = BLOCK_LEN;
	return 0;
}

/* What the peer's block says must match ours. */
static int hello_check(rdmx_conn *c, const uint8_t *b, size_t len)
{
	struct wring *p = wr_of(c);
	uint8_t notify = b[38] & 0xf, ack = b[38] >> 4;
	uint32_t size;

	if (len != BLOCK_LEN)
		return rdmx__fail(-EPROTO, "%s: protocol block of %zu bytes, expected %u",
				  c->proto->name, len, BLOCK_LEN);
	size = rdmx__get_u32(b + 12);
	if (size != c->opts.ring_size)
		return rdmx__fail(-EPROTO, "%s: ring_size mismatch: this side %u, peer %u",
				  c->proto->name, c->opts.ring_size, size);
	if (notify != p->notify)
		return rdmx__fail(-EPROTO, "%s: notify mismatch: this side %s, peer %s",
				  c->proto->name, rdmx__wring_notify_name(p->notify),
				  rdmx__wring_notify_name(notify));
	if (!ack)
		ack = variant_of(c->proto)->head_by_read ? RDMX_ACK_READ : RDMX_ACK_SEND;
	if (ack != (p->ack_read ? RDMX_ACK_READ : RDMX_ACK_SEND))
		return rdmx__fail(-EPROTO, "%s: ack mismatch: this side %s, peer %s",
				  c->proto->name, p->ack_read ? "read" : "send",
				  rdmx__wring_ack_name(ack));
	if (!rdmx__get_u16(b + 36))
		return rdmx__fail(-EPROTO, "%s: peer send_depth 0", c->proto->name);
	return 0;
}

int rdmx__wring_hello_in(rdmx_conn *c, const uint8_t *b, size_t len)
{
	struct wring *p = wr_of(c);
	int magic, rc = hello_check(c, b, len);

	if (rc)
		return rc;
	p->peer_ring = rdmx__get_u64(b);
	p->peer_ring_rkey = rdmx__get_u32(b + 8);
	p->sseed = rdmx__get_u64(b + 16);
	p->peer_ctl = rdmx__get_u64(b + 24);
	p->peer_ctl_rkey = rdmx__get_u32(b + 32);
	magic = p->local_magic && (b[39] & HELLO_MAGIC);
	rdmx__ring_geo_init(&p->rgeo, c->opts.ring_size, magic);
	rdmx__ring_geo_init(&p->sgeo, c->opts.ring_size, magic);
	p->st.magic = magic;
	p->win_out = c->peer_recv_depth + (p->imm ? 0 : c->opts.send_depth);
	p->win_in = c->opts.recv_depth + (p->imm ? 0 : rdmx__get_u16(b + 36));
	p->ends = calloc(p->win_out + 1, sizeof(*p->ends));
	if (!p->ends || rdmx__ring_rel_init(&p->rel, p->win_in))
		return rdmx__fail(-ENOMEM, "%s: out of memory for %u+%u records",
				  c->proto->name, p->win_out, p->win_in);
	return 0;
}

/* ------------------------------------------------------------- progress */

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
	struct wring *p = wr_of(c);
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, p->scq, wc, WC_BATCH), rc;

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
	if (!rc && post_ctrl_recv(c, idx))
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
	n = c->f->poll_cq(p->rcq, wc, WC_BATCH);
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
static int maybe_update(rdmx_conn *c)
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
	rc = maybe_update(c);
	return rc ? rc : a + b;
}

/* ------------------------------------------------------------- receives */

static void fill_recv_msg(rdmx_conn *c, const struct rdmx__ring_rec_view *v,
			  uint64_t seq, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);

	m->data = p->ring + rdmx__wring_at(p, &p->rgeo, p->rd, v->size) +
		  (p->notify == RDMX_NOTIFY_REV ? 0 : RDMX__RING_HDR);
	m->len = v->len;
	m->cap = v->len;
	m->imm = (v->flags & RDMX__RING_REC_IMM) ? v->imm : 0;
	m->flags = (v->flags & RDMX__RING_REC_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(m, c, RDMX__MSG_RECV, seq);
}

/* Take the record at rd: 1 with @m filled, 0 if none is complete yet. */
static int take(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);
	struct rdmx__ring_rec_view v;
	int64_t seq;
	int rc;

	for (;;) {
		rc = rdmx__wring_announced(c);
		if (rc > 0)
			rc = rdmx__wring_peek(c, &v);
		if (rc <= 0)
			return rc;
		if (!(v.flags & RDMX__RING_REC_PAD))
			break;
		p->rd += v.size;
	}
	seq = rdmx__ring_rel_push(&p->rel, p->rd + v.size);
	if (seq < 0)
		return rdmx__fail(-EPROTO, "peer overran the window of %u messages",
				  p->win_in);
	fill_recv_msg(c, &v, (uint64_t)seq, m);
	rdmx__bell_woke(&p->bell); /* a later sleep is a new one */
	p->rd += v.size;
	p->imm_ready -= p->imm ? 1 : 0;
	p->st.records_in++;
	return 1;
}

/* A receive timed out: say what it waited for and what the ring shows. */
static int recv_timed_out(rdmx_conn *c, int timeout_ms)
{
	struct wring *p = wr_of(c);

	return rdmx__fail(-ETIMEDOUT, "%s: no record at ring offset %llu within %d ms (%llu taken; notify %s: tail word %llu, doorbells %llu, sleeps published %llu; head updates sent %llu)",
			  c->proto->name, (unsigned long long)p->rd, timeout_ms,
			  (unsigned long long)p->st.records_in,
			  rdmx__wring_notify_name(p->notify),
			  (unsigned long long)p->tail_seen,
			  (unsigned long long)p->st.doorbells_recv,
			  (unsigned long long)p->bell.gen,
			  (unsigned long long)p->st.updates_sent);
}

int rdmx__wring_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct wring *p = wr_of(c);
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (unsigned i = 0;; i++) {
		/* Polling mode finds records without the CQs: poll those (and
		 * answer the peer) every few spins only. A failure marks the
		 * connection down. */
		if (p->imm || !(i % 16) || d.parking || c->state == RDMX__CONN_DOWN)
			rdmx__wring_progress(c);
		rc = take(c, m);
		if (rc > 0)
			return 0;
		if (rc < 0)
			return rdmx__conn_down(c, rc, "%s: %s", c->proto->name,
					       rdmx__last());
		if ((rc = rdmx__recv_idle(c, &d)))
			return rc == -ETIMEDOUT ? recv_timed_out(c, timeout_ms) : rc;
	}
}

/* The first message as rdmx__wring_recv takes it, then the records
 * already complete; the CQs are polled once more when none is left. */
int rdmx__wring_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			  int timeout_ms, int *later)
{
	int n = 1, polled = 0, rc = rdmx__wring_recv(c, m, timeout_ms);

	if (rc)
		return rc;
	while (n < max) {
		rc = take(c, &m[n]);
		if (rc > 0) {
			n++;
			continue;
		}
		if (rc < 0)
			*later = rdmx__conn_down(c, rc, "%s: %s", c->proto->name,
						 rdmx__last());
		if (rc < 0 || polled++)
			break;
		rdmx__wring_progress(c); /* a failure marks the connection down */
	}
	return n;
}

/* Give back @m without telling the peer: 1 if the released prefix grew,
 * 0, or -EINVAL. */
static int release_one(rdmx_conn *c, struct rdmx_msg *m)
{
	struct wring *p = wr_of(c);
	uint64_t seq;
	int n;

	if (rdmx__wring_live_alloc(c, m)) {
		p->ob.live = 0;
		rdmx__msg_spend(m);
		return 0;
	}
	if (rdmx__msg_get(m, c, RDMX__MSG_RECV, &seq) ||
	    (n = rdmx__ring_rel_release(&p->rel, seq)) < 0)
		return rdmx__fail(-EINVAL, "%s: message not held on this connection",
				  c->proto->name);
	rdmx__msg_spend(m);
	return n > 0;
}

/* The released prefix grew: publish it (ack READ) or report it. */
static int released(rdmx_conn *c)
{
	struct wring *p = wr_of(c);

	if (p->ack_read)
		__atomic_store_n(&p->ctl->released, p->rel.released, __ATOMIC_RELEASE);
	return maybe_update(c);
}

int rdmx__wring_release(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc = release_one(c, m);

	return rc > 0 ? released(c) : rc;
}

/* One publication or report for the whole vector. */
int rdmx__wring_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	int first = 0, grew = 0;

	for (int i = 0; i < n; i++) {
		int rc = release_one(c, &m[i]);

		grew |= rc > 0;
		if (rc < 0 && !first)
			first = rc;
	}
	if (grew) {
		int rc = released(c);

		first = first ? first : rc;
	}
	return first;
}
