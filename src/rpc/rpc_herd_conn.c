/* SPDX-License-Identifier: MIT */
/*
 * Transport "herd": what both sides do with a connection (its control
 * connection's options and sends, its registered memory, its end). The
 * design: rpc_herd_ops.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/dgram.h"
#include "rpc/rpc_herd_priv.h"

void rdmx__herd_conn_opts(const struct rdmx_rpc_opts *o, const struct rpc_contract *k,
			  struct rdmx_conn_opts *co)
{
	rdmx__rpc_conn_opts(o, k, 0, co);
	co->protocol = o->protocol;
}

/* Zeroed memory of @len bytes (a multiple of 64). */
int rdmx__herd_mem_alloc(struct herd_conn *h, size_t len)
{
	h->memlen = (len + 63) & ~(size_t)63;
	h->mem = aligned_alloc(64, h->memlen);
	if (!h->mem)
		return rdmx__fail(-ENOMEM, "herd: out of memory for %zu bytes", h->memlen);
	memset(h->mem, 0, h->memlen);
	return 0;
}

/* The same, registered with @access on the device of @h's UC QP (and its
 * UD QP's: the connection's). */
int rdmx__herd_mem_get(struct herd_conn *h, size_t len, int access)
{
	int rc = rdmx__herd_mem_alloc(h, len);

	return rc ? rc : rdmx__dgram_reg(h->uc, h->mem, h->memlen, access, &h->mr);
}

void rdmx__herd_conn_free(struct herd_conn *h)
{
	rdmx__export_revoke(&h->exp); /* before the QP and the region go */
	if (h->ah)
		rdmx__ud_ah_free(h->ud->g, h->ah);
	rdmx__dgram_close(h->udq);
	if (h->mr) /* made on h->uc's device (rdmx__herd_mem_get) */
		rdmx__dgram_dereg(h->uc, h->mr);
	rdmx__dgram_close(h->uc);
	free(h->mem);
	if (h->hs)
		free(h->tx);
	rdmx_conn_close(h->conn);
	free(h);
}

/* Send @len bytes at @buf as one message of the control connection. The
 * server never waits for a send buffer (its RPC core queues what a client
 * cannot take now: rpc_server_queue.c); a client waits its timeout. */
int rdmx__herd_ctrl_send(struct herd_conn *h, const void *buf, size_t len)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(h->conn, len, &m, h->hs ? 0 : h->timeout_ms);

	if (rc)
		return rc;
	memcpy(m.data, buf, len);
	m.len = len;
	return rdmx_send(h->conn, &m);
}
