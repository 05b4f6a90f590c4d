/* SPDX-License-Identifier: MIT */
/*
 * The one wait step (src/core/wait.c) on the fake fabric:
 *  - a zero-timeout poll that finds nothing returns -EAGAIN and records no
 *    message: the thread's and the objects' error text stay as they were;
 *  - an idle blocked (and adaptive) receive sleeps: its CPU time is a small
 *    part of the wall time (a property, bounded generously, not a speed);
 *  - the wait options are checked.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cmocka.h>

#include "harness.h"

#define IDLE_CPU_MAX_PCT 20.0

static struct rdmx_conn_opts opts(const char *proto, uint8_t mode)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	o.wait_mode = mode;
	return o;
}

static void open_pair(struct th_pair *p, const struct rdmx_conn_opts *o)
{
	int rc = th_pair_open(p, o, o);

	if (rc)
		fail_msg("%s: cannot connect a pair: %s (%s)", o->protocol,
			 rdmx_strerror(rc), rdmx_last_error());
}

/* Put a known message in the thread's last error; returns a copy. */
static void known_error(char *buf, size_t len)
{
	struct rdmx_ctx_opts co = { .fabric = "no-such-fabric" };
	rdmx_ctx *ctx;

	assert_int_equal(rdmx_ctx_create(&ctx, &co), -EINVAL);
	snprintf(buf, len, "%s", rdmx_last_error());
	assert_non_null(strstr(buf, "no-such-fabric"));
}

/* Every zero-timeout poll finds nothing and leaves every error text. */
static void quiet_polls(struct th_pair *p, const char *proto)
{
	char last[256], conn[256], lis[256];
	struct rdmx_event ev;
	struct rdmx_msg m;
	rdmx_conn *c;

	known_error(last, sizeof(last));
	snprintf(conn, sizeof(conn), "%s", rdmx_conn_error(p->server));
	snprintf(lis, sizeof(lis), "%s", rdmx_listener_error(p->lis));
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(rdmx_recv(p->server, &m, 0), -EAGAIN);
		assert_int_equal(rdmx_recv(p->client, &m, 0), -EAGAIN);
		assert_int_equal(rdmx_listener_recv(p->lis, &m, 0), -EAGAIN);
		assert_int_equal(rdmx_accept(p->lis, 0, &c), -EAGAIN);
		assert_int_equal(rdmx_listener_next(p->lis, &ev, 0), -EAGAIN);
	}
	if (strcmp(rdmx_last_error(), last))
		fail_msg("%s: a zero-timeout poll wrote '%s'", proto, rdmx_last_error());
	assert_string_equal(rdmx_conn_error(p->server), conn);
	assert_string_equal(rdmx_listener_error(p->lis), lis);
}

static void test_zero_timeout_formats_nothing(void **state)
{
	const char *const *names = rdmx_protocol_names();

	(void)state;
	for (int i = 0; names[i]; i++) {
		struct rdmx_conn_opts o = opts(names[i], RDMX_WAIT_DEFAULT);
		struct th_pair p;

		open_pair(&p, &o);
		quiet_polls(&p, names[i]);
		th_pair_close(&p);
	}
}

static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* An idle receive of @ms on @proto in @mode: the share of a core it used. */
static double idle_recv_pct(const char *proto, uint8_t mode, int listener, int ms)
{
	struct rdmx_conn_opts o = opts(proto, mode);
	struct th_pair p;
	struct rdmx_msg m;
	double c0, t0, pct;
	int rc;

	open_pair(&p, &o);
	c0 = cpu_ms();
	t0 = th_now_ms();
	rc = listener ? rdmx_listener_recv(p.lis, &m, ms) : rdmx_recv(p.server, &m, ms);
	pct = 100.0 * (cpu_ms() - c0) / (th_now_ms() - t0);
	assert_int_equal(rc, -ETIMEDOUT);
	assert_true(th_now_ms() - t0 >= ms - 10);
	th_pair_close(&p);
	print_message("idle %s(%d ms) on %s, wait mode %u: %.2f%% of a core\n",
		      listener ? "rdmx_listener_recv" : "rdmx_recv", ms, proto, mode, pct);
	return pct;
}

static void test_idle_block_sleeps(void **state)
{
	(void)state;
	/* a CQ receiver and a receiver polling ring memory */
	assert_true(idle_recv_pct("send_recv", RDMX_WAIT_BLOCK, 0, 2000) < IDLE_CPU_MAX_PCT);
	assert_true(idle_recv_pct("write_magic", RDMX_WAIT_BLOCK, 0, 2000) < IDLE_CPU_MAX_PCT);
}

static void test_idle_adaptive_sleeps(void **state)
{
	(void)state;
	/* the default mode; the listener's waits (shared queue and ring) */
	assert_true(idle_recv_pct("srq", RDMX_WAIT_DEFAULT, 1, 1000) < IDLE_CPU_MAX_PCT);
	assert_true(idle_recv_pct("write_atomic", RDMX_WAIT_ADAPTIVE, 1, 1000) < IDLE_CPU_MAX_PCT);
}

static void test_bad_wait_options(void **state)
{
	struct rdmx_ctx_opts co;
	struct rdmx_conn_opts o = opts("send_recv", 9);
	rdmx_listener *lis;
	rdmx_ctx *ctx;

	(void)state;
	rdmx_ctx_opts_init(&co);
	co.fabric = "fake";
	co.wait_mode = 4;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "wait_mode"));
	co.wait_mode = RDMX_WAIT_BLOCK;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, "fake", 0, &o, &lis), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "wait_mode 9"));
	o = opts("send_recv", RDMX_WAIT_ADAPTIVE);
	o.spin_us = 2000000;
	assert_int_equal(rdmx_listen(ctx, "fake", 0, &o, &lis), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "spin_us"));
	rdmx_ctx_destroy(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero_timeout_formats_nothing),
		cmocka_unit_test(test_idle_block_sleeps),
		cmocka_unit_test(test_idle_adaptive_sleeps),
		cmocka_unit_test(test_bad_wait_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
