/* SPDX-License-Identifier: MIT */
/*
 * Transport "herd" (HERD, SIGCOMM'14): requests WRITTEN into the client's
 * slots of a region on the server over UC, the server polling the slots
 * round robin, responses SENT over UD from one UD QP per server worker.
 *
 * Control: an rdmx connection as "msg" uses (its protocol, message size
 * and depths). The dialer's first message is the herd setup (HERD_SETUP:
 * magic, window, its UC and UD descriptors, a random 64-bit nonce); the
 * server answers with
 * HERD_REPLY (magic, slot size, the region's rkey and address, its UC
 * QP's and its worker's UD QP's descriptors). Descriptors go through
 * rdmx__qp_desc_decode: read once, range-checked. Then the contract check
 * (HELLO) runs over the control connection as on "msg". A first message
 * that is not a setup is handed to the RPC core as a frame (so garbage is
 * judged, and fails that connection, the one way it is on "msg").
 *
 * A slot (one per call of the client's window) holds the request frame
 * RIGHT-ALIGNED, followed by a trailer [u32 length | u8 mark]: one WRITE
 * of frame + trailer ends on the slot's last byte, the mark (non-zero).
 * The server polls that byte; once set it copies the trailer once, checks
 * the length against the slot, copies the frame once into its own memory
 * (the handler reads the copy; the client cannot change it under it) and
 * clears the mark. The RPC core then checks the header copy against the
 * contract (method known, length within its max_req); a bad slot fails
 * that client's connection only. A slot is written again only after its
 * call completed (the core's window), so clearing races with no write of
 * a well-behaved client.
 *
 * Responses up to the UD payload limit (the path MTU: 1024 bytes on the
 * fake fabric and rxe's default) go as one UD SEND; larger ones go over
 * the control connection (chosen over refusing them at contract time, so
 * any contract runs; document: only small responses get HERD's path).
 * UD is unreliable: a lost response is a call that times out (bounded by
 * the caller's timeout) with "no response within N ms"; the call's window
 * slot stays taken until a late response arrives (HERD's stance: no
 * retransmission; the calls are not replayed, idempotent or not).
 * Requests above the slot size cannot happen: the slot is sized to the
 * contract's largest request, and the core refuses larger ones with
 * -EMSGSIZE before anything is sent.
 *
 * The client takes a UD datagram only from the server's UD QP (the QPN of
 * the setup reply) and only when it starts with the client's nonce (every
 * UD response is the nonce, then the frame): anyone who knows the client's
 * QPN and the fixed QKey can SEND to it, and another client of the server
 * can name the victim's UD QP as its own in its setup and have the server
 * SEND its answers there, from the server's QP. The nonce travels only on
 * the client's own RC control connection. What fails either check is
 * dropped, never taken as a response nor held against the server. (The
 * source QPN is what the sending NIC stamps; the nonce is what holds
 * against a forger with raw packet access.)
 *
 * A device without UC (iWARP) is refused with -ENOTSUP at dial: the RC
 * path HERD falls back to is not built here.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"
#include "core/dgram.h"
#include "core/event.h"
#include "core/live.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "rpc/rpc_int.h"

#define HERD_QKEY 0x48455244u
#define HERD_TRAILER 5u         /* u32 length, u8 mark */
#define HERD_NONCE 8u           /* before every UD response: the client's nonce */
#define HERD_SETUP_LEN (8u + 2 * RDMX__QP_DESC_WIRE + HERD_NONCE)
#define HERD_REPLY_LEN (24u + 2 * RDMX__QP_DESC_WIRE)
#define HERD_SLOT_MAX (1u << 24)
#define HERD_UC_DEPTH 16u
#define HERD_UD_DEPTH 64u
#define PEER_CHECK_ROUNDS 256u

/* One UD QP of the server, per worker; its lock makes a responder the
 * QP's one thread for a post and its completion. */
struct herd_ud {
	pthread_mutex_t lock;
	struct rdmx__dgram *g;
	struct rdmx__mr *mr;
	uint8_t *buf;                 /* dev.ud_max bytes: the SEND's source */
};

struct herd_conn;

/* The listener side: s->tstate. */
struct herd_srv {
	struct rdmx_rpc_server *s;
	rdmx_listener *lis;
	struct herd_ud *ud;
	unsigned nud, next_ud;
	uint32_t slot;                /* bytes per request slot */
	struct herd_conn *conns;      /* every connection; set up: slots polled */
	unsigned idle;                /* empty rounds since the last peer check */
	struct herd_conn *cur;        /* round robin: the next conn ... */
	uint32_t cur_slot;            /* ... and its next slot */
	_Atomic uint64_t ud_sends, ctrl_sends;
};

/* A connection, either side (@hs set on the server's). */
struct herd_conn {
	rdmx_conn *conn;
	void *user;
	struct herd_srv *hs;
	int timeout_ms;
	struct rdmx__dgram *uc;       /* requests: the client's WRITEs land in mem */
	struct rdmx__mr *mr;
	uint8_t *mem;                 /* server: the slots; client: tx, then rx */
	size_t memlen;
	uint8_t *tx;                  /* a frame to send (alloc) */
	size_t txcap;
	uint32_t window, slot;
	uint32_t slots;               /* server: polled (window once set up) */
	uint64_t nonce;               /* the client's: heads its UD responses */
	bool setup, linked;
	struct rdmx__err err;
	/* server */
	struct herd_ud *ud;
	struct rdmx__ah *ah;
	struct rdmx__qp_desc peer_ud;
	struct herd_conn *prev, *next;
	/* client */
	struct rdmx__dgram *udq;
	uint8_t *rx;                  /* window receive buffers of rxlen */
	uint32_t rxlen, rkey;
	uint64_t raddr;
	uint32_t srv_qpn;             /* the server's UD QP: the one source taken */
	uint64_t foreign;             /* datagrams from any other QP, dropped */
};

static void herd_conn_opts(const struct rdmx_rpc_opts *o, const struct rpc_contract *k,
			   struct rdmx_conn_opts *co)
{
	rdmx__rpc_conn_opts(o, k, 0, co);
	co->protocol = o->protocol;
}

/* Registered, zeroed memory of @len bytes (a multiple of 64) on the
 * device of @h's UC QP (and its UD QP's: the connection's). */
static int mem_get(struct herd_conn *h, size_t len, int access)
{
	h->memlen = (len + 63) & ~(size_t)63;
	h->mem = aligned_alloc(64, h->memlen);
	if (!h->mem)
		return rdmx__fail(-ENOMEM, "herd: out of memory for %zu bytes", h->memlen);
	memset(h->mem, 0, h->memlen);
	return rdmx__dgram_reg(h->uc, h->mem, h->memlen, access, &h->mr);
}

static void conn_free(struct herd_conn *h)
{
	if (h->ah)
		rdmx__ud_ah_free(h->ud->g, h->ah);
	rdmx__dgram_close(h->udq);
	if (h->mr) /* made on h->uc's device (mem_get) */
		rdmx__dgram_dereg(h->uc, h->mr);
	rdmx__dgram_close(h->uc);
	free(h->mem);
	if (h->hs)
		free(h->tx);
	rdmx_conn_close(h->conn);
	free(h);
}

/* Send @len bytes at @buf as one message of the control connection. */
static int ctrl_send(struct herd_conn *h, const void *buf, size_t len)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(h->conn, len, &m, h->timeout_ms);

	if (rc)
		return rc;
	memcpy(m.data, buf, len);
	m.len = len;
	return rdmx_send(h->conn, &m);
}

/* ---------------------------------------------------------------- server */

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

static int herd_listen(struct rdmx_rpc_server *s, const char *addr, uint16_t port)
{
	struct herd_srv *hs = calloc(1, sizeof(*hs));
	struct rdmx_conn_opts co;
	int rc;

	if (!hs)
		return rdmx__fail(-ENOMEM, "herd: out of memory for a listener");
	hs->s = s;
	hs->slot = (uint32_t)((RPC_HDR + s->k.max_req + HERD_TRAILER + 63) & ~63u);
	herd_conn_opts(&s->o, &s->k, &co);
	rc = rdmx_listen(s->ctx, addr, port, &co, &hs->lis);
	if (rc) {
		free(hs);
		return rc;
	}
	s->tstate = hs;
	return 0;
}

static uint16_t herd_port(const struct rdmx_rpc_server *s)
{
	return rdmx_listener_port(((const struct herd_srv *)s->tstate)->lis);
}

static void herd_unlisten(struct rdmx_rpc_server *s)
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

static void conn_unlink(struct herd_srv *hs, struct herd_conn *h)
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
	rdmx__put_u32(w + 8, h->mr->rkey);
	rdmx__put_u64(w + 16, (uintptr_t)h->mem);
	rdmx__qp_desc_encode(&h->uc->self, w + 24);
	rdmx__qp_desc_encode(&h->ud->g->self, w + 24 + RDMX__QP_DESC_WIRE);
	return ctrl_send(h, w, sizeof(w));
}

/* A client's setup: its slots (at most the server's window: each is a
 * registered slot of the contract's largest request, so a client asking
 * for 4096 would pin that much here), its UC QP's peer, its UD address. */
static int setup_serve(struct herd_srv *hs, struct herd_conn *h, const struct rdmx_msg *m)
{
	struct rdmx__qp_desc uc;
	int rc = setup_read(m, h, &uc);

	if (!rc && h->window > hs->s->o.window)
		rc = rdmx__fail(-EPROTO, "herd: a client asks for %u slots, above the "
				"server's window of %u: refused", h->window, hs->s->o.window);
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
		rc = rdmx__uc_connect(h->uc, &uc);
	if (!rc)
		rc = mem_get(h, (size_t)h->window * h->slot,
			     RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE);
	if (!rc)
		rc = setup_reply(h);
	if (!rc) {
		h->setup = true;
		h->slots = h->window;
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
		conn_unlink(hs, h);
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

static int herd_next(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms)
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
static int ud_send(struct herd_conn *h, const void *buf, size_t len)
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

/* ---------------------------------------------------------------- client */

static int client_mem(struct herd_conn *h, const struct rpc_contract *k)
{
	int rc;

	h->txcap = rdmx__rpc_frame_max(k);
	h->rxlen = (RDMX__GRH_LEN + h->udq->dev.ud_max + 63) & ~63u;
	rc = mem_get(h, ((h->txcap + HERD_TRAILER + 63) & ~(size_t)63) +
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
	return ctrl_send(h, w, sizeof(w));
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

static int herd_dial(struct rdmx_rpc_client *c, const char *addr, uint16_t port)
{
	struct herd_conn *h = calloc(1, sizeof(*h));
	struct rdmx_conn_opts co;
	int rc;

	if (!h)
		return rdmx__fail(-ENOMEM, "herd: out of memory for a connection");
	herd_conn_opts(&c->o, &c->k, &co);
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
		conn_free(h);
		return rc;
	}
	c->t = h;
	return 0;
}

/* WRITE the first @n bytes of tx so they end on slot @i's last byte. */
static int slot_put(struct herd_conn *h, uint32_t i, uint32_t n, uint64_t wr_id)
{
	struct rdmx__wc wc;
	int rc = rdmx__uc_write(h->uc, h->tx, n, h->mr->lkey,
				h->raddr + (uint64_t)(i + 1) * h->slot - n, h->rkey, wr_id);

	return rc ? rc : rdmx__dgram_wait(h->uc, 0, h->timeout_ms, "a request's WRITE", &wc);
}

/* A request: frame and trailer in one UC WRITE, right-aligned in the
 * slot of its call (the call id's low bits), the mark last. */
static int slot_write(struct herd_conn *h, size_t len)
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
static int herd_recv(void *t, struct rpc_rx *rx, int timeout_ms)
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

/* ------------------------------------------------------------ both sides */

static int herd_alloc(void *t, size_t size, struct rpc_buf *b, int timeout_ms)
{
	struct herd_conn *h = t;

	(void)timeout_ms;
	if (size > h->txcap)
		return rdmx__fail(-EMSGSIZE, "herd: a frame of %zu bytes, largest %zu", size,
				  h->txcap);
	b->data = h->tx;
	b->cap = h->txcap;
	return 0;
}

static int herd_send(void *t, struct rpc_buf *b, size_t len)
{
	struct herd_conn *h = t;
	uint8_t kind = ((const uint8_t *)b->data)[4]; /* our own frame */
	int rc;

	if (!h->hs && kind == RPC_REQ)
		rc = slot_write(h, len);
	else if (h->hs && kind == RPC_RESP && h->ud && HERD_NONCE + len <= h->ud->g->dev.ud_max) {
		rc = ud_send(h, b->data, len);
		atomic_fetch_add(&h->hs->ud_sends, 1);
	} else {
		rc = ctrl_send(h, b->data, len);
		if (h->hs)
			atomic_fetch_add(&h->hs->ctrl_sends, 1);
	}
	return rc ? rdmx__keep(&h->err, rc) : 0;
}

static void herd_drop(void *t, struct rpc_buf *b)
{
	(void)t;
	(void)b; /* the connection's own buffer */
}

static void herd_release(void *t, struct rpc_rx *rx)
{
	struct herd_conn *h = t;

	if (rx->msg.data) {
		rdmx_msg_release(h->conn, &rx->msg);
	} else if (h->hs) {
		free((void *)rx->data); /* a slot's copy */
	} else {
		size_t i = (size_t)((const uint8_t *)rx->data - HERD_NONCE - RDMX__GRH_LEN - h->rx) /
			   h->rxlen;

		if (rdmx__dgram_recv(h->udq, h->rx + i * h->rxlen, h->rxlen, h->mr->lkey, i))
			rdmx__keep(&h->err, -EIO);
	}
}

static int herd_flush(void *t, int timeout_ms)
{
	return rdmx_flush(((struct herd_conn *)t)->conn, timeout_ms);
}

static const char *herd_error(const void *t)
{
	const struct herd_conn *h = t;

	return h->err.msg[0] ? h->err.msg : rdmx_conn_error(h->conn);
}

static void herd_set_user(void *t, void *user)
{
	((struct herd_conn *)t)->user = user;
}

static void *herd_get_user(const void *t)
{
	return ((const struct herd_conn *)t)->user;
}

static rdmx_conn *herd_conn(const void *t)
{
	return ((const struct herd_conn *)t)->conn;
}

static void herd_close(void *t)
{
	struct herd_conn *h = t;

	if (h->hs)
		conn_unlink(h->hs, h);
	conn_free(h);
}

void rdmx__rpc_herd_counts(const struct rdmx_rpc_server *s, uint64_t *ud_sends,
			   uint64_t *ctrl_sends)
{
	struct herd_srv *hs = s->tstate;

	*ud_sends = atomic_load(&hs->ud_sends);
	*ctrl_sends = atomic_load(&hs->ctrl_sends);
}

/* The UD SENDs: work requests outside the connections. */
static uint64_t herd_posts(const struct rdmx_rpc_server *s)
{
	struct herd_srv *hs = s->tstate;

	return hs ? atomic_load(&hs->ud_sends) : 0;
}

const struct rpc_transport_ops rdmx__rpc_transport_herd = {
	.name = "herd",
	.listen = herd_listen,
	.port = herd_port,
	.next = herd_next,
	.unlisten = herd_unlisten,
	.dial = herd_dial,
	.alloc = herd_alloc,
	.send = herd_send,
	.drop = herd_drop,
	.recv = herd_recv,
	.release = herd_release,
	.flush = herd_flush,
	.error = herd_error,
	.set_user = herd_set_user,
	.get_user = herd_get_user,
	.close = herd_close,
	.conn = herd_conn,
	.posts = herd_posts,
};
