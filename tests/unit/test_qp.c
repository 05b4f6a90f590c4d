/* SPDX-License-Identifier: MIT */
/*
 * The core's queue pairs (core/qp.h) on the fake fabric, for every
 * protocol: a connection's CQs are recorded in c->qp and watched; a
 * make that fails part way (its receive CQ refused, or its QP: the ep
 * has one already) unwinds what it made and leaves the connection as it
 * was, still carrying messages (ASan's leak check sees the unwound CQs);
 * a shared receive side is made all or nothing and unmade to empty.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/qp.h"
#include "harness.h"

static void open_pair(struct th_pair *p, const char *proto)
{
	struct rdmx_conn_opts o = th_opts(proto, 1024, 8, 8);

	assert_int_equal(th_pair_open(p, &o, &o), 0);
}

/* @c's queues: both CQs made and watched, receives completing on rcq. */
static void assert_recorded(rdmx_conn *c)
{
	int scq = 0, rcq = 0;

	assert_non_null(c->qp.scq);
	assert_non_null(c->qp.rcq);
	assert_ptr_equal(c->live.scq, c->qp.scq);
	for (int i = 0; i < c->ws.ncq; i++) {
		scq |= c->ws.cq[i] == c->qp.scq;
		rcq |= c->ws.cq[i] == c->qp.rcq;
	}
	assert_true(scq && rcq && c->ws.recv_cq);
}

static void roundtrip(struct th_pair *p)
{
	struct rdmx_msg m;

	assert_int_equal(th_send_seq(p->client, 1, 100, 5000), 0);
	assert_int_equal(rdmx_recv(p->server, &m, 5000), 0);
	assert_int_equal(m.len, 100);
	assert_int_equal(rdmx_msg_release(p->server, &m), 0);
}

static void test_recorded(void **state)
{
	const char *proto;

	(void)state;
	for (int i = 0; (proto = th_next_protocol(&i));) {
		struct th_pair p;

		open_pair(&p, proto);
		assert_recorded(p.client);
		assert_recorded(p.server);
		th_pair_close(&p);
	}
}

static void test_half_made_unwinds(void **state)
{
	const char *proto;

	(void)state;
	for (int i = 0; (proto = th_next_protocol(&i));) {
		struct rdmx__qp_want no_rcq = { .send_wr = 4 }; /* a CQ of 0 */
		struct rdmx__qp_want twice = { .send_wr = 4, .recv_wr = 4 };
		struct th_pair p;
		struct rdmx__qp was;
		int ncq;

		open_pair(&p, proto);
		was = p.client->qp;
		ncq = p.client->ws.ncq;
		assert_int_equal(rdmx__qp_make(p.client, &no_rcq), -EINVAL);
		assert_int_equal(rdmx__qp_make(p.client, &twice), -EEXIST);
		assert_memory_equal(&p.client->qp, &was, sizeof(was));
		assert_ptr_equal(p.client->live.scq, was.scq);
		assert_int_equal(p.client->ws.ncq, ncq);
		roundtrip(&p);
		th_pair_close(&p);
	}
}

static void test_shared(void **state)
{
	struct rdmx__qp_shared s = { 0 }, none = { 0 };
	struct th_pair p;

	(void)state;
	open_pair(&p, "send_recv");
	assert_int_equal(rdmx__qp_shared_make(p.client, 0, &s), -EINVAL);
	assert_memory_equal(&s, &none, sizeof(s));
	assert_int_equal(rdmx__qp_shared_make(p.client, 16, &s), 0);
	assert_non_null(s.srq);
	assert_non_null(s.rcq);
	rdmx__qp_shared_unmake(p.client->f, &s);
	assert_memory_equal(&s, &none, sizeof(s));
	rdmx__qp_shared_unmake(p.client->f, &s); /* nothing: a no-op */
	th_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recorded),
		cmocka_unit_test(test_half_made_unwinds),
		cmocka_unit_test(test_shared),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
