/* SPDX-License-Identifier: MIT */
/*
 * Tests of the single-sender ring protocols (write_simplex, write_magic,
 * write_duplex) beyond the conformance suite: wrap-around with records
 * crossing the end, a slow receiver, out-of-order release, held messages,
 * WRITE_WITH_IMM notification, option checks and, for write_duplex, that
 * the receiving side posts no work request while it receives. Built for
 * both fabrics like the conformance suite; RDMX_TEST_PROTOCOL restricts it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/conn.h"
#include "core/ring.h"
#include "harness.h"
#include "protocols/write_ring.h"

#define RING 16384u
#define MAXMSG 3000u

static const char *protocol;

static struct rdmx_conn_opts ring_opts(void)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	o.ring_size = RING;
	o.max_msg_size = MAXMSG;
	return o;
}

static void open_pair(struct th_pair *p, const struct rdmx_conn_opts *o)
{
	int rc = th_pair_open(p, o, o);

	if (rc)
		fail_msg("%s: cannot connect a pair: %s (%s)", protocol,
			 rdmx_strerror(rc), rdmx_last_error());
}

/* Send message @seq of @size bytes (imm @seq), waiting up to @timeout ms
 * for room: 0, or -EAGAIN when there was none and @eagain_ok; any other
 * failure fails the test. */
static int send_seq(rdmx_conn *c, size_t size, uint64_t seq, int timeout, bool eagain_ok)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, size, &m, timeout);

	if (rc == -EAGAIN && eagain_ok)
		return rc;
	if (rc)
		fail_msg("alloc #%llu of %zu: %s (%s)", (unsigned long long)seq, size,
			 rdmx_strerror(rc), rdmx_conn_error(c));
	th_fill(m.data, size, seq);
	m.len = size;
	m.imm = (uint32_t)seq;
	m.flags = RDMX_MSG_IMM;
	assert_int_equal(rdmx_send(c, &m), 0);
	return 0;
}

static void send_one(rdmx_conn *c, size_t size, uint64_t seq, int timeout)
{
	send_seq(c, size, seq, timeout, false);
}

static void recv_one(rdmx_conn *c, size_t size, uint64_t seq, struct rdmx_msg *m)
{
	int rc = rdmx_recv(c, m, 20000);
	long bad;

	if (rc)
		fail_msg("recv #%llu: %s (%s)", (unsigned long long)seq,
			 rdmx_strerror(rc), rdmx_conn_error(c));
	assert_int_equal(m->len, size);
	assert_int_equal(m->flags & RDMX_MSG_IMM, RDMX_MSG_IMM);
	assert_int_equal(m->imm, (uint32_t)seq);
	bad = th_check(m->data, m->len, seq);
	if (bad >= 0)
		fail_msg("%s: message #%llu of %zu bytes differs at offset %ld",
			 protocol, (unsigned long long)seq, size, bad);
}

/* Sizes whose records (size + 24, rounded to 16) do not divide the ring:
 * records land at every alignment and many cross or meet the end. */
static size_t wrap_size(uint64_t i)
{
	static const size_t sizes[] = { 1000, 2999, 17, 1500, 3000, 700, 2048 };

	return sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
}

static struct rdmx__wring_stats stats(rdmx_conn *c)
{
	struct rdmx__wring_stats st;

	assert_int_equal(rdmx__wring_stats(c, &st), 0);
	return st;
}

/* Send message @seq without waiting: 0, or -EAGAIN when there is no room. */
static int try_send(rdmx_conn *c, uint64_t seq)
{
	return send_seq(c, wrap_size(seq), seq, 0, true);
}

/* Let the receiver answer the sender when nothing is in flight. */
static void poke(rdmx_conn *c)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_recv(c, &m, 0), -EAGAIN);
}

/* Stream @bytes one way in one thread: send while there is room, else
 * receive; every message checked. */
static void stream(struct th_pair *p, uint64_t bytes, uint64_t *count)
{
	uint64_t sent = 0, got = 0, total = 0;
	struct rdmx_msg m;

	while (total < bytes || got < sent) {
		if (total < bytes && !try_send(p->client, sent)) {
			total += wrap_size(sent++);
			continue;
		}
		if (got == sent) {
			poke(p->server);
			continue;
		}
		recv_one(p->server, wrap_size(got), got, &m);
		assert_int_equal(rdmx_msg_release(p->server, &m), 0);
		got++;
	}
	*count = got;
}

static void test_wrap_around(void **state)
{
	struct rdmx_conn_opts o = ring_opts();
	struct rdmx__wring_stats st;
	struct th_pair p;
	uint64_t n;

	(void)state;
	open_pair(&p, &o);
	stream(&p, 25ull * RING, &n);
	assert_int_equal(rdmx_flush(p.client, 10000), 0);
	st = stats(p.client);
	print_message("%s: %llu messages, %llu bytes over a %u-byte ring; %llu pads wasted %llu bytes, %llu updates, %llu asks, %llu reads; magic %d, %llu records crossed the end\n",
		      protocol, (unsigned long long)n, 25ull * RING, RING,
		      (unsigned long long)st.pads, (unsigned long long)st.pad_bytes,
		      (unsigned long long)stats(p.server).updates_sent,
		      (unsigned long long)st.asks, (unsigned long long)st.head_reads,
		      st.magic, (unsigned long long)st.crossings);
	assert_int_equal(st.records_out, n);
	assert_int_equal(stats(p.server).records_in, n);
	if (st.magic) {
		assert_int_equal(st.pads, 0);
		assert_int_equal(st.pad_bytes, 0);
		assert_true(st.crossings >= 20);
	} else {
		assert_true(st.pads >= 20);
		assert_true(st.pad_bytes > 0);
	}
	th_pair_close(&p);
}

struct slow {
	pthread_t t;
	rdmx_conn *c;
	uint64_t n;
	int failed;
};

static void *slow_main(void *arg)
{
	struct slow *s = arg;
	struct rdmx_msg m;

	for (uint64_t i = 0; i < s->n; i++) {
		if (rdmx_recv(s->c, &m, 20000) || m.len != wrap_size(i) ||
		    th_check(m.data, m.len, i) >= 0 || m.imm != (uint32_t)i) {
			s->failed = 1;
			return NULL;
		}
		rdmx_msg_release(s->c, &m);
		if (i % 4 == 0)
			usleep(2000);
	}
	return NULL;
}

/* A receiver that sleeps: the sender waits (never overwrites) and every
 * message arrives intact and in order. */
static void test_backpressure_slow_receiver(void **state)
{
	struct rdmx_conn_opts o = ring_opts();
	struct th_pair p;
	struct slow s = { .n = 400 }; /* not scaled: it must fill the ring */

	(void)state;
	open_pair(&p, &o);
	s.c = p.server;
	pthread_create(&s.t, NULL, slow_main, &s);
	for (uint64_t i = 0; i < s.n; i++)
		send_one(p.client, wrap_size(i), i, 20000);
	assert_int_equal(rdmx_flush(p.client, 20000), 0);
	pthread_join(s.t, NULL);
	assert_false(s.failed);
	assert_true(stats(p.client).blocked > 0);
	th_pair_close(&p);
}

/* Hold several messages, release them in scrambled order while more
 * arrive; a held message's bytes stay intact until it is released. */
static void test_out_of_order_release(void **state)
{
	enum { HOLD = 4 };
	struct rdmx_conn_opts o = ring_opts();
	struct rdmx_msg held[HOLD];
	uint64_t seqs[HOLD], rs = 99;
	struct th_pair p;
	uint64_t sent = 0, got = 0;
	int nheld = 0;

	(void)state;
	open_pair(&p, &o);
	while (got < th_count(3000)) {
		while (sent - got < 3 && !try_send(p.client, sent))
			sent++;
		if (got < sent && nheld < HOLD) {
			recv_one(p.server, wrap_size(got), got, &held[nheld]);
			seqs[nheld++] = got++;
			if (nheld < HOLD && th_rand(&rs) % 4)
				continue;
		} else if (!nheld) {
			poke(p.server);
			continue;
		}
		while (nheld) {
			int i = (int)(th_rand(&rs) % (uint64_t)nheld);

			assert_int_equal(th_check(held[i].data, held[i].len, seqs[i]), -1);
			assert_int_equal(rdmx_msg_release(p.server, &held[i]), 0);
			held[i] = held[--nheld];
			seqs[i] = seqs[nheld];
			if (th_rand(&rs) % 2)
				break;
		}
	}
	while (nheld)
		assert_int_equal(rdmx_msg_release(p.server, &held[--nheld]), 0);
	while (got < sent) {
		recv_one(p.server, wrap_size(got), got, &held[0]);
		rdmx_msg_release(p.server, &held[0]);
		got++;
	}
	th_pair_close(&p);
}

/* The receiver holds the first message: the sender fills the ring up to
 * it and is then told -ETIMEDOUT / -EAGAIN; the held bytes stay intact;
 * once released, everything flows again. */
static void test_held_message_blocks(void **state)
{
	struct rdmx_conn_opts o = ring_opts();
	struct rdmx_msg first, m;
	struct th_pair p;
	uint64_t sent = 0;
	int rc;

	(void)state;
	open_pair(&p, &o);
	send_one(p.client, 2000, 0, 1000);
	sent = 1;
	recv_one(p.server, 2000, 0, &first);
	for (;;) {
		rc = rdmx_msg_alloc(p.client, 2000, &m, 200);
		if (rc)
			break;
		th_fill(m.data, 2000, sent);
		m.len = 2000;
		m.imm = (uint32_t)sent;
		m.flags = RDMX_MSG_IMM;
		assert_int_equal(rdmx_send(p.client, &m), 0);
		sent++;
		/* Drain all but the held one. */
		recv_one(p.server, 2000, sent - 1, &m);
		assert_int_equal(rdmx_msg_release(p.server, &m), 0);
		assert_true(sent < 100);
	}
	assert_int_equal(rc, -ETIMEDOUT);
	assert_int_equal(rdmx_msg_alloc(p.client, 2000, &m, 0), -EAGAIN);
	/* It got as far as a ring allows past one held record. */
	assert_true(sent * rdmx__ring_rec_size(2000) >= RING - rdmx__ring_rec_size(2000));
	assert_int_equal(th_check(first.data, first.len, 0), -1);
	assert_int_equal(rdmx_msg_release(p.server, &first), 0);
	for (uint64_t i = 0; i < 20; i++, sent++) {
		send_one(p.client, 2000, sent, 10000);
		recv_one(p.server, 2000, sent, &m);
		assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	}
	th_pair_close(&p);
}

/* WRITE_WITH_IMM notification: the same stream, taken by completions. */
static void test_notify_imm(void **state)
{
	struct rdmx_conn_opts o = ring_opts();
	struct rdmx_msg m;
	struct th_pair p;
	uint64_t n;
	int rc;

	(void)state;
	o.notify = RDMX_NOTIFY_IMM;
	if (!strcmp(protocol, "write_duplex")) {
		struct rdmx_ctx_opts co = { .fabric = th_fabric() };
		rdmx_ctx *ctx;
		rdmx_conn *c = NULL;

		assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
		rc = rdmx_dial(ctx, th_addr(), 1, &o, &c);
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(rdmx_ctx_error(ctx), "notify"));
		rdmx_ctx_destroy(ctx);
		return;
	}
	open_pair(&p, &o);
	assert_int_equal(stats(p.server).imm, 1);
	stream(&p, 21ull * RING, &n);
	assert_true(p.server->posted_recv > n); /* every message took a receive */
	send_one(p.client, 10, n, 1000);
	recv_one(p.server, 10, n, &m);
	assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	th_pair_close(&p);
}

/* 1,000 small messages, 8 in flight: the ring never fills. */
static uint64_t small_batches(struct th_pair *p, uint64_t seq0)
{
	struct rdmx_msg m;
	uint64_t seq = seq0;

	for (int b = 0; b < 125; b++) {
		for (int i = 0; i < 8; i++)
			send_one(p->client, 64, seq + (uint64_t)i, 20000);
		for (int i = 0; i < 8; i++, seq++) {
			recv_one(p->server, 64, seq, &m);
			assert_int_equal(rdmx_msg_release(p->server, &m), 0);
		}
	}
	return seq - seq0;
}

/*
 * The receiver's verbs while receiving: write_duplex posts no SEND, WRITE,
 * READ or receive at all (its sender READs the head); write_simplex and
 * write_magic return the head with SENDs and nothing else, batched when
 * the ring has room (at most one per 4 messages; a ring kept full by big
 * records needs one per release or so).
 */
static void test_receiver_verbs(void **state)
{
	struct rdmx_conn_opts o = ring_opts();
	struct th_pair p;
	uint64_t before[RDMX__OP_FETCH_ADD + 1], recv_before, n, small, s1, s2;

	(void)state;
	open_pair(&p, &o);
	memcpy(before, p.server->posted, sizeof(before));
	recv_before = p.server->posted_recv;
	stream(&p, 30ull * RING, &n);             /* back-pressure, wrap-around */
	s1 = p.server->posted[RDMX__OP_SEND] - before[RDMX__OP_SEND];
	small = small_batches(&p, n);
	s2 = p.server->posted[RDMX__OP_SEND] - before[RDMX__OP_SEND] - s1;
	assert_int_equal(p.server->posted[RDMX__OP_WRITE], before[RDMX__OP_WRITE]);
	assert_int_equal(p.server->posted[RDMX__OP_READ], before[RDMX__OP_READ]);
	if (!strcmp(protocol, "write_duplex")) {
		assert_int_equal(s1 + s2, 0);
		assert_int_equal(p.server->posted_recv, recv_before);
		assert_true(stats(p.client).head_reads > 0); /* the sender did the work */
	} else {
		assert_true(s1 > 0 && s1 <= n);
		assert_true(s2 * 4 <= small);
		assert_int_equal(stats(p.client).head_reads, 0);
	}
	print_message("%s: receiver posted %llu SENDs for %llu big messages (ring full), %llu for %llu small; no WRITE/READ; sender read the head %llu times\n",
		      protocol, (unsigned long long)s1, (unsigned long long)n,
		      (unsigned long long)s2, (unsigned long long)small,
		      (unsigned long long)stats(p.client).head_reads);
	th_pair_close(&p);
}

/* Dial a listener with @so using @o; returns the dial's result. */
static int dial_mismatch(rdmx_ctx *ctx, const struct rdmx_conn_opts *so,
			 const struct rdmx_conn_opts *o)
{
	struct th_acceptor a = { .timeout_ms = 3000 };
	rdmx_conn *c = NULL;
	int rc;

	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, so, &a.lis), 0);
	th_accept_start(&a);
	rc = rdmx_dial(ctx, th_addr(), rdmx_listener_port(a.lis), o, &c);
	th_accept_join(&a);
	assert_null(c);
	assert_null(a.conn);
	assert_int_equal(rdmx_listener_rejected(a.lis), 1);
	rdmx_listener_destroy(a.lis);
	return rc;
}

/* A ring too small for two records is -EINVAL; ring_size and notify
 * mismatches are rejected with a reason naming what differs. */
static void test_ring_options(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = ring_opts(), so = ring_opts();
	rdmx_conn *c = NULL;
	rdmx_ctx *ctx;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	o.ring_size = 4096;
	o.max_msg_size = 3000;
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, &o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "two records"));
	o = ring_opts();
	o.ring_size = 2 * RING;
	assert_int_equal(dial_mismatch(ctx, &so, &o), -ECONNREFUSED);
	print_message("%s\n", rdmx_ctx_error(ctx));
	assert_non_null(strstr(rdmx_ctx_error(ctx), "ring_size mismatch"));
	if (strcmp(protocol, "write_duplex")) {
		o = ring_opts();
		o.notify = RDMX_NOTIFY_IMM;
		assert_int_equal(dial_mismatch(ctx, &so, &o), -ECONNREFUSED);
		assert_non_null(strstr(rdmx_ctx_error(ctx), "notify mismatch"));
	}
	rdmx_ctx_destroy(ctx);
}

static int is_ring_protocol(const char *name)
{
	return !strcmp(name, "write_simplex") || !strcmp(name, "write_magic") ||
	       !strcmp(name, "write_duplex");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrap_around),
		cmocka_unit_test(test_backpressure_slow_receiver),
		cmocka_unit_test(test_out_of_order_release),
		cmocka_unit_test(test_held_message_blocks),
		cmocka_unit_test(test_notify_imm),
		cmocka_unit_test(test_receiver_verbs),
		cmocka_unit_test(test_ring_options),
	};
	int failed = 0, i = 0;

	while ((protocol = th_next_protocol(&i))) {
		if (!is_ring_protocol(protocol))
			continue;
		print_message("=== ring tests: %s on the %s fabric ===\n", protocol, th_fabric());
		failed += _cmocka_run_group_tests(protocol, tests, sizeof(tests) / sizeof(tests[0]),
						  NULL, NULL);
	}
	return failed;
}
