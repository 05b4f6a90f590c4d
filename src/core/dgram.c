/* SPDX-License-Identifier: MIT */
/*
 * UD and UC queue pairs above the fabric seam (see dgram.h): one QP and its
 * CQs as one object, the descriptor's wire form and its validation, posts
 * of single work requests, and a bounded completion wait.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dgram.h"
#include "errors.h"
#include "wait.h"

#define QPN_MAX 0xffffffu
#define LID_UNICAST_MAX 0xbfff
#define MTU_MIN 1 /* IBV_MTU_256 */
#define MTU_MAX 5 /* IBV_MTU_4096 */
#define INLINE_WANT 64

static const char *type_name(enum rdmx__dqp_type t)
{
	return t == RDMX__DQP_UD ? "UD" : "UC";
}

static int make_cqs(struct rdmx__dgram *g, struct rdmx__ep *ep, uint32_t depth)
{
	int rc = g->f->create_cq(ep, (int)depth, &g->scq);

	return rc ? rc : g->f->create_cq(ep, (int)depth, &g->rcq);
}

static void free_dgram(struct rdmx__dgram *g)
{
	if (g->qp)
		g->f->dgram->destroy(g->qp);
	if (g->scq)
		g->f->destroy_cq(g->scq);
	if (g->rcq)
		g->f->destroy_cq(g->rcq);
	free(g);
}

int rdmx__dgram_open(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep,
		     enum rdmx__dqp_type type, uint32_t depth, uint32_t qkey,
		     struct rdmx__dgram **out)
{
	struct rdmx__dqp_caps caps = { .type = type, .max_send_wr = depth,
				       .max_recv_wr = depth, .max_inline = INLINE_WANT,
				       .qkey = qkey };
	struct rdmx__dgram *g = calloc(1, sizeof(*g));
	int rc;

	if (!g)
		return rdmx__fail(-ENOMEM, "out of memory for a %s QP", type_name(type));
	g->f = f;
	g->ep = ep;
	rc = f->dgram->caps(ep, &g->dev);
	if (!rc && type == RDMX__DQP_UC && !g->dev.uc)
		rc = rdmx__fail(-ENOTSUP, "the device does not run UC queue pairs");
	if (!rc)
		rc = make_cqs(g, ep, depth);
	caps.send_cq = g->scq;
	caps.recv_cq = g->rcq;
	if (!rc)
		rc = f->dgram->create(ep, &caps, &g->qp);
	if (!rc)
		rc = f->dgram->desc(g->qp, &g->self);
	if (rc) {
		free_dgram(g);
		return rc;
	}
	g->max_inline = caps.max_inline;
	*out = g;
	return 0;
}

int rdmx__dgram_open_on(rdmx_conn *c, enum rdmx__dqp_type type, uint32_t depth,
			uint32_t qkey, struct rdmx__dgram **out)
{
	return rdmx__dgram_open(c->f, c->ep, type, depth, qkey, out);
}

void rdmx__dgram_close(struct rdmx__dgram *g)
{
	if (g)
		free_dgram(g);
}

int rdmx__dgram_reg(struct rdmx__dgram *g, void *buf, size_t len, int access,
		    struct rdmx__mr **out)
{
	return g->f->reg_mr(g->ep, buf, len, access, out);
}

void rdmx__dgram_dereg(struct rdmx__dgram *g, struct rdmx__mr *mr)
{
	g->f->dereg_mr(mr);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void rdmx__qp_desc_encode(const struct rdmx__qp_desc *d,
			  uint8_t wire[RDMX__QP_DESC_WIRE])
{
	memset(wire, 0, RDMX__QP_DESC_WIRE);
	wire[0] = RDMX__QP_DESC_VERSION;
	wire[1] = d->type;
	wire[2] = d->mtu;
	put32(wire + 4, d->qpn);
	put32(wire + 8, d->psn);
	put32(wire + 12, d->qkey);
	wire[16] = (uint8_t)d->lid;
	wire[17] = (uint8_t)(d->lid >> 8);
	memcpy(wire + 32, d->gid, sizeof(d->gid));
}

static int zeros(const uint8_t *p, size_t n)
{
	while (n && !p[n - 1])
		n--;
	return n == 0;
}

/* Range checks of a descriptor decoded into a local copy. */
static int desc_check(const uint8_t *w, const struct rdmx__qp_desc *d,
		      enum rdmx__dqp_type want)
{
	const char *bad = NULL;

	if (w[0] != RDMX__QP_DESC_VERSION)
		bad = "version";
	else if (d->type != want)
		bad = "type";
	else if (d->mtu < MTU_MIN || d->mtu > MTU_MAX)
		bad = "mtu";
	else if (!d->qpn || d->qpn > QPN_MAX)
		bad = "qpn";
	else if (d->psn > QPN_MAX)
		bad = "psn";
	else if (d->lid > LID_UNICAST_MAX)
		bad = "lid";
	else if (w[3] || !zeros(w + 18, 14))
		bad = "reserved bytes";
	if (!bad)
		return 0;
	return rdmx__fail(-EINVAL, "bad %s queue pair descriptor from the peer: %s "
			  "(type %u, mtu %u, qpn %u, psn %u, lid %u)", type_name(want), bad,
			  d->type, d->mtu, d->qpn, d->psn, d->lid);
}

int rdmx__qp_desc_decode(const void *wire, size_t len, enum rdmx__dqp_type want,
			 struct rdmx__qp_desc *out)
{
	uint8_t w[RDMX__QP_DESC_WIRE];
	struct rdmx__qp_desc d;
	int rc;

	if (len != sizeof(w))
		return rdmx__fail(-EINVAL, "queue pair descriptor of %zu bytes from the peer, "
				  "expected %d", len, RDMX__QP_DESC_WIRE);
	memcpy(w, wire, sizeof(w)); /* the peer's bytes, read once */
	d = (struct rdmx__qp_desc){ .type = w[1], .mtu = w[2], .qpn = get32(w + 4),
				    .psn = get32(w + 8), .qkey = get32(w + 12),
				    .lid = (uint16_t)(w[16] | w[17] << 8) };
	memcpy(d.gid, w + 32, sizeof(d.gid));
	rc = desc_check(w, &d, want);
	if (!rc)
		*out = d;
	return rc;
}

int rdmx__uc_connect(struct rdmx__dgram *g, const struct rdmx__qp_desc *peer)
{
	return g->f->dgram->uc_connect(g->qp, peer);
}

static int post_one(struct rdmx__dgram *g, struct rdmx__wr *wr)
{
	wr->flags = RDMX__WR_SIGNALED | (wr->len <= g->max_inline ? RDMX__WR_INLINE : 0);
	return g->f->dgram->post_send(g->qp, wr, 1);
}

int rdmx__uc_write(struct rdmx__dgram *g, const void *buf, uint32_t len,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct rdmx__wr wr = { .wr_id = wr_id, .op = RDMX__OP_WRITE, .addr = (void *)buf,
			       .len = len, .lkey = lkey, .remote_addr = raddr, .rkey = rkey };

	return post_one(g, &wr);
}

int rdmx__ud_ah(struct rdmx__dgram *g, const struct rdmx__qp_desc *peer,
		struct rdmx__ah **out)
{
	return g->f->dgram->ah_create(g->qp, peer, out);
}

void rdmx__ud_ah_free(struct rdmx__dgram *g, struct rdmx__ah *ah)
{
	if (ah)
		g->f->dgram->ah_destroy(ah);
}

int rdmx__ud_send(struct rdmx__dgram *g, struct rdmx__ah *ah,
		  const struct rdmx__qp_desc *peer, const void *buf,
		  uint32_t len, uint32_t lkey, uint64_t wr_id)
{
	struct rdmx__wr wr = { .wr_id = wr_id, .op = RDMX__OP_SEND, .addr = (void *)buf,
			       .len = len, .lkey = lkey, .ah = ah,
			       .remote_qpn = peer->qpn, .remote_qkey = peer->qkey };

	if (len > g->dev.ud_max)
		return rdmx__fail(-EMSGSIZE, "UD SEND of %u bytes on QP %u: the MTU is %u",
				  len, g->self.qpn, g->dev.ud_max);
	return post_one(g, &wr);
}

int rdmx__dgram_recv(struct rdmx__dgram *g, void *buf, uint32_t len,
		     uint32_t lkey, uint64_t wr_id)
{
	struct rdmx__wr wr = { .wr_id = wr_id, .op = RDMX__OP_RECV, .addr = buf,
			       .len = len, .lkey = lkey };

	return g->f->dgram->post_recv(g->qp, &wr, 1);
}

int rdmx__dgram_poll(struct rdmx__dgram *g, int recv, struct rdmx__wc *wc)
{
	return g->f->poll_cq(recv ? g->rcq : g->scq, wc, 1);
}

int rdmx__dgram_wait(struct rdmx__dgram *g, int recv, int timeout_ms,
		     const char *what, struct rdmx__wc *wc)
{
	const char *t = type_name(g->self.type);
	struct rdmx__deadline d;
	int n;

	if (timeout_ms < 0)
		return rdmx__fail(-EINVAL, "%s QP %u: a wait for %s without a bound",
				  t, g->self.qpn, what);
	rdmx__deadline_start(&d, timeout_ms);
	while (!(n = rdmx__dgram_poll(g, recv, wc))) {
		if (!rdmx__wait_idle(&d))
			continue;
		if (rdmx__deadline_left_ms(&d) == 0)
			return rdmx__fail(-ETIMEDOUT, "%s QP %u: no %s completion within %d ms "
					  "waiting for %s", t, g->self.qpn,
					  recv ? "receive" : "send", timeout_ms, what);
		rdmx__wait_park(&d);
	}
	if (n < 0)
		return n;
	if (wc->status != RDMX__WC_OK)
		return rdmx__fail(-EIO, "%s QP %u: %s completed with %s (vendor %d) "
				  "waiting for %s", t, g->self.qpn, recv ? "receive" : "send",
				  rdmx__wc_status_name(wc->status), wc->vendor_status, what);
	return 0;
}

static void gid_text(const uint8_t *g, char *buf, size_t len)
{
	size_t n = 0;

	for (int i = 0; i < 16 && n + 3 < len; i += 2)
		n += (size_t)snprintf(buf + n, len - n, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
}

int rdmx__qp_desc_of_peer(rdmx_conn *c, const struct rdmx__qp_desc *d)
{
	uint8_t want[16];
	char a[48], b[48];
	int rc = c->f->peer_gid(c->ep, want);

	if (rc || zeros(want, sizeof(want)) || !memcmp(want, d->gid, sizeof(want)))
		return rc;
	gid_text(d->gid, a, sizeof(a));
	gid_text(want, b, sizeof(b));
	return rdmx__fail(-EPERM, "%s QP %u is at GID %s, not at the connection's peer %s: "
			  "a client names only its own queue pairs", type_name(d->type), d->qpn,
			  a, b);
}
