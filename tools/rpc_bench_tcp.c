// SPDX-License-Identifier: MIT
/*
 * rdmx rpc bench: the TCP RPC baseline. A call is one frame of rdmx
 * bench's TCP endpoint (bench_tcp.c: an 8-byte length-prefix header, then
 * the payload, TCP_NODELAY): a 16-byte call header (u32 slot, u32 method,
 * u64 0) and the request's bytes. The server runs a thread per connection
 * and echoes each frame whole; a control frame (END) asks for its figures,
 * answered by an ACK carrying its process CPU time and calls answered.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_ep.h"
#include "rpc_bench.h"

#define CALL_HDR 16u
#define SRV_CONNS 256		/* connections served at once */
#define ACCEPT_POLL_MS 100

struct rb_tcp {
	struct bench_ep *ep;
};

/* ------------------------------------------------------------- the client */

int rb_tcp_dial(const char *addr, uint16_t port, uint64_t max, int timeout_ms,
		struct rb_tcp **out, char *err, size_t err_len)
{
	struct cli_err e = { "" };
	struct rb_tcp *t = calloc(1, sizeof(*t));
	int rc;

	if (!t) {
		snprintf(err, err_len, "tcp: out of memory");
		return -ENOMEM;
	}
	rc = bench_tcp_dial(addr, port, CALL_HDR + max, timeout_ms, &t->ep, &e);
	if (rc) {
		snprintf(err, err_len, "%s", e.msg);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int rb_tcp_send(struct rb_tcp *t, uint32_t slot, uint64_t size)
{
	uint8_t h[CALL_HDR] = { 0 };
	uint32_t v = htole32(slot), m = htole32(RB_ECHO);

	memcpy(h, &v, 4);
	memcpy(h + 4, &m, 4);
	return t->ep->ops->send(t->ep, h, sizeof(h), CALL_HDR + size, false);
}

int rb_tcp_recv(struct rb_tcp *t, uint32_t *slot, uint64_t *len)
{
	struct bench_rx rx;
	uint32_t v;
	int rc = t->ep->ops->recv(t->ep, &rx);

	if (rc == -ECONNRESET)
		cli_set_err(&t->ep->err, "the tcp server disconnected");
	if (rc)
		return rc;
	if (rx.ctrl || rx.len < CALL_HDR) {
		cli_set_err(&t->ep->err, "tcp: a response of %zu bytes%s", rx.len,
			    rx.ctrl ? " of control" : "");
		return -EPROTO;
	}
	memcpy(&v, rx.head, 4);
	*slot = le32toh(v);
	*len = rx.len - CALL_HDR;
	return 0;
}

int rb_tcp_stats(struct rb_tcp *t, struct rb_snap *s)
{
	struct bench_ctrl c = { .op = BENCH_OP_END }, ack;
	int rc = bench_send_ctrl(t->ep, &c);

	if (!rc)
		rc = bench_recv_ack(t->ep, &ack);
	if (rc)
		return rc;
	*s = (struct rb_snap){ .user_ns = ack.user_ns, .sys_ns = ack.sys_ns,
			       .calls = ack.count };
	return 0;
}

const char *rb_tcp_error(const struct rb_tcp *t)
{
	return t->ep->err.msg;
}

void rb_tcp_close(struct rb_tcp *t)
{
	if (!t)
		return;
	bench_ep_close(t->ep);
	free(t);
}

/* ------------------------------------------------------------- the server */

struct rb_tcp_srv;

struct srv_conn {
	struct rb_tcp_srv *s;
	struct bench_ep *ep;
	pthread_t t;
	bool used;		/* a thread runs or ran: join it */
	atomic_bool done;	/* the thread has ended */
};

struct rb_tcp_srv {
	int lfd;
	uint16_t port;
	uint64_t max;
	int timeout_ms;
	atomic_bool stop;
	atomic_uint_fast64_t calls;
	pthread_t accept_t;
	struct srv_conn conns[SRV_CONNS];
};

/* The figures of a control frame's answer. */
static int srv_ack(struct rb_tcp_srv *s, struct bench_ep *ep)
{
	struct bench_ctrl ack = { .op = BENCH_OP_ACK };
	struct rb_snap snap;

	rb_proc_cpu(&snap);
	ack.user_ns = snap.user_ns;
	ack.sys_ns = snap.sys_ns;
	ack.count = atomic_load(&s->calls);
	return bench_send_ctrl(ep, &ack);
}

/* One connection: echo every frame until the client leaves. */
static void *conn_main(void *arg)
{
	struct srv_conn *c = arg;
	struct bench_rx rx;
	struct bench_ctrl ctl;
	int rc;

	for (;;) {
		rc = c->ep->ops->recv(c->ep, &rx);
		if (rc == -ETIMEDOUT && !atomic_load(&c->s->stop))
			continue; /* an idle client (the harness's stats one) */
		if (rc)
			break; /* gone, or a broken stream: the client sees it */
		if (rx.ctrl)
			rc = bench_rx_ctrl(c->ep, &rx, &ctl) ? -EPROTO : srv_ack(c->s, c->ep);
		else
			rc = c->ep->ops->send(c->ep, rx.head, rx.len < BENCH_HEAD ?
					      rx.len : BENCH_HEAD, rx.len, false);
		if (rc)
			break;
		if (!rx.ctrl)
			atomic_fetch_add(&c->s->calls, 1);
	}
	atomic_store(&c->done, true);
	return NULL;
}

/* Join a connection's thread and close it; the slot is free again. */
static void conn_reap(struct srv_conn *c)
{
	pthread_join(c->t, NULL);
	bench_ep_close(c->ep);
	c->used = false;
}

/* A free slot (reaping ended connections), or NULL when all are busy. */
static struct srv_conn *conn_slot(struct rb_tcp_srv *s)
{
	struct srv_conn *free_one = NULL;

	for (int i = 0; i < SRV_CONNS; i++) {
		struct srv_conn *c = &s->conns[i];

		if (c->used && atomic_load(&c->done))
			conn_reap(c);
		if (!c->used && !free_one)
			free_one = c;
	}
	return free_one;
}

/* Accept connections until stopped, a thread each. */
static void *accept_main(void *arg)
{
	struct rb_tcp_srv *s = arg;
	struct timespec nap = { 0, ACCEPT_POLL_MS * 1000000L };
	struct cli_err e = { "" };
	struct srv_conn *c;
	struct bench_ep *ep;

	while (!atomic_load(&s->stop)) {
		c = conn_slot(s);
		if (!c) { /* all busy: the kernel's backlog holds the next */
			nanosleep(&nap, NULL);
			continue;
		}
		if (bench_tcp_accept(s->lfd, ACCEPT_POLL_MS, CALL_HDR + s->max, s->timeout_ms,
				     &ep, &e))
			continue;
		c->s = s;
		c->ep = ep;
		atomic_store(&c->done, false);
		if (pthread_create(&c->t, NULL, conn_main, c))
			bench_ep_close(ep);
		else
			c->used = true;
	}
	return NULL;
}

int rb_tcp_srv_start(const char *addr, uint16_t port, uint64_t max,
		     int timeout_ms, struct rb_tcp_srv **out, char *err, size_t len)
{
	struct rb_tcp_srv *s = calloc(1, sizeof(*s));
	struct cli_err e = { "" };

	if (!s) {
		snprintf(err, len, "out of memory");
		return -ENOMEM;
	}
	s->max = max;
	s->timeout_ms = timeout_ms;
	if (bench_tcp_listen(addr, port, &s->lfd, &s->port, &e)) {
		snprintf(err, len, "%s", e.msg);
		free(s);
		return -EADDRNOTAVAIL;
	}
	if (pthread_create(&s->accept_t, NULL, accept_main, s)) {
		snprintf(err, len, "no accept thread");
		close(s->lfd);
		free(s);
		return -EAGAIN;
	}
	*out = s;
	return 0;
}

uint16_t rb_tcp_srv_port(const struct rb_tcp_srv *s)
{
	return s->port;
}

/* Stop accepting; each connection's thread ends when its client leaves
 * (the harness closes its clients first) or at its next idle timeout. */
void rb_tcp_srv_stop(struct rb_tcp_srv *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->accept_t, NULL);
	for (int i = 0; i < SRV_CONNS; i++)
		if (s->conns[i].used)
			conn_reap(&s->conns[i]);
	close(s->lfd);
	free(s);
}
