// SPDX-License-Identifier: MIT
/* rdmx bench: the rdmx endpoint and the control messages; see bench_ep.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ep.h"
#include "le.h"

#define REP_VEC 16 /* messages per rdmx_recv_many */
#define VEC_MAX 4096 /* --sendv: messages staged for one rdmx_sendv */
#define VEC_BYTES (1u << 20) /* and their bytes, but one message of any size */

struct rdmx_ep {
	struct bench_ep ep;
	rdmx_conn *conn;
	struct bench_rx q[REP_VEC]; /* taken, not yet handed out */
	int qn, qi;
	/* --sendv: a burst's messages, staged until its last */
	struct iovec *iov;
	uint8_t *vbuf;
	size_t vcap, vused;
	int vn;
};

static struct rdmx_ep *rep_of(struct bench_ep *ep)
{
	return (struct rdmx_ep *)ep;
}

/* Record "<what>: <error> (<detail>)" and pass @rc on. */
static int rep_fail(struct rdmx_ep *r, const char *what, int rc)
{
	cli_fail(&r->ep.err, what, rc, r->conn);
	return rc;
}

/* What is left of the endpoint's timeout since @t0 (-1: none). */
static int vec_left(const struct rdmx_ep *r, uint64_t t0)
{
	uint64_t ms = (bench_now_ns() - t0) / 1000000;

	if (r->ep.timeout_ms < 0)
		return -1;
	return ms >= (uint64_t)r->ep.timeout_ms ? 0 : r->ep.timeout_ms - (int)ms;
}

/* --sendv: send the staged messages, in as many rdmx_sendv calls as it
 * takes (each returns how many it sent, like writev), all within the
 * endpoint's timeout. The stage is empty after it, sent or failed: a
 * message is never sent twice. */
static int vec_flush(struct rdmx_ep *r)
{
	uint64_t t0 = bench_now_ns();
	int done = 0, n = 0;

	while (done < r->vn && n >= 0) {
		n = rdmx_sendv(r->conn, r->iov + done, r->vn - done, vec_left(r, t0), NULL);
		done += n > 0 ? n : 0;
	}
	r->vn = 0;
	r->vused = 0;
	if (n == -EAGAIN && r->ep.timeout_ms) /* no room within the timeout */
		n = -ETIMEDOUT;
	return n < 0 ? rep_fail(r, "send a vector", n) : 0;
}

/* Room in the staging buffer for a message of @len bytes: its address.
 * The buffer is allocated zeroed (the bytes after a message's head are
 * sent as they are: zeros, or an earlier message's) and only while the
 * stage is empty: the iovecs point into it. */
static uint8_t *vec_room(struct rdmx_ep *r, size_t len)
{
	size_t cap = len > VEC_BYTES ? len : VEC_BYTES;

	if (!r->iov && !(r->iov = calloc(VEC_MAX, sizeof(*r->iov))))
		return NULL;
	if (r->vused + len > r->vcap) {
		if (r->vn)
			return NULL;
		free(r->vbuf);
		r->vcap = 0;
		if (!(r->vbuf = calloc(1, cap)))
			return NULL;
		r->vcap = cap;
	}
	return r->vbuf + r->vused;
}

/* --sendv: stage a data message; a burst's last one (or a full stage)
 * sends them all with rdmx_sendv. */
static int vec_send(struct rdmx_ep *r, const void *head, size_t head_len, size_t len)
{
	uint8_t *b;
	int rc;

	if (r->vn && (r->vn == VEC_MAX || r->vused + len > r->vcap)) {
		rc = vec_flush(r);
		if (rc)
			return rc;
	}
	b = vec_room(r, len);
	if (!b)
		return rep_fail(r, "stage a vector", -ENOMEM);
	memcpy(b, head, head_len < len ? head_len : len);
	r->iov[r->vn++] = (struct iovec){ .iov_base = b, .iov_len = len };
	r->vused += len;
	return r->ep.more ? 0 : vec_flush(r);
}

static int rep_send(struct bench_ep *ep, const void *head, size_t head_len,
		    size_t len, bool ctrl)
{
	struct rdmx_ep *r = rep_of(ep);
	struct rdmx_msg m;
	int rc;

	if (ep->vec && !ctrl)
		return vec_send(r, head, head_len, len);
	if (r->vn && (rc = vec_flush(r))) /* a control after a cut burst */
		return rc;
	rc = rdmx_msg_alloc(r->conn, len, &m, ep->timeout_ms);
	if (rc)
		return rep_fail(r, "allocate a message", rc);
	memcpy(m.data, head, head_len < len ? head_len : len);
	m.len = len;
	m.flags = ctrl ? RDMX_MSG_IMM : 0;
	m.imm = ctrl ? BENCH_CTRL_IMM : 0;
	/* a burst (--batch): every send but its last may be held */
	rc = rdmx_send_flags(r->conn, &m, ep->more && !ctrl ? RDMX_SEND_MORE : 0,
			     NULL);
	return rc ? rep_fail(r, "send", rc) : 0;
}

/* What bench_rx keeps of @m. */
static void rx_fill(struct bench_rx *rx, const struct rdmx_msg *m)
{
	rx->len = m->len;
	rx->ctrl = (m->flags & RDMX_MSG_IMM) && m->imm == BENCH_CTRL_IMM;
	memcpy(rx->head, m->data, m->len < BENCH_HEAD ? m->len : BENCH_HEAD);
}

int bench_rx_take(struct bench_ep *ep, struct rdmx_msg *m, struct bench_rx *rx)
{
	struct rdmx_ep *r = rep_of(ep);
	int rc;

	rx_fill(rx, m);
	rc = rdmx_msg_release(r->conn, m);
	return rc ? rep_fail(r, "release a message", rc) : 0;
}

/* The next message: from those the last rdmx_recv_many took, else up to
 * REP_VEC more (a burst's messages, --batch), given back in one call. */
static int rep_recv(struct bench_ep *ep, struct bench_rx *rx)
{
	struct rdmx_ep *r = rep_of(ep);
	struct rdmx_msg m[REP_VEC];
	int n, rc;

	if (r->qi < r->qn) {
		*rx = r->q[r->qi++];
		return 0;
	}
	n = rdmx_recv_many(r->conn, m, REP_VEC, ep->timeout_ms);
	if (n == -ECONNRESET)
		return n;
	if (n < 0)
		return rep_fail(r, "receive", n);
	for (int i = 0; i < n; i++)
		rx_fill(&r->q[i], &m[i]);
	rc = rdmx_msg_release_many(r->conn, m, n);
	if (rc)
		return rep_fail(r, "release messages", rc);
	r->qn = n;
	r->qi = 1;
	*rx = r->q[0];
	return 0;
}

static int rep_flush(struct bench_ep *ep)
{
	struct rdmx_ep *r = rep_of(ep);
	int rc = r->vn ? vec_flush(r) : 0;

	if (rc)
		return rc;
	rc = rdmx_flush(r->conn, ep->timeout_ms);

	return rc ? rep_fail(r, "flush", rc) : 0;
}

static void rep_close(struct bench_ep *ep)
{
	struct rdmx_ep *r = rep_of(ep);

	rdmx_conn_close(r->conn);
	free(r->iov);
	free(r->vbuf);
	free(r);
}

static const struct bench_ep_ops rdmx_ep_ops = {
	.send = rep_send,
	.recv = rep_recv,
	.flush = rep_flush,
	.close = rep_close,
};

struct bench_ep *bench_ep_rdmx(rdmx_conn *conn, int timeout_ms)
{
	struct rdmx_ep *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->ep.ops = &rdmx_ep_ops;
	r->ep.timeout_ms = timeout_ms;
	r->conn = conn;
	return &r->ep;
}

void bench_ep_close(struct bench_ep *ep)
{
	if (ep)
		ep->ops->close(ep);
}

/* ------------------------------------------------------- control messages */

int bench_send_ctrl(struct bench_ep *ep, const struct bench_ctrl *c)
{
	uint8_t b[BENCH_CTRL_LEN];

	le_put64(b, c->op);
	le_put64(b + 8, c->size);
	le_put64(b + 16, c->count);
	le_put64(b + 24, c->bad);
	le_put64(b + 32, c->user_ns);
	le_put64(b + 40, c->sys_ns);
	return ep->ops->send(ep, b, sizeof(b), sizeof(b), true);
}

int bench_send_data(struct bench_ep *ep, size_t size, uint64_t seq)
{
	uint8_t b[8];

	le_put64(b, seq);
	return ep->ops->send(ep, b, sizeof(b), size, false);
}

int bench_rx_ctrl(struct bench_ep *ep, const struct bench_rx *rx,
		  struct bench_ctrl *c)
{
	if (!rx->ctrl || rx->len != BENCH_CTRL_LEN) {
		cli_set_err(&ep->err, "protocol error: expected a control message, "
			    "got %zu bytes of data", rx->len);
		return -EPROTO;
	}
	c->op = (uint32_t)le_get64(rx->head);
	c->size = le_get64(rx->head + 8);
	c->count = le_get64(rx->head + 16);
	c->bad = le_get64(rx->head + 24);
	c->user_ns = le_get64(rx->head + 32);
	c->sys_ns = le_get64(rx->head + 40);
	if (c->op < BENCH_OP_BEGIN_LAT || c->op > BENCH_OP_SHUTDOWN) {
		cli_set_err(&ep->err, "protocol error: unknown control %u", c->op);
		return -EPROTO;
	}
	return 0;
}

uint64_t bench_rx_seq(const struct bench_rx *rx)
{
	return rx->len >= 8 ? le_get64(rx->head) : 0;
}

int bench_recv_ack(struct bench_ep *ep, struct bench_ctrl *ack)
{
	struct bench_rx rx;
	int rc;

	rc = ep->ops->recv(ep, &rx);
	if (rc == -ECONNRESET)
		cli_set_err(&ep->err, "the server disconnected");
	if (rc)
		return rc;
	rc = bench_rx_ctrl(ep, &rx, ack);
	if (rc)
		return rc;
	if (ack->op != BENCH_OP_ACK) {
		cli_set_err(&ep->err, "protocol error: expected ACK, got control %u",
			    ack->op);
		return -EPROTO;
	}
	return 0;
}
