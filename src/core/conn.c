/* SPDX-License-Identifier: MIT */
/*
 * Connections: option checks, the hello exchange over rdma_cm private data,
 * listen/accept/dial/close, and the one-line public wrappers of the data
 * path that dispatch to the connection's protocol. A connection going
 * down is live.c's (so group.c and wait.c need nothing of this file).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define MAX_MSG_LIMIT (1u << 30)
#define DEPTH_LIMIT 16384u
#define LIVENESS_MIN 1000u
#define LIVENESS_MAX 3600000u

void rdmx_conn_opts_init(struct rdmx_conn_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->protocol = "send_recv";
	o->max_msg_size = 65536;
	o->send_depth = 64;
	o->recv_depth = 64;
	o->rnr_retry = 7;
	o->retry_count = 7;
	o->connect_timeout_ms = 5000;
	o->ring_size = 1u << 20;
	o->notify = RDMX_NOTIFY_DEFAULT;
	o->eager_max = 1024;
	o->liveness_ms = 10000;
}

/* Range checks of options, also for the protocols' check_opts(). */
int rdmx__check_range(const char *what, uint32_t v, uint32_t lo, uint32_t hi)
{
	if (v < lo || v > hi)
		return rdmx__fail(-EINVAL, "%s %u out of range %u..%u", what,
				  v, lo, hi);
	return 0;
}

/* ring_size and notify, for the ring protocols' check_opts(). */
int rdmx__check_ring_opts(const struct rdmx_conn_opts *o)
{
	if (o->ring_size < RDMX__RING_SIZE_MIN || o->ring_size > RDMX__RING_SIZE_MAX ||
	    (o->ring_size & (o->ring_size - 1)))
		return rdmx__fail(-EINVAL, "ring_size %u is not a power of two in %u..%u",
				  o->ring_size, RDMX__RING_SIZE_MIN, RDMX__RING_SIZE_MAX);
	if (o->notify > RDMX_NOTIFY_REV)
		return rdmx__fail(-EINVAL, "notify %u is not an enum rdmx_notify value",
				  o->notify);
	if (o->ack > RDMX_ACK_READ)
		return rdmx__fail(-EINVAL, "ack %u is not an enum rdmx_ack value",
				  o->ack);
	return 0;
}

/*
 * Copy @in (or the defaults) to @out and check every field: the common
 * ones here, the protocol's own with its check_opts() (max_msg not known).
 */
static int opts_load(const struct rdmx_conn_opts *in, struct rdmx_conn_opts *out,
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
	if (rdmx__check_range("max_msg_size", out->max_msg_size, 1, MAX_MSG_LIMIT) ||
	    rdmx__check_range("send_depth", out->send_depth, 1, DEPTH_LIMIT) ||
	    rdmx__check_range("recv_depth", out->recv_depth, 1, DEPTH_LIMIT) ||
	    rdmx__check_range("rnr_retry", out->rnr_retry, 0, 7) ||
	    rdmx__check_range("retry_count", out->retry_count, 0, 7) ||
	    rdmx__check_range("liveness_ms", out->liveness_ms, LIVENESS_MIN, LIVENESS_MAX))
		return -EINVAL;
	if (out->connect_timeout_ms <= 0)
		return rdmx__fail(-EINVAL, "connect_timeout_ms must be > 0");
	if (out->wait_mode > RDMX_WAIT_ADAPTIVE)
		return rdmx__fail(-EINVAL, "wait_mode %u is not an enum rdmx_wait_mode value",
				  out->wait_mode);
	if (rdmx__check_range("spin_us", out->spin_us, 0, RDMX__SPIN_US_MAX))
		return -EINVAL;
	if (out->signal_every > 1 && out->signal_every > out->send_depth / 2)
		return rdmx__fail(-EINVAL, "signal_every %u: a send queue of send_depth %u must hold two unsignaled batches (1 or up to %u)",
				  out->signal_every, out->send_depth,
				  out->send_depth / 2);
	if (out->coalesce > RDMX_COALESCE_ON)
		return rdmx__fail(-EINVAL, "coalesce %u is not an enum rdmx_coalesce value",
				  out->coalesce);
	return (*proto)->conn->check_opts(*proto, out, 0);
}

int rdmx__post_send(rdmx_conn *c, const struct rdmx__wr *wr, int n)
{
	struct rdmx__wr w;

	for (int i = 0; i < n; i++)
		c->posted[wr[i].op]++;
	if (n != 1 || !rdmx__wr_may_inline(c, wr))
		return c->f->post_send(c->ep, wr, n);
	w = *wr;
	w.flags |= RDMX__WR_INLINE;
	return c->f->post_send(c->ep, &w, 1);
}

int rdmx__post_recv(rdmx_conn *c, const struct rdmx__wr *wr, int n)
{
	c->posted_recv += (uint64_t)n;
	return c->f->post_recv(c->ep, wr, n);
}

void *rdmx__alloc_buf(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	memset(p, 0, len);
	return p;
}

/* -------------------------------------------------------- conn lifetime */

static rdmx_conn *conn_new(rdmx_ctx *ctx, const struct rdmx_conn_opts *o,
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

/* Free everything; the QP goes first (with the ep), then its CQs (qp.h),
 * then protocol state. */
static void conn_free(rdmx_conn *c, int did_setup)
{
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
static int conn_setup(rdmx_conn *c)
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
	conn_free(c, 1);
}

const char *rdmx_conn_error(const rdmx_conn *c)
{
	return c ? c->err.msg : "no connection";
}

const char *rdmx_conn_protocol(const rdmx_conn *c)
{
	return c ? c->proto->name : "";
}

size_t rdmx_conn_max_msg(const rdmx_conn *c)
{
	return c ? c->max_msg : 0;
}

/* This side's hello: common header plus the protocol's block. */
static int hello_build(rdmx_conn *c, uint16_t flags, uint8_t *buf, size_t cap)
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

/* ----------------------------------------------------------------- dial */

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

	len = hello_build(c, 0, hello, sizeof(hello));
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
	rc = opts_load(opts, &o, &proto);
	if (rc)
		return rdmx__keep(&ctx->err, rc);
	c = conn_new(ctx, &o, proto);
	if (!c)
		return rdmx__failo(&ctx->err, -ENOMEM, "out of memory for a connection");
	rc = o.src_addr && *o.src_addr ?
	     ctx->fops->resolve_src(ctx->fab, o.src_addr, addr, port,
				    o.connect_timeout_ms, &c->ep) :
	     ctx->fops->resolve(ctx->fab, addr, port, o.connect_timeout_ms, &c->ep);
	if (rc)
		goto free_conn;
	rc = conn_setup(c);
	if (rc)
		goto free_setup;
	rc = dial_connect(c, addr, port);
	if (rc)
		goto free_setup;
	*out = c;
	return 0;

free_setup:
	rdmx__keep(&ctx->err, rc);
	conn_free(c, 1);
	return rc;
free_conn:
	rdmx__keep(&ctx->err, rc);
	conn_free(c, 0);
	return rc;
}

/* --------------------------------------------------------------- listen */

#define LISTENER_MAX_CONNS 256u
#define LISTENER_MAX_MEM (1ull << 30)

void rdmx_listener_opts_init(struct rdmx_listener_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->max_conns = LISTENER_MAX_CONNS;
	o->max_mem = LISTENER_MAX_MEM;
}

int rdmx_listener_set_opts(rdmx_listener *lis,
			   const struct rdmx_listener_opts *o)
{
	struct rdmx_listener_opts l;

	if (!lis)
		return rdmx__fail(-EINVAL, "rdmx_listener_set_opts: listener is NULL");
	rdmx_listener_opts_init(&l);
	if (o && (o->size < offsetof(struct rdmx_listener_opts, max_mem) +
		  sizeof(o->max_mem) || o->size > sizeof(l)))
		return rdmx__failo(&lis->err, -EINVAL,
				   "rdmx_listener_set_opts: size %u is not that of a struct "
				   "rdmx_listener_opts (use rdmx_listener_opts_init)", o->size);
	if (o)
		memcpy(&l, o, o->size);
	l.size = sizeof(l);
	lis->lopts = l;
	return 0;
}

int rdmx_listen(rdmx_ctx *ctx, const char *addr, uint16_t port,
		const struct rdmx_conn_opts *opts, rdmx_listener **out)
{
	rdmx_listener *lis;
	int rc;

	if (!ctx || !out)
		return rdmx__fail(-EINVAL, "rdmx_listen: context and out are required");
	lis = calloc(1, sizeof(*lis));
	if (!lis)
		return rdmx__failo(&ctx->err, -ENOMEM, "out of memory for a listener");
	lis->ctx = ctx;
	lis->epfd = lis->parkfd = -1;
	rdmx_listener_opts_init(&lis->lopts);
	rc = opts_load(opts, &lis->opts, &lis->proto);
	if (rc)
		goto free_lis;
	rc = rdmx__group_create(lis->proto, &lis->group);
	if (rc)
		goto free_lis;
	rdmx__wait_resolve(ctx, &lis->opts);
	lis->group->wait_mode = lis->opts.wait_mode;
	lis->group->spin_us = lis->opts.spin_us;
	rc = ctx->fops->listen(ctx->fab, addr, port, &lis->ep);
	if (rc)
		goto put_group;
	*out = lis;
	return 0;

put_group:
	rdmx__group_put(lis->group);
free_lis:
	free(lis);
	return rdmx__keep(&ctx->err, rc);
}

uint16_t rdmx_listener_port(const rdmx_listener *lis)
{
	return lis ? lis->ctx->fops->local_port(lis->ep) : 0;
}

unsigned rdmx_listener_rejected(const rdmx_listener *lis)
{
	return lis ? lis->rejected : 0;
}

const char *rdmx_listener_error(const rdmx_listener *lis)
{
	return lis ? lis->err.msg : "no listener";
}

void rdmx_listener_shutdown(rdmx_listener *lis)
{
	if (!lis)
		return;
	__atomic_store_n(&lis->group->shut, 1, __ATOMIC_RELEASE);
	rdmx__group_kick(lis->group); /* wake its sleepers */
}

/* Wait (bounded by the waiters' own wake-up cadence) until no thread is
 * left in rdmx_accept() or rdmx_listener_recv(). */
static void listener_drain(rdmx_listener *lis)
{
	struct timespec ms = { 0, 1000000L };

	while (__atomic_load_n(&lis->waiters, __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL);
}
static void conn_free(rdmx_conn *c, int did_setup);

void rdmx_listener_destroy(rdmx_listener *lis)
{
	if (!lis)
		return;
	rdmx_listener_shutdown(lis);
	listener_drain(lis);
	for (size_t i = 0; i < lis->npending; i++)
		conn_free(lis->pending[i].c, 1);
	free(lis->pending);
	if (lis->parkfd >= 0)
		close(lis->parkfd);
	if (lis->epfd >= 0)
		close(lis->epfd);
	lis->ctx->fops->destroy_ep(lis->ep);
	rdmx__group_put(lis->group);
	free(lis);
}

/* Turn down a request: the dialer sees @code and the current message. */
static void listener_reject(rdmx_listener *lis, struct rdmx__ep *child,
			    enum rdmx__reject_code code)
{
	uint8_t buf[RDMX__PDATA_REJECT_MAX];
	int len = rdmx__reject_encode(code, rdmx__last(), buf, sizeof(buf));

	rdmx__keep(&lis->err, -EPROTO);
	lis->ctx->fops->reject(child, buf, (size_t)len);
	lis->rejected++;
}

/* Check a request's hello against the listener; returns a reject code. */
static int request_check(rdmx_listener *lis, const uint8_t *pdata, size_t plen,
			 struct rdmx__hello *h)
{
	const struct rdmx_protocol_ops *asked;

	if (rdmx__hello_decode(pdata, plen, h))
		return RDMX__REJ_MALFORMED;
	if (h->max_msg < 1) {
		rdmx__fail(-EPROTO, "dialer proposed a max message of 0 bytes");
		return RDMX__REJ_PARAMS;
	}
	if (h->protocol == lis->proto->id)
		return 0;
	asked = rdmx__protocol_by_id(h->protocol);
	rdmx__fail(-EPROTO, "protocol mismatch: listener speaks %s, dialer asked for %s",
		   lis->proto->name, asked ? asked->name : "an unknown protocol");
	return RDMX__REJ_PROTOCOL;
}

/* Track @c until its dialer completes (or connect_timeout_ms passes). */
static int pending_add(rdmx_listener *lis, rdmx_conn *c, int up)
{
	if (lis->npending == lis->pcap) {
		size_t cap = lis->pcap ? 2 * lis->pcap : 8;
		struct rdmx__pending *v = realloc(lis->pending, cap * sizeof(*v));

		if (!v)
			return rdmx__fail(-ENOMEM, "out of memory tracking a connection request");
		lis->pending = v;
		lis->pcap = cap;
	}
	lis->pending[lis->npending].c = c;
	lis->pending[lis->npending].up = up;
	rdmx__deadline_start(&lis->pending[lis->npending].by, lis->opts.connect_timeout_ms);
	(void)rdmx__deadline_left_ms(&lis->pending[lis->npending].by); /* arm now */
	lis->npending++;
	rdmx__lis_watch(lis, c, 1);
	return 0;
}

/*
 * Build the connection for an accepted request and send the reply; the
 * connection is pending until the dialer completes (pending_reap()).
 */
static int accept_one(rdmx_listener *lis, struct rdmx__ep *child,
		      const struct rdmx__hello *h)
{
	uint8_t reply[RDMX__PDATA_ACCEPT_MAX];
	rdmx_conn *c = conn_new(lis->ctx, &lis->opts, lis->proto);
	int len, rc;

	if (!c) {
		rdmx__fail(-ENOMEM, "out of memory for a connection");
		listener_reject(lis, child, RDMX__REJ_RESOURCES);
		return -ENOMEM;
	}
	c->ep = child;
	c->is_server = 1;
	c->max_msg = h->max_msg < c->max_msg ? h->max_msg : c->max_msg;
	c->peer_recv_depth = h->recv_depth;
	c->mem_charge = lis->proto->conn->mem_estimate(c);
	rc = rdmx__group_admit(lis->group, c, &lis->lopts);
	if (rc) {
		c->ep = NULL;
		listener_reject(lis, child, RDMX__REJ_RESOURCES);
		conn_free(c, 0);
		return rc;
	}
	rc = conn_setup(c);
	if (rc) {
		c->ep = NULL;
		listener_reject(lis, child, RDMX__REJ_RESOURCES);
		conn_free(c, 1);
		return rc;
	}
	rc = lis->proto->conn->hello_in(c, h->block, h->block_len);
	len = rc ? rc : hello_build(c, RDMX__HELLO_REPLY, reply, sizeof(reply));
	if (len < 0) {
		c->ep = NULL;
		listener_reject(lis, child, RDMX__REJ_PARAMS);
		conn_free(c, 1);
		return len;
	}
	rc = lis->ctx->fops->accept(child, reply, (size_t)len, 0);
	if (rc && rc != -EAGAIN) {
		conn_free(c, 1);
		return rc;
	}
	/* 0: established already (its one ESTABLISHED event is consumed);
	 * -EAGAIN: pending_reap() polls for it */
	rc = pending_add(lis, c, !rc);
	if (rc)
		conn_free(c, 1);
	return rc;
}

/* Drop pending[@i]: the last one takes its place. */
static void pending_drop(rdmx_listener *lis, size_t i)
{
	rdmx__lis_watch(lis, lis->pending[i].c, 0);
	lis->pending[i] = lis->pending[--lis->npending];
}

/* A pending connection is up: list it in the group, hand it out. */
static int pending_up(rdmx_listener *lis, size_t i, rdmx_conn **out)
{
	rdmx_conn *c = lis->pending[i].c;
	int rc;

	pending_drop(lis, i);
	rc = rdmx__group_add(lis->group, c);
	if (rc) {
		conn_free(c, 1);
		return rc;
	}
	c->state = RDMX__CONN_UP;
	*out = c;
	return 0;
}

/*
 * Progress the handshakes in flight: 0 with the first connection that is
 * up in *@out, else -EAGAIN. A handshake that failed, or that the dialer
 * left open past connect_timeout_ms, is dropped with its connection.
 */
static int pending_reap(rdmx_listener *lis, rdmx_conn **out)
{
	size_t i = 0;
	int rc;

	while (i < lis->npending) {
		struct rdmx__pending *p = &lis->pending[i];

		rc = p->up ? 0 : lis->ctx->fops->accept_poll(p->c->ep);
		if (!rc && !pending_up(lis, i, out))
			return 0;
		if (rc == -EAGAIN && rdmx__deadline_left_ms(&p->by) > 0) {
			i++;
			continue;
		}
		if (rc == -EAGAIN)
			rdmx__failo(&lis->err, -ETIMEDOUT,
				    "a dialer did not complete its connection within %d ms; dropped",
				    lis->opts.connect_timeout_ms);
		else if (rc)
			rdmx__keep(&lis->err, rc);
		if (rc) {
			rdmx_conn *gone = p->c;

			pending_drop(lis, i); /* unwatches it: before the free */
			conn_free(gone, 1);
		}
	}
	return -EAGAIN;
}

/* Take the next request within @wait_ms: reject it, or start its accept. */
static int take_request(rdmx_listener *lis, int wait_ms)
{
	uint8_t pdata[RDMX__PDATA_BUF];
	struct rdmx__hello h;
	struct rdmx__ep *child;
	size_t plen = 0;
	int rc, code;

	rc = lis->ctx->fops->get_request(lis->ep, wait_ms, &child, pdata, &plen);
	if (rc)
		return rc;
	code = request_check(lis, pdata, plen, &h);
	if (code) {
		listener_reject(lis, child, code);
		return 0;
	}
	rc = accept_one(lis, child, &h);
	if (rc)
		rdmx__keep(&lis->err, rc);
	return 0;
}

/* Requests are awaited in slices this long: while handshakes are in
 * flight (to progress them), and otherwise (to see a shutdown). */
#define PENDING_POLL_MS 10
#define ACCEPT_SLICE_MS 50

static int accept_wait(rdmx_listener *lis, int timeout_ms, rdmx_conn **out)
{
	struct rdmx__deadline d;
	int rc, left, slice;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		rc = rdmx__group_shut(lis->group);
		if (rc)
			return rc; /* the thread's message only: lis->err may
				    * be written by a listener_recv waking too */
		if (!pending_reap(lis, out))
			return 0;
		left = rdmx__deadline_left_ms(&d);
		slice = lis->npending ? PENDING_POLL_MS : ACCEPT_SLICE_MS;
		rc = take_request(lis, left < slice ? left : slice);
		if (rc && rc != -ETIMEDOUT && rc != -EAGAIN)
			return rdmx__keep(&lis->err, rc);
		if (!rc || d.forever || rdmx__deadline_left_ms(&d) > 0)
			continue;
		if (!pending_reap(lis, out))
			return 0;
		if (d.once)
			return rdmx__again();
		return rdmx__failo(&lis->err, -ETIMEDOUT,
				   "no connection came up within %d ms (%zu handshakes in flight)",
				   timeout_ms, lis->npending);
	}
}

int rdmx__accept_promote(rdmx_listener *lis, rdmx_conn *c)
{
	rdmx_conn *out;

	for (size_t i = 0; i < lis->npending; i++)
		if (lis->pending[i].c == c)
			return pending_up(lis, i, &out);
	return -ENOENT;
}

int rdmx__accept_step(rdmx_listener *lis, rdmx_conn **out)
{
	int rc;

	if (!pending_reap(lis, out))
		return 0;
	rc = take_request(lis, 0);
	if (rc && rc != -ETIMEDOUT && rc != -EAGAIN)
		return rdmx__keep(&lis->err, rc);
	return rc ? -EAGAIN : pending_reap(lis, out);
}

int rdmx_accept(rdmx_listener *lis, int timeout_ms, rdmx_conn **out)
{
	int rc;

	if (!lis || !out)
		return rdmx__fail(-EINVAL, "rdmx_accept: listener and out are required");
	__atomic_add_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	rc = accept_wait(lis, timeout_ms, out);
	__atomic_sub_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	return rc;
}

/* ------------------------------------------------------------ data path */

static int conn_usable(rdmx_conn *c)
{
	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	if (c->state == RDMX__CONN_DOWN)
		return rdmx__conn_down_reason(c);
	return 0;
}

int rdmx__conn_usable(rdmx_conn *c)
{
	return conn_usable(c);
}

/*
 * The data-path calls hold c->lock for their whole run, so a connection's
 * calls never overlap (the threading contract in rdmx.h); the listener's
 * member poll only tries the lock.
 */
static int msg_alloc_locked(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			    int timeout_ms)
{
	int rc = conn_usable(c);

	if (rc)
		return rc;
	if (!m)
		return rdmx__fail(-EINVAL, "rdmx_msg_alloc: msg is NULL");
	if (size > c->max_msg)
		return rdmx__fail(-EMSGSIZE,
				  "message of %zu bytes exceeds the connection's maximum of %u",
				  size, c->max_msg);
	return c->data_ops->msg_alloc(c, size, m, timeout_ms);
}

int rdmx_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
		   int timeout_ms)
{
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	pthread_mutex_lock(&c->lock);
	rc = rdmx__conn_keep(c, msg_alloc_locked(c, size, m, timeout_ms));
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* What every send checks first: the connection usable, @m there and
 * within its buffer and the connection's maximum. Inline, as the
 * counting below: they are on every message's path (bench/profile-burst:
 * a call of its own cost send_recv 24 instructions a message). */
RDMX__HOT int send_check(rdmx_conn *c, const struct rdmx_msg *m)
{
	int rc = conn_usable(c);

	if (rc)
		return rc;
	if (!m)
		return rdmx__fail(-EINVAL, "rdmx_send: msg is NULL");
	if (m->len > m->cap || m->len > c->max_msg)
		return rdmx__fail(-EMSGSIZE,
				  "message of %zu bytes exceeds its buffer of %zu bytes",
				  m->len, m->cap);
	return 0;
}

/* The send's outcome @rc, kept; a send that succeeded is counted, and
 * its count is its sequence, the token (under c->lock). */
RDMX__HOT int send_counted(rdmx_conn *c, int rc, size_t len, rdmx_token *tok)
{
	rc = rdmx__conn_keep(c, rc);
	if (!rc) {
		uint64_t seq = RDMX__COUNT(c, msgs_sent, 1) + 1;

		if (tok)
			*tok = rdmx__tok_make(c, seq);
		RDMX__COUNT(c, bytes_sent, len);
	}
	return rc;
}

static int send_locked(rdmx_conn *c, struct rdmx_msg *m, unsigned flags)
{
	int rc = send_check(c, m);

	if (rc)
		return rc;
	if (flags & RDMX_SEND_MORE)
		return c->data_ops->send_more(c, m);
	return c->data_ops->send(c, m);
}

int rdmx_send_flags(rdmx_conn *c, struct rdmx_msg *m, unsigned flags,
		    rdmx_token *tok)
{
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	if (flags & ~(unsigned)RDMX_SEND_MORE)
		return rdmx__fail(-EINVAL, "rdmx_send_flags: unknown flags %#x",
				  flags & ~(unsigned)RDMX_SEND_MORE);
	size_t len = m ? m->len : 0; /* the handle is spent once sent */

	pthread_mutex_lock(&c->lock);
	rc = send_counted(c, send_locked(c, m, flags), len, tok);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx__send_from(rdmx_conn *c, struct rdmx_msg *m, const void *from,
		    uint32_t lkey, rdmx_token *tok)
{
	size_t len = m->len;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = send_check(c, m);
	if (!rc)
		rc = c->data_ops->send_from(c, m, from, lkey);
	rc = send_counted(c, rc, len, tok);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx_send_tok(rdmx_conn *c, struct rdmx_msg *m, rdmx_token *tok)
{
	return rdmx_send_flags(c, m, 0, tok);
}

int rdmx_send(rdmx_conn *c, struct rdmx_msg *m)
{
	return rdmx_send_flags(c, m, 0, NULL);
}

int rdmx_flush(rdmx_conn *c, int timeout_ms)
{
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	pthread_mutex_lock(&c->lock);
	rc = conn_usable(c);
	if (!rc)
		rc = c->data_ops->flush(c, timeout_ms);
	rc = rdmx__conn_keep(c, rc);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	int rc;

	if (!c || !m)
		return rdmx__fail(-EINVAL, "rdmx_recv: connection and msg are required");
	/* Messages that arrived before the peer left are still delivered,
	 * so the protocol is asked even when the connection is down. */
	pthread_mutex_lock(&c->lock);
	rc = c->recv_later ? rdmx__recv_later(c) :
			     rdmx__conn_keep(c, c->data_ops->recv(c, m, timeout_ms));
	pthread_mutex_unlock(&c->lock);
	if (!rc) {
		RDMX__COUNT(c, msgs_recv, 1);
		RDMX__COUNT(c, bytes_recv, m->len);
	}
	return rc;
}

int rdmx_msg_release(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc;

	if (!c || !m)
		return rdmx__fail(-EINVAL, "rdmx_msg_release: connection and msg are required");
	pthread_mutex_lock(&c->lock);
	rc = rdmx__conn_keep(c, c->data_ops->release(c, m));
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx_listener_recv(rdmx_listener *lis, struct rdmx_msg *m, int timeout_ms)
{
	int rc;

	if (!lis || !m)
		return rdmx__fail(-EINVAL, "rdmx_listener_recv: listener and msg are required");
	__atomic_add_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	rc = rdmx__group_shut(lis->group);
	if (!rc)
		rc = rdmx__group_recv(lis->group, m, timeout_ms);
	if (!rc) {
		RDMX__COUNT(rdmx_msg_conn(m), msgs_recv, 1);
		RDMX__COUNT(rdmx_msg_conn(m), bytes_recv, m->len);
	}
	if (rc != -ESHUTDOWN) /* see accept_wait() */
		rdmx__keep(&lis->err, rc);
	__atomic_sub_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	return rc;
}

rdmx_conn *rdmx_msg_conn(const struct rdmx_msg *m)
{
	return m ? rdmx__msg_conn(m) : NULL;
}
