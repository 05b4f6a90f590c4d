/* SPDX-License-Identifier: MIT */
/*
 * UD and UC queue pairs on the fake fabric (the seam's rdmx__dgram_ops,
 * described in fabric.h), so that HERD-style logic is unit-tested natively.
 * Like the rest of the fake, work requests execute at post time under the
 * one lock; the QP's send slots, receive queue and completions are an RC
 * QP's (a struct rdmx__ep inside, never on G.qps), so slots are freed when
 * poll_cq() reaps the completion covering them.
 *
 * What is modelled:
 *  - One host: every QP has the GID ::ffff:127.0.0.1, LID 0, MTU 1024
 *    (IBV_MTU_1024, as rxe on a 1500-byte link).
 *  - UD SEND (or SEND_IMM): delivered to the UD QP with the remote QPN if
 *    the qkey matches and a receive is posted; the receive gets a 40-byte
 *    GRH (as RoCEv2 with IPv4 addresses: bytes 20..39 are the IPv4
 *    header, addresses 127.0.0.1), then the payload; byte_len counts
 *    both, src_qp names the sender. Otherwise it is dropped and counted in
 *    rdmx__fake_ud_drops. A receive too short for GRH + payload completes
 *    with LOCAL_LENGTH. The sender completes OK either way; a payload over
 *    the MTU is refused at post time (-EMSGSIZE).
 *  - UC WRITE: executed into the peer's memory if the QP is connected, the
 *    QP it names exists and is connected, and the rkey grants REMOTE WRITE
 *    over the range; otherwise dropped (rdmx__fake_uc_drops). No ACKs: the
 *    sender completes OK either way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "fabric_fake_base.h"
#include "fabric_fake_post.h"

#define FAKE_MTU 3 /* IBV_MTU_1024 */
#define FAKE_MTU_BYTES 1024u
#define GRH_HOP_LIMIT 64
#define IPV4_HDR 20
#define UDP_BTH_DETH (8 + 12 + 8)
#define IPPROTO_UDP_NUM 17

unsigned long rdmx__fake_ud_drops, rdmx__fake_uc_drops;

struct rdmx__dqp {
	struct rdmx__ep ep;        /* qpn, caps, rq, sq_used, unsig */
	enum rdmx__dqp_type type;
	uint32_t qkey;
	uint32_t psn;
	int connected;             /* UC: uc_connect() done */
	uint32_t peer_qpn;         /* UC */
	struct rdmx__dqp *next;
};

struct rdmx__ah {
	struct rdmx__qp_desc peer;
};

static struct rdmx__dqp *dqps;

static const uint8_t fake_gid[16] = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 };

static const char *type_name(enum rdmx__dqp_type t)
{
	return t == RDMX__DQP_UD ? "UD" : "UC";
}

static int fd_caps(struct rdmx__ep *ep, struct rdmx__dgram_caps *out)
{
	(void)ep;
	*out = (struct rdmx__dgram_caps){ .uc = 1, .ud_max = FAKE_MTU_BYTES,
					  .mtu = FAKE_MTU };
	return 0;
}

static int fd_create(struct rdmx__ep *ep, struct rdmx__dqp_caps *caps,
		     struct rdmx__dqp **out)
{
	struct rdmx__dqp *q;

	(void)ep;
	if (caps->type != RDMX__DQP_UD && caps->type != RDMX__DQP_UC)
		return rdmx__fail(-EINVAL, "fake: unknown datagram QP type %d", caps->type);
	if (!caps->send_cq || !caps->recv_cq || !caps->max_send_wr || !caps->max_recv_wr)
		return rdmx__fail(-EINVAL, "fake: a %s QP needs CQs and queue depths",
				  type_name(caps->type));
	q = calloc(1, sizeof(*q));
	if (q)
		q->ep.rq.w = calloc(caps->max_recv_wr, sizeof(*q->ep.rq.w));
	if (!q || !q->ep.rq.w) {
		free(q);
		return rdmx__fail(-ENOMEM, "fake: out of memory for a %s QP", type_name(caps->type));
	}
	q->ep.cm_fd = -1;
	q->type = caps->type;
	q->qkey = caps->qkey;
	q->ep.caps = (struct rdmx__qp_caps){ .send_cq = caps->send_cq, .recv_cq = caps->recv_cq,
					     .max_send_wr = caps->max_send_wr,
					     .max_recv_wr = caps->max_recv_wr,
					     .max_inline = caps->max_inline };
	q->ep.rq.cap = caps->max_recv_wr;
	lock();
	q->ep.qpn = G.next_qpn++;
	q->psn = (q->ep.qpn * 2654435761u) & 0xffffff;
	q->next = dqps;
	dqps = q;
	unlock();
	*out = q;
	return 0;
}

/* Its completions still queued no longer free slots. */
static void fd_destroy(struct rdmx__dqp *q)
{
	struct rdmx__cq *cq;
	struct rdmx__dqp **pp;

	if (!q)
		return;
	lock();
	for (pp = &dqps; *pp != q; pp = &(*pp)->next)
		;
	*pp = q->next;
	cq = q->ep.caps.send_cq;
	for (uint32_t i = 0; i < cq->count; i++)
		if (cq->ring[(cq->head + i) % cq->cap].owner == &q->ep)
			cq->ring[(cq->head + i) % cq->cap].owner = NULL;
	unlock();
	free(q->ep.rq.w);
	free(q);
}

static int fd_desc(struct rdmx__dqp *q, struct rdmx__qp_desc *out)
{
	*out = (struct rdmx__qp_desc){ .qpn = q->ep.qpn, .psn = q->psn, .qkey = q->qkey,
				       .mtu = FAKE_MTU, .type = (uint8_t)q->type };
	memcpy(out->gid, fake_gid, sizeof(out->gid));
	return 0;
}

static int fd_uc_connect(struct rdmx__dqp *q, const struct rdmx__qp_desc *p)
{
	if (q->type != RDMX__DQP_UC)
		return rdmx__fail(-EINVAL, "fake: uc_connect on UD QP %u", q->ep.qpn);
	lock();
	q->peer_qpn = p->qpn;
	q->connected = 1;
	unlock();
	return 0;
}

static int fd_ah_create(struct rdmx__dqp *q, const struct rdmx__qp_desc *p,
			struct rdmx__ah **out)
{
	struct rdmx__ah *ah = calloc(1, sizeof(*ah));

	if (!ah)
		return rdmx__fail(-ENOMEM, "fake: out of memory for an address handle");
	(void)q;
	ah->peer = *p;
	*out = ah;
	return 0;
}

static void fd_ah_destroy(struct rdmx__ah *ah)
{
	free(ah);
}

static struct rdmx__dqp *dqp_find(uint32_t qpn, enum rdmx__dqp_type type)
{
	for (struct rdmx__dqp *q = dqps; q; q = q->next)
		if (q->ep.qpn == qpn && q->type == type)
			return q;
	return NULL;
}

/* The GRH in front of a UD receive, as RoCEv2 lays it for IPv4 GIDs (the
 * fake's): 20 bytes unused, then the IPv4 header (UDP, source and
 * destination address from the GIDs' last four bytes). */
static void grh_fill(uint8_t *grh, uint32_t len)
{
	uint32_t total = IPV4_HDR + UDP_BTH_DETH + len;

	memset(grh, 0, RDMX__GRH_LEN);
	grh[20] = 0x45;
	grh[22] = (uint8_t)(total >> 8);
	grh[23] = (uint8_t)total;
	grh[28] = GRH_HOP_LIMIT;
	grh[29] = IPPROTO_UDP_NUM;
	memcpy(grh + 32, fake_gid + 12, 4);
	memcpy(grh + 36, fake_gid + 12, 4);
}

/* Deliver a UD SEND to @dst's next receive (one is posted). */
static void ud_deliver(struct rdmx__dqp *src, struct rdmx__dqp *dst,
		       const struct rdmx__wr *wr)
{
	struct rq *rq = &dst->ep.rq;
	struct rdmx__wr r = rq->w[rq->head];
	uint64_t need = (uint64_t)wr->len + RDMX__GRH_LEN;
	struct rdmx__wc wc = { .wr_id = r.wr_id, .op = RDMX__OP_RECV, .qp_num = dst->ep.qpn,
			       .src_qp = src->ep.qpn, .byte_len = (uint32_t)need,
			       .has_imm = wr->op == RDMX__OP_SEND_IMM, .imm = wr->imm };

	rq->head = (rq->head + 1) % rq->cap;
	rq->count--;
	if (r.len < need || !local_write_ok(r.lkey, r.addr, need)) {
		wc.status = r.len < need ? RDMX__WC_LOCAL_LENGTH : RDMX__WC_OTHER;
		wc.vendor_status = r.len < need ? VS_LOC_LEN : VS_LOC_PROT;
	} else {
		grh_fill(r.addr, wr->len);
		mem_copy((uint8_t *)r.addr + RDMX__GRH_LEN, wr->addr, wr->len);
	}
	rdmx__fake_cq_push(dst->ep.caps.recv_cq, &wc, NULL, 0);
}

static void ud_send(struct rdmx__dqp *q, const struct rdmx__wr *wr)
{
	struct rdmx__dqp *dst = dqp_find(wr->remote_qpn, RDMX__DQP_UD);

	if (dst && dst->qkey == wr->remote_qkey && dst->ep.rq.count)
		ud_deliver(q, dst, wr);
	else
		rdmx__fake_ud_drops++;
}

static void uc_write(struct rdmx__dqp *q, const struct rdmx__wr *wr)
{
	struct rdmx__dqp *dst = dqp_find(q->peer_qpn, RDMX__DQP_UC);

	if (!dst || !dst->connected || !remote_write(wr, dst->ep.qpn))
		rdmx__fake_uc_drops++;
}

/* Successful unsignaled WRs complete silently, as in fabric_fake_post.c. */
static void send_done(struct rdmx__dqp *q, const struct rdmx__wr *wr)
{
	struct rdmx__wc wc = { .wr_id = wr->wr_id, .op = wr->op, .byte_len = wr->len,
			       .qp_num = q->ep.qpn };

	q->ep.sq_used++;
	if (!(wr->flags & RDMX__WR_SIGNALED)) {
		q->ep.unsig++;
		return;
	}
	rdmx__fake_cq_push(q->ep.caps.send_cq, &wc, &q->ep, q->ep.unsig + 1);
	q->ep.unsig = 0;
}

static int wr_check(const struct rdmx__dqp *q, const struct rdmx__wr *wr)
{
	const char *t = type_name(q->type);
	int ud = q->type == RDMX__DQP_UD;

	if (ud ? (wr->op != RDMX__OP_SEND && wr->op != RDMX__OP_SEND_IMM) || !wr->ah :
	    wr->op != RDMX__OP_WRITE)
		return rdmx__fail(-EINVAL, "fake: opcode %d%s not for %s QP %u", wr->op,
				  wr->ah ? "" : " without an address handle", t, q->ep.qpn);
	if (!ud && !q->connected)
		return rdmx__fail(-EINVAL, "fake: WRITE on UC QP %u before uc_connect", q->ep.qpn);
	if (ud && wr->len > FAKE_MTU_BYTES)
		return rdmx__fail(-EMSGSIZE, "fake: UD SEND of %u bytes over the MTU (%u)",
				  wr->len, FAKE_MTU_BYTES);
	if (q->ep.sq_used >= q->ep.caps.max_send_wr)
		return rdmx__fail(-ENOMEM, "fake: send queue of %s QP %u full (%u posted)",
				  t, q->ep.qpn, q->ep.caps.max_send_wr);
	if ((wr->flags & RDMX__WR_INLINE) ? wr->len > q->ep.caps.max_inline :
	    !local_ok(wr->lkey, wr->addr, wr->len))
		return rdmx__fail(-EINVAL, "fake: %s QP %u: %u bytes at %p: bad lkey or over "
				  "max_inline", t, q->ep.qpn, wr->len, wr->addr);
	return 0;
}

static int fd_post_send(struct rdmx__dqp *q, const struct rdmx__wr *wr, int n)
{
	int rc = 0;

	lock();
	for (int i = 0; i < n && !rc; i++) {
		rc = wr_check(q, &wr[i]);
		if (rc)
			break;
		if (q->type == RDMX__DQP_UD)
			ud_send(q, &wr[i]);
		else
			uc_write(q, &wr[i]);
		send_done(q, &wr[i]);
	}
	unlock();
	return rc;
}

static int fd_post_recv(struct rdmx__dqp *q, const struct rdmx__wr *wr, int n)
{
	struct rq *rq = &q->ep.rq;
	int rc = 0;

	lock();
	for (int i = 0; i < n && !rc; i++) {
		if (rq->count == rq->cap)
			rc = rdmx__fail(-ENOMEM, "fake: receive queue of %s QP %u full (%u posted)",
					type_name(q->type), q->ep.qpn, rq->cap);
		else
			rq->w[(rq->head + rq->count++) % rq->cap] = wr[i];
	}
	unlock();
	return rc;
}

/* ---------------------------------------------------------------- windows */

static const char *bind_check(const struct fmr *w, const struct fmr *mr,
			      const struct rdmx__mw_bind *b)
{
	uintptr_t base = (uintptr_t)b->mr->addr, at = (uintptr_t)b->addr;

	if (!w || !mr)
		return "unknown window or region";
	if (!(mr->access & RDMX__ACCESS_MW_BIND))
		return "the region was not registered for window binds";
	if (!b->len || at < base || b->len > b->mr->len || at - base > b->mr->len - b->len)
		return "the range is not within the region";
	if ((b->access & (RDMX__ACCESS_WRITE | RDMX__ACCESS_ATOMIC)) &&
	    !(mr->access & RDMX__ACCESS_LOCAL))
		return "remote write rights on a region without local write";
	if (b->access & ~(RDMX__ACCESS_WRITE | RDMX__ACCESS_READ | RDMX__ACCESS_ATOMIC))
		return "rights other than remote write, read, atomic";
	return NULL;
}

static struct fmr *fmr_of(const void *pub, int mw)
{
	for (struct fmr *m = G.mrs; m; m = m->next)
		if ((mw ? (const void *)&m->mw : (const void *)&m->pub) == pub)
			return m;
	return NULL;
}

/* Bind @mw to the UC QP b->qp (a work request: signaled completion on its
 * send CQ); the window takes a fresh key, so the old one is refused. */
int rdmx__fake_mw_bind(struct rdmx__mw *mw, const struct rdmx__mw_bind *b)
{
	struct rdmx__wr wr = { .wr_id = b->wr_id, .op = RDMX__OP_BIND_MW,
			       .flags = RDMX__WR_SIGNALED };
	struct rdmx__dqp *q = b->qp;
	struct fmr *w, *mr;
	const char *bad;
	int rc;

	lock();
	w = fmr_of(mw, 1);
	mr = fmr_of(b->mr, 0);
	bad = bind_check(w, mr, b);
	if (b->ep) { /* RC: a work request behind the QP's sends */
		rc = bad ? rdmx__fail(-EINVAL, "fake: window bind on QP %u: %s", b->ep->qpn,
				      bad) : rdmx__fake_bind_post(b->ep, w, b);
		unlock();
		return rc;
	}
	if (!bad && q->ep.sq_used >= q->ep.caps.max_send_wr)
		bad = "the send queue is full";
	if (!bad) {
		w->pub.addr = b->addr;
		w->pub.len = b->len;
		w->access = b->access;
		w->parent = mr;
		w->qpn = q->ep.qpn;
		w->mw.rkey = w->pub.rkey = rdmx__fake_rkey_new();
		send_done(q, &wr);
	}
	unlock();
	if (bad)
		return rdmx__fail(-EINVAL, "fake: window bind on %s QP %u: %s",
				  type_name(q->type), q->ep.qpn, bad);
	return 0;
}

/* Every fake host is 127.0.0.1: its GID, as the descriptors carry it. */
int rdmx__fake_peer_gid(const struct rdmx__ep *ep, uint8_t gid[16])
{
	(void)ep;
	memcpy(gid, fake_gid, 16);
	return 0;
}

const struct rdmx__dgram_ops rdmx__dgram_fake = {
	.caps = fd_caps,
	.create = fd_create,
	.destroy = fd_destroy,
	.desc = fd_desc,
	.uc_connect = fd_uc_connect,
	.ah_create = fd_ah_create,
	.ah_destroy = fd_ah_destroy,
	.post_send = fd_post_send,
	.post_recv = fd_post_recv,
};
