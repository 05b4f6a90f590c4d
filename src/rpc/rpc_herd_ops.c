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

#include "core/dgram.h"
#include "rpc/rpc_herd_priv.h"

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

/*
 * Server: has the client's set-up completed (its UD QP, address handle
 * and UD address all made)? A worker answering a request the client sent
 * on the control connection before its set-up reads this while the run
 * thread sets the client up (setup_serve): h->ud alone was set before the
 * address handle, and stayed set when a later step failed, so a response
 * could go out with no address handle. The flag is published last.
 */
static bool herd_set_up(const struct herd_conn *h)
{
	return __atomic_load_n(&h->setup, __ATOMIC_ACQUIRE);
}

static int herd_send(void *t, struct rpc_buf *b, size_t len)
{
	struct herd_conn *h = t;
	uint8_t kind = ((const uint8_t *)b->data)[4]; /* our own frame */
	int rc;

	if (!h->hs && kind == RPC_REQ)
		rc = rdmx__herd_slot_write(h, len);
	else if (h->hs && kind == RPC_RESP && herd_set_up(h) &&
		 HERD_NONCE + len <= h->ud->g->dev.ud_max) {
		rc = rdmx__herd_ud_send(h, b->data, len);
		atomic_fetch_add(&h->hs->ud_sends, 1);
	} else {
		rc = rdmx__herd_ctrl_send(h, b->data, len);
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
		rdmx__herd_conn_unlink(h->hs, h);
	rdmx__herd_conn_free(h);
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

static rdmx_listener *herd_listener(const struct rdmx_rpc_server *s)
{
	return ((const struct herd_srv *)s->tstate)->lis;
}

/* The window the client set up (0 before: its control connection's flow
 * control bounds what it sends there). */
static uint32_t herd_window(const void *t)
{
	return ((const struct herd_conn *)t)->window;
}

const struct rpc_transport_ops rdmx__rpc_transport_herd = {
	.name = "herd",
	.listen = rdmx__herd_listen,
	.port = rdmx__herd_port,
	.next = rdmx__herd_next,
	.unlisten = rdmx__herd_unlisten,
	.dial = rdmx__herd_dial,
	.alloc = herd_alloc,
	.send = herd_send,
	.drop = herd_drop,
	.recv = rdmx__herd_recv,
	.release = herd_release,
	.flush = herd_flush,
	.error = herd_error,
	.set_user = herd_set_user,
	.get_user = herd_get_user,
	.close = herd_close,
	.conn = herd_conn,
	.listener = herd_listener,
	.window = herd_window,
	.posts = herd_posts,
};
