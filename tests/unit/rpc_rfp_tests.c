/* SPDX-License-Identifier: MIT */
/*
 * Transport rfp's own cases of test_rpc (RDMA WRITE requests, READ
 * responses): SENDs per call in fetch and push mode, a client that
 * takes no pushes, a client's buffers, trailers read torn, a client
 * that sleeps while its responses are to be pushed. Skipped on other
 * transports, but t_rfp_fetch_push (rfp whatever RPC_TRANSPORT).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_common.h"

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

void t_rfp_fetch_push(void **state)
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
void t_rfp_client_mem(void **state)
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

/* t_rfp_idle_cpu: the window of each measure, and the bound of a share
 * of a core. */
#define IDLE_MS 1000
#define IDLE_CPU_MAX_PCT 20.0

/* The CPU time thread @t has used, in ms. */
static double cpu_ms(pthread_t t)
{
	struct timespec ts;
	clockid_t id;

	assert_int_equal(pthread_getcpuclockid(t, &id), 0);
	assert_int_equal(clock_gettime(id, &ts), 0);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* @c blocked IDLE_MS in a call @v holds: its share of a core, and the
 * server's meanwhile in *@srv_pct. Then the call is answered: the client
 * wakes from its parks and takes the response. */
static double blocked_pct(struct srv *v, rdmx_rpc_client *c, double *srv_pct)
{
	unsigned char out[64];
	double t0, c0, s0, wall, pct;
	int n, status;
	uint64_t id;

	pthread_mutex_lock(&v->hold.lock);
	n = v->hold.n;
	pthread_mutex_unlock(&v->hold.lock);
	assert_int_equal(rdmx_rpc_call_async(c, M_HOLD, "h", 1, out, sizeof(out), &id), 0);
	assert_int_equal(held(&v->hold, n + 1), 0);
	s0 = cpu_ms(v->t);
	c0 = cpu_ms(pthread_self());
	t0 = th_now_ms();
	assert_int_equal(rdmx_rpc_wait(c, id, &status, NULL, IDLE_MS), -ETIMEDOUT);
	wall = th_now_ms() - t0;
	pct = 100.0 * (cpu_ms(pthread_self()) - c0) / wall;
	*srv_pct = 100.0 * (cpu_ms(v->t) - s0) / wall;
	assert_true(wall >= IDLE_MS - 10);
	assert_int_equal(rdmx_rpc_respond(v->hold.req[n], 0, 0), 0);
	assert_int_equal(rdmx_rpc_wait(c, id, &status, NULL, WAIT_MS), 0);
	return pct;
}

/*
 * rfp: a client blocked in a call whose response is to be pushed (it
 * asked after fetch_retries READs) sleeps in rdmx_recv on the control
 * connection: a small part of a core. Its old loop spun with sched_yield
 * to its timeout: 87-99% of a core, which fails here. Printed, not
 * bounded: a client of fetch mode only (fetch_retries 2^30), which READs
 * until its response is there, by design; and the server, idle and
 * meanwhile, whose loop still polls its slots and waits 1 ms on its
 * listener every 128 passes (6-8% of a core on the fake, 14-22% on rxe
 * under emulation).
 */
void t_rfp_idle_cpu(void **state)
{
	const char *t = getenv("RPC_TRANSPORT");
	double srv, push, fetch, srv1, srv2, t0, s0;
	rdmx_rpc_client *c;
	struct srv v;

	(void)state;
	if (!t || strcmp(t, "rfp"))
		skip();
	srv_start(&v, 1);
	s0 = cpu_ms(v.t);
	t0 = th_now_ms();
	usleep(IDLE_MS * 1000);
	srv = 100.0 * (cpu_ms(v.t) - s0) / (th_now_ms() - t0);
	c = dial_ok(&v, 4);
	push = blocked_pct(&v, c, &srv1);
	rdmx_rpc_client_destroy(c);
	c = rfp_fetcher(&v);
	fetch = blocked_pct(&v, c, &srv2);
	rdmx_rpc_client_destroy(c);
	srv_stop(&v);
	print_message("rfp idle, %% of a core: server %.2f; client pushed %.2f (server %.2f), "
		      "fetching %.2f (server %.2f)\n", srv, push, srv1, fetch, srv2);
	assert_true(push < IDLE_CPU_MAX_PCT);
}

/*
 * rfp: a trailer read torn - the new seq with bytes of the old len, as
 * rxe's byte copies can place or READ it: a len near the real one, 0 (a
 * slot's first use) or above the slot - is "not yet": the client fetches
 * again rather than hand over a wrong length or fail the call (-EPROTO
 * before), the server scans the slot again rather than drop the client.
 * The hook shows each trailer torn for 30 ms before the real one.
 */
void t_rfp_torn(void **state)
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
void t_rfp_torn_garbage(void **state)
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
void t_rfp_push_flood(void **state)
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

/* An rfp server with a good client and a bad one that does @act (to the
 * good one): the device refuses it (@act fails), the bad client's
 * connection fails with it, the good one's calls go on. */
static void rfp_refused(const char *what,
			int (*act)(rdmx_rpc_client *bad, const rdmx_rpc_client *good))
{
	const char *t = getenv("RPC_TRANSPORT");
	rdmx_rpc_client *good, *bad;
	unsigned char out[64];
	struct srv v;
	int rc, status;

	if (!t || strcmp(t, "rfp"))
		skip();
	srv_start(&v, 1);
	good = dial_ok(&v, 4);
	bad = dial_ok(&v, 4);
	rc = act(bad, good);
	print_message("rfp: %s: %s\n", what, rdmx_strerror(rc));
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rdmx_rpc_call(bad, M_ECHO, "x", 1, out, sizeof(out), NULL,
					   &status, WAIT_MS), 0);
	echo_once(good, 100, 1);
	rdmx_rpc_client_destroy(bad);
	echo_once(good, 100, 2);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}

static int write_resp(rdmx_rpc_client *bad, const rdmx_rpc_client *good)
{
	(void)good;
	return rdmx__rpc_rfp_write_resp(bad);
}

/*
 * rfp exports a client's request slots for remote WRITE only and its
 * response slots for remote READ only. A client that forges WRITE access
 * into its response descriptor and WRITEs there is refused by the device
 * (remote access error) and its connection fails; the other client's
 * calls go on. On main one registration granted both rights over both
 * halves: the WRITE landed.
 */
void t_rfp_read_only(void **state)
{
	(void)state;
	rfp_refused("a WRITE into read-only response slots", write_resp);
}

/*
 * Client B WRITEs into client A's request slots with A's descriptor (the
 * key and address A was given): the server binds each client's slots to
 * that client's QP (a memory window where the device has them), so the
 * device refuses B's WRITE and B's connection fails; A's calls go on. On
 * main A's key was valid on every QP of the server's domain: it landed.
 */
void t_rfp_cross(void **state)
{
	(void)state;
	rfp_refused("B's WRITE into A's request slots with A's key", rdmx__rpc_rfp_write_as);
}
