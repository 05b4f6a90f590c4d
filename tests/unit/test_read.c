/* SPDX-License-Identifier: MIT */
/*
 * The read protocol on the fake fabric, beyond the conformance suite: many
 * READs in flight each acknowledged, credits, a receiver that holds its
 * buffers, eager against READ, immediate data on the READ path, a sender
 * that leaves before its payload was read, and hello mismatches.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/conn.h"
#include "harness.h"
#include "seam.h"
#include "protocols/read.h"

#define BIG 4096   /* above the 1 KiB eager limit: moves by RDMA READ */
#define SMALL 100  /* eager: inside the descriptor */

static struct rdmx_conn_opts opts(uint32_t send_depth, uint32_t recv_depth)
{
	return th_opts("read", 8192, send_depth, recv_depth);
}

static void open_pair(struct th_pair *p, const struct rdmx_conn_opts *so,
		      const struct rdmx_conn_opts *co)
{
	int rc = th_pair_open(p, so, co);

	if (rc)
		fail_msg("cannot connect a pair: %s (%s)", rdmx_strerror(rc),
			 rdmx_last_error());
}

static void send_one(rdmx_conn *c, size_t size, uint64_t seq, uint32_t flags)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, size, &m, 0);

	if (rc)
		fail_msg("alloc #%llu: %s (%s)", (unsigned long long)seq,
			 rdmx_strerror(rc), rdmx_conn_error(c));
	th_fill(m.data, size, seq);
	m.len = size;
	m.flags = flags;
	m.imm = (uint32_t)seq ^ 0x5a5a0000u;
	assert_int_equal(rdmx_send(c, &m), 0);
}

static void check_msg(const struct rdmx_msg *m, size_t size, uint64_t seq)
{
	long bad;

	assert_int_equal(m->len, size);
	bad = th_check(m->data, m->len, seq);
	if (bad >= 0)
		fail_msg("message #%llu differs at offset %ld", (unsigned long long)seq, bad);
}

static void recv_one(rdmx_conn *c, size_t size, uint64_t seq)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(c, &m, 5000);

	if (rc)
		fail_msg("recv #%llu: %s (%s)", (unsigned long long)seq,
			 rdmx_strerror(rc), rdmx_conn_error(c));
	check_msg(&m, size, seq);
	assert_int_equal(rdmx_msg_release(c, &m), 0);
}

/* send_depth READ messages out before the receiver looks: each is read
 * and acknowledged on its own, and only then does flush return 0. */
static void test_many_in_flight_each_acked(void **state)
{
	struct rdmx_conn_opts o = opts(32, 32);
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	open_pair(&p, &o, &o);
	for (uint64_t i = 0; i < 32; i++)
		send_one(p.client, BIG, i, 0);
	assert_int_equal(rdmx_msg_alloc(p.client, BIG, &m, 0), -EAGAIN);
	/* Nothing is acknowledged while the receiver is idle. */
	assert_int_equal(rdmx_flush(p.client, 0), -ETIMEDOUT);
	assert_int_equal(rdmx_flush(p.client, 50), -ETIMEDOUT);
	assert_true(p.server->posted[RDMX__OP_READ] == 0);
	for (uint64_t i = 0; i < 32; i++)
		recv_one(p.server, BIG, i);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	/* One descriptor SEND per message out, one READ and one ack back. */
	assert_true(p.client->posted[RDMX__OP_SEND] == 32);
	assert_true(p.client->posted[RDMX__OP_READ] == 0);
	assert_true(p.server->posted[RDMX__OP_READ] == 32);
	assert_true(p.server->posted[RDMX__OP_WRITE] == 32);
	assert_true(p.server->posted[RDMX__OP_SEND] == 0);
	/* Every buffer came back: all of them can be had at once again. */
	for (uint64_t i = 32; i < 64; i++)
		send_one(p.client, BIG, i, 0);
	for (uint64_t i = 32; i < 64; i++)
		recv_one(p.server, BIG, i);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

/* More READs wanted than the READ depth (16) and than the receive buffers:
 * the rest wait in the receiver's queue; order and content hold. */
static void test_deep_stream_mixed(void **state)
{
	struct rdmx_conn_opts so = opts(64, 20), co = opts(64, 64);
	struct th_pair p;
	uint64_t sent = 0, got = 0;
	const uint64_t n = 3000;

	(void)state;
	open_pair(&p, &so, &co);
	while (got < n) {
		for (; sent < n && sent - got < 64; sent++)
			send_one(p.client, sent % 3 ? BIG : SMALL, sent, 0);
		for (int k = 0; k < 40 && got < sent; k++, got++)
			recv_one(p.server, got % 3 ? BIG : SMALL, got);
	}
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	assert_true(p.server->posted[RDMX__OP_READ] == 2000);
	th_pair_close(&p);
}

/* The sender never has more descriptors out than the receiver can hold
 * (desc_depth = max(recv_depth, send_depth) of the receiver). */
static void test_credits_bound_sender(void **state)
{
	struct rdmx_conn_opts so = opts(2, 2), co = opts(8, 8);
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	open_pair(&p, &so, &co);
	send_one(p.client, BIG, 0, 0);
	send_one(p.client, SMALL, 1, 0);
	/* Six buffers free, but no credit left. */
	assert_int_equal(rdmx_msg_alloc(p.client, SMALL, &m, 0), -EAGAIN);
	assert_int_equal(rdmx_msg_alloc(p.client, SMALL, &m, 30), -ETIMEDOUT);
	recv_one(p.server, BIG, 0);
	send_one(p.client, SMALL, 2, 0);
	recv_one(p.server, SMALL, 1);
	recv_one(p.server, SMALL, 2);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

/* A receiver holding all its buffers: later messages wait, nothing is
 * overwritten, and they come in order once buffers are released. */
static void test_held_buffers_not_overwritten(void **state)
{
	struct rdmx_conn_opts so = opts(8, 2), co = opts(8, 8);
	struct rdmx_msg a, b, c;
	struct th_pair p;

	(void)state;
	open_pair(&p, &so, &co);
	for (uint64_t i = 0; i < 6; i++)
		send_one(p.client, i % 2 ? SMALL : BIG, i, 0);
	assert_int_equal(rdmx_recv(p.server, &a, 5000), 0);
	assert_int_equal(rdmx_recv(p.server, &b, 5000), 0);
	assert_int_equal(rdmx_recv(p.server, &c, 0), -EAGAIN);
	assert_int_equal(rdmx_recv(p.server, &c, 20), -ETIMEDOUT);
	check_msg(&a, BIG, 0);
	check_msg(&b, SMALL, 1);
	assert_int_equal(rdmx_msg_release(p.server, &a), 0);
	assert_int_equal(rdmx_recv(p.server, &a, 5000), 0);
	check_msg(&a, BIG, 2);
	check_msg(&b, SMALL, 1);
	assert_int_equal(rdmx_msg_release(p.server, &b), 0);
	assert_int_equal(rdmx_msg_release(p.server, &a), 0);
	for (uint64_t i = 3; i < 6; i++)
		recv_one(p.server, i % 2 ? SMALL : BIG, i);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

/* Eager payloads cost no READ; both paths carry immediate data. */
static void test_eager_and_read_paths_with_imm(void **state)
{
	struct rdmx_conn_opts o = opts(16, 16);
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	open_pair(&p, &o, &o);
	for (uint64_t i = 0; i < 40; i++) {
		size_t size = i < 20 ? SMALL : i == 20 ? 1024 : i == 21 ? 1025 : 8192;

		send_one(p.client, size, i, i % 2 ? RDMX_MSG_IMM : 0);
		assert_int_equal(rdmx_recv(p.server, &m, 5000), 0);
		check_msg(&m, size, i);
		assert_int_equal(m.flags & RDMX_MSG_IMM, i % 2 ? RDMX_MSG_IMM : 0);
		if (i % 2)
			assert_int_equal(m.imm, (uint32_t)i ^ 0x5a5a0000u);
		assert_int_equal(rdmx_msg_release(p.server, &m), 0);
		if (i == 20)
			assert_true(p.server->posted[RDMX__OP_READ] == 0);
	}
	assert_true(p.server->posted[RDMX__OP_READ] == 19); /* 1025 B and up */
	assert_true(p.server->posted[RDMX__OP_WRITE] == 40);
	th_pair_close(&p);
}

/* A dial with @o is refused before it reaches the fabric, naming @what. */
static void dial_refused(const struct rdmx_conn_opts *o, const char *what)
{
	struct rdmx_ctx_opts x = { .fabric = th_fabric() };
	rdmx_conn *c = NULL;
	rdmx_ctx *ctx;

	assert_int_equal(rdmx_ctx_create(&ctx, &x), 0);
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), what));
	assert_null(c);
	rdmx_ctx_destroy(ctx);
}

/* The receiver's eager_max decides what rides in the descriptor: 64 B
 * eager and 65 B by READ with eager_max 64; everything by READ with 0;
 * a value beyond the 16-bit field is refused. */
static void test_eager_max_option(void **state)
{
	struct rdmx_conn_opts so = opts(8, 8), co = opts(8, 8);
	struct th_pair p;
	uint64_t seq = 0;

	(void)state;
	so.eager_max = 64;
	open_pair(&p, &so, &co);
	send_one(p.client, 64, seq, 0);
	recv_one(p.server, 64, seq++);
	assert_true(p.server->posted[RDMX__OP_READ] == 0);
	send_one(p.client, 65, seq, 0);
	recv_one(p.server, 65, seq++);
	assert_true(p.server->posted[RDMX__OP_READ] == 1);
	/* the client's default 1 KiB applies the other way */
	send_one(p.server, 1000, seq, 0);
	recv_one(p.client, 1000, seq++);
	assert_true(p.client->posted[RDMX__OP_READ] == 0);
	th_pair_close(&p);

	so.eager_max = 0;
	open_pair(&p, &so, &co);
	send_one(p.client, 1, seq, 0);
	recv_one(p.server, 1, seq++);
	assert_true(p.server->posted[RDMX__OP_READ] == 1);
	th_pair_close(&p);

	co.eager_max = 65536;
	dial_refused(&co, "eager_max");
}

/* Both ends send and receive on the one connection. */
static void test_both_directions(void **state)
{
	struct rdmx_conn_opts o = opts(24, 24);
	struct th_pair p;

	(void)state;
	open_pair(&p, &o, &o);
	for (int round = 0; round < 5; round++) {
		uint64_t base = (uint64_t)round * 100;

		for (uint64_t i = 0; i < 24; i++) {
			send_one(p.client, BIG, base + i, 0);
			send_one(p.server, BIG + 1, base + 50 + i, 0);
		}
		for (uint64_t i = 0; i < 24; i++) {
			recv_one(p.server, BIG, base + i);
			recv_one(p.client, BIG + 1, base + 50 + i);
		}
		assert_int_equal(rdmx_flush(p.client, 5000), 0);
		assert_int_equal(rdmx_flush(p.server, 5000), 0);
	}
	th_pair_close(&p);
}

/* A sender that closes before its payload was read: what arrived eagerly
 * is delivered, then an error, not a hang. */
static void test_sender_gone_before_read(void **state)
{
	struct rdmx_conn_opts o = opts(8, 8);
	struct rdmx_msg m;
	struct th_pair p;
	double t0;

	(void)state;
	open_pair(&p, &o, &o);
	send_one(p.client, SMALL, 0, 0);
	send_one(p.client, BIG, 1, 0);
	rdmx_conn_close(p.client);
	p.client = NULL;
	recv_one(p.server, SMALL, 0);
	t0 = th_now_ms();
	assert_int_equal(rdmx_recv(p.server, &m, 5000), -ECONNRESET);
	assert_true(th_now_ms() - t0 < 4000);
	assert_int_equal(rdmx_msg_alloc(p.server, SMALL, &m, 100), -ECONNRESET);
	th_pair_close(&p);
}

/* Connect through the seam with a read hello carrying @block. */
static int raw_connect(rdmx_ctx *ctx, uint16_t port, const uint8_t *block,
		       size_t blen, char *why, size_t wlen)
{
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION, .protocol = RDMX__PROTO_READ,
				 .max_msg = 4096, .recv_depth = 4 };

	return th_hello_connect(ctx, port, &h, block, blen, why, wlen);
}

/* Hello blocks that do not match are refused with a reason that says
 * what did not match; the listener keeps serving. */
static void test_hello_mismatch_rejected(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = opts(8, 8);
	struct rdmx__read_hello h = { .version = RDMX__READ_HELLO_VERSION, .rd_atomic = 4,
				      .desc_depth = 8, .send_depth = 8, .eager_max = 64,
				      .ack_rkey = 1, .ack_addr = 0x1000 };
	uint8_t block[RDMX__READ_HELLO_SIZE];
	struct th_acceptor a = { 0 };
	char why[160];
	rdmx_conn *c;
	rdmx_ctx *ctx;
	uint16_t port;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &a.lis), 0);
	port = rdmx_listener_port(a.lis);
	th_accept_start(&a);
	rdmx__read_hello_encode(&h, block);
	assert_int_equal(raw_connect(ctx, port, block, 5, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "hello block is 5 bytes, this side expects 24"));
	h.version = 9;
	rdmx__read_hello_encode(&h, block);
	assert_int_equal(raw_connect(ctx, port, block, sizeof(block), why, sizeof(why)),
			 -ECONNREFUSED);
	assert_non_null(strstr(why, "version mismatch"));
	h.version = RDMX__READ_HELLO_VERSION;
	h.desc_depth = 0;
	rdmx__read_hello_encode(&h, block);
	assert_int_equal(raw_connect(ctx, port, block, sizeof(block), why, sizeof(why)),
			 -ECONNREFUSED);
	assert_non_null(strstr(why, "0 descriptors"));
	assert_int_equal(rdmx_dial(ctx, th_addr(), port, &o, &c), 0);
	th_accept_join(&a);
	assert_int_equal(a.rc, 0);
	assert_int_equal(rdmx_listener_rejected(a.lis), 3);
	send_one(c, BIG, 7, 0);
	recv_one(a.conn, BIG, 7);
	rdmx_conn_close(c);
	rdmx_conn_close(a.conn);
	rdmx_listener_destroy(a.lis);
	rdmx_ctx_destroy(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_in_flight_each_acked),
		cmocka_unit_test(test_deep_stream_mixed),
		cmocka_unit_test(test_credits_bound_sender),
		cmocka_unit_test(test_held_buffers_not_overwritten),
		cmocka_unit_test(test_eager_and_read_paths_with_imm),
		cmocka_unit_test(test_eager_max_option),
		cmocka_unit_test(test_both_directions),
		cmocka_unit_test(test_sender_gone_before_read),
		cmocka_unit_test(test_hello_mismatch_rejected),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
