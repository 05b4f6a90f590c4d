/* SPDX-License-Identifier: MIT */
/*
 * The conformance suite: every built-in protocol through the same tests.
 * Built twice: against the in-process fake fabric (a unit test, runs
 * natively) and against verbs (an integration test, runs on rxe in the
 * sandbox). Every payload carries a sequence number and a pattern that is
 * checked byte for byte.
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

#include "core/msg.h"
#include "core/protocol.h"
#include "harness.h"
#include "seam.h"
#include "many_senders.h"
#include "send_tokens.h"
#include "recv_many.h"
#include "send_vec.h"
#include "send_burst.h"

static const char *protocol; /* the protocol under test */
static uint8_t wait_mode;     /* and the wait mode (enum rdmx_wait_mode) */
static uint8_t notify, ack;   /* and the ring variant (enum rdmx_notify, rdmx_ack) */
static int short_counts;      /* a ring variant: a tenth of the counts */

/* @n messages, a tenth for the ring variants (each wraps the ring still). */
/* The long stream's messages: RDMX_TEST_STREAM, else 100,000. */
static uint64_t stream_count(void)
{
	const char *e = getenv("RDMX_TEST_STREAM");
	char *end;
	unsigned long long n = e && *e ? strtoull(e, &end, 10) : 0;

	return n && !*end ? (uint64_t)n : 100000;
}

static uint64_t cf_count(uint64_t n)
{
	return th_count(short_counts ? n / 10 : n);
}

static struct rdmx_conn_opts opts(void)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	o.wait_mode = wait_mode;
	o.notify = notify;
	o.ack = ack;
	return o;
}

const char *cf_protocol(void)
{
	return protocol;
}

struct rdmx_conn_opts cf_opts(void)
{
	return opts();
}

void cf_pair(struct th_pair *p, const struct rdmx_conn_opts *so,
	     const struct rdmx_conn_opts *co)
{
	int rc = th_pair_open(p, so, co);

	if (rc)
		fail_msg("%s: cannot connect a pair: %s (%s)", protocol,
			 rdmx_strerror(rc), rdmx_last_error());
}

static void send_seq(rdmx_conn *c, size_t size, uint64_t seq)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, size, &m, 10000);

	if (rc)
		fail_msg("alloc %zu: %s (%s)", size, rdmx_strerror(rc), rdmx_conn_error(c));
	assert_true(m.cap >= size);
	th_fill(m.data, size, seq);
	m.len = size;
	rc = rdmx_send(c, &m);
	if (rc)
		fail_msg("send: %s (%s)", rdmx_strerror(rc), rdmx_conn_error(c));
}

static void recv_seq(rdmx_conn *c, size_t size, uint64_t seq)
{
	struct rdmx_msg m;
	long bad;
	int rc = rdmx_recv(c, &m, 20000);

	if (rc)
		fail_msg("recv #%llu: %s (%s)", (unsigned long long)seq,
			 rdmx_strerror(rc), rdmx_conn_error(c));
	assert_int_equal(m.len, size);
	bad = th_check(m.data, m.len, seq);
	if (bad >= 0)
		fail_msg("%s: message #%llu of %zu bytes differs at offset %ld",
			 protocol, (unsigned long long)seq, size, bad);
	assert_int_equal(rdmx_msg_release(c, &m), 0);
}

/* A size in 1..max, log-uniform so that every order of magnitude shows up. */
static size_t rand_size(uint64_t *rs, size_t max)
{
	unsigned bits = 1 + (unsigned)(th_rand(rs) % 17);
	size_t s = 1 + (size_t)(th_rand(rs) & ((1ull << bits) - 1));

	return s > max ? max : s;
}

/* 10,000 round trips of mixed sizes 1 B..max, including both ends. */
static void test_pingpong_mixed_sizes(void **state)
{
	struct th_pair p;
	struct th_echo e;
	uint64_t rs = 42;
	struct rdmx_conn_opts o = opts();
	const uint64_t n = cf_count(10000);
	size_t max;

	(void)state;
	cf_pair(&p, &o, &o);
	max = rdmx_conn_max_msg(p.client);
	assert_int_equal(max, o.max_msg_size);
	th_echo_start(&e, p.server);
	for (uint64_t i = 0; i < n; i++) {
		size_t size = i == 0 ? 1 : i == 1 ? max : rand_size(&rs, max);

		send_seq(p.client, size, i);
		recv_seq(p.client, size, i);
	}
	rdmx_conn_close(p.client);
	p.client = NULL;
	assert_int_equal(th_echo_join(&e), -ECONNRESET);
	assert_int_equal(e.echoed, n);
	th_pair_close(&p);
}

/* One way, 100,000 messages of 1 B..4 KiB (seeded), 32 in flight: order
 * and content hold byte for byte. RDMX_TEST_STREAM sets another count
 * (make check: 25,000 on rxe; make soak: the full 100,000). */
static void test_stream_in_order(void **state)
{
	struct rdmx_conn_opts o = opts();
	struct th_pair p;
	const uint64_t n = cf_count(stream_count());
	uint64_t rs = 7, rr = 7;

	(void)state;
	o.max_msg_size = 4096;
	cf_pair(&p, &o, &o);
	for (uint64_t sent = 0, got = 0; got < n;) {
		while (sent < n && sent - got < 32)
			send_seq(p.client, rand_size(&rs, 4096), sent++);
		recv_seq(p.server, rand_size(&rr, 4096), got++);
	}
	assert_int_equal(rdmx_flush(p.client, 10000), 0);
	th_pair_close(&p);
}

static void test_immediate_data(void **state)
{
	struct rdmx_conn_opts o = opts();
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	cf_pair(&p, &o, &o);
	for (uint32_t i = 0; i < 100; i++) {
		assert_int_equal(rdmx_msg_alloc(p.client, 16, &m, 1000), 0);
		th_fill(m.data, 16, i);
		m.len = 16;
		m.flags = (i % 2) ? RDMX_MSG_IMM : 0;
		m.imm = 0xabc00000u + i;
		assert_int_equal(rdmx_send(p.client, &m), 0);
		assert_int_equal(rdmx_recv(p.server, &m, 10000), 0);
		assert_int_equal(m.flags & RDMX_MSG_IMM, (i % 2) ? RDMX_MSG_IMM : 0);
		if (i % 2)
			assert_int_equal(m.imm, 0xabc00000u + i);
		assert_int_equal(th_check(m.data, m.len, i), -1);
		assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	}
	th_pair_close(&p);
}

static void test_oversize_is_emsgsize(void **state)
{
	struct rdmx_conn_opts o = opts();
	struct rdmx_msg m;
	struct th_pair p;
	size_t max;

	(void)state;
	o.max_msg_size = 1000;
	cf_pair(&p, &o, &o);
	max = rdmx_conn_max_msg(p.client);
	assert_int_equal(max, 1000);
	assert_int_equal(rdmx_msg_alloc(p.client, max + 1, &m, 0), -EMSGSIZE);
	assert_non_null(strstr(rdmx_conn_error(p.client), "exceeds"));
	assert_int_equal(rdmx_msg_alloc(p.client, max, &m, 0), 0);
	m.len = m.cap + 1;
	assert_int_equal(rdmx_send(p.client, &m), -EMSGSIZE);
	/* The connection is still fine afterwards. */
	m.len = max;
	th_fill(m.data, max, 5);
	assert_int_equal(rdmx_send(p.client, &m), 0);
	recv_seq(p.server, max, 5);
	th_pair_close(&p);
}

/* Different limits on the two sides: the smaller maximum wins. */
static void test_max_msg_negotiated(void **state)
{
	struct rdmx_conn_opts so = opts(), co = opts();
	struct th_pair p;

	(void)state;
	so.max_msg_size = 2048;
	co.max_msg_size = 8192;
	cf_pair(&p, &so, &co);
	assert_int_equal(rdmx_conn_max_msg(p.client), 2048);
	assert_int_equal(rdmx_conn_max_msg(p.server), 2048);
	send_seq(p.client, 2048, 1);
	recv_seq(p.server, 2048, 1);
	th_pair_close(&p);
}

static void test_bad_handles(void **state)
{
	struct rdmx_conn_opts o = opts();
	struct rdmx_msg m, junk;
	struct th_pair p;

	(void)state;
	cf_pair(&p, &o, &o);
	memset(&junk, 0, sizeof(junk));
	assert_int_equal(rdmx_send(p.client, &junk), -EINVAL);
	assert_int_equal(rdmx_msg_release(p.client, &junk), -EINVAL);
	assert_int_equal(rdmx_send(NULL, &junk), -EINVAL);
	assert_int_equal(rdmx_send(p.client, NULL), -EINVAL);
	assert_int_equal(rdmx_recv(p.client, NULL, 0), -EINVAL);
	assert_int_equal(rdmx_recv(p.client, &m, 0), -EAGAIN);
	/* A message sent cannot be sent again or released. */
	assert_int_equal(rdmx_msg_alloc(p.client, 8, &m, 0), 0);
	m.len = 8;
	junk = m;
	assert_int_equal(rdmx_send(p.client, &m), 0);
	assert_int_equal(rdmx_send(p.client, &junk), -EINVAL);
	/* A received message is released once. */
	assert_int_equal(rdmx_recv(p.server, &m, 10000), 0);
	junk = m;
	assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	assert_int_equal(rdmx_msg_release(p.server, &junk), -EINVAL);
	/* A handle of one connection is refused by another. */
	assert_int_equal(rdmx_msg_alloc(p.client, 8, &m, 0), 0);
	assert_int_equal(rdmx_send(p.server, &m), -EINVAL);
	assert_int_equal(rdmx_msg_release(p.client, &m), 0);
	th_pair_close(&p);
}

/* A handle is user memory: one with its value or its kind tampered with
 * is refused by send and release (no slot is touched), a received one
 * cannot be sent, and the real handle still works afterwards. */
static void test_forged_handles(void **state)
{
	struct rdmx_conn_opts o = opts();
	const uint64_t flip[][2] = {
		{ UINT64_C(1) << 40, 0 }, { UINT64_MAX, 0 },
		{ 0, RDMX__MSG_SEND }, { 0, RDMX__MSG_SEND ^ RDMX__MSG_RECV },
	};
	struct rdmx_msg m, bad;
	struct th_pair p;

	(void)state;
	cf_pair(&p, &o, &o);
	assert_int_equal(rdmx_msg_alloc(p.client, 8, &m, 0), 0);
	m.len = 8;
	memset(m.data, 7, 8);
	for (size_t i = 0; i < sizeof(flip) / sizeof(flip[0]); i++) {
		bad = m;
		bad.priv_[0] ^= flip[i][0];
		bad.priv_[1] ^= flip[i][1];
		assert_int_equal(rdmx_send(p.client, &bad), -EINVAL);
		assert_int_equal(rdmx_msg_release(p.client, &bad), -EINVAL);
	}
	assert_int_equal(rdmx_send(p.client, &m), 0);
	assert_int_equal(rdmx_recv(p.server, &m, 10000), 0);
	assert_int_equal(m.len, 8);
	assert_int_equal(rdmx_send(p.server, &m), -EINVAL);
	assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	th_pair_close(&p);
}

/* Protocols whose sender is held at the receiver's buffers (credits,
 * advertised descriptors) rather than at its own send buffers. */
static int stops_at_receiver(void)
{
	return !strcmp(protocol, "srq") || !strcmp(protocol, "direct_write") ||
	       !strcmp(protocol, "buffered_read");
}

/* Protocols whose receiver pulls the messages (buffered_read): a flush
 * returns once the receiver fetched them, so it needs a receiver. */
static int receiver_pulls(void)
{
	return !strcmp(protocol, "buffered_read");
}

/* A receiver on a thread of its own: @n messages of @size, pattern i. */
struct puller {
	pthread_t t;
	rdmx_conn *c;
	size_t size;
	uint64_t n, bad;
	int rc;
};

static void *pull_main(void *arg)
{
	struct puller *u = arg;
	struct rdmx_msg m;

	for (uint64_t i = 0; !u->rc && i < u->n; i++) {
		u->rc = rdmx_recv(u->c, &m, 20000);
		if (u->rc)
			break;
		u->bad += m.len != u->size || th_check(m.data, m.len, i) >= 0;
		u->rc = rdmx_msg_release(u->c, &m);
	}
	return NULL;
}

/* A receiver that does not receive: the sender runs out of buffers and
 * is told so; nothing is lost or overwritten once the receiver drains. */
static void test_backpressure(void **state)
{
	struct rdmx_conn_opts so = opts(), co = opts();
	struct rdmx_msg m;
	struct th_pair p;
	uint64_t sent = 0;
	int rc;

	(void)state;
	so.recv_depth = 4;
	co.send_depth = 8;
	cf_pair(&p, &so, &co);
	for (;;) {
		double t0 = th_now_ms();

		rc = rdmx_msg_alloc(p.client, 512, &m, sent < 12 ? 200 : 100);
		if (rc)
			break;
		assert_true(th_now_ms() - t0 < 10000);
		th_fill(m.data, 512, sent);
		m.len = 512;
		assert_int_equal(rdmx_send(p.client, &m), 0);
		sent++;
		assert_true(sent <= 64);
	}
	assert_int_equal(rc, -ETIMEDOUT);
	assert_int_equal(rdmx_msg_alloc(p.client, 512, &m, 0), -EAGAIN);
	/* srq's credits stop the sender at the receiver's share (the whole
	 * SRQ of a dialed end, recv_depth), before its send buffers; so do
	 * direct_write's descriptors (one per receive buffer) and a ring
	 * with notify IMM (one posted receive per message). */
	assert_true(sent >= (stops_at_receiver() || notify == RDMX_NOTIFY_IMM ?
			     so.recv_depth : co.send_depth));
	assert_true(sent <= so.recv_depth + co.send_depth + 4);
	for (uint64_t i = 0; i < sent; i++) {
		if (i % 3 == 0)
			usleep(1000); /* a slow receiver */
		recv_seq(p.server, 512, i);
	}
	assert_int_equal(rdmx_flush(p.client, 10000), 0);
	send_seq(p.client, 512, sent);
	recv_seq(p.server, 512, sent);
	th_pair_close(&p);
}

static void test_dial_without_listener(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = opts();
	rdmx_listener *lis;
	rdmx_conn *c = NULL;
	rdmx_ctx *ctx;
	uint16_t port;
	double t0;
	int rc;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	/* A port that was free a moment ago. */
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &lis), 0);
	port = rdmx_listener_port(lis);
	rdmx_listener_destroy(lis);
	o.connect_timeout_ms = 2000;
	t0 = th_now_ms();
	rc = rdmx_dial(ctx, th_addr(), port, &o, &c);
	assert_true(rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ETIMEDOUT);
	assert_null(c);
	assert_true(th_now_ms() - t0 < 2000 + 5000);
	assert_true(strlen(rdmx_ctx_error(ctx)) > 0);
	print_message("dial to port %u without listener: %s (%s)\n", port,
		      rdmx_strerror(rc), rdmx_ctx_error(ctx));
	rdmx_ctx_destroy(ctx);
}

/* Bad hellos are rejected with a reason; the listener keeps serving. */
static void test_bad_hello_rejected_listener_survives(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = opts();
	struct th_acceptor a = { 0 };
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION, .protocol = 99,
				 .max_msg = 4096, .recv_depth = 4 };
	uint8_t buf[RDMX__PDATA_CONNECT_MAX];
	char why[160];
	rdmx_conn *c;
	rdmx_ctx *ctx;
	uint16_t port;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &a.lis), 0);
	port = rdmx_listener_port(a.lis);
	th_accept_start(&a);

	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(th_raw_connect(ctx, port, buf, sizeof(buf), why, sizeof(why)),
			 -ECONNREFUSED);
	assert_non_null(strstr(why, "not an rdmx peer"));

	rdmx__hello_encode(&h, buf, sizeof(buf));
	assert_int_equal(th_raw_connect(ctx, port, buf, sizeof(buf), why, sizeof(why)),
			 -ECONNREFUSED);
	assert_non_null(strstr(why, "protocol mismatch"));

	h.protocol = rdmx__protocol_by_name(protocol)->id;
	h.version = RDMX__WIRE_VERSION + 1;
	rdmx__hello_encode(&h, buf, sizeof(buf));
	buf[4] = RDMX__WIRE_VERSION + 1;
	assert_int_equal(th_raw_connect(ctx, port, buf, sizeof(buf), why, sizeof(why)),
			 -ECONNREFUSED);
	assert_non_null(strstr(why, "version"));

	/* A proper client still gets in. */
	assert_int_equal(rdmx_dial(ctx, th_addr(), port, &o, &c), 0);
	th_accept_join(&a);
	assert_int_equal(a.rc, 0);
	assert_int_equal(rdmx_listener_rejected(a.lis), 3);
	send_seq(c, 100, 1);
	recv_seq(a.conn, 100, 1);
	rdmx_conn_close(c);
	rdmx_conn_close(a.conn);
	rdmx_listener_destroy(a.lis);
	rdmx_ctx_destroy(ctx);
}

static void test_bad_options(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = opts();
	rdmx_listener *lis = NULL;
	rdmx_conn *c = NULL;
	rdmx_ctx *ctx;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	o.protocol = "carrier_pigeon";
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &lis), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "carrier_pigeon"));
	o = opts();
	o.max_msg_size = 0;
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, &o, &c), -EINVAL);
	o = opts();
	o.rnr_retry = 8;
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, &o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "rnr_retry"));
	o = opts();
	o.signal_every = o.send_depth / 2 + 1; /* two batches must fit */
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, &o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "signal_every"));
	o = opts();
	o.coalesce = RDMX_COALESCE_ON + 1;
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, &o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "coalesce"));
	assert_int_equal(rdmx_dial(ctx, NULL, 1, NULL, &c), -EINVAL);
	assert_int_equal(rdmx_dial(ctx, "", 1, NULL, &c), -EINVAL);
	assert_null(c);
	assert_null(lis);
	rdmx_ctx_destroy(ctx);
}

/* The peer closes after a burst: every message sent before the close is
 * delivered, then the receiver sees -ECONNRESET (no hang). */
static void test_peer_close_delivers_then_resets(void **state)
{
	struct rdmx_conn_opts o = opts();
	struct rdmx_msg m;
	struct th_pair p;
	int rc;

	(void)state;
	cf_pair(&p, &o, &o);
	for (uint64_t i = 0; i < 40; i++)
		send_seq(p.client, 300, i);
	if (receiver_pulls()) {
		struct puller u = { .c = p.server, .size = 300, .n = 40 };

		assert_int_equal(pthread_create(&u.t, NULL, pull_main, &u), 0);
		assert_int_equal(rdmx_flush(p.client, 10000), 0);
		rdmx_conn_close(p.client);
		p.client = NULL;
		assert_int_equal(pthread_join(u.t, NULL), 0);
		assert_int_equal(u.rc, 0);
		assert_int_equal(u.bad, 0);
	} else {
		assert_int_equal(rdmx_flush(p.client, 10000), 0);
		rdmx_conn_close(p.client);
		p.client = NULL;
		for (uint64_t i = 0; i < 40; i++)
			recv_seq(p.server, 300, i);
	}
	rc = rdmx_recv(p.server, &m, 10000);
	assert_int_equal(rc, -ECONNRESET);
	/* Sending on it now fails cleanly as well. */
	rc = rdmx_msg_alloc(p.server, 10, &m, 1000);
	assert_true(rc == -ECONNRESET);
	th_pair_close(&p);
}

/* The receiver closes while the sender streams: the sender gets an error
 * within a bound, never a hang. */
static void test_receiver_close_midstream(void **state)
{
	struct rdmx_conn_opts o = opts();
	struct th_pair p;
	struct rdmx_msg m;
	double t0;
	int rc = 0;

	(void)state;
	o.rnr_retry = 7;
	cf_pair(&p, &o, &o);
	for (uint64_t i = 0; i < 10; i++)
		send_seq(p.client, 64, i);
	for (uint64_t i = 0; i < 10; i++)
		recv_seq(p.server, 64, i);
	rdmx_conn_close(p.server);
	p.server = NULL;
	t0 = th_now_ms();
	for (uint64_t i = 10; !rc && th_now_ms() - t0 < 30000; i++) {
		rc = rdmx_msg_alloc(p.client, 64, &m, 1000);
		if (!rc) {
			m.len = 64;
			rc = rdmx_send(p.client, &m);
		}
		if (!rc && i % 64 == 0)
			rc = rdmx_flush(p.client, 1000);
		if (!rc)
			rc = rdmx_recv(p.client, &m, 0) == -ECONNRESET ? -ECONNRESET : 0;
	}
	assert_int_equal(rc, -ECONNRESET);
	th_pair_close(&p);
}

/* Eight senders into one listener: exactly once, in order per sender. */
static void test_many_senders(void **state)
{
	(void)state;
	th_many_senders(protocol, th_count(2000));
}

/* The ring protocols' notify x ack variants that can work (rdmx.h, enum
 * rdmx_notify), except the default each protocol ran above. */
static const struct variant {
	uint8_t notify, ack;
	const char *name;
} variants[] = {
	{ RDMX_NOTIFY_POLL, RDMX_ACK_SEND, "poll/send" },
	{ RDMX_NOTIFY_POLL, RDMX_ACK_READ, "poll/read" },
	{ RDMX_NOTIFY_IMM, RDMX_ACK_SEND, "imm/send" },
	{ RDMX_NOTIFY_OFF, RDMX_ACK_SEND, "off/send" },
	{ RDMX_NOTIFY_OFF, RDMX_ACK_READ, "off/read" },
	{ RDMX_NOTIFY_REV, RDMX_ACK_SEND, "rev/send" },
	{ RDMX_NOTIFY_REV, RDMX_ACK_READ, "rev/read" },
};

/* Does @proto run variant @v, other than its default (poll, its ack)? */
static int runs_variant(const char *proto, const struct variant *v)
{
	int duplex = !strcmp(proto, "write_duplex");

	if (strcmp(proto, "write_simplex") && strcmp(proto, "write_magic") && !duplex)
		return 0;
	if (v->notify == RDMX_NOTIFY_POLL && v->ack == (duplex ? RDMX_ACK_READ : RDMX_ACK_SEND))
		return 0;
	return !(v->notify == RDMX_NOTIFY_REV && !strcmp(proto, "write_magic"));
}

/* Each ring protocol through each variant: what integrity, order, wrap,
 * back-pressure and a peer leaving need, with a tenth of the counts (and
 * the vector receive's, whose take differs by notify); in
 * block mode too on the fake (every notify must wake a sleeping receiver). */
static int run_variants(const char *only)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pingpong_mixed_sizes),
		cmocka_unit_test(test_stream_in_order),
		cmocka_unit_test(test_backpressure),
		cmocka_unit_test(test_peer_close_delivers_then_resets),
		cmocka_unit_test(test_recv_many_in_order),
		cmocka_unit_test(test_recv_many_ring_wrap),
		cmocka_unit_test(test_recv_many_peer_close),
	};
	const struct CMUnitTest blocked[] = {
		cmocka_unit_test(test_pingpong_mixed_sizes),
		cmocka_unit_test(test_peer_close_delivers_then_resets),
	};
	const char *const *names = rdmx_protocol_names();
	int failed = 0, fake = !strcmp(th_fabric(), "fake");

	short_counts = 1;
	for (int i = 0; names[i]; i++) {
		for (size_t k = 0; k < sizeof(variants) / sizeof(variants[0]); k++) {
			if ((only && *only && strcmp(only, names[i])) ||
			    !runs_variant(names[i], &variants[k]))
				continue;
			protocol = names[i];
			notify = variants[k].notify;
			ack = variants[k].ack;
			wait_mode = RDMX_WAIT_DEFAULT;
			print_message("=== protocol %s, notify/ack %s, on the %s fabric ===\n",
				      protocol, variants[k].name, th_fabric());
			failed += _cmocka_run_group_tests(variants[k].name, tests,
					sizeof(tests) / sizeof(tests[0]), NULL, NULL);
			if (!fake)
				continue;
			wait_mode = RDMX_WAIT_BLOCK;
			failed += _cmocka_run_group_tests(variants[k].name, blocked,
					sizeof(blocked) / sizeof(blocked[0]), NULL, NULL);
		}
	}
	notify = ack = 0;
	short_counts = 0;
	return failed;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pingpong_mixed_sizes),
		cmocka_unit_test(test_stream_in_order),
		cmocka_unit_test(test_immediate_data),
		cmocka_unit_test(test_oversize_is_emsgsize),
		cmocka_unit_test(test_max_msg_negotiated),
		cmocka_unit_test(test_bad_handles),
		cmocka_unit_test(test_forged_handles),
		cmocka_unit_test(test_backpressure),
		cmocka_unit_test(test_dial_without_listener),
		cmocka_unit_test(test_bad_hello_rejected_listener_survives),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_peer_close_delivers_then_resets),
		cmocka_unit_test(test_receiver_close_midstream),
		cmocka_unit_test(test_many_senders),
		cmocka_unit_test(test_send_tokens_in_order),
		cmocka_unit_test(test_send_tokens_no_flush),
		cmocka_unit_test(test_send_tokens_bad),
		cmocka_unit_test(test_send_tokens_peer_gone),
		cmocka_unit_test(test_send_failed_keeps_buffer),
		cmocka_unit_test(test_send_close_no_drain),
		cmocka_unit_test(test_send_burst_in_order),
		cmocka_unit_test(test_send_burst_pushed),
		cmocka_unit_test(test_send_burst_bad),
		cmocka_unit_test(test_send_burst_deep),
		cmocka_unit_test(test_send_burst_slow_receiver),
		cmocka_unit_test(test_send_burst_peer_closes),
		cmocka_unit_test(test_send_burst_ring_wrap),
		cmocka_unit_test(test_send_burst_backpressure),
		cmocka_unit_test(test_send_burst_peer_close),
		cmocka_unit_test(test_recv_many_in_order),
		cmocka_unit_test(test_recv_many_max_smaller),
		cmocka_unit_test(test_recv_many_ring_wrap),
		cmocka_unit_test(test_recv_many_again),
		cmocka_unit_test(test_recv_many_peer_close),
		cmocka_unit_test(test_recv_many_bad_args),
		cmocka_unit_test(test_sendv_in_order),
		cmocka_unit_test(test_sendv_partial),
		cmocka_unit_test(test_sendv_bad_args),
		cmocka_unit_test(test_sendv_peer_close),
	};
	/* the other wait modes: what waits (pingpong, backpressure, the
	 * peer leaving, a send token), kept short for make check */
	const struct CMUnitTest waits[] = {
		cmocka_unit_test(test_pingpong_mixed_sizes),
		cmocka_unit_test(test_backpressure),
		cmocka_unit_test(test_peer_close_delivers_then_resets),
		cmocka_unit_test(test_send_tokens_no_flush),
		cmocka_unit_test(test_send_tokens_peer_gone),
		cmocka_unit_test(test_send_burst_pushed),
	};
	static const struct { uint8_t mode; const char *name; } modes[] = {
		{ RDMX_WAIT_DEFAULT, "adaptive (default)" },
		{ RDMX_WAIT_SPIN, "spin" },
		{ RDMX_WAIT_BLOCK, "block" },
	};
	const char *const *names = rdmx_protocol_names();
	const char *only = getenv("RDMX_TEST_PROTOCOL");
	int failed = 0;

	if (getenv("RDMX_TEST_FILTER")) /* e.g. "test_send*" */
		cmocka_set_test_filter(getenv("RDMX_TEST_FILTER"));
	for (size_t w = 0; w < sizeof(modes) / sizeof(modes[0]); w++) {
		wait_mode = modes[w].mode;
		for (int i = 0; names[i]; i++) {
			if (only && *only && strcmp(only, names[i]))
				continue;
			protocol = names[i];
			print_message("=== protocol %s, wait %s, on the %s fabric ===\n",
				      protocol, modes[w].name, th_fabric());
			failed += w ? _cmocka_run_group_tests(protocol, waits,
					sizeof(waits) / sizeof(waits[0]), NULL, NULL) :
				_cmocka_run_group_tests(protocol, tests,
					sizeof(tests) / sizeof(tests[0]), NULL, NULL);
		}
	}
	return failed + run_variants(only);
}
