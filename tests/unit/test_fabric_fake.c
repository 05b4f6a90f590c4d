/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric against the RC verbs and rdma_cm semantics it models:
 * connection setup with private data, SEND/RECV, RNR, RDMA WRITE/READ,
 * atomics, SRQs, errors and flushes, and the limits of queues.
 * Connection setup and teardown here; the data path in
 * fabric_fake_data_tests.c, the fixture in fabric_fake_common.c.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/errors.h"
#include "fabric_fake_common.h"

/* ----------------------------------------------------------- rdma_cm */

static void test_connect_accept_pdata(void **state)
{
	struct pair *p = pair_new();
	size_t i;

	(void)state;
	assert_true(F->local_port(p->lis) >= 1024);
	pair_open(p);
	/* IB CM pads: the listener sees 56 bytes, the dialer 196. */
	assert_int_equal(p->req_len, RDMX__PDATA_CONNECT_MAX);
	assert_memory_equal(p->req, "hello", 5);
	for (i = 5; i < p->req_len; i++)
		assert_int_equal(p->req[i], 0);
	assert_int_equal(p->rep_len, RDMX__PDATA_ACCEPT_MAX);
	assert_memory_equal(p->rep, "server-hi", 9);
	for (i = 9; i < p->rep_len; i++)
		assert_int_equal(p->rep[i], 0);
	assert_int_equal(F->check_event(p->c.ep), 0);
	assert_int_equal(F->check_event(p->s.ep), 0);
	assert_int_not_equal(F->qp_num(p->c.ep), 0);
	assert_int_not_equal(F->qp_num(p->c.ep), F->qp_num(p->s.ep));
	pair_free(p);
}

static void test_listen_port_in_use(void **state)
{
	struct rdmx__fabric *fab;
	struct rdmx__ep *a, *b;
	uint16_t port;

	(void)state;
	assert_int_equal(F->create(&fab), 0);
	assert_int_equal(F->listen(fab, "any", 0, &a), 0);
	port = F->local_port(a);
	assert_int_equal(F->listen(fab, NULL, port, &b), -EADDRINUSE);
	assert_int_equal(F->listen(fab, NULL, 0, &b), 0);
	assert_int_not_equal(F->local_port(b), port);
	F->destroy_ep(a);
	F->destroy_ep(b);
	assert_int_equal(F->listen(fab, NULL, port, &a), 0);
	assert_int_equal(F->local_port(a), port);
	F->destroy_ep(a);
	F->destroy(fab);
}

static void test_reject_carries_pdata(void **state)
{
	struct pair *p = pair_new();
	struct rdmx__ep *child;
	struct dial d;

	(void)state;
	dial_start(&d, p->cfab, F->local_port(p->lis), &p->c, "let me in", WAIT_MS);
	assert_int_equal(F->get_request(p->lis, WAIT_MS, &child, p->req, &p->req_len), 0);
	assert_memory_equal(p->req, "let me in", 9);
	assert_int_equal(F->reject(child, "go away", 7), 0);
	pthread_join(d.thread, NULL);
	assert_int_equal(d.rc, -ECONNREFUSED);
	assert_int_equal(d.rlen, RDMX__PDATA_REJECT_MAX);
	assert_memory_equal(d.reply, "go away", 7);
	assert_int_equal(d.reply[7], 0);
	pair_free(p);
}

static void test_connect_no_listener(void **state)
{
	struct pair *p = pair_new();
	uint16_t port = F->local_port(p->lis);
	uint8_t reply[RDMX__PDATA_BUF];
	size_t rlen = 99;
	char want[64];

	(void)state;
	F->destroy_ep(p->lis);
	p->lis = NULL;
	assert_int_equal(F->resolve(p->cfab, NULL, port, 100, &p->c.ep), -EINVAL);
	assert_int_equal(F->resolve(p->cfab, "fake", port, 100, &p->c.ep), 0);
	assert_int_equal(F->connect(p->c.ep, "x", 1, 100, reply, &rlen), -EINVAL);
	assert_int_equal(side_setup(&p->c), 0);
	assert_int_equal(F->connect(p->c.ep, "x", 1, 100, reply, &rlen), -ECONNREFUSED);
	assert_int_equal(rlen, 0);
	snprintf(want, sizeof(want), "no listener on port %u", port);
	assert_non_null(strstr(rdmx__last(), want));
	pair_free(p);
}

static void test_get_request_timeout(void **state)
{
	struct pair *p = pair_new();
	struct rdmx__ep *child = NULL;
	uint8_t pdata[RDMX__PDATA_BUF];
	size_t plen;
	double t0 = now_ms();

	(void)state;
	assert_int_equal(F->get_request(p->lis, 50, &child, pdata, &plen), -ETIMEDOUT);
	assert_true(now_ms() - t0 >= 45);
	assert_null(child);
	pair_free(p);
}

/* A dialer that times out withdraws its request, even once picked up. */
static void test_connect_timeout_withdraws(void **state)
{
	struct pair *p = pair_new();
	struct rdmx__ep *child;
	uint8_t pdata[RDMX__PDATA_BUF];
	size_t plen;
	struct dial d;

	(void)state;
	assert_int_equal(F->resolve(p->cfab, "fake", F->local_port(p->lis), 100, &p->c.ep), 0);
	assert_int_equal(side_setup(&p->c), 0);
	assert_int_equal(F->connect(p->c.ep, "a", 1, 30, pdata, &plen), -ETIMEDOUT);
	assert_int_equal(F->get_request(p->lis, 0, &child, pdata, &plen), -EAGAIN);
	side_close(&p->c);

	dial_start(&d, p->cfab, F->local_port(p->lis), &p->c, "b", 100);
	assert_int_equal(F->get_request(p->lis, WAIT_MS, &child, pdata, &plen), 0);
	pthread_join(d.thread, NULL);
	assert_int_equal(d.rc, -ETIMEDOUT);
	p->s.ep = child;
	assert_int_equal(side_setup(&p->s), 0);
	assert_int_equal(F->accept(child, NULL, 0, 100), -ECONNABORTED);
	pair_free(p);
}

/* ------------------------------------------------------------ disconnect */

static void test_disconnect_flushes(void **state)
{
	struct pair *p = *state;
	struct rdmx__wc wc[4];
	struct rdmx__wr w;

	post_recvs(&p->c, 0, 64, 4);
	post_recvs(&p->s, 0, 64, 2);
	assert_int_equal(F->disconnect(p->c.ep), 0);
	assert_int_equal(F->check_event(p->c.ep), -ECONNRESET);
	assert_int_equal(F->check_event(p->s.ep), -ECONNRESET);
	assert_int_equal(poll_n(p->c.rcq, wc, 4), 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(wc[i].status, RDMX__WC_FLUSHED);
		assert_int_equal(wc[i].wr_id, i * 64);
		assert_int_equal(wc[i].qp_num, F->qp_num(p->c.ep));
	}
	assert_int_equal(poll_n(p->s.rcq, wc, 2), 2);
	assert_int_equal(wc[1].status, RDMX__WC_FLUSHED);
	/* WRs posted in error complete at once, flushed. */
	w = wr_on(&p->s, RDMX__OP_SEND, 0, 8);
	w.flags = 0; /* errors complete even unsignaled */
	assert_int_equal(post(&p->s, w), 0);
	expect_wc(p->s.scq, RDMX__WC_FLUSHED);
	post_recvs(&p->s, 0, 64, 1);
	expect_wc(p->s.rcq, RDMX__WC_FLUSHED);
}

/*
 * A dialer that completes and disconnects before the listener looks: the
 * handshake still counts as done (rdma_cm delivers ESTABLISHED, then
 * DISCONNECTED), so what the dialer sent meanwhile is not dropped with a
 * connection that never came up.
 */
static void test_disconnect_before_accept_poll(void **state)
{
	struct pair *p = *state;

	assert_int_equal(F->disconnect(p->c.ep), 0);
	assert_int_equal(F->accept_poll(p->s.ep), 0);
	assert_int_equal(F->check_event(p->s.ep), -ECONNRESET);
}

/* Like a process dying: destroying one end is seen by the other. */
static void test_destroy_seen_by_peer(void **state)
{
	struct pair *p = *state;

	post_recvs(&p->s, 0, 64, 1);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 0, 8)), 0);
	assert_int_equal(poll_now(p->s.scq), 0); /* RNR: it waits */
	side_close(&p->c);
	assert_int_equal(F->check_event(p->s.ep), -ECONNRESET);
	expect_wc(p->s.scq, RDMX__WC_FLUSHED);
	expect_wc(p->s.rcq, RDMX__WC_FLUSHED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_accept_pdata),
		pair_test(test_disconnect_before_accept_poll),
		cmocka_unit_test(test_listen_port_in_use),
		cmocka_unit_test(test_reject_carries_pdata),
		cmocka_unit_test(test_connect_no_listener),
		cmocka_unit_test(test_get_request_timeout),
		cmocka_unit_test(test_connect_timeout_withdraws),
		pair_test(test_send_recv_imm_order),
		pair_test(test_rnr_waits_in_order),
		cmocka_unit_test(test_rnr_retry_exhausted),
		pair_test(test_send_too_long),
		pair_test(test_inline_copied_at_post),
		pair_test(test_write_then_read),
		cmocka_unit_test(test_remote_access_errors),
		pair_test(test_local_key_error),
		cmocka_unit_test(test_local_write_needs_access),
		pair_test(test_write_imm),
		cmocka_unit_test(test_fetch_add_threads),
		cmocka_unit_test(test_srq_shared),
		pair_test(test_disconnect_flushes),
		pair_test(test_destroy_seen_by_peer),
		pair_test(test_unsignaled),
		cmocka_unit_test(test_max_send_wr),
		cmocka_unit_test(test_cq_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
