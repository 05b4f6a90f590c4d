/* SPDX-License-Identifier: MIT */
/*
 * Liveness on the fake fabric, every protocol: a peer whose host goes
 * silent (rdmx__fake_silence: no disconnect, nothing answered) makes the
 * calls waiting on the connection return -ECONNRESET, "peer stopped
 * answering", within the 1 s bound; an idle live peer stays up. Built for
 * verbs too (rxe in the sandbox), where only the tests without a silenced
 * peer run: keepalives (zero-length WRITEs without an rkey) must be
 * accepted and answered by the device.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/conn.h"
#include "harness.h"

#define BOUND_MS 1000
/* Generous: the fake gives up after 0.54 s plus a keepalive interval of
 * 0.25 s; what is asserted is "found, not hung", not a speed. */
#define FOUND_MS (3 * BOUND_MS)

static const char *protocol;

static void open_pair(struct th_pair *p)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	o.liveness_ms = BOUND_MS;
	if (th_pair_open(p, &o, &o))
		fail_msg("%s: cannot connect a pair: %s", protocol, rdmx_last_error());
}

#ifdef TH_SILENCE
static void assert_dead(rdmx_conn *c, int rc, double t0, const char *what)
{
	double ms = th_now_ms() - t0;

	print_message("%s: %s found the silent peer after %.0f ms: %s\n", protocol,
		      what, ms, rdmx_conn_error(c));
	assert_int_equal(rc, -ECONNRESET);
	assert_non_null(strstr(rdmx_conn_error(c), "stopped answering"));
	assert_true(ms < FOUND_MS);
}
#endif

#ifdef TH_SILENCE
/* rdmx_recv(-1) on either side of a connection whose peer went silent. */
static void test_recv_forever(void **state)
{
	struct rdmx_msg m;
	struct th_pair p;
	double t0;

	(void)state;
	for (int side = 0; side < 2; side++) {
		rdmx_conn *c;

		open_pair(&p);
		c = side ? p.server : p.client;
		rdmx__fake_silence((side ? p.client : p.server)->ep, 1);
		t0 = th_now_ms();
		assert_dead(c, rdmx_recv(c, &m, -1), t0, side ? "server recv(-1)" : "client recv(-1)");
		th_pair_close(&p);
	}
}

/* A finite wait longer than the bound ends with the peer dead, not with
 * -ETIMEDOUT. */
static void test_recv_long_timeout(void **state)
{
	struct rdmx_msg m;
	struct th_pair p;
	double t0;

	(void)state;
	open_pair(&p);
	rdmx__fake_silence(p.server->ep, 1);
	t0 = th_now_ms();
	assert_dead(p.client, rdmx_recv(p.client, &m, 5 * BOUND_MS), t0, "recv(5 s)");
	th_pair_close(&p);
}

/* Sends toward a silent peer: the buffer/credit wait of msg_alloc and the
 * flush wait both end. */
static void test_send_waits(void **state)
{
	struct rdmx_msg m;
	struct th_pair p;
	double t0;
	int rc = 0;

	(void)state;
	open_pair(&p);
	rdmx__fake_silence(p.server->ep, 1);
	t0 = th_now_ms();
	for (int i = 0; i < 100000 && !rc; i++) {
		rc = rdmx_msg_alloc(p.client, 64, &m, -1);
		if (!rc) {
			m.len = 64;
			rc = rdmx_send(p.client, &m);
		}
	}
	assert_dead(p.client, rc, t0, "alloc(-1)/send");
	th_pair_close(&p);

	open_pair(&p);
	rdmx__fake_silence(p.server->ep, 1);
	assert_int_equal(rdmx_msg_alloc(p.client, 64, &m, 1000), 0);
	m.len = 64;
	rc = rdmx_send(p.client, &m);
	t0 = th_now_ms();
	if (!rc)
		rc = rdmx_flush(p.client, -1);
	assert_dead(p.client, rc, t0, "flush(-1)");
	th_pair_close(&p);
}

/* The link cut while busy: sends are outstanding when the peer goes
 * silent, and the caller then waits in rdmx_recv(-1). The sends' RETRY
 * failure, reaped by the keepalive's poll, must bring the connection down
 * (the keepalive behind them is only flushed). */
static void test_recv_behind_sends(void **state)
{
	struct rdmx_msg m;
	struct th_pair p;
	double t0 = th_now_ms();
	int rc = 0;

	(void)state;
	open_pair(&p);
	rdmx__fake_silence(p.server->ep, 1);
	/* write_atomic's alloc reserves by FETCH_ADD: it finds the peer dead
	 * itself */
	for (int i = 0; i < 4 && !rc; i++) {
		rc = rdmx_msg_alloc(p.client, 64, &m, 1000);
		m.len = 64;
		if (!rc)
			rc = rdmx_send(p.client, &m);
	}
	if (!rc)
		rc = rdmx_recv(p.client, &m, -1);
	assert_dead(p.client, rc, t0, "recv(-1) behind sends");
	th_pair_close(&p);
}

/* rdmx_listener_recv(-1) reports the silent member. */
static void test_listener_recv(void **state)
{
	struct rdmx_msg m;
	struct th_pair p;
	double t0;
	int rc;

	(void)state;
	open_pair(&p);
	rdmx__fake_silence(p.client->ep, 1);
	t0 = th_now_ms();
	rc = rdmx_listener_recv(p.lis, &m, -1);
	assert_dead(p.server, rc, t0, "listener_recv(-1)");
	assert_ptr_equal(rdmx_msg_conn(&m), p.server);
	th_pair_close(&p);
}

#endif /* TH_SILENCE */

/* An idle peer that is alive is not declared dead: several bounds of
 * waiting time out, then the connection still carries a message. */
static void test_idle_live_peer(void **state)
{
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	open_pair(&p);
	assert_int_equal(rdmx_recv(p.client, &m, 4 * BOUND_MS), -ETIMEDOUT);
	assert_int_equal(rdmx_recv(p.server, &m, 2 * BOUND_MS), -ETIMEDOUT);
	assert_int_equal(rdmx_msg_alloc(p.client, 64, &m, 1000), 0);
	th_fill(m.data, 64, 7);
	m.len = 64;
	assert_int_equal(rdmx_send(p.client, &m), 0);
	assert_int_equal(rdmx_recv(p.server, &m, 5000), 0);
	assert_int_equal(th_check(m.data, 64, 7), -1);
	assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	th_pair_close(&p);
}

struct blocked {
	rdmx_listener *lis;
	int recv;        /* 1: rdmx_listener_recv, 0: rdmx_accept */
	int rc;
	pthread_t t;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	struct rdmx_msg m;
	rdmx_conn *c = NULL;

	b->rc = b->recv ? rdmx_listener_recv(b->lis, &m, -1) : rdmx_accept(b->lis, -1, &c);
	return NULL;
}

/* rdmx_listener_shutdown wakes threads blocked forever in rdmx_accept and
 * rdmx_listener_recv with -ESHUTDOWN; destroy does too, and waits for them
 * to leave before it frees (ASan sees a use after free otherwise). */
static void test_listener_shutdown(void **state)
{
	struct blocked b[2];
	struct th_pair p;

	(void)state;
	for (int destroy = 0; destroy < 2; destroy++) {
		open_pair(&p);
		for (int i = 0; i < 2; i++) {
			b[i] = (struct blocked){ .lis = p.lis, .recv = i, .rc = 1 };
			assert_int_equal(pthread_create(&b[i].t, NULL, blocked_main, &b[i]), 0);
		}
		/* Destroy may only race with calls already made: wait for both
		 * threads to be inside. */
		while (__atomic_load_n(&p.lis->waiters, __ATOMIC_ACQUIRE) < 2)
			usleep(1000);
		usleep(100000);
		assert_int_equal(__atomic_load_n(&b[0].rc, __ATOMIC_ACQUIRE), 1);
		assert_int_equal(__atomic_load_n(&b[1].rc, __ATOMIC_ACQUIRE), 1);
		if (destroy) {
			rdmx_listener_destroy(p.lis);
			p.lis = NULL;
		} else {
			rdmx_listener_shutdown(p.lis);
		}
		for (int i = 0; i < 2; i++) {
			pthread_join(b[i].t, NULL);
			assert_int_equal(b[i].rc, -ESHUTDOWN);
		}
		th_pair_close(&p);
	}
}

/* liveness_ms is checked: 1 s is the least. */
static void test_option_checked(void **state)
{
	struct rdmx_conn_opts o;
	struct th_pair p;

	(void)state;
	rdmx_conn_opts_init(&o);
	assert_int_equal(o.liveness_ms, 10000);
	o.protocol = protocol;
	o.liveness_ms = 999;
	assert_int_equal(th_pair_open(&p, &o, &o), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "liveness_ms"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#ifdef TH_SILENCE
		cmocka_unit_test(test_recv_forever),
		cmocka_unit_test(test_recv_long_timeout),
		cmocka_unit_test(test_send_waits),
		cmocka_unit_test(test_recv_behind_sends),
		cmocka_unit_test(test_listener_recv),
#endif
		cmocka_unit_test(test_idle_live_peer),
		cmocka_unit_test(test_listener_shutdown),
		cmocka_unit_test(test_option_checked),
	};
	int failed = 0, i = 0;

	alarm(600); /* a hang (no liveness) fails the run instead of blocking */
	while ((protocol = th_next_protocol(&i)))
		failed += _cmocka_run_group_tests(protocol, tests,
						  sizeof(tests) / sizeof(tests[0]), NULL, NULL);
	return failed ? 1 : 0;
}
