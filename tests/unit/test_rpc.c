/* SPDX-License-Identifier: MIT */
/*
 * rdmx RPC on one fabric (fake natively, verbs in the sandbox): the
 * contract check, sync and async calls with checksummed payloads of
 * 1 B..max, deferred responses answered out of order, handler errors,
 * unknown methods, oversize requests, a malformed client dropped while
 * others are served, the server going away with calls in flight, a
 * client going away with calls held, and 8 clients on 8 threads.
 * RPC_TRANSPORT / RPC_PROTOCOL pick what the calls ride on.
 */
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

#include <rdmx/rpc.h>

#include "harness.h"
#include "rpc/rpc_int.h"

#define M_ECHO 1
#define M_FAIL 2
#define M_HOLD 3
#define M_NONE 4    /* in the contract, no handler */
#define MAX_ECHO 4096
#define HOLD_N 8
#define WAIT_MS 20000
#define NTHREADS 8

static const struct rdmx_rpc_method contract[] = {
	{ M_ECHO, "echo", MAX_ECHO, MAX_ECHO, RDMX_RPC_IDEMPOTENT },
	{ M_FAIL, "fail", 64, 64, 0 },
	{ M_HOLD, "hold", 64, 64, 0 },
	{ M_NONE, "none", 64, 64, 0 },
};
#define NMETHODS (sizeof(contract) / sizeof(contract[0]))

/* Held requests of M_HOLD, answered by the test thread. */
struct holder {
	pthread_mutex_t lock;
	rdmx_rpc_req *req[64];
	int n;
};

struct srv {
	rdmx_ctx *ctx;
	rdmx_rpc_server *s;
	pthread_t t;
	int rc;
	struct holder hold;
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
static uint64_t calls(uint64_t n)
{
	return strcmp(TH_FABRIC, "verbs") ? th_count(n) : th_count(n) / 5;
}

static void opts(struct rdmx_rpc_opts *o)
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
static int srv_timeout_ms = WAIT_MS;

static void srv_start(struct srv *v, unsigned workers)
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
	o.workers = workers;
	o.window = 64; /* rfp: request slots per client */
	assert_int_equal(rdmx_rpc_server_create(v->ctx, th_addr(), 0, contract, NMETHODS,
						&o, &v->s), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, M_ECHO, on_echo, NULL), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, M_FAIL, on_fail, NULL), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, M_HOLD, on_hold, &v->hold), 0);
	assert_int_equal(rdmx_rpc_server_handle(v->s, 77, on_fail, NULL), -ENOENT);
	assert_int_equal(pthread_create(&v->t, NULL, run_main, v), 0);
}

static void srv_stop(struct srv *v)
{
	rdmx_rpc_server_stop(v->s);
	pthread_join(v->t, NULL);
	assert_int_equal(v->rc, 0);
	rdmx_rpc_server_destroy(v->s);
	rdmx_ctx_destroy(v->ctx);
	pthread_mutex_destroy(&v->hold.lock);
}

static rdmx_rpc_client *dial(struct srv *v, const struct rdmx_rpc_method *m, size_t n,
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

static rdmx_rpc_client *dial_ok(struct srv *v, uint32_t window)
{
	int rc;
	rdmx_rpc_client *c = dial(v, contract, NMETHODS, window, &rc);

	if (rc)
		fprintf(stderr, "dial: %s\n", rdmx_last_error());
	assert_int_equal(rc, 0);
	return c;
}

/* Wait (bounded) until @pred holds on the server's stats. */
static int stats_wait(struct srv *v, uint64_t open, uint64_t min_calls)
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

/* Wait (bounded) until the server dropped @n peers for malformed frames. */
static int bad_wait(struct srv *v, uint64_t n)
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
static void echo_once(rdmx_rpc_client *c, size_t n, uint64_t seq)
{
	static unsigned char in[MAX_ECHO], out[MAX_ECHO];
	size_t len = 0;
	int status = 1, rc;

	th_fill(in, n, seq);
	rc = rdmx_rpc_call(c, M_ECHO, in, n, out, sizeof(out), &len, &status, WAIT_MS);
	if (rc)
		fprintf(stderr, "echo of %zu bytes: %s\n", n, rdmx_rpc_client_error(c));
	assert_int_equal(rc, 0);
	assert_int_equal(status, 0);
	assert_int_equal(len, n);
	assert_int_equal(th_check(out, n, seq), -1);
}

static void t_sizes(void **state)
{
	struct srv v;
	rdmx_rpc_client *c;
	uint64_t seq = 0;

	(void)state;
	srv_start(&v, 1);
	c = dial_ok(&v, 16);
	for (size_t n = 1; n <= MAX_ECHO; n += n < 64 ? 1 : 61)
		echo_once(c, n, seq++);
	echo_once(c, MAX_ECHO, seq++);
	for (uint64_t i = 0; i < calls(2000); i++)
		echo_once(c, 8 + i % 200, seq++);
	rdmx_rpc_client_destroy(c);
	assert_int_equal(stats_wait(&v, 0, seq), 0);
	srv_stop(&v);
}

/* A free buffer slot of t_window's (busy[] false), or W. */
static unsigned free_slot(const int *busy, unsigned w)
{
	unsigned s = 0;

	while (s < w && busy[s])
		s++;
	return s;
}

/* A window of calls in flight, collected by rdmx_rpc_poll in any order. */
static void t_window(void **state)
{
	enum { W = 32 };
	static unsigned char in[W][256], out[W][256];
	uint64_t ids[W], seqs[W], id, sent = 0, done = 0, total = calls(4000);
	int busy[W] = { 0 }, status;
	rdmx_rpc_client *c;
	struct srv v;
	size_t len;
	unsigned s;

	(void)state;
	srv_start(&v, 2);
	c = dial_ok(&v, W);
	while (done < total) {
		while (sent < total && (s = free_slot(busy, W)) < W) {
			th_fill(in[s], sizeof(in[s]), sent);
			assert_int_equal(rdmx_rpc_call_async(c, M_ECHO, in[s], sizeof(in[s]),
							     out[s], sizeof(out[s]), &ids[s]), 0);
			seqs[s] = sent++;
			busy[s] = 1;
		}
		if (sent - done == W)
			assert_int_equal(rdmx_rpc_call_async(c, M_ECHO, in[0], 1, out[0], 1,
							     &id), -ENOBUFS);
		assert_int_equal(rdmx_rpc_poll(c, &id, &status, &len, WAIT_MS), 0);
		assert_int_equal(status, 0);
		assert_int_equal(len, 256);
		for (s = 0; s < W && !(busy[s] && ids[s] == id); s++)
			;
		assert_true(s < W);
		assert_int_equal(th_check(out[s], 256, seqs[s]), -1);
		busy[s] = 0;
		done++;
	}
	assert_int_equal(rdmx_rpc_poll(c, &id, &status, &len, 0), -EINVAL);
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
}

/* t_volume's calls: RDMX_RPC_CALLS (make soak: 100,000), else calls(4096). */
static uint64_t volume(void)
{
	const char *e = getenv("RDMX_RPC_CALLS");

	return e && *e ? strtoull(e, NULL, 10) : calls(4096);
}

/* The size of t_volume's call @i: 1..MAX_ECHO, each once in MAX_ECHO calls. */
static size_t volume_size(uint64_t i)
{
	return 1 + (size_t)(i * 997 % MAX_ECHO);
}

/* Calls of every size 1 B..max (checksummed), 16 in flight, collected in
 * any order: make check's few thousand, make soak's 100,000. */
static void t_volume(void **state)
{
	enum { W = 16 };
	static unsigned char in[W][MAX_ECHO], out[W][MAX_ECHO];
	uint64_t ids[W], seqs[W], id, sent = 0, done = 0, total = volume();
	int busy[W] = { 0 }, status;
	rdmx_rpc_client *c;
	struct srv v;
	double t0;
	size_t len;
	unsigned s;

	(void)state;
	srv_start(&v, 2);
	c = dial_ok(&v, W);
	t0 = th_now_ms();
	while (done < total) {
		while (sent < total && (s = free_slot(busy, W)) < W) {
			th_fill(in[s], volume_size(sent), sent);
			assert_int_equal(rdmx_rpc_call_async(c, M_ECHO, in[s], volume_size(sent),
							     out[s], MAX_ECHO, &ids[s]), 0);
			seqs[s] = sent++;
			busy[s] = 1;
		}
		if (rdmx_rpc_poll(c, &id, &status, &len, WAIT_MS))
			fail_msg("call %llu of %llu: %s", (unsigned long long)done,
				 (unsigned long long)total, rdmx_rpc_client_error(c));
		for (s = 0; s < W && !(busy[s] && ids[s] == id); s++)
			;
		assert_true(s < W);
		assert_int_equal(status, 0);
		assert_int_equal(len, volume_size(seqs[s]));
		assert_int_equal(th_check(out[s], len, seqs[s]), -1);
		busy[s] = 0;
		done++;
	}
	printf("rpc %s: %llu calls of 1..%d B checked, 16 in flight, %.0f calls/s\n",
	       getenv("RPC_TRANSPORT") ? getenv("RPC_TRANSPORT") : "msg",
	       (unsigned long long)total, MAX_ECHO, total / ((th_now_ms() - t0) / 1e3));
	rdmx_rpc_client_destroy(c);
	assert_int_equal(stats_wait(&v, 0, total), 0);
	srv_stop(&v);
}

/* Send one frame on a raw connection: 0, or the send's error. */
static int raw_frame(rdmx_conn *raw, const struct rpc_hdr *h, const void *payload)
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

/* Wait (bounded) until @n requests are held. */
static int held(struct holder *h, int n)
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

/* Deferred responses, answered from this thread in reverse order. */
static void t_deferred(void **state)
{
	uint64_t ids[HOLD_N], id;
	unsigned char in[HOLD_N], out[HOLD_N][64];
	rdmx_rpc_client *c;
	struct srv v;
	size_t len;
	int status;

	(void)state;
	srv_start(&v, 1);
	c = dial_ok(&v, 16);
	for (int i = 0; i < HOLD_N; i++) {
		in[i] = (unsigned char)(100 + i);
		assert_int_equal(rdmx_rpc_call_async(c, M_HOLD, &in[i], 1, out[i], 64,
						     &ids[i]), 0);
	}
	assert_int_equal(held(&v.hold, HOLD_N), 0);
	assert_int_equal(rdmx_rpc_wait(c, ids[0], &status, &len, 0), -EAGAIN);
	for (int i = HOLD_N - 1; i >= 0; i--) {
		rdmx_rpc_req *r = v.hold.req[i];
		size_t n, cap;
		const unsigned char *d = rdmx_rpc_req_data(r, &n);
		unsigned char *o = rdmx_rpc_req_resp(r, &cap);

		assert_int_equal(n, 1);
		assert_int_equal(cap, 64);
		assert_int_equal(rdmx_rpc_req_method(r), M_HOLD);
		o[0] = d[0];
		o[1] = (unsigned char)i;
		assert_int_equal(rdmx_rpc_respond(r, -i, 2), 0);
		/* the newest answered first: it is the first to complete */
		assert_int_equal(rdmx_rpc_poll(c, &id, &status, &len, WAIT_MS), 0);
		assert_true(id == ids[i]);
		assert_int_equal(status, -i);
		assert_int_equal(len, 2);
		assert_int_equal(out[i][0], 100 + i);
	}
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
}

/* Handler errors, methods outside the contract or without a handler,
 * oversize requests (refused before anything is sent). */
static void t_errors(void **state)
{
	struct rdmx_rpc_server_stats st;
	static unsigned char big[MAX_ECHO + 1], out[64];
	rdmx_rpc_client *c;
	struct srv v;
	size_t len;
	int status;

	(void)state;
	srv_start(&v, 0);
	c = dial_ok(&v, 4);
	assert_int_equal(rdmx_rpc_call(c, M_FAIL, "x", 1, out, 64, &len, &status, WAIT_MS), 0);
	assert_int_equal(status, -EIO);
	assert_int_equal(rdmx_rpc_call(c, M_NONE, "x", 1, out, 64, &len, &status, WAIT_MS), 0);
	assert_int_equal(status, -ENOSYS);
	assert_int_equal(rdmx_rpc_call(c, 99, "x", 1, out, 64, &len, &status, WAIT_MS), -ENOENT);
	assert_non_null(strstr(rdmx_rpc_client_error(c), "not in the contract"));
	assert_int_equal(rdmx_rpc_call(c, M_ECHO, big, sizeof(big), big, sizeof(big), &len,
				       &status, WAIT_MS), -EMSGSIZE);
	assert_non_null(strstr(rdmx_rpc_client_error(c), "'echo': request of 4097 bytes"));
	/* a response larger than the caller's buffer */
	assert_int_equal(rdmx_rpc_call(c, M_ECHO, big, 100, out, 10, &len, &status, WAIT_MS),
			 -EMSGSIZE);
	echo_once(c, 5, 1);
	/* fail, none, the small buffer, echo: counted once sent */
	assert_int_equal(stats_wait(&v, 1, 4), 0);
	rdmx_rpc_server_stats(v.s, &st);
	assert_int_equal(st.calls, 4);
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
}

/* A client with another table is refused with the first difference
 * named; the server goes on serving the others. */
static void t_mismatch(void **state)
{
	struct rdmx_rpc_method other[NMETHODS];
	struct rdmx_rpc_server_stats st;
	rdmx_rpc_client *c, *good;
	struct srv v;
	int rc;

	(void)state;
	srv_start(&v, 1);
	good = dial_ok(&v, 4);
	memcpy(other, contract, sizeof(other));
	other[0].max_req = 8192;
	c = dial(&v, other, NMETHODS, 4, &rc);
	assert_int_equal(rc, -EPROTO);
	assert_null(c);
	assert_non_null(strstr(rdmx_last_error(),
			       "method 1 'echo': largest request 8192 here, 4096 on the server"));
	other[0].max_req = MAX_ECHO;
	c = dial(&v, other, NMETHODS - 1, 4, &rc); /* "none" missing here */
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(rdmx_last_error(), "method 4 'none' of the server is not here"));
	echo_once(good, 100, 7);
	rdmx_rpc_server_stats(v.s, &st);
	assert_int_equal(st.rejected, 2);
	assert_int_equal(st.conns, 1);
	assert_non_null(strstr(rdmx_rpc_server_error(v.s), "contract differs"));
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/* A peer that writes a malformed frame loses its connection, nobody else. */
static void t_malformed(void **state)
{
	struct rdmx_rpc_server_stats st;
	struct rdmx_conn_opts co;
	rdmx_rpc_client *good;
	struct rdmx_msg m;
	rdmx_conn *raw;
	struct srv v;
	int rc;

	(void)state;
	srv_start(&v, 1);
	good = dial_ok(&v, 4);
	rdmx_conn_opts_init(&co);
	if (getenv("RPC_PROTOCOL") && *getenv("RPC_PROTOCOL"))
		co.protocol = getenv("RPC_PROTOCOL");
	co.max_msg_size = 24 + MAX_ECHO;
	co.send_depth = co.recv_depth = 16;
	assert_int_equal(rdmx_dial(v.ctx, th_addr(), rdmx_rpc_server_port(v.s), &co, &raw), 0);
	assert_int_equal(rdmx_msg_alloc(raw, 30, &m, WAIT_MS), 0);
	memset(m.data, 0x5a, 30);
	m.len = 30;
	assert_int_equal(rdmx_send(raw, &m), 0);
	assert_int_equal(bad_wait(&v, 1), 0);
	assert_non_null(strstr(rdmx_rpc_server_error(v.s), "rpc"));
	/* what the server sent before (rfp: its set-up), then the end */
	for (int n = 0; n < 4 && !(rc = rdmx_recv(raw, &m, WAIT_MS)); n++)
		rdmx_msg_release(raw, &m);
	if (rc != -ECONNRESET)
		fprintf(stderr, "raw peer: %s (%s)\n", rdmx_strerror(rc), rdmx_conn_error(raw));
	assert_int_equal(rc, -ECONNRESET);
	rdmx_rpc_server_stats(v.s, &st);
	assert_int_equal(st.bad_frames, 1);
	echo_once(good, 33, 3);
	rdmx_conn_close(raw);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/* The server goes away with calls held: every one fails -ECONNRESET. */
static void t_server_gone(void **state)
{
	uint64_t ids[HOLD_N];
	unsigned char out[64];
	rdmx_rpc_client *c;
	struct srv v;
	int status;

	(void)state;
	srv_start(&v, 1);
	c = dial_ok(&v, 16);
	for (int i = 0; i < HOLD_N; i++)
		assert_int_equal(rdmx_rpc_call_async(c, M_HOLD, "h", 1, out, 64, &ids[i]), 0);
	assert_int_equal(held(&v.hold, HOLD_N), 0);
	rdmx_rpc_server_stop(v.s);
	pthread_join(v.t, NULL);
	rdmx_rpc_server_destroy(v.s); /* drops the held requests */
	for (int i = 0; i < HOLD_N; i++)
		assert_int_equal(rdmx_rpc_wait(c, ids[i], &status, NULL, WAIT_MS), -ECONNRESET);
	assert_int_equal(rdmx_rpc_call(c, M_ECHO, "x", 1, out, 64, NULL, &status, WAIT_MS),
			 -ECONNRESET);
	rdmx_rpc_client_destroy(c);
	rdmx_ctx_destroy(v.ctx);
	pthread_mutex_destroy(&v.hold.lock);
}

/* A client goes away with calls held: the server frees its connection
 * once they are answered, and keeps serving. */
static void t_client_gone(void **state)
{
	uint64_t id;
	unsigned char out[64];
	rdmx_rpc_client *c, *good;
	struct srv v;

	(void)state;
	srv_start(&v, 2);
	good = dial_ok(&v, 4);
	c = dial_ok(&v, 16);
	for (int i = 0; i < HOLD_N; i++)
		assert_int_equal(rdmx_rpc_call_async(c, M_HOLD, "h", 1, out, 64, &id), 0);
	assert_int_equal(held(&v.hold, HOLD_N), 0);
	rdmx_rpc_client_destroy(c);
	usleep(50 * 1000);
	assert_int_equal(stats_wait(&v, 2, 0), 0); /* held: still open */
	for (int i = 0; i < HOLD_N; i++)
		rdmx_rpc_respond(v.hold.req[i], 0, 0); /* may fail: nobody there */
	assert_int_equal(stats_wait(&v, 1, 0), 0);
	echo_once(good, 64, 9);
	rdmx_rpc_client_destroy(good);
	assert_int_equal(stats_wait(&v, 0, 0), 0);
	srv_stop(&v);
}

struct thr {
	pthread_t t;
	struct srv *v;
	int id;
	uint64_t calls, bad;
	int rc;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	unsigned char in[512], out[512];
	rdmx_rpc_client *c;
	struct rdmx_rpc_opts o;

	opts(&o);
	o.window = 8;
	t->rc = rdmx_rpc_client_create(t->v->ctx, th_addr(), rdmx_rpc_server_port(t->v->s),
				       contract, NMETHODS, &o, &c);
	for (uint64_t i = 0; !t->rc && i < calls(1000); i++) {
		uint64_t seq = (uint64_t)t->id << 32 | i;
		size_t n = 8 + (size_t)(i * 37 % 500), len = 0;
		int status = 1;

		th_fill(in, n, seq);
		t->rc = rdmx_rpc_call(c, M_ECHO, in, n, out, sizeof(out), &len, &status,
				      WAIT_MS);
		if (!t->rc && (status || len != n || th_check(out, n, seq) != -1))
			t->bad++;
		t->calls++;
	}
	if (t->rc)
		fprintf(stderr, "client %d: %s (%s)\n", t->id, rdmx_strerror(t->rc),
			rdmx_last_error());
	else
		rdmx_rpc_client_destroy(c);
	return NULL;
}

static void t_threads(void **state)
{
	struct thr t[NTHREADS];
	struct srv v;

	(void)state;
	srv_start(&v, 3);
	for (int i = 0; i < NTHREADS; i++) {
		t[i] = (struct thr){ .v = &v, .id = i };
		assert_int_equal(pthread_create(&t[i].t, NULL, thr_main, &t[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i].t, NULL);
		assert_int_equal(t[i].rc, 0);
		assert_int_equal(t[i].bad, 0);
		assert_int_equal(t[i].calls, calls(1000));
	}
	assert_int_equal(stats_wait(&v, 0, NTHREADS * calls(1000)), 0);
	srv_stop(&v);
}

/* The server's work requests since @s0 once they reach @want, else what
 * they are when WAIT_MS have passed. The core counts a send once its post
 * returned, and rxe delivers a loopback SEND within the post's system
 * call: the client may hold the last push before the server counted it. */
static uint64_t wrs_wait(struct srv *v, const struct rdmx_rpc_server_stats *s0,
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

/* rfp: the server's SENDs to a client (its msgs_recv) per call: none in
 * fetch mode (only the set-up), one per call when every call asks for
 * the push at once (fetch_retries 0). The server's work_requests from
 * before the client's connect (awaited until they cover what the client
 * received: the server posts nothing else to it) go to *@wrs. */
static uint64_t rfp_sends(struct srv *v, uint32_t retries, int n, uint64_t *wrs)
{
	struct rdmx_conn_stats st = { .size = sizeof(st) };
	struct rdmx_rpc_server_stats s0;
	struct rdmx_rpc_opts o;
	rdmx_rpc_client *c;
	unsigned char buf[64];
	int status;

	rdmx_rpc_opts_init(&o);
	o.transport = "rfp";
	o.timeout_ms = WAIT_MS;
	o.fetch_retries = retries;
	rdmx_rpc_server_stats(v->s, &s0);
	assert_int_equal(rdmx_rpc_client_create(v->ctx, th_addr(), rdmx_rpc_server_port(v->s),
						contract, NMETHODS, &o, &c), 0);
	for (int i = 0; i < n; i++) {
		th_fill(buf, sizeof(buf), (uint64_t)i);
		assert_int_equal(rdmx_rpc_call(c, M_ECHO, buf, sizeof(buf), buf, sizeof(buf),
					       NULL, &status, WAIT_MS), 0);
		assert_int_equal(th_check(buf, sizeof(buf), (uint64_t)i), -1);
	}
	assert_int_equal(rdmx_conn_stats(rdmx_rpc_client_conn(c), &st), 0);
	*wrs = wrs_wait(v, &s0, st.msgs_recv);
	rdmx_rpc_client_destroy(c);
	return st.msgs_recv;
}

static void t_rfp_fetch_push(void **state)
{
	struct srv v;
	const char *t = getenv("RPC_TRANSPORT");
	uint64_t wrs;

	(void)state;
	if (!t || strcmp(t, "rfp"))
		setenv("RPC_TRANSPORT", "rfp", 1);

	srv_start(&v, 1);
	assert_int_equal(rfp_sends(&v, 1u << 30, 200, &wrs), 1);   /* the set-up */
	assert_int_equal(wrs, 1); /* fetch mode: no work request per call */
	assert_int_equal(rfp_sends(&v, 0, 200, &wrs), 2 + 200); /* set-up, hello, each call */
	assert_int_equal(wrs, 2 + 200); /* a push per call */
	srv_stop(&v);
	if (!t)
		unsetenv("RPC_TRANSPORT");
	else
		setenv("RPC_TRANSPORT", t, 1);
}

static void t_contract(void **state)
{
	struct rdmx_rpc_method m[2] = {
		{ 5, "a", 1, 1, 0 }, { 5, "b", 1, 1, 0 },
	};

	(void)state;
	assert_int_equal(rdmx_rpc_contract_check(m, 2), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "declared twice"));
	m[1].id = 6;
	assert_int_equal(rdmx_rpc_contract_check(m, 2), 0);
	m[1].name = "";
	assert_int_equal(rdmx_rpc_contract_check(m, 2), -EINVAL);
	m[1].name = "b";
	m[1].flags = 0x80;
	assert_int_equal(rdmx_rpc_contract_check(m, 2), -EINVAL);
	assert_int_equal(rdmx_rpc_contract_check(m, 0), -EINVAL);
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Calls/s and p50 of 32-byte echoes, printed to compare transports in one
 * run (reported, never asserted: only the echoes are checked). */
static void t_rate(void **state)
{
	uint64_t n = th_count(2000);
	double *lat = calloc(n, sizeof(*lat)), t0;
	rdmx_rpc_client *c;
	struct srv v;
	const char *t = getenv("RPC_TRANSPORT");

	(void)state;
	assert_non_null(lat);
	srv_start(&v, 1);
	c = dial_ok(&v, 4);
	t0 = th_now_ms();
	for (uint64_t i = 0; i < n; i++) {
		double s = th_now_ms();

		echo_once(c, 32, i);
		lat[i] = th_now_ms() - s;
	}
	t0 = th_now_ms() - t0;
	qsort(lat, n, sizeof(*lat), dcmp);
	printf("rpc %s: %llu echoes of 32 B: %.0f calls/s, p50 %.1f us, p99 %.1f us\n",
	       t && *t ? t : "msg", (unsigned long long)n, n / (t0 / 1e3), lat[n / 2] * 1e3,
	       lat[n * 99 / 100] * 1e3);
	free(lat);
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
}

/* ------------------------------------------------------ transport herd */

static int herd(void)
{
	const char *t = getenv("RPC_TRANSPORT");

	return t && !strcmp(t, "herd");
}

/* A herd case's server (skipped on other transports) and a client of it. */
static rdmx_rpc_client *herd_start(struct srv *v, unsigned workers)
{
	if (!herd())
		skip();
	srv_start(v, workers);
	return dial_ok(v, 4);
}

/* The server's outbound work requests: one UD SEND per call whose
 * response fits the UD limit, a control message for the others (and
 * each client's HELLO_OK). */
static void t_herd_counts(void **state)
{
	uint64_t ud, ctrl, n = calls(500);
	struct rdmx_rpc_server_stats s0;
	rdmx_rpc_client *c;
	struct srv v;

	(void)state;
	if (!herd())
		skip();
	srv_start(&v, 1);
	/* from before the connect: the HELLO_OK may be counted after the
	 * client has it (rxe delivers a loopback SEND within the post) */
	rdmx_rpc_server_stats(v.s, &s0);
	c = dial_ok(&v, 4);
	for (uint64_t i = 0; i < n; i++)
		echo_once(c, 100, i);
	for (uint64_t i = 0; i < 5; i++)
		echo_once(c, MAX_ECHO, i);
	rdmx__rpc_herd_counts(v.s, &ud, &ctrl);
	printf("herd: %llu calls: %llu UD SENDs, %llu control messages (1 HELLO_OK): "
	       "%.2f server work requests per call; requests over UC\n",
	       (unsigned long long)(n + 5), (unsigned long long)ud,
	       (unsigned long long)ctrl, (double)(ud + ctrl - 1) / (double)(n + 5));
	assert_int_equal(ud, n);
	assert_int_equal(ctrl, 1 + 5);
	/* the public count: every UD SEND and control message (HELLO_OK
	 * too) and the herd set-up message the server sent at connect */
	assert_int_equal(wrs_wait(&v, &s0, ud + ctrl + 1), ud + ctrl + 1);
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
}

/* A frame of @len bytes (header @kind/@method/@plen, payload 0x5a) and its
 * trailer, as a hostile client WRITEs it into its slot. */
static size_t herd_frame(unsigned char *buf, uint32_t len, uint16_t method, uint32_t plen)
{
	struct rpc_hdr h = { .kind = RPC_REQ, .method = method, .len = plen, .call = 1 };

	memset(buf, 0x5a, len);
	if (plen)
		rdmx__rpc_hdr_put(buf, &h);
	buf[len] = (unsigned char)len;
	buf[len + 1] = (unsigned char)(len >> 8);
	buf[len + 2] = (unsigned char)(len >> 16);
	buf[len + 3] = (unsigned char)(len >> 24);
	buf[len + 4] = 1; /* the mark */
	return len + 5;
}

/* A client writing garbage into its slot fails its connection only: a
 * length above the slot, bytes that are no frame, a request above its
 * method's max_req. */
static void t_herd_hostile(void **state)
{
	static unsigned char buf[8192];
	static const char *const why[] = { "shorter than", "not an rpc frame",
					   "above its largest" };
	rdmx_rpc_client *good, *bad;
	unsigned char out[64];
	struct srv v;
	size_t n;
	int status;

	(void)state;
	if (!herd())
		skip();
	srv_start(&v, 2);
	good = dial_ok(&v, 4);
	for (int k = 0; k < 3; k++) {
		bad = dial_ok(&v, 4);
		if (k == 0) {
			n = herd_frame(buf, 0, 0, 0);
			memset(buf, 0xff, 4); /* length 0xffffffff */
		} else {
			uint32_t big = rdmx__rpc_herd_slot(bad) - 5;

			n = k == 1 ? herd_frame(buf, 30, 0, 0)
				   : herd_frame(buf, big, M_ECHO, big - RPC_HDR);
		}
		assert_true(k < 2 || n - 5 - RPC_HDR > MAX_ECHO);
		assert_int_equal(rdmx__rpc_herd_poke(bad, 1, buf, n), 0);
		assert_int_equal(bad_wait(&v, (uint64_t)k + 1), 0);
		if (!strstr(rdmx_rpc_server_error(v.s), why[k]))
			fail_msg("case %d: %s", k, rdmx_rpc_server_error(v.s));
		assert_int_equal(rdmx_rpc_call(bad, M_ECHO, "x", 1, out, sizeof(out), NULL,
					       &status, WAIT_MS), -ECONNRESET);
		rdmx_rpc_client_destroy(bad);
		echo_once(good, 100, (uint64_t)k);
	}
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/* A herd setup with a descriptor out of range: that peer is let go. */
static void t_herd_setup(void **state)
{
	unsigned char w[8 + 96 + 8] = { 'H', 'R', 'D', '1', 4 }; /* + the nonce */
	struct rdmx_conn_opts co;
	rdmx_rpc_client *good;
	struct rdmx_msg m;
	rdmx_conn *raw;
	struct srv v;

	(void)state;
	if (!herd())
		skip();
	srv_start(&v, 1);
	good = dial_ok(&v, 4);
	rdmx_conn_opts_init(&co);
	co.max_msg_size = 24 + MAX_ECHO;
	co.send_depth = co.recv_depth = 16;
	assert_int_equal(rdmx_dial(v.ctx, th_addr(), rdmx_rpc_server_port(v.s), &co, &raw), 0);
	assert_int_equal(rdmx_msg_alloc(raw, sizeof(w), &m, WAIT_MS), 0);
	memcpy(m.data, w, sizeof(w)); /* descriptors of version 0 */
	m.len = sizeof(w);
	assert_int_equal(rdmx_send(raw, &m), 0);
	assert_int_equal(rdmx_recv(raw, &m, WAIT_MS), -ECONNRESET);
	if (!strstr(rdmx_rpc_server_error(v.s), "queue pair descriptor"))
		fail_msg("%s", rdmx_rpc_server_error(v.s));
	echo_once(good, 100, 1);
	rdmx_conn_close(raw);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/* Wait (bounded) until @n requests are held. */
static void hold_wait(struct srv *v, int n)
{
	double end = th_now_ms() + WAIT_MS;
	int got;

	do {
		pthread_mutex_lock(&v->hold.lock);
		got = v->hold.n;
		pthread_mutex_unlock(&v->hold.lock);
		if (got >= n)
			return;
		usleep(1000);
	} while (th_now_ms() < end);
	fail_msg("%d of %d requests held", got, n);
}

/* The end of a spoofing case: @c's call @id (held first) is not answered
 * by what was spoofed, then gets the server's real answer; all is shut. */
static void spoof_end(struct srv *v, rdmx_rpc_client *c, rdmx_rpc_client *evil,
		      uint64_t id, const unsigned char *out)
{
	size_t len = 0;
	int status = 1;

	assert_int_equal(rdmx_rpc_wait(c, id, &status, &len, 300), -ETIMEDOUT);
	memcpy(rdmx_rpc_req_resp(v->hold.req[0], NULL), "real", 4);
	assert_int_equal(rdmx_rpc_respond(v->hold.req[0], 0, 4), 0);
	assert_int_equal(rdmx_rpc_wait(c, id, &status, &len, WAIT_MS), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(out, "real", 4);
	echo_once(c, 100, 1);
	rdmx_rpc_client_destroy(evil);
	rdmx_rpc_client_destroy(c);
	srv_stop(v);
}

/* A third party that knows a herd client's UD QPN (and the fixed QKey)
 * SENDs it a forged response to its call in flight and a junk datagram:
 * neither is taken (not the forged payload, not a failed client); the
 * server's real response is. */
static void t_herd_spoof(void **state)
{
	unsigned char forged[RPC_HDR + 6], out[64];
	struct rpc_hdr h = { .kind = RPC_RESP, .method = M_HOLD, .len = 6 };
	rdmx_rpc_client *c, *evil;
	uint64_t id;
	struct srv v;

	(void)state;
	c = herd_start(&v, 1);
	evil = dial_ok(&v, 4);
	assert_int_equal(rdmx_rpc_call_async(c, M_HOLD, "h", 1, out, sizeof(out), &id), 0);
	hold_wait(&v, 1);
	h.call = id;
	rdmx__rpc_hdr_put(forged, &h);
	memcpy(forged + RPC_HDR, "forged", 6);
	assert_int_equal(rdmx__rpc_herd_spoof(evil, c, forged, sizeof(forged)), 0);
	assert_int_equal(rdmx__rpc_herd_spoof(evil, c, "junk", 4), 0);
	spoof_end(&v, c, evil, id, out);
}

/* A client that WRITEs request after request into one slot without
 * waiting for the answers (each a well-formed M_HOLD) is dropped at the
 * second: a slot holds one call, so a client has at most a window of
 * requests pending on the server, not as many as it can write. */
static void t_herd_flood(void **state)
{
	static unsigned char buf[256];
	rdmx_rpc_client *good, *bad;
	struct srv v;
	size_t n;

	(void)state;
	good = herd_start(&v, 1);
	bad = dial_ok(&v, 4);
	n = herd_frame(buf, RPC_HDR + 1, M_HOLD, 1);
	assert_int_equal(rdmx__rpc_herd_poke(bad, 1, buf, n), 0);
	hold_wait(&v, 1);
	assert_int_equal(rdmx__rpc_herd_poke(bad, 1, buf, n), 0);
	assert_int_equal(bad_wait(&v, 1), 0);
	if (!strstr(rdmx_rpc_server_error(v.s), "already pending"))
		fail_msg("%s", rdmx_rpc_server_error(v.s));
	echo_once(good, 100, 1);
	pthread_mutex_lock(&v.hold.lock);
	assert_int_equal(v.hold.n, 1);
	pthread_mutex_unlock(&v.hold.lock);
	rdmx_rpc_respond(v.hold.req[0], 0, 0); /* to a client gone: not sent */
	rdmx_rpc_client_destroy(bad);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/* rfp: a client of the server's whole window (64) asking for every
 * push at once, calls all in flight, a few rounds: every one answered. */
static void rfp_burst(struct srv *v)
{
	static unsigned char out[64][64];
	struct rdmx_rpc_opts o;
	rdmx_rpc_client *c;
	uint64_t id;
	int status;

	rdmx_rpc_opts_init(&o);
	o.transport = "rfp";
	o.timeout_ms = WAIT_MS;
	o.window = 64;
	o.fetch_retries = 0;
	assert_int_equal(rdmx_rpc_client_create(v->ctx, th_addr(), rdmx_rpc_server_port(v->s),
						contract, NMETHODS, &o, &c), 0);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 64; i++)
			assert_int_equal(rdmx_rpc_call_async(c, M_ECHO, "burst", 5, out[i], 64,
							     &id), 0);
		for (int i = 0; i < 64; i++)
			assert_int_equal(rdmx_rpc_poll(c, &id, &status, NULL, WAIT_MS), 0);
	}
	rdmx_rpc_client_destroy(c);
}

/* rfp: a client's buffers are its own window's (a fetch buffer per call
 * slot it uses), not one per slot the server says it has: a hostile
 * server's set-up of 4096 slots of 16 MiB would have it allocate 64 GiB. */
static void t_rfp_client_mem(void **state)
{
	const char *t = getenv("RPC_TRANSPORT");
	rdmx_rpc_client *c;
	struct srv v;

	(void)state;
	if (!t || strcmp(t, "rfp"))
		skip();
	srv_start(&v, 1); /* 64 slots a client */
	c = dial_ok(&v, 4);
	assert_true(rdmx__rpc_rfp_client_mem(c) <= (1 + 4) * (size_t)rdmx__rpc_rfp_slot(c));
	echo_once(c, MAX_ECHO, 1);
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
}

/* An rfp client of fetch mode only (the torn responses are READ). */
static rdmx_rpc_client *rfp_fetcher(struct srv *v)
{
	struct rdmx_rpc_opts o;
	rdmx_rpc_client *c;

	rdmx_rpc_opts_init(&o);
	o.transport = "rfp";
	o.timeout_ms = WAIT_MS;
	o.fetch_retries = 1u << 30;
	assert_int_equal(rdmx_rpc_client_create(v->ctx, th_addr(), rdmx_rpc_server_port(v->s),
						contract, NMETHODS, &o, &c), 0);
	return c;
}

/*
 * rfp: a trailer read torn - the new seq with bytes of the old len, as
 * rxe's byte copies can place or READ it: a len near the real one, 0 (a
 * slot's first use) or above the slot - is "not yet": the client fetches
 * again rather than hand over a wrong length or fail the call (-EPROTO
 * before), the server scans the slot again rather than drop the client.
 * The hook shows each trailer torn for 30 ms before the real one.
 */
static void t_rfp_torn(void **state)
{
	const char *t = getenv("RPC_TRANSPORT");
	rdmx_rpc_client *c;
	struct srv v;
	uint64_t seq = 0;

	(void)state;
	if (!t || strcmp(t, "rfp"))
		skip();
	srv_start(&v, 1);
	c = rfp_fetcher(&v);
	echo_once(c, 40, seq++);
	for (int how = RDMX__RFP_TEAR_NEAR; how <= RDMX__RFP_TEAR_BIG; how++) {
		rdmx__rpc_rfp_tear(RDMX__RFP_TEAR_RESP, 30, how);
		echo_once(c, 40, seq++);
		rdmx__rpc_rfp_tear(RDMX__RFP_TEAR_REQ, 30, how);
		echo_once(c, 40, seq++);
	}
	echo_once(c, 40, seq++);
	rdmx_rpc_client_destroy(c);
	assert_int_equal(stats_wait(&v, 0, seq), 0); /* the client gone, every call */
	srv_stop(&v);
}

/*
 * rfp: a trailer that stays torn is a peer's garbage, not a copy in
 * flight: a response's fails the call (-EPROTO) and a request's drops the
 * client, each within about a second (the hook holds it 1.5 s); the
 * server serves on.
 */
static void t_rfp_torn_garbage(void **state)
{
	const char *t = getenv("RPC_TRANSPORT");
	static unsigned char out[64];
	rdmx_rpc_client *c;
	struct srv v;
	int status;

	(void)state;
	if (!t || strcmp(t, "rfp"))
		skip();
	srv_start(&v, 1);
	c = rfp_fetcher(&v);
	rdmx__rpc_rfp_tear(RDMX__RFP_TEAR_RESP, 1500, RDMX__RFP_TEAR_BIG);
	assert_int_equal(rdmx_rpc_call(c, M_ECHO, "x", 1, out, sizeof(out), NULL, &status,
				       WAIT_MS), -EPROTO);
	if (!strstr(rdmx_rpc_client_error(c), "response trailer says 16777215 bytes"))
		fail_msg("%s", rdmx_rpc_client_error(c));
	rdmx_rpc_client_destroy(c);
	c = rfp_fetcher(&v);
	rdmx__rpc_rfp_tear(RDMX__RFP_TEAR_REQ, 1500, RDMX__RFP_TEAR_ZERO);
	assert_int_equal(rdmx_rpc_call(c, M_ECHO, "x", 1, out, sizeof(out), NULL, &status,
				       WAIT_MS), -ECONNRESET);
	assert_int_equal(bad_wait(&v, 1), 0);
	rdmx_rpc_client_destroy(c);
	c = rfp_fetcher(&v);
	echo_once(c, 40, 1);
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
}

/*
 * rfp: a client asks the server to push its (answered) hello response
 * over and over and never takes the pushes. Its receives run out, the
 * server's SENDs to it wait on RNR and its send buffers fill: the push
 * must not wait for a buffer in the server's run thread (every client's
 * requests wait there too), it fails that client at once.
 */
static void t_rfp_push_flood(void **state)
{
	const uint32_t ask[2] = { 0, 1 }; /* slot 0, seq 1: the hello's answer */
	rdmx_rpc_client *good, *bad;
	const char *t = getenv("RPC_TRANSPORT");
	struct rdmx_msg m;
	struct srv v;
	rdmx_conn *ctl;
	double t0;

	(void)state;
	if (!t || strcmp(t, "rfp"))
		skip();
	srv_start(&v, 1);
	good = dial_ok(&v, 4);
	bad = dial_ok(&v, 4);
	ctl = rdmx_rpc_client_conn(bad);
	for (int i = 0; i < 200; i++) {
		if (rdmx_msg_alloc(ctl, sizeof(ask), &m, 1000))
			break; /* the server let it go */
		memcpy(m.data, ask, sizeof(ask));
		m.len = sizeof(ask);
		if (rdmx_send(ctl, &m))
			break;
	}
	t0 = th_now_ms();
	echo_once(good, 100, 1);
	assert_int_equal(bad_wait(&v, 1), 0);
	rfp_burst(&v); /* a full window pushed at once is no flood */
	echo_once(good, 100, 2);
	if (th_now_ms() - t0 > WAIT_MS / 4)
		fail_msg("a client that takes no pushes held the server %.0f ms",
			 th_now_ms() - t0);
	rdmx_rpc_client_destroy(bad);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/* A herd client asks for more slots than the server's window: refused
 * before the server allocates or registers any (a client could otherwise
 * pin 4096 slots of the contract's largest request on the server). */
static void t_herd_window(void **state)
{
	rdmx_rpc_client *good, *big;
	struct srv v;
	int rc;

	(void)state;
	good = herd_start(&v, 1);
	big = dial(&v, contract, NMETHODS, 65, &rc); /* the server's window is 64 */
	assert_null(big);
	assert_int_not_equal(rc, 0);
	if (!strstr(rdmx_rpc_server_error(v.s), "above the server's window"))
		fail_msg("%s", rdmx_rpc_server_error(v.s));
	rdmx_rpc_client_destroy(dial_ok(&v, 64));
	echo_once(good, 100, 1);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/*
 * msg: a client sends request after request (each slot answered before it
 * is used again) and never takes a response. Its receives fill, the
 * server's SENDs to it wait, its send buffers run out: the worker that
 * answers it must not then wait the timeout for every one of its requests
 * (every client of that worker waits behind it). One wait, then that
 * client is failed and its other requests are not answered.
 */
static void t_msg_no_reader(void **state)
{
	const char *t = getenv("RPC_TRANSPORT"), *p = getenv("RPC_PROTOCOL");
	unsigned char hello[RPC_HELLO_LEN];
	struct rpc_contract k;
	struct rdmx_conn_opts co;
	rdmx_rpc_client *good;
	struct rdmx_msg m;
	struct srv v;
	rdmx_conn *raw;
	double t0;

	(void)state;
	if ((t && *t && strcmp(t, "msg")) || (p && *p))
		skip(); /* send_recv's flow control: the responses wait on RNR */
	srv_timeout_ms = 300;
	srv_start(&v, 1);
	srv_timeout_ms = WAIT_MS;
	good = dial_ok(&v, 4);
	rdmx_conn_opts_init(&co);
	co.max_msg_size = (uint32_t)(24 + MAX_ECHO);
	co.send_depth = co.recv_depth = 16;
	assert_int_equal(rdmx_dial(v.ctx, th_addr(), rdmx_rpc_server_port(v.s), &co, &raw), 0);
	assert_int_equal(rdmx__rpc_contract_load(&k, contract, NMETHODS), 0);
	rdmx__rpc_hello_put(hello, &k);
	rdmx__rpc_contract_free(&k);
	raw_frame(raw, &(struct rpc_hdr){ .kind = RPC_HELLO, .len = RPC_HELLO_LEN }, hello);
	assert_int_equal(rdmx_recv(raw, &m, WAIT_MS), 0); /* HELLO_OK */
	rdmx_msg_release(raw, &m);
	for (uint64_t i = 0; i < 200; i++)
		if (raw_frame(raw, &(struct rpc_hdr){ .kind = RPC_REQ, .method = M_ECHO,
				.len = 1, .call = (i + 1) << RPC_SLOT_BITS | (i % 64) }, "x"))
			break; /* the server stopped taking them */
	t0 = th_now_ms();
	echo_once(good, 100, 1);
	echo_once(good, 100, 2);
	if (th_now_ms() - t0 > 3000)
		fail_msg("a client that takes no responses held the worker %.0f ms",
			 th_now_ms() - t0);
	rdmx_conn_close(raw);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

/*
 * A herd client names another client's UD QP as its own in its setup, then
 * WRITEs a request with the other's call id: the server SENDs the answer
 * from its own UD QP (the source the victim takes) to the victim. The
 * victim must not take it for its call, nor fail on it.
 */
static void t_herd_reflect(void **state)
{
	unsigned char buf[256], out[64];
	struct rpc_hdr h = { .kind = RPC_REQ, .method = M_HOLD, .len = 1 };
	rdmx_rpc_client *c, *evil;
	size_t n;
	uint64_t id;
	struct srv v;

	(void)state;
	c = herd_start(&v, 1);
	rdmx__rpc_herd_ud_as(c);
	evil = dial_ok(&v, 4);
	assert_int_equal(rdmx_rpc_call_async(c, M_HOLD, "h", 1, out, sizeof(out), &id), 0);
	hold_wait(&v, 1);
	h.call = id;
	rdmx__rpc_hdr_put(buf, &h);
	buf[RPC_HDR] = 'e';
	n = RPC_HDR + 1;
	buf[n] = (unsigned char)n;
	memset(buf + n + 1, 0, 3);
	buf[n + 4] = 1; /* the mark */
	assert_int_equal(rdmx__rpc_herd_poke(evil, (uint32_t)(id & (RPC_WINDOW_MAX - 1)), buf,
					     n + 5), 0);
	hold_wait(&v, 2);
	memcpy(rdmx_rpc_req_resp(v.hold.req[1], NULL), "forged", 6);
	assert_int_equal(rdmx_rpc_respond(v.hold.req[1], 0, 6), 0);
	spoof_end(&v, c, evil, id, out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_contract),
		cmocka_unit_test(t_sizes),
		cmocka_unit_test(t_window),
		cmocka_unit_test(t_volume),
		cmocka_unit_test(t_deferred),
		cmocka_unit_test(t_errors),
		cmocka_unit_test(t_mismatch),
		cmocka_unit_test(t_malformed),
		cmocka_unit_test(t_msg_no_reader),
		cmocka_unit_test(t_server_gone),
		cmocka_unit_test(t_client_gone),
		cmocka_unit_test(t_threads),
		cmocka_unit_test(t_rfp_fetch_push),
		cmocka_unit_test(t_rfp_push_flood),
		cmocka_unit_test(t_rfp_client_mem),
		cmocka_unit_test(t_rfp_torn),
		cmocka_unit_test(t_rfp_torn_garbage),
		cmocka_unit_test(t_rate),
		cmocka_unit_test(t_herd_counts),
		cmocka_unit_test(t_herd_hostile),
		cmocka_unit_test(t_herd_setup),
		cmocka_unit_test(t_herd_spoof),
		cmocka_unit_test(t_herd_flood),
		cmocka_unit_test(t_herd_window),
		cmocka_unit_test(t_herd_reflect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
