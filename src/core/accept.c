/* SPDX-License-Identifier: MIT */
/*
 * Listening and accepting: a listener's options and lifetime, the check
 * of a connection request's hello, and the handshakes in flight until
 * their dialers complete them (rdmx_accept, and the steps
 * rdmx_listener_next takes in event.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accept.h"
#include "conn.h"
#include "errors.h"
#include "group.h"
#include "open.h"
#include "opts.h"
#include "protocol.h"
#include "wait.h"
#include "waitset.h"
#include "wire.h"

#define LISTENER_MAX_CONNS 256u
#define LISTENER_MAX_MEM (1ull << 30)
#define LISTENER_MAX_PER_PEER (LISTENER_MAX_CONNS / 4)

void rdmx_listener_opts_init(struct rdmx_listener_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->max_conns = LISTENER_MAX_CONNS;
	o->max_mem = LISTENER_MAX_MEM;
	o->max_conns_per_peer = LISTENER_MAX_PER_PEER;
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
	rc = rdmx__opts_load(opts, &lis->opts, &lis->proto);
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

void rdmx_listener_destroy(rdmx_listener *lis)
{
	if (!lis)
		return;
	rdmx_listener_shutdown(lis);
	listener_drain(lis);
	for (size_t i = 0; i < lis->npending; i++)
		rdmx__conn_free(lis->pending[i].c, 1);
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

/* The dialer's address without its port: the host its dials count under
 * (max_conns_per_peer). */
static void peer_host(rdmx_listener *lis, const struct rdmx__ep *child, char *buf,
		      size_t len)
{
	char *colon;

	if (lis->ctx->fops->addr_str(child, 1, buf, len)) {
		snprintf(buf, len, "?");
		return;
	}
	colon = strrchr(buf, ':');
	if (colon && colon != buf)
		*colon = '\0';
}

/*
 * Build the connection for an accepted request and send the reply; the
 * connection is pending until the dialer completes (pending_reap()).
 */
static int accept_one(rdmx_listener *lis, struct rdmx__ep *child,
		      const struct rdmx__hello *h)
{
	uint8_t reply[RDMX__PDATA_ACCEPT_MAX];
	rdmx_conn *c = rdmx__conn_new(lis->ctx, &lis->opts, lis->proto);
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
	c->mem_charge = lis->proto->conn->mem_estimate(c) + lis->charge_each;
	peer_host(lis, child, c->peer_host, sizeof(c->peer_host));
	rc = rdmx__group_admit(lis->group, c, &lis->lopts);
	if (rc) {
		c->ep = NULL;
		listener_reject(lis, child, RDMX__REJ_RESOURCES);
		rdmx__conn_free(c, 0);
		return rc;
	}
	rc = rdmx__conn_setup(c);
	if (rc) {
		c->ep = NULL;
		listener_reject(lis, child, RDMX__REJ_RESOURCES);
		rdmx__conn_free(c, 1);
		return rc;
	}
	rc = lis->proto->conn->hello_in(c, h->block, h->block_len);
	len = rc ? rc : rdmx__hello_build(c, RDMX__HELLO_REPLY, reply, sizeof(reply));
	if (len < 0) {
		c->ep = NULL;
		listener_reject(lis, child, RDMX__REJ_PARAMS);
		rdmx__conn_free(c, 1);
		return len;
	}
	rc = lis->ctx->fops->accept(child, reply, (size_t)len, 0);
	if (rc && rc != -EAGAIN) {
		rdmx__conn_free(c, 1);
		return rc;
	}
	/* 0: established already (its one ESTABLISHED event is consumed);
	 * -EAGAIN: pending_reap() polls for it */
	rc = pending_add(lis, c, !rc);
	if (rc)
		rdmx__conn_free(c, 1);
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
		rdmx__conn_free(c, 1);
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
			rdmx__conn_free(gone, 1);
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
