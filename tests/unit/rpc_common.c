/* SPDX-License-Identifier: MIT */
/* The fixture test_rpc's files share (rpc_common.h). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_common.h"

const struct rdmx_rpc_method contract[] = {
	{ M_ECHO, "echo", MAX_ECHO, MAX_ECHO, RDMX_RPC_IDEMPOTENT },
	{ M_FAIL, "fail", 64, 64, 0 },
	{ M_HOLD, "hold", 64, 64, 0 },
	{ M_NONE, "none", 64, 64, 0 },
};

static void on_echo(rdmx_rpc_req *req, void *arg)
{
	size_t len, cap;
	const void *in = rdmx_rpc_req_data(req, &len);
	void *out = rdmx_rpc_req_resp(req, &cap);

	(void)arg;
	memcpy(out, in, len);
	rdmx_rpc_respond(req, 0, len);
}

static void on_fail(rdmx_rpc_req *req, void *arg)
{
	(void)arg;
	rdmx_rpc_respond(req, -EIO, 0);
}

static void on_hold(rdmx_rpc_req *req, void *arg)
{
	struct holder *h = arg;

	pthread_mutex_lock(&h->lock);
	h->req[h->n++] = req;
	pthread_mutex_unlock(&h->lock);
}

static void *run_main(void *arg)
{
	struct srv *v = arg;

	v->rc = rdmx_rpc_server_run(v->s);
	return NULL;
}

/* A case's call count: a fifth on a real device (the emulated rxe of the
 * sandbox is slow; this is make check's run, volume is not its point). */
uint64_t calls(uint64_t n)
{
	return strcmp(TH_FABRIC, "verbs") ? th_count(n) : th_count(n) / 5;
}

void opts(struct rdmx_rpc_opts *o)
{
	const char *t = getenv("RPC_TRANSPORT"), *p = getenv("RPC_PROTOCOL");

	rdmx_rpc_opts_init(o);
	o->timeout_ms = WAIT_MS; /* 8 clients dialing at once on a loaded host */
	if (t && *t)
		o->transport = t;
	if (p && *p)
		o->protocol = p;
}

/* The server's timeout (its waits for a send buffer): a case may shorten it. */
int srv_timeout_ms = WAIT_MS;
/* The server's drop and hello deadlines: 0, its defaults. */
int srv_drop_ms, srv_hello_ms;
uint32_t srv_window = 64;

void srv_start(struct srv *v, unsigned workers)
{
	struct rdmx_ctx_opts co;
	struct rdmx_rpc_opts o;

	memset(v, 0, sizeof(*v));
	pthread_mutex_init(&v->hold.lock, NULL);
	rdmx_ctx_opts_init(&co);
	co.fabric = th_fabric();
	assert_int_equal(rdmx_ctx_create(&v->ctx, &co), 0);
	opts(&o);
	o.timeout_ms = srv_timeout_ms;
#ifndef BEFORE
	o.drop_ms = srv_drop_ms;
	o.hello_ms = srv_hello_ms;
#endif
	o.workers = workers;
	o.window = srv_window; /* rfp: request slots per client */
	assert_int_equal(rdmx_rpc_server_create(v->ctx, th_addr(), 0, contract, NMETHODS,
						&o, &v->s), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, M_ECHO, on_echo, NULL), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, M_FAIL, on_fail, NULL), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, M_HOLD, on_hold, &v->hold), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, 77, on_fail, NULL), -ENOENT);
	assert_int_equal(pthread_create(&v->t, NULL, run_main, v), 0);
}

void srv_stop(struct srv *v)
{
	rdmx_rpc_server_stop(v->s);
	pthread_join(v->t, NULL);
	assert_int_equal(v->rc, 0);
	rdmx_rpc_server_destroy(v->s);
	rdmx_ctx_destroy(v->ctx);
	pthread_mutex_destroy(&v->hold.lock);
}

rdmx_rpc_client *dial(struct srv *v, const struct rdmx_rpc_method *m, size_t n,
			     uint32_t window, int *rc)
{
	struct rdmx_rpc_opts o;
	rdmx_rpc_client *c = NULL;

	opts(&o);
	o.window = window;
	*rc = rdmx_rpc_client_create(v->ctx, th_addr(), rdmx_rpc_server_port(v->s), m, n,
				     &o, &c);
	return c;
}

rdmx_rpc_client *dial_ok(struct srv *v, uint32_t window)
{
	int rc;
	rdmx_rpc_client *c = dial(v, contract, NMETHODS, window, &rc);

	if (rc)
		fprintf(stderr, "dial: %s\n", rdmx_last_error());
	assert_int_equal(rc, 0);
	return c;
}

/* Wait (bounded) until @pred holds on the server's stats. */
int stats_wait(struct srv *v, uint64_t open, uint64_t min_calls)
{
	struct rdmx_rpc_server_stats st;
	double end = th_now_ms() + WAIT_MS;

	do {
		rdmx_rpc_server_stats(v->s, &st);
		if (st.open == open && st.calls >= min_calls)
			return 0;
		usleep(1000);
	} while (th_now_ms() < end);
	return -ETIMEDOUT;
}

/* Wait (bounded) until @n requests are held. */
int held(struct holder *h, int n)
{
	double end = th_now_ms() + WAIT_MS;
	int got;

	do {
		pthread_mutex_lock(&h->lock);
		got = h->n;
		pthread_mutex_unlock(&h->lock);
		if (got >= n)
			return 0;
		usleep(1000);
	} while (th_now_ms() < end);
	return -ETIMEDOUT;
}

/* Wait (bounded) until the server dropped @n peers for malformed frames. */
int bad_wait(struct srv *v, uint64_t n)
{
	struct rdmx_rpc_server_stats st;
	double end = th_now_ms() + WAIT_MS;

	do {
		rdmx_rpc_server_stats(v->s, &st);
		if (st.bad_frames == n)
			return 0;
		usleep(1000);
	} while (th_now_ms() < end);
	return -ETIMEDOUT;
}

/* One echo call of @n bytes with the pattern of @seq, checked. */
void echo_once(rdmx_rpc_client *c, size_t n, uint64_t seq)
{
	echo_within(c, n, seq, WAIT_MS);
}

double echo_within(rdmx_rpc_client *c, size_t n, uint64_t seq, int timeout_ms)
{
	static _Thread_local unsigned char in[MAX_ECHO], out[MAX_ECHO];
	size_t len = 0;
	int status = 1, rc;
	double t0 = th_now_ms();

	th_fill(in, n, seq);
	rc = rdmx_rpc_call(c, M_ECHO, in, n, out, sizeof(out), &len, &status, timeout_ms);
	t0 = th_now_ms() - t0;
	if (rc)
		fprintf(stderr, "echo of %zu bytes: %s\n", n, rdmx_rpc_client_error(c));
	assert_int_equal(rc, 0);
	assert_int_equal(status, 0);
	assert_int_equal(len, n);
	assert_int_equal(th_check(out, n, seq), -1);
	return t0;
}

/* The server's work requests since @s0 once they reach @want, else what
 * they are when WAIT_MS have passed. The core counts a send once its post
 * returned, and rxe delivers a loopback SEND within the post's system
 * call: the client may hold the last push before the server counted it. */
uint64_t wrs_wait(struct srv *v, const struct rdmx_rpc_server_stats *s0,
			 uint64_t want)
{
	struct rdmx_rpc_server_stats st;
	double end = th_now_ms() + WAIT_MS;

	do {
		rdmx_rpc_server_stats(v->s, &st);
		if (st.work_requests - s0->work_requests >= want)
			break;
		usleep(1000);
	} while (th_now_ms() < end);
	return st.work_requests - s0->work_requests;
}

int raw_frame(rdmx_conn *raw, const struct rpc_hdr *h, const void *payload)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(raw, RPC_HDR + h->len, &m, 1000);

	if (rc)
		return rc;
	rdmx__rpc_hdr_put(m.data, h);
	memcpy((char *)m.data + RPC_HDR, payload, h->len);
	m.len = RPC_HDR + h->len;
	return rdmx_send(raw, &m);
}

rdmx_conn *raw_dial(struct srv *v)
{
	struct rdmx_conn_opts co;
	rdmx_conn *raw;

	rdmx_conn_opts_init(&co);
	co.max_msg_size = (uint32_t)(RPC_HDR + MAX_ECHO);
	co.send_depth = co.recv_depth = 16;
	assert_int_equal(rdmx_dial(v->ctx, th_addr(), rdmx_rpc_server_port(v->s), &co, &raw), 0);
	return raw;
}

void raw_hello(rdmx_conn *raw)
{
	unsigned char hello[RPC_HELLO_LEN];
	struct rpc_contract k;
	struct rdmx_msg m;

	assert_int_equal(rdmx__rpc_contract_load(&k, contract, NMETHODS), 0);
	rdmx__rpc_hello_put(hello, &k);
	rdmx__rpc_contract_free(&k);
	raw_frame(raw, &(struct rpc_hdr){ .kind = RPC_HELLO, .len = RPC_HELLO_LEN }, hello);
	assert_int_equal(rdmx_recv(raw, &m, WAIT_MS), 0); /* HELLO_OK */
	rdmx_msg_release(raw, &m);
}
