/* SPDX-License-Identifier: MIT */
/*
 * Transport "herd", the client: the dial and its set-up (its UC and UD
 * QPs, its nonce), a request's UC WRITE into its slot, and the responses
 * taken from the server's UD QP (with its nonce) or the control
 * connection. The design: rpc_herd_ops.c.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"
#include "core/dgram.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "rpc/rpc_herd_priv.h"

static int client_mem(struct herd_conn *h, const struct rpc_contract *k)
{
	int rc;

	h->txcap = rdmx__rpc_frame_max(k);
	h->rxlen = (RDMX__GRH_LEN + h->udq->dev.ud_max + 63) & ~63u;
	rc = rdmx__herd_mem_get(h, ((h->txcap + HERD_TRAILER + 63) & ~(size_t)63) +
				(size_t)h->window * h->rxlen, RDMX__ACCESS_LOCAL);
	if (rc)
		return rc;
	h->tx = h->mem;
	h->rx = h->mem + h->memlen - (size_t)h->window * h->rxlen;
	for (uint32_t i = 0; i < h->window && !rc; i++)
		rc = rdmx__dgram_recv(h->udq, h->rx + (size_t)i * h->rxlen, h->rxlen,
				      h->mr->lkey, i);
	return rc;
}

static int client_qps(struct herd_conn *h)
{
	int rc = rdmx__dgram_open_on(h->conn, RDMX__DQP_UC, HERD_UC_DEPTH, 0, &h->uc);

	if (rc == -ENOTSUP)
		return rdmx__fail(rc, "herd: the device runs no UC queue pairs (the RC "
				  "fallback is not built): use transport msg");
	return rc ? rc : rdmx__dgram_open_on(h->conn, RDMX__DQP_UD, h->window, HERD_QKEY,
					     &h->udq);
}

/* For tests (rdmx__rpc_herd_ud_as): whose UD QP the next setup names.
 * Clients set up on many threads at once: taken with an atomic exchange,
 * and only when a test set it (the others only load it). */
static _Atomic(const struct rdmx_rpc_client *) herd_ud_as;

void rdmx__rpc_herd_ud_as(const struct rdmx_rpc_client *c)
{
	atomic_store(&herd_ud_as, c);
}

static int setup_send(struct herd_conn *h)
{
	const struct rdmx_rpc_client *ud_as =
		atomic_load_explicit(&herd_ud_as, memory_order_relaxed) ?
		atomic_exchange(&herd_ud_as, NULL) : NULL;
	const struct herd_conn *as = ud_as ? ud_as->t : h;
	uint8_t w[HERD_SETUP_LEN];

	rdmx__put_u32(w, HERD_MAGIC);
	rdmx__put_u32(w + 4, h->window);
	rdmx__qp_desc_encode(&h->uc->self, w + 8);
	rdmx__qp_desc_encode(&as->udq->self, w + 8 + RDMX__QP_DESC_WIRE);
	rdmx__put_u64(w + 8 + 2 * RDMX__QP_DESC_WIRE, h->nonce);
	return rdmx__herd_ctrl_send(h, w, sizeof(w));
}

/* The client's nonce: random (the clock and an address if the kernel's
 * generator cannot answer, still unknown to another client). */
static void nonce_make(struct herd_conn *h)
{
	if (getrandom(&h->nonce, sizeof(h->nonce), GRND_NONBLOCK) == sizeof(h->nonce))
		return;
	h->nonce = (uint64_t)rdmx__now_ns() ^ ((uint64_t)(uintptr_t)h << 17);
}

/* The server's reply (read once): the slots and its UC QP. */
static int reply_take(struct herd_conn *h)
{
	uint8_t w[HERD_REPLY_LEN];
	struct rdmx__qp_desc uc, ud;
	struct rdmx_msg m;
	int rc = rdmx_recv(h->conn, &m, h->timeout_ms);

	if (rc)
		return rdmx__fail(rc, "herd: no setup reply from the server within %d ms: %s",
				  h->timeout_ms, rdmx_conn_error(h->conn));
	if (m.len != sizeof(w)) {
		rdmx_msg_release(h->conn, &m);
		return rdmx__fail(-EPROTO, "herd: setup reply of %zu bytes, expected %u "
				  "(is the server's transport herd?)", m.len, HERD_REPLY_LEN);
	}
	memcpy(w, m.data, sizeof(w)); /* the peer's bytes, read once */
	rdmx_msg_release(h->conn, &m);
	h->slot = rdmx__get_u32(w + 4);
	h->rkey = rdmx__get_u32(w + 8);
	h->raddr = rdmx__get_u64(w + 16);
	if (rdmx__get_u32(w) != HERD_MAGIC || h->slot < RPC_HDR + HERD_TRAILER ||
	    h->slot > HERD_SLOT_MAX)
		return rdmx__fail(-EPROTO, "herd: bad setup reply (magic 0x%08x, slot %u)",
				  rdmx__get_u32(w), h->slot);
	rc = rdmx__qp_desc_decode(w + 24, RDMX__QP_DESC_WIRE, RDMX__DQP_UC, &uc);
	if (!rc)
		rc = rdmx__qp_desc_decode(w + 24 + RDMX__QP_DESC_WIRE, RDMX__QP_DESC_WIRE,
					  RDMX__DQP_UD, &ud);
	h->srv_qpn = ud.qpn;
	return rc ? rc : rdmx__uc_connect(h->uc, &uc);
}

int rdmx__herd_dial(struct rdmx_rpc_client *c, const char *addr, uint16_t port)
{
	struct herd_conn *h = calloc(1, sizeof(*h));
	struct rdmx_conn_opts co;
	int rc;

	if (!h)
		return rdmx__fail(-ENOMEM, "herd: out of memory for a connection");
	rdmx__herd_conn_opts(&c->o, &c->k, &co);
	rc = rdmx_dial(c->ctx, addr, port, &co, &h->conn);
	if (rc) {
		free(h);
		return rc;
	}
	h->timeout_ms = c->o.timeout_ms;
	h->window = c->o.window;
	nonce_make(h);
	rc = client_qps(h);
	if (!rc)
		rc = client_mem(h, &c->k);
	if (!rc)
		rc = setup_send(h);
	if (!rc)
		rc = reply_take(h);
	if (rc) {
		rdmx__herd_conn_free(h);
		return rc;
	}
	c->t = h;
	return 0;
}

/* WRITE the first @n bytes of tx so they end on slot @i's last byte. */
static int slot_put_key(struct herd_conn *h, const struct rdmx__herd_key *k, uint32_t i,
			uint32_t n, uint64_t wr_id)
{
	struct rdmx__wc wc;
	int rc = rdmx__uc_write(h->uc, h->tx, n, h->mr->lkey,
				k->raddr + (uint64_t)(i + 1) * k->slot - n, k->rkey, wr_id);

	return rc ? rc : rdmx__dgram_wait(h->uc, 0, h->timeout_ms, "a request's WRITE", &wc);
}

static int slot_put(struct herd_conn *h, uint32_t i, uint32_t n, uint64_t wr_id)
{
	struct rdmx__herd_key k = { .rkey = h->rkey, .raddr = h->raddr, .slot = h->slot };

	return slot_put_key(h, &k, i, n, wr_id);
}

/* A request: frame and trailer in one UC WRITE, right-aligned in the
 * slot of its call (the call id's low bits), the mark last. */
int rdmx__herd_slot_write(struct herd_conn *h, size_t len)
{
	uint64_t id = rdmx__get_u64(h->tx + 16);
	uint32_t i = (uint32_t)(id & (RPC_WINDOW_MAX - 1));
	uint32_t n = (uint32_t)len + HERD_TRAILER;

	if (i >= h->window || n > h->slot)
		return rdmx__fail(-EMSGSIZE, "herd: a request of %zu bytes for slot %u: "
				  "%u slots of %u bytes", len, i, h->window, h->slot);
	rdmx__put_u32(h->tx + len, (uint32_t)len);
	h->tx[len + 4] = (uint8_t)(1 + (id >> RPC_SLOT_BITS) % 255);
	return slot_put(h, i, n, id);
}

int rdmx__rpc_herd_poke(struct rdmx_rpc_client *c, uint32_t i, const void *bytes,
			size_t n)
{
	struct herd_conn *h = c->t;

	if (c->ops != &rdmx__rpc_transport_herd || i >= h->window || n > h->slot ||
	    n > (size_t)(h->rx - h->tx))
		return rdmx__fail(-EINVAL, "herd: no slot %u of %zu bytes to poke", i, n);
	memcpy(h->tx, bytes, n);
	return slot_put(h, i, (uint32_t)n, 0);
}

void rdmx__rpc_herd_key(const struct rdmx_rpc_client *c, struct rdmx__herd_key *k)
{
	const struct herd_conn *h = c->t;

	*k = (struct rdmx__herd_key){ .rkey = h->rkey, .raddr = h->raddr, .slot = h->slot };
}

int rdmx__rpc_herd_poke_key(struct rdmx_rpc_client *c, const struct rdmx__herd_key *k,
			    uint32_t i, const void *bytes, size_t n)
{
	struct herd_conn *h = c->t;

	if (c->ops != &rdmx__rpc_transport_herd || n > k->slot || n > (size_t)(h->rx - h->tx))
		return rdmx__fail(-EINVAL, "herd: no slot %u of %zu bytes to poke", i, n);
	memcpy(h->tx, bytes, n);
	return slot_put_key(h, k, i, (uint32_t)n, 0);
}

uint32_t rdmx__rpc_herd_slot(const struct rdmx_rpc_client *c)
{
	return ((const struct herd_conn *)c->t)->slot;
}

int rdmx__rpc_herd_spoof(struct rdmx_rpc_client *from, const struct rdmx_rpc_client *to,
			 const void *bytes, size_t n)
{
	struct herd_conn *f = from->t;
	const struct herd_conn *t = to->t;
	struct rdmx__ah *ah;
	struct rdmx__wc wc;
	int rc;

	if (from->ops != &rdmx__rpc_transport_herd || to->ops != &rdmx__rpc_transport_herd ||
	    n > f->udq->dev.ud_max || n > (size_t)(f->rx - f->tx))
		return rdmx__fail(-EINVAL, "herd: no datagram of %zu bytes to spoof", n);
	rc = rdmx__ud_ah(f->udq, &t->udq->self, &ah);
	if (rc)
		return rc;
	memcpy(f->tx, bytes, n);
	rc = rdmx__ud_send(f->udq, ah, &t->udq->self, f->tx, (uint32_t)n, f->mr->lkey, 0);
	if (!rc)
		rc = rdmx__dgram_wait(f->udq, 0, f->timeout_ms, "a spoofed SEND", &wc);
	rdmx__ud_ah_free(f->udq, ah);
	return rc;
}

/*
 * A datagram from a QP that is not the server's, or without our nonce:
 * anyone who knows our QPN and the QKey can SEND one, and another client
 * can have the server SEND its answers to us. Taking it would hand a
 * forged response to a call in flight, or fail the client on junk; it is
 * dropped (counted) and its buffer posted again. 0, or -EIO if the buffer
 * cannot be reposted.
 */
static int ud_foreign(struct herd_conn *h, const struct rdmx__wc *wc)
{
	h->foreign++;
	if (rdmx__dgram_recv(h->udq, h->rx + wc->wr_id * h->rxlen, h->rxlen, h->mr->lkey,
			     wc->wr_id))
		return rdmx__fail(-EIO, "herd: reposting a UD receive after a datagram "
				  "from QP %u (not the server's %u)", wc->src_qp, h->srv_qpn);
	return 0;
}

/* Take a UD response if one is there: 1, 0 (none) or -errno. */
static int ud_take(struct herd_conn *h, struct rpc_rx *rx)
{
	const uint8_t *buf;
	struct rdmx__wc wc;
	int n = rdmx__dgram_poll(h->udq, 1, &wc);

	if (n <= 0)
		return n;
	if (wc.status != RDMX__WC_OK || wc.wr_id >= h->window)
		return rdmx__fail(-EIO, "herd: UD receive completed with %s (vendor %d)",
				  rdmx__wc_status_name(wc.status), wc.vendor_status);
	buf = h->rx + wc.wr_id * h->rxlen + RDMX__GRH_LEN;
	if (wc.src_qp != h->srv_qpn || wc.byte_len < RDMX__GRH_LEN + HERD_NONCE ||
	    rdmx__get_u64(buf) != h->nonce)
		return ud_foreign(h, &wc);
	*rx = (struct rpc_rx){ .data = buf + HERD_NONCE,
			       .len = wc.byte_len - RDMX__GRH_LEN - HERD_NONCE };
	return 1;
}

/* One look at both ways a response comes: 1 with one in @rx, 0 none,
 * -errno. */
static int herd_take(struct herd_conn *h, struct rpc_rx *rx)
{
	int rc = h->udq ? ud_take(h, rx) : 0;

	if (rc)
		return rc;
	rc = rdmx_recv(h->conn, &rx->msg, 0);
	if (rc)
		return rc == -EAGAIN || rc == -ETIMEDOUT ? 0 : rc;
	rx->data = rx->msg.data;
	rx->len = rx->msg.len;
	return 1;
}

/* The next response: a UD SEND, or a message of the control connection
 * (the hello's answer, a response above the UD limit, or its close). */
int rdmx__herd_recv(void *t, struct rpc_rx *rx, int timeout_ms)
{
	struct herd_conn *h = t;
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	/* timed parks only: the UD responses' CQ is not in the control
	 * connection's wait set, a sleep there would last the backstop */
	d.timed = h->udq != NULL;
	while (!(rc = herd_take(h, rx))) {
		rc = rdmx__conn_wait(h->conn, &d); /* bound, and the server's liveness */
		/* what the server sent before it left comes first (a
		 * refusal of the contract, then its close) */
		if (rc) {
			int got = herd_take(h, rx);

			return got > 0 ? 0 : got < 0 ? got : rc;
		}
	}
	return rc < 0 ? rc : 0;
}
