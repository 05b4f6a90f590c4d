/* SPDX-License-Identifier: MIT */
/*
 * rdmx_dial: resolve the listener's address, set the protocol up, and
 * exchange hellos over rdma_cm's private data.
 */
#include <errno.h>
#include <stdint.h>

#include "conn.h"
#include "errors.h"
#include "open.h"
#include "protocol.h"
#include "wire.h"

static int dial_refused(rdmx_conn *c, const char *addr, uint16_t port,
			const uint8_t *reply, size_t rlen)
{
	char why[RDMX__PDATA_REJECT_MAX];

	if (rdmx__reject_decode(reply, rlen, why, sizeof(why)))
		return rdmx__fail(-ECONNREFUSED, "rejected by %s:%u: %s", addr,
				  port, why);
	(void)c;
	return rdmx__fail(-ECONNREFUSED,
			  "connection refused by %s:%u (no rdmx listener on that port?)",
			  addr, port);
}

/* Check the listener's accept reply and adopt what it negotiated. */
static int dial_reply(rdmx_conn *c, const uint8_t *reply, size_t rlen)
{
	struct rdmx__hello h;
	int rc = rdmx__hello_decode(reply, rlen, &h);

	if (rc)
		return rc;
	if (!(h.flags & RDMX__HELLO_REPLY) || h.protocol != c->proto->id)
		return rdmx__fail(-EPROTO, "listener replied with protocol id %u, asked for %s",
				  h.protocol, c->proto->name);
	if (h.max_msg < 1 || h.max_msg > c->max_msg)
		return rdmx__fail(-EPROTO, "listener negotiated max message %u above the %u proposed",
				  h.max_msg, c->max_msg);
	c->max_msg = h.max_msg;
	c->peer_recv_depth = h.recv_depth;
	return c->proto->conn->hello_in(c, h.block, h.block_len);
}

static int dial_connect(rdmx_conn *c, const char *addr, uint16_t port)
{
	uint8_t hello[RDMX__PDATA_CONNECT_MAX], reply[RDMX__PDATA_BUF];
	size_t rlen = 0;
	int len, rc;

	len = rdmx__hello_build(c, 0, hello, sizeof(hello));
	if (len < 0)
		return len;
	rc = c->f->connect(c->ep, hello, (size_t)len, c->opts.connect_timeout_ms,
			   reply, &rlen);
	if (rc == -ECONNREFUSED)
		return dial_refused(c, addr, port, reply, rlen);
	if (rc)
		return rc;
	c->state = RDMX__CONN_UP;
	rc = dial_reply(c, reply, rlen);
	if (rc)
		c->f->disconnect(c->ep);
	return rc;
}

int rdmx_dial(rdmx_ctx *ctx, const char *addr, uint16_t port,
	      const struct rdmx_conn_opts *opts, rdmx_conn **out)
{
	const struct rdmx_protocol_ops *proto;
	struct rdmx_conn_opts o;
	rdmx_conn *c;
	int rc;

	if (!ctx || !addr || !*addr || !out)
		return rdmx__failo(ctx ? &ctx->err : NULL, -EINVAL,
				   "rdmx_dial: context, address and out are required");
	rc = rdmx__opts_load(opts, &o, &proto);
	if (rc)
		return rdmx__keep(&ctx->err, rc);
	c = rdmx__conn_new(ctx, &o, proto);
	if (!c)
		return rdmx__failo(&ctx->err, -ENOMEM, "out of memory for a connection");
	rc = o.src_addr && *o.src_addr ?
	     ctx->fops->resolve_src(ctx->fab, o.src_addr, addr, port,
				    o.connect_timeout_ms, &c->ep) :
	     ctx->fops->resolve(ctx->fab, addr, port, o.connect_timeout_ms, &c->ep);
	if (rc)
		goto free_conn;
	rc = rdmx__conn_setup(c);
	if (rc)
		goto free_setup;
	rc = dial_connect(c, addr, port);
	if (rc)
		goto free_setup;
	*out = c;
	return 0;

free_setup:
	rdmx__keep(&ctx->err, rc);
	rdmx__conn_free(c, 1);
	return rc;
free_conn:
	rdmx__keep(&ctx->err, rc);
	rdmx__conn_free(c, 0);
	return rc;
}
