/* SPDX-License-Identifier: MIT */
/*
 * Transport "herd", the server: the listener, a client's set-up (its
 * slots, its UC QP, its UD address), the round-robin poll of every set-up
 * client's slots, and the responses SENT over the workers' UD QPs. The
 * design: rpc_herd_ops.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/admit.h"
#include "core/clock.h"
#include "core/dgram.h"
#include "core/event.h"
#include "core/live.h"
#include "core/wait.h"
#include "core/wire.h"
#include "rpc/rpc_herd_priv.h"

#define PEER_CHECK_ROUNDS 256u

static void ud_free(struct herd_srv *hs, struct herd_ud *u)
{
	if (u->mr) /* made on u->g's device (ud_open) */
		rdmx__dgram_dereg(u->g, u->mr);
	rdmx__dgram_close(u->g);
	free(u->buf);
	pthread_mutex_destroy(&u->lock);
	(void)hs;
}

static int ud_open(struct herd_ud *u, rdmx_conn *c)
{
	int rc = rdmx__dgram_open_on(c, RDMX__DQP_UD, HERD_UD_DEPTH, HERD_QKEY, &u->g);

	if (rc)
		return rc;
	u->buf = aligned_alloc(64, (u->g->dev.ud_max + 63) & ~63u);
	if (!u->buf)
		return rdmx__fail(-ENOMEM, "herd: out of memory for a UD send buffer");
	return rdmx__dgram_reg(u->g, u->buf, (u->g->dev.ud_max + 63) & ~63u,
			       RDMX__ACCESS_LOCAL, &u->mr);
}

static void uds_close(struct herd_srv *hs)
{
	for (unsigned i = 0; i < hs->nud; i++)
		ud_free(hs, &hs->ud[i]);
	free(hs->ud);
	hs->ud = NULL;
	hs->nud = 0;
}

/* The workers' UD QPs, made on the device of the first connection. */
static int uds_open(struct herd_srv *hs, rdmx_conn *c)
{
	unsigned n = hs->s->o.workers ? hs->s->o.workers : 1;
	int rc = 0;

	if (hs->ud)
		return 0;
	hs->ud = calloc(n, sizeof(*hs->ud));
	if (!hs->ud)
		return rdmx__fail(-ENOMEM, "herd: out of memory for %u UD QPs", n);
	for (hs->nud = 0; hs->nud < n && !rc; hs->nud++) {
		pthread_mutex_init(&hs->ud[hs->nud].lock, NULL);
		rc = ud_open(&hs->ud[hs->nud], c);
	}
	if (rc)
		uds_close(hs);
	return rc;
}

int rdmx__herd_listen(struct rdmx_rpc_server *s, const char *addr, uint16_t port)
{
	struct herd_srv *hs = calloc(1, sizeof(*hs));
	struct rdmx_conn_opts co;
	int rc;

	if (!hs)
		return rdmx__fail(-ENOMEM, "herd: out of memory for a listener");
	hs->s = s;
	hs->slot = (uint32_t)((RPC_HDR + s->k.max_req + HERD_TRAILER + 63) & ~63u);
	rdmx__herd_conn_opts(&s->o, &s->k, &co);
	rc = rdmx_listen(s->ctx, addr, port, &co, &hs->lis);
	if (rc) {
		free(hs);
		return rc;
	}
	/* a client's request slots, registered for it (up to the server's
	 * window): in the listener's max_mem, so a dial beyond it is refused */
	rdmx__listener_charge_each(hs->lis, (uint64_t)s->o.window * hs->slot);
	s->tstate = hs;
	return 0;
}

int rdmx__rpc_herd_iso(const struct rdmx_rpc_server *s)
{
	return (int)((const struct herd_srv *)s->tstate)->iso;
}

uint16_t rdmx__herd_port(const struct rdmx_rpc_server *s)
{
	return rdmx_listener_port(((const struct herd_srv *)s->tstate)->lis);
}

void rdmx__herd_unlisten(struct rdmx_rpc_server *s)
{
	struct herd_srv *hs = s->tstate;

	rdmx_listener_destroy(hs->lis);
	uds_close(hs);
	free(hs);
	s->tstate = NULL;
}

static void conn_link(struct herd_srv *hs, struct herd_conn *h)
{
	h->next = hs->conns;
	if (hs->conns)
		hs->conns->prev = h;
	hs->conns = h;
	h->linked = true;
}

void rdmx__herd_conn_unlink(struct herd_srv *hs, struct herd_conn *h)
{
	if (!h->linked)
		return;
	if (hs->cur == h) {
		hs->cur = h->next;
		hs->cur_slot = 0;
	}
	if (h->prev)
		h->prev->next = h->next;
	else
		hs->conns = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->linked = false;
	h->slots = 0;
	rdmx__export_revoke(&h->exp); /* closed: its key is refused from now */
}

/* The client's descriptors and nonce from its setup message (read once). */
static int setup_read(const struct rdmx_msg *m, struct herd_conn *h, struct rdmx__qp_desc *uc)
{
	uint32_t *window = &h->window;
	struct rdmx__qp_desc *ud = &h->peer_ud;
	uint8_t w[HERD_SETUP_LEN];
	int rc;

	memcpy(w, m->data, sizeof(w)); /* the peer's bytes, read once */
	*window = rdmx__get_u32(w + 4);
	h->nonce = rdmx__get_u64(w + 8 + 2 * RDMX__QP_DESC_WIRE);
	if (*window < 1 || *window > RPC_WINDOW_MAX)
		return rdmx__fail(-EPROTO, "herd: setup asks for a window of %u slots, "
				  "1..%u", *window, RPC_WINDOW_MAX);
	rc = rdmx__qp_desc_decode(w + 8, RDMX__QP_DESC_WIRE, RDMX__DQP_UC, uc);
	return rc ? rc : rdmx__qp_desc_decode(w + 8 + RDMX__QP_DESC_WIRE,
					      RDMX__QP_DESC_WIRE, RDMX__DQP_UD, ud);
}

static int setup_reply(struct herd_conn *h)
{
	uint8_t w[HERD_REPLY_LEN] = { 0 };

	rdmx__put_u32(w, HERD_MAGIC);
	rdmx__put_u32(w + 4, h->slot);
	rdmx__put_u32(w + 8, h->exp.rkey);
	rdmx__put_u64(w + 16, (uintptr_t)h->mem);
	rdmx__qp_desc_encode(&h->uc->self, w + 24);
	rdmx__qp_desc_encode(&h->ud->g->self, w + 24 + RDMX__QP_DESC_WIRE);
	return rdmx__herd_ctrl_send(h, w, sizeof(w));
}

/* @d, a QP @h's client names as its own: at its host (the control
 * connection's peer), and no QP another client set up with (a client
 * naming another's UD QP would have the server SEND its answers there). */
static int desc_own(struct herd_srv *hs, struct herd_conn *h, const struct rdmx__qp_desc *d)
{
	int rc = rdmx__qp_desc_of_peer(h->conn, d);

	for (unsigned i = 0; i < hs->nud && !rc; i++)
		if (hs->ud[i].g->self.qpn == d->qpn &&
		    !memcmp(hs->ud[i].g->self.gid, d->gid, sizeof(d->gid)))
			rc = rdmx__fail(-EPERM, "herd: a client names the server's own UD QP %u "
					"as its own: refused", d->qpn);
	for (struct herd_conn *o = hs->conns; o && !rc; o = o->next)
		if (o != h && o->setup && (o->peer_ud.qpn == d->qpn || o->peer_uc.qpn == d->qpn) &&
		    !memcmp(o->peer_ud.gid, d->gid, sizeof(d->gid)))
			rc = rdmx__fail(-EPERM, "herd: a client names %s QP %u, another client's, "
					"as its own: refused", d->type == RDMX__DQP_UD ? "UD" : "UC",
					d->qpn);
	return rc;
}

/* The client's slots, exported for remote WRITE only to its UC QP alone
 * (a window bound to it where the device has windows; mw.h). */
static int slots_export(struct herd_srv *hs, struct herd_conn *h)
{
	int rc = rdmx__herd_mem_alloc(h, (size_t)h->window * h->slot);

	if (!rc)
		rc = rdmx__export_dgram(h->uc, h->mem, h->memlen, RDMX__ACCESS_WRITE,
					h->timeout_ms, &h->exp);
	if (!rc)
		hs->iso = h->exp.how;
	return rc;
}

/* A client's setup: its slots (at most the server's window: each is a
 * registered slot of the contract's largest request, so a client asking
 * for 4096 would pin that much here), its UC QP's peer, its UD address. */
static int setup_serve(struct herd_srv *hs, struct herd_conn *h, const struct rdmx_msg *m)
{
	struct rdmx__qp_desc *uc = &h->peer_uc;
	int rc = setup_read(m, h, uc);

	if (!rc && h->window > hs->s->o.window)
		rc = rdmx__fail(-EPROTO, "herd: a client asks for %u slots, above the "
				"server's window of %u: refused", h->window, hs->s->o.window);
	if (!rc)
		rc = desc_own(hs, h, &h->peer_ud);
	if (!rc)
		rc = desc_own(hs, h, uc);
	if (!rc)
		rc = uds_open(hs, h->conn);
	if (rc)
		return rc;
	h->ud = &hs->ud[hs->next_ud++ % hs->nud];
	h->slot = hs->slot;
	rc = rdmx__ud_ah(h->ud->g, &h->peer_ud, &h->ah);
	if (!rc)
		rc = rdmx__dgram_open_on(h->conn, RDMX__DQP_UC, HERD_UC_DEPTH, 0, &h->uc);
	if (!rc)
		rc = rdmx__uc_connect(h->uc, uc);
	if (!rc)
		rc = slots_export(hs, h);
	if (!rc)
		rc = setup_reply(h);
	if (!rc) {
		h->slots = h->window;
		/* last: a worker's herd_send may use h->ud, h->ah from now */
		__atomic_store_n(&h->setup, true, __ATOMIC_RELEASE);
		/* charged at accept for the server's window of slots */
		rdmx__conn_uncharge(h->conn, (uint64_t)(hs->s->o.window - h->window) * h->slot);
	}
	return rc;
}

static int is_setup(const struct rdmx_msg *m)
{
	return m->len == HERD_SETUP_LEN && rdmx__get_u32(m->data) == HERD_MAGIC;
}

/* A control event: 1 when it is one for the core (in @ev), 0 if herd's. */
static int on_ctrl(struct herd_srv *hs, struct rdmx_event *e, struct rpc_sev *ev)
{
	struct herd_conn *h;
	int rc;

	if (e->type == RDMX_EVENT_CONN) {
		size_t cap = rdmx__rpc_frame_max(&hs->s->k);

		h = calloc(1, sizeof(*h));
		if (h)
			*h = (struct herd_conn){ .conn = e->conn, .hs = hs, .tx = malloc(cap),
						 .txcap = cap, .timeout_ms = hs->s->o.timeout_ms };
		if (!h || !h->tx) {
			free(h);
			rdmx_conn_close(e->conn);
			return 0;
		}
		rdmx_conn_set_user(e->conn, h);
		conn_link(hs, h);
		*ev = (struct rpc_sev){ .type = RPC_SEV_CONN, .t = h };
		return 1;
	}
	h = rdmx_conn_get_user(e->conn);
	*ev = (struct rpc_sev){ .type = RPC_SEV_CLOSED, .t = h };
	if (e->type == RDMX_EVENT_CLOSED) {
		rdmx__herd_conn_unlink(hs, h);
		return 1;
	}
	if (h->setup || !is_setup(&e->msg)) {
		*ev = (struct rpc_sev){ .type = RPC_SEV_FRAME, .t = h,
					.rx = { .data = e->msg.data, .len = e->msg.len,
						.msg = e->msg } };
		return 1;
	}
	rc = setup_serve(hs, h, &e->msg);
	rdmx_msg_release(e->conn, &e->msg);
	if (!rc)
		return 0;
	rdmx__keep(&hs->s->err, rc);
	return 1; /* CLOSED: the core lets that client go */
}

/* Slot @i of @h has its mark: copy the trailer once, then the frame. */
static void slot_take(struct herd_conn *h, uint32_t i, struct rpc_sev *ev)
{
	uint8_t *end = h->mem + (size_t)(i + 1) * h->slot;
	uint8_t tr[HERD_TRAILER];
	uint32_t len;
	void *copy;

	memcpy(tr, end - HERD_TRAILER, sizeof(tr)); /* the peer's bytes, read once */
	len = rdmx__get_u32(tr);
	if (len > h->slot - HERD_TRAILER) {
		rdmx__fail(-EPROTO, "herd: slot %u says %u bytes, above its %u", i, len,
			   h->slot - HERD_TRAILER);
		len = 0; /* the core judges an empty frame: that client fails */
	}
	copy = malloc(len ? len : 1);
	if (copy)
		memcpy(copy, end - HERD_TRAILER - len, len);
	__atomic_store_n(end - 1, 0, __ATOMIC_RELEASE);
	*ev = (struct rpc_sev){ .type = RPC_SEV_FRAME, .t = h,
				.rx = { .data = copy, .len = copy ? len : 0 } };
}

/* One round over every set-up client's slots, from where the last ended. */
static int slots_poll(struct herd_srv *hs, struct rpc_sev *ev)
{
	size_t total = 0;

	for (struct herd_conn *h = hs->conns; h; h = h->next)
		total += h->slots;
	for (size_t n = 0; n < total; n++) {
		struct herd_conn *h;
		uint32_t i;

		while (!hs->cur || hs->cur_slot >= hs->cur->slots) {
			hs->cur = hs->cur ? hs->cur->next : NULL;
			hs->cur = hs->cur ? hs->cur : hs->conns;
			hs->cur_slot = 0;
		}
		h = hs->cur;
		i = hs->cur_slot++;
		if (__atomic_load_n(h->mem + (size_t)(i + 1) * h->slot - 1, __ATOMIC_ACQUIRE)) {
			slot_take(h, i, ev);
			return 1;
		}
	}
	return 0;
}

/* Now and then, when idle, look for clients gone (their control
 * connection's peer): the listener reports them at its next poll. */
static void peers_check(struct herd_srv *hs)
{
	if (++hs->idle % PEER_CHECK_ROUNDS)
		return;
	for (struct herd_conn *h = hs->conns; h; h = h->next)
		rdmx__conn_check_peer(h->conn);
}

int rdmx__herd_next(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms)
{
	struct herd_srv *hs = s->tstate;
	struct rdmx__deadline d;
	struct rdmx_event e;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		int rc = rdmx_listener_next(hs->lis, &e, 0);

		if (!rc && on_ctrl(hs, &e, ev))
			return 0;
		if (rc && rc != -ETIMEDOUT && rc != -EAGAIN && rc != -ENOTCONN)
			return rc;
		if (slots_poll(hs, ev))
			return 0;
		if (rdmx__deadline_left_ms(&d) == 0)
			return -ETIMEDOUT;
		if (rc) {
			peers_check(hs);
			/* shared cores: let the clients run; then a dial
			 * is looked for first */
			if (rdmx__wait_idle(&d)) {
				rdmx__wait_park(&d);
				rdmx__listener_parked(hs->lis);
			}
		}
	}
}

/* A response as one UD SEND from the connection's worker QP. */
int rdmx__herd_ud_send(struct herd_conn *h, const void *buf, size_t len)
{
	struct herd_ud *u = h->ud;
	struct rdmx__wc wc;
	int rc;

	pthread_mutex_lock(&u->lock);
	rdmx__put_u64(u->buf, h->nonce);
	memcpy(u->buf + HERD_NONCE, buf, len);
	rc = rdmx__ud_send(u->g, h->ah, &h->peer_ud, u->buf, (uint32_t)(HERD_NONCE + len),
			   u->mr->lkey, 0);
	if (!rc)
		rc = rdmx__dgram_wait(u->g, 0, h->timeout_ms, "a response's SEND", &wc);
	pthread_mutex_unlock(&u->lock);
	return rc;
}
