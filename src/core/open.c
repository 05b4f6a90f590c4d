/* SPDX-License-Identifier: MIT */
/*
 * A connection made and freed, the part rdmx_dial (dial.c) and
 * rdmx_accept (accept.c) share: the options loaded and checked, the
 * object built with every module's share of it, the protocol's setup,
 * this side's hello; and rdmx_conn_close.
 */
#include <errno.h>
#include <stdlib.h>

#include "conn.h"
#include "errors.h"
#include "group.h"
#include "live.h"
#include "mw.h"
#include "open.h"
#include "opslots.h"
#include "opts.h"
#include "protocol.h"
#include "qp.h"
#include "token.h"
#include "waitset.h"
#include "wire.h"

/*
 * Copy @in (or the defaults) to @out and check every field: the common
 * ones (opts.c), the protocol's own with its check_opts() (max_msg not
 * known).
 */
int rdmx__opts_load(const struct rdmx_conn_opts *in, struct rdmx_conn_opts *out,
		    const struct rdmx_protocol_ops **proto)
{
	if (!in)
		rdmx_conn_opts_init(out);
	else if (rdmx__conn_opts_copy(in, out))
		return -EINVAL;
	if (!out->protocol)
		out->protocol = "send_recv";
	*proto = rdmx__protocol_by_name(out->protocol);
	if (!*proto)
		return rdmx__fail(-EINVAL, "unknown protocol '%s'",
				  out->protocol);
	if (rdmx__opts_check(out))
		return -EINVAL;
	return (*proto)->conn->check_opts(*proto, out, 0);
}

rdmx_conn *rdmx__conn_new(rdmx_ctx *ctx, const struct rdmx_conn_opts *o,
			  const struct rdmx_protocol_ops *proto)
{
	rdmx_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->priv = calloc(1, proto->conn->priv_size ? proto->conn->priv_size : 1);
	if (!c->priv) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->down_lock, NULL);
	c->ctx = ctx;
	c->f = ctx->fops;
	c->proto = proto;
	c->data_ops = proto->data;
	c->opts = *o;
	rdmx__wait_resolve(ctx, &c->opts);
	c->max_msg = o->max_msg_size;
	rdmx__live_init(c);
	rdmx__os_init(c);
	c->tok_tag = rdmx__tok_tag_next();
	rdmx__ws_init(&c->ws);
	return c;
}

/* Free everything; the windows exported over it first (their keys
 * refused from now on), then the QP (with the ep), its CQs (qp.h), then
 * protocol state. */
void rdmx__conn_free(rdmx_conn *c, int did_setup)
{
	rdmx__export_revoke_all(&c->exports);
	if (c->ep)
		c->f->destroy_ep(c->ep);
	rdmx__qp_unmake(c);
	if (did_setup)
		c->proto->conn->teardown(c);
	rdmx__group_leave(c);
	rdmx__live_fini(c);
	rdmx__os_fini(c);
	rdmx__ws_fini(&c->ws);
	pthread_mutex_destroy(&c->down_lock);
	pthread_mutex_destroy(&c->lock);
	free(c->priv);
	free(c);
}

/* The protocol's checks with the connection's max_msg, then its setup(). */
int rdmx__conn_setup(rdmx_conn *c)
{
	int rc = c->proto->conn->check_opts(c->proto, &c->opts, c->max_msg);

	return rc ? rc : c->proto->conn->setup(c);
}

void rdmx_conn_close(rdmx_conn *c)
{
	if (!c)
		return;
	rdmx__group_unlist(c); /* the listener lets go of it first */
	if (c->state == RDMX__CONN_UP)
		c->f->disconnect(c->ep);
	rdmx__conn_free(c, 1);
}

/* This side's hello: common header plus the protocol's block. */
int rdmx__hello_build(rdmx_conn *c, uint16_t flags, uint8_t *buf, size_t cap)
{
	struct rdmx__hello h = {
		.version = RDMX__WIRE_VERSION,
		.protocol = c->proto->id,
		.flags = flags,
		.max_msg = c->max_msg,
		.recv_depth = (uint16_t)c->opts.recv_depth,
	};
	size_t blen = 0;
	int rc;

	rc = c->proto->conn->hello_out(c, h.block, cap - RDMX__HELLO_HDR, &blen);
	if (rc)
		return rc;
	h.block_len = (uint8_t)blen;
	return rdmx__hello_encode(&h, buf, cap);
}
