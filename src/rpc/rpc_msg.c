/* SPDX-License-Identifier: MIT */
/*
 * Transport "msg": every frame is one rdmx message on one rdmx connection,
 * over any rdmx protocol (rdmx_rpc_opts.protocol, default send_recv). The
 * server is one loop over rdmx_listener_next(); its workers reply on the
 * member connections, as rdmx.h's server pattern allows. Both sides size
 * their messages to the contract's largest frame and their queues to the
 * window, so a client's calls in flight always have receive buffers for
 * their responses.
 */
#include <errno.h>
#include <string.h>

#include "rpc/rpc_int.h"

/* Every frame one message over @o's protocol. */
static void msg_conn_opts(const struct rdmx_rpc_opts *o, const struct rpc_contract *k,
			  struct rdmx_conn_opts *co)
{
	rdmx__rpc_conn_opts(o, k, 0, co);
	co->protocol = o->protocol;
}

static int msg_listen(struct rdmx_rpc_server *s, const char *addr, uint16_t port)
{
	struct rdmx_conn_opts co;
	rdmx_listener *lis;
	int rc;

	msg_conn_opts(&s->o, &s->k, &co);
	rc = rdmx_listen(s->ctx, addr, port, &co, &lis);
	if (!rc)
		s->tstate = lis;
	return rc;
}

static uint16_t msg_port(const struct rdmx_rpc_server *s)
{
	return rdmx_listener_port(s->tstate);
}

static int msg_next(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms)
{
	struct rdmx_event e;
	int rc = rdmx_listener_next(s->tstate, &e, timeout_ms);

	if (rc)
		return rc;
	ev->t = e.conn;
	if (e.type == RDMX_EVENT_CONN)
		ev->type = RPC_SEV_CONN;
	else if (e.type == RDMX_EVENT_CLOSED)
		ev->type = RPC_SEV_CLOSED;
	else {
		ev->type = RPC_SEV_FRAME;
		ev->rx.msg = e.msg;
		ev->rx.data = e.msg.data;
		ev->rx.len = e.msg.len;
	}
	return 0;
}

static void msg_unlisten(struct rdmx_rpc_server *s)
{
	rdmx_listener_destroy(s->tstate);
	s->tstate = NULL;
}

static int msg_dial(struct rdmx_rpc_client *c, const char *addr, uint16_t port)
{
	struct rdmx_conn_opts co;
	rdmx_conn *conn;
	int rc;

	msg_conn_opts(&c->o, &c->k, &co);
	rc = rdmx_dial(c->ctx, addr, port, &co, &conn);
	if (!rc)
		c->t = conn;
	return rc;
}

static int msg_alloc(void *t, size_t size, struct rpc_buf *b, int timeout_ms)
{
	int rc = rdmx_msg_alloc(t, size, &b->msg, timeout_ms);

	if (rc)
		return rc;
	b->data = b->msg.data;
	b->cap = b->msg.cap;
	return 0;
}

static int msg_send(void *t, struct rpc_buf *b, size_t len)
{
	b->msg.len = len;
	return rdmx_send(t, &b->msg);
}

static void msg_drop(void *t, struct rpc_buf *b)
{
	rdmx_msg_release(t, &b->msg);
}

static int msg_recv(void *t, struct rpc_rx *rx, int timeout_ms)
{
	int rc = rdmx_recv(t, &rx->msg, timeout_ms);

	if (rc)
		return rc;
	rx->data = rx->msg.data;
	rx->len = rx->msg.len;
	return 0;
}

static void msg_release(void *t, struct rpc_rx *rx)
{
	rdmx_msg_release(t, &rx->msg);
}

static int msg_flush(void *t, int timeout_ms)
{
	return rdmx_flush(t, timeout_ms);
}

static const char *msg_error(const void *t)
{
	return rdmx_conn_error(t);
}

static void msg_set_user(void *t, void *user)
{
	rdmx_conn_set_user(t, user);
}

static void *msg_get_user(const void *t)
{
	return rdmx_conn_get_user(t);
}

static rdmx_conn *msg_conn(const void *t)
{
	return (rdmx_conn *)t;
}

static void msg_close(void *t)
{
	rdmx_conn_close(t);
}

static rdmx_listener *msg_listener(const struct rdmx_rpc_server *s)
{
	return s->tstate;
}

/* A request holds its receive buffer: the depth bounds the pending. */
static uint32_t msg_window(const void *t)
{
	(void)t;
	return 0;
}

const struct rpc_transport_ops rdmx__rpc_transport_msg = {
	.name = "msg",
	.listen = msg_listen,
	.port = msg_port,
	.next = msg_next,
	.unlisten = msg_unlisten,
	.dial = msg_dial,
	.alloc = msg_alloc,
	.send = msg_send,
	.drop = msg_drop,
	.recv = msg_recv,
	.release = msg_release,
	.flush = msg_flush,
	.error = msg_error,
	.set_user = msg_set_user,
	.get_user = msg_get_user,
	.conn = msg_conn,
	.listener = msg_listener,
	.window = msg_window,
	.close = msg_close,
};
