/* SPDX-License-Identifier: MIT */
/*
 * rdmx RPC on one fabric (fake natively, verbs in the sandbox): the
 * contract check, sync and async calls with checksummed payloads of
 * 1 B..max, deferred responses answered out of order, handler errors,
 * unknown methods, oversize requests, a malformed client dropped while
 * others are served, the server going away with calls in flight, a
 * client going away with calls held, and 8 clients on 8 threads.
 * RPC_TRANSPORT / RPC_PROTOCOL pick what the calls ride on.
 * Fixtures in rpc_common.c; transport rfp's and herd's own cases in
 * rpc_rfp_tests.c and rpc_herd_tests.c.
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

#include "rpc_common.h"

#define NTHREADS 8

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
	assert_non_null(strstr(rdmx_rpc_server_error(v.s), "connection #")); /* which */
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
		cmocka_unit_test(t_stuck_reader),
		cmocka_unit_test(t_stuck_reader_inline),
		cmocka_unit_test(t_hello_deadline),
		cmocka_unit_test(t_rfp_round_robin),
		cmocka_unit_test(t_queue_bytes),
		cmocka_unit_test(t_server_gone),
		cmocka_unit_test(t_client_gone),
		cmocka_unit_test(t_threads),
		cmocka_unit_test(t_rfp_fetch_push),
		cmocka_unit_test(t_rfp_push_flood),
		cmocka_unit_test(t_rfp_client_mem),
		cmocka_unit_test(t_rfp_torn),
		cmocka_unit_test(t_rfp_torn_garbage),
		cmocka_unit_test(t_rfp_idle_cpu),
		cmocka_unit_test(t_rfp_read_only),
		cmocka_unit_test(t_rfp_cross),
		cmocka_unit_test(t_rate),
		cmocka_unit_test(t_herd_counts),
		cmocka_unit_test(t_herd_hostile),
		cmocka_unit_test(t_herd_setup),
		cmocka_unit_test(t_herd_spoof),
		cmocka_unit_test(t_herd_flood),
		cmocka_unit_test(t_herd_window),
		cmocka_unit_test(t_herd_reflect),
		cmocka_unit_test(t_herd_cross),
		cmocka_unit_test(t_herd_stale),
		cmocka_unit_test(t_herd_dial_idle),
		cmocka_unit_test(t_admit_mem),
		cmocka_unit_test(t_admit_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
