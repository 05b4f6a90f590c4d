/* SPDX-License-Identifier: MIT */
/*
 * Transport "rfp" (RFP, EuroSys'17: remote fetching). Each client gets
 * @slots request slots and as many response slots in server memory, one
 * registration exported to it at connect (REMOTE_WRITE on the request
 * half, REMOTE_READ on the response half). A call's slot is its call id's
 * slot index (rpc_client.c), the hello's slot 0.
 *
 *   client: WRITE the frame into its request slot, then WRITE the slot's
 *           trailer (len and seq, the slot's last 8 bytes, trailer_word):
 *           the validity mark is written last, by a second WRITE that RC
 *           places after the first.
 *   server: polls the trailers of every slot (one 8-byte acquire load,
 *           the copy is what is checked: seq one above the slot's last,
 *           len within the slot), hands the frame in place to the RPC
 *           layer, and writes the response frame into the response slot,
 *           then its trailer (release store). No work request is posted.
 *   client: RDMA-READs the response trailer; when it carries the call's
 *           seq, READs the frame (two READs: the frame was complete before
 *           its trailer was stored, so no reliance on the order within one
 *           READ). After @fetch_retries READs that found nothing it asks the
 *           server to push (an 8-byte message: slot, seq); the server SENDs
 *           that response on the control connection (hybrid mode). While
 *           a response is fetched the client spins (READs, yielding the
 *           CPU between passes); once every awaited response is to be
 *           pushed it sleeps in rdmx_recv on the control connection, in
 *           that connection's wait mode, until one comes or time is up.
 *
 * The control connection (an rdmx send_recv connection) carries the
 * set-up (slots, slot size, the two region descriptors), push requests
 * and pushed responses, and its liveness is the call's: a server that
 * goes away fails the client's waits with -ECONNRESET. A malformed slot
 * or push request is handed to the RPC layer as an empty frame, which
 * drops that client (rpc_server.c). Copies: the server copies a response
 * from the request's buffer into its response slot (one more than msg).
 */
#include <errno.h>

#include "rpc/rpc_rfp_priv.h"

/* ------------------------------------------------------------ both sides */

static int rfp_alloc(void *t, size_t size, struct rpc_buf *b, int timeout_ms)
{
	struct rfp_conn *r = t;

	(void)timeout_ms;
	if (r->server)
		return rdmx__rfp_server_alloc(r, size, b);
	if (size > r->ssize - RFP_TRAILER)
		return rdmx__fail(-EMSGSIZE, "rpc rfp: a frame of %zu bytes, slots of %u",
				  size, r->ssize - RFP_TRAILER);
	b->data = r->mem;
	b->cap = r->ssize - RFP_TRAILER;
	return 0;
}

static int rfp_send(void *t, struct rpc_buf *b, size_t len)
{
	struct rfp_conn *r = t;

	return r->server ? rdmx__rfp_server_send(r, b, len) : rdmx__rfp_client_send(r, b, len);
}

static void rfp_drop(void *t, struct rpc_buf *b)
{
	(void)t;
	(void)b; /* the scratch buffer stays the connection's */
}

static int rfp_recv(void *t, struct rpc_rx *rx, int timeout_ms)
{
	return rdmx__rfp_client_recv(t, rx, timeout_ms);
}

static void rfp_release(void *t, struct rpc_rx *rx)
{
	struct rfp_conn *r = t;

	if (rx->slot < 0 && rx->msg.data)
		rdmx_msg_release(r->c, &rx->msg);
}

static int rfp_flush(void *t, int timeout_ms)
{
	return rdmx_flush(((struct rfp_conn *)t)->c, timeout_ms);
}

static const char *rfp_error(const void *t)
{
	return rdmx_conn_error(((const struct rfp_conn *)t)->c);
}

static void rfp_set_user(void *t, void *user)
{
	((struct rfp_conn *)t)->user = user;
}

static void *rfp_get_user(const void *t)
{
	return ((const struct rfp_conn *)t)->user;
}

static rdmx_conn *rfp_conn(const void *t)
{
	return ((const struct rfp_conn *)t)->c;
}

static void rfp_close(void *t)
{
	struct rfp_conn *r = t;

	if (r->server) {
		if (r->lis->cur == r) /* the scan's round robin goes on */
			r->lis->cur = r->next;
		if (r->prev)
			r->prev->next = r->next;
		else
			r->lis->conns = r->next;
		if (r->next)
			r->next->prev = r->prev;
	}
	if (r->rreq)
		rdmx_region_free(r->rreq);
	if (r->rresp)
		rdmx_region_free(r->rresp);
	r->rreq = r->rresp = NULL;
	rdmx__export_revoke(&r->exp[0]); /* closed: its keys are refused from now */
	rdmx__export_revoke(&r->exp[1]);
	rdmx_conn_close(r->c);
	rdmx__rfp_free(r);
}

static rdmx_listener *rfp_listener(const struct rdmx_rpc_server *s)
{
	return ((const struct rfp_lis *)s->tstate)->lis;
}

/* A slot a call: the server's window of slots. */
static uint32_t rfp_window(const void *t)
{
	return ((const struct rfp_conn *)t)->slots;
}

const struct rpc_transport_ops rdmx__rpc_transport_rfp = {
	.name = "rfp",
	.listen = rdmx__rfp_listen,
	.port = rdmx__rfp_port,
	.next = rdmx__rfp_next,
	.unlisten = rdmx__rfp_unlisten,
	.dial = rdmx__rfp_dial,
	.alloc = rfp_alloc,
	.send = rfp_send,
	.drop = rfp_drop,
	.recv = rfp_recv,
	.release = rfp_release,
	.flush = rfp_flush,
	.error = rfp_error,
	.set_user = rfp_set_user,
	.get_user = rfp_get_user,
	.conn = rfp_conn,
	.listener = rfp_listener,
	.window = rfp_window,
	.close = rfp_close,
};
