/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TH_FABRIC
#define TH_FABRIC "verbs"
#endif

uint64_t th_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint8_t pattern_byte(uint64_t seq, size_t k, uint64_t *word)
{
	if (k % 8 == 0) {
		uint64_t s = seq * 0x100000001b3ull + k;

		*word = th_rand(&s);
	}
	return (uint8_t)(*word >> ((k % 8) * 8));
}

void th_fill(void *buf, size_t n, uint64_t seq)
{
	uint8_t *p = buf;
	uint64_t w = 0;

	for (size_t k = 0; k < n; k++)
		p[k] = pattern_byte(seq, k, &w);
	if (n >= 8)
		memcpy(p, &seq, 8);
}

struct rdmx_conn_opts th_opts(const char *protocol, uint64_t max_msg, uint32_t send_depth,
			      uint32_t recv_depth)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	o.max_msg_size = max_msg;
	if (send_depth)
		o.send_depth = send_depth;
	if (recv_depth)
		o.recv_depth = recv_depth;
	return o;
}

int th_send_seq(rdmx_conn *c, uint64_t seq, size_t len, int timeout_ms)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, len, &m, timeout_ms);

	if (rc)
		return rc;
	th_fill(m.data, len, seq);
	m.len = len;
	return rdmx_send(c, &m);
}

long th_check(const void *buf, size_t n, uint64_t seq)
{
	const uint8_t *p = buf;
	uint64_t w = 0, got;

	if (n >= 8) {
		memcpy(&got, p, 8);
		if (got != seq)
			return 0;
	}
	for (size_t k = 0; k < n; k++) {
		uint8_t b = pattern_byte(seq, k, &w);

		if (k >= 8 && p[k] != b)
			return (long)k;
		if (n < 8 && p[k] != b)
			return (long)k;
	}
	return -1;
}

const char *th_fabric(void)
{
	return TH_FABRIC;
}

const char *th_addr(void)
{
	static char buf[64];
	const char *a = getenv("RDMX_TEST_ADDR");

	if (!strcmp(TH_FABRIC, "fake"))
		return "fake";
	if (!a || !*a)
		a = getenv("RDMX_SANDBOX_ADDR");
	if (a && *a)
		return a;
	if (rdmx_pick_address(NULL, -1, buf, sizeof(buf))) {
		fprintf(stderr, "harness: no RDMA address (%s); run the integration tests "
			"with sandbox/run or set RDMX_TEST_ADDR\n", rdmx_last_error());
		return NULL;
	}
	return buf;
}

const char *th_next_protocol(int *i)
{
	const char *const *names = rdmx_protocol_names();
	const char *only = getenv("RDMX_TEST_PROTOCOL");

	for (; names[*i]; (*i)++)
		if (!only || !*only || !strcmp(only, names[*i]))
			return names[(*i)++];
	return NULL;
}

uint64_t th_count(uint64_t n)
{
	const char *q = getenv("RDMX_TEST_QUICK");

	return q && *q && *q != '0' && n >= 20 ? n / 20 : n;
}

double th_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *accept_main(void *arg)
{
	struct th_acceptor *a = arg;

	a->rc = rdmx_accept(a->lis, a->timeout_ms ? a->timeout_ms : 20000, &a->conn);
	return NULL;
}

void th_accept_start(struct th_acceptor *a)
{
	a->conn = NULL;
	a->rc = -EINPROGRESS;
	if (pthread_create(&a->t, NULL, accept_main, a))
		abort();
}

int th_accept_join(struct th_acceptor *a)
{
	pthread_join(a->t, NULL);
	return a->rc;
}

int th_pair_open(struct th_pair *p, const struct rdmx_conn_opts *server_opts,
		 const struct rdmx_conn_opts *client_opts)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct th_acceptor a = { 0 };
	const char *addr = th_addr();
	int rc;

	memset(p, 0, sizeof(*p));
	if (!addr)
		return -ENODEV;
	rc = rdmx_ctx_create(&p->ctx, &co);
	if (!rc)
		rc = rdmx_listen(p->ctx, addr, 0, server_opts, &p->lis);
	if (rc)
		goto fail;
	a.lis = p->lis;
	th_accept_start(&a);
	rc = rdmx_dial(p->ctx, addr, rdmx_listener_port(p->lis), client_opts, &p->client);
	if (rc)
		fprintf(stderr, "harness: dial: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
	if (th_accept_join(&a))
		fprintf(stderr, "harness: accept: %s (%s)\n", rdmx_strerror(a.rc),
			rdmx_listener_error(p->lis));
	p->server = a.conn;
	if (!rc)
		rc = a.rc;
	if (!rc)
		return 0;
fail:
	th_pair_close(p);
	return rc;
}

void th_pair_close(struct th_pair *p)
{
	rdmx_conn_close(p->client);
	rdmx_conn_close(p->server);
	rdmx_listener_destroy(p->lis);
	rdmx_ctx_destroy(p->ctx);
	memset(p, 0, sizeof(*p));
}

static int echo_one(rdmx_conn *c, const struct rdmx_msg *in)
{
	struct rdmx_msg out;
	int rc = rdmx_msg_alloc(c, in->len, &out, 10000);

	if (rc)
		return rc;
	memcpy(out.data, in->data, in->len);
	out.len = in->len;
	out.imm = in->imm;
	out.flags = in->flags;
	return rdmx_send(c, &out);
}

static void *echo_main(void *arg)
{
	struct th_echo *e = arg;
	struct rdmx_msg m;

	for (;;) {
		e->rc = rdmx_recv(e->conn, &m, 20000);
		if (e->rc)
			break;
		e->rc = echo_one(e->conn, &m);
		rdmx_msg_release(e->conn, &m);
		if (e->rc)
			break;
		e->echoed++;
	}
	if (e->rc != -ECONNRESET) /* the test fails: say why the echo stopped */
		fprintf(stderr, "echo thread: stopped after %ld messages: %s (%s)\n",
			e->echoed, rdmx_strerror(e->rc),
			rdmx_conn_error(e->conn));
	return NULL;
}

void th_echo_start(struct th_echo *e, rdmx_conn *conn)
{
	e->conn = conn;
	e->echoed = 0;
	e->rc = 0;
	pthread_create(&e->thread, NULL, echo_main, e);
}

int th_echo_join(struct th_echo *e)
{
	pthread_join(e->thread, NULL);
	return e->rc;
}

static char watchdog_msg[256];

static void watchdog_fire(int sig)
{
	ssize_t n = write(STDOUT_FILENO, watchdog_msg, strlen(watchdog_msg));

	(void)sig;
	(void)n;
	_exit(1);
}

void th_watchdog(unsigned seconds, const char *fmt, ...)
{
	va_list ap;

	alarm(0);
	if (!seconds)
		return;
	va_start(ap, fmt);
	vsnprintf(watchdog_msg, sizeof(watchdog_msg), fmt, ap);
	va_end(ap);
	signal(SIGALRM, watchdog_fire);
	alarm(seconds);
}
