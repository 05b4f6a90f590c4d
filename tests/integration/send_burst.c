/* SPDX-License-Identifier: MIT */
/*
 * Bursts of sends on every protocol (rdmx_send_flags, RDMX_SEND_MORE):
 * bursts of 1..16 messages of mixed sizes arrive whole and in order, one
 * per rdmx_recv, and the token of a burst's last message completes; what
 * a protocol holds goes out with rdmx_flush() and with an rdmx_wait() for
 * a held send's token, not only with the next plain send; unknown flags
 * are refused with the handle still the caller's.
 *
 * A receiver thread takes the messages: read and buffered_read complete
 * a send (token, flush) only once the receiver took it.
 *
 * The ring protocols coalesce held records into one RDMA WRITE
 * (src/protocols/write_ring_burst.h); on a small ring their bursts wrap
 * the ring's end, meet a slow receiver (the sender blocks with records
 * held) and a peer that leaves with records held. These run on every
 * protocol; for write_simplex/magic/duplex they also check, through the
 * engine's counters, that WRITEs did carry several records.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "protocols/write_ring.h"
#include "send_burst.h"
#include "send_tokens.h"

#define BURST_MAX 16

static size_t big = 4096; /* the largest message: the pair's max_msg_size */

static void pair(struct th_pair *p, const struct rdmx_conn_opts *o)
{
	big = o->max_msg_size;
	cf_pair(p, o, o);
}

/* Sizes 1..big mixed, small ones often (where coalescing pays). */
static size_t mixed(uint64_t i)
{
	return i % 3 ? 1 + (size_t)(i * 37 % 200 % big) :
		       1 + (size_t)(i * 397 % big);
}

/* Send message @seq with @flags; its token. */
static rdmx_token send_seq(rdmx_conn *c, uint64_t seq, unsigned flags)
{
	struct rdmx_msg m;
	rdmx_token tok = 0;
	size_t size = mixed(seq);
	int rc = rdmx_msg_alloc(c, size, &m, 10000);

	if (rc)
		fail_msg("%s: alloc #%llu: %s (%s)", cf_protocol(),
			 (unsigned long long)seq, rdmx_strerror(rc), rdmx_conn_error(c));
	th_fill(m.data, size, seq);
	m.len = size;
	rc = rdmx_send_flags(c, &m, flags, &tok);
	if (rc)
		fail_msg("%s: send #%llu (flags %#x): %s (%s)", cf_protocol(),
			 (unsigned long long)seq, flags, rdmx_strerror(rc),
			 rdmx_conn_error(c));
	return tok;
}

/* The receiver thread: messages 0..n-1 in order, each checked. */
struct taker {
	pthread_t t;
	rdmx_conn *c;
	uint64_t n, got, bad;
	unsigned slow;            /* sleep 1 ms after every this many */
	int rc;
};

static void *take(void *arg)
{
	struct taker *k = arg;
	struct rdmx_msg m;

	while (k->got < k->n) {
		k->rc = rdmx_recv(k->c, &m, 20000);
		if (k->rc)
			break;
		if (m.len != mixed(k->got) || th_check(m.data, m.len, k->got) != -1)
			k->bad++;
		rdmx_msg_release(k->c, &m);
		k->got++;
		if (k->slow && k->got % k->slow == 0)
			usleep(1000);
	}
	return NULL;
}

/* The receiver thread takes @n messages, sleeping 1 ms after every
 * @slow (0: never). */
static void take_slow(struct taker *k, rdmx_conn *c, uint64_t n, unsigned slow)
{
	memset(k, 0, sizeof(*k));
	k->c = c;
	k->n = n;
	k->slow = slow;
	assert_int_equal(pthread_create(&k->t, NULL, take, k), 0);
}

static void take_start(struct taker *k, rdmx_conn *c, uint64_t n)
{
	take_slow(k, c, n, 0);
}

static void take_join(struct taker *k)
{
	pthread_join(k->t, NULL);
	if (k->rc || k->bad || k->got != k->n)
		fail_msg("%s: receiver took %llu of %llu, %llu bad: %s (%s)",
			 cf_protocol(), (unsigned long long)k->got,
			 (unsigned long long)k->n, (unsigned long long)k->bad,
			 rdmx_strerror(k->rc), rdmx_conn_error(k->c));
}

static void wait_ok(rdmx_conn *c, rdmx_token tok, const char *what)
{
	int rc = rdmx_wait(c, tok, 20000);

	if (rc)
		fail_msg("%s: wait for %s: %s (%s)", cf_protocol(), what,
			 rdmx_strerror(rc), rdmx_conn_error(c));
}

/* Bursts of 1, 2, ... 16, 1, ...: each burst's last token completes. */
void test_send_burst_in_order(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	const uint64_t n = th_count(2000);
	struct th_pair p;
	struct taker k;
	uint64_t seq = 0;

	(void)state;
	o.max_msg_size = 4096;
	pair(&p, &o);
	take_start(&k, p.server, n);
	for (unsigned b = 1; seq < n; b = b % BURST_MAX + 1) {
		rdmx_token tok = 0;

		for (unsigned i = 0; i < b && seq < n; i++, seq++)
			tok = send_seq(p.client, seq,
				       i + 1 < b && seq + 1 < n ? RDMX_SEND_MORE : 0);
		wait_ok(p.client, tok, "a burst's last send");
	}
	take_join(&k);
	th_pair_close(&p);
}

/* Held sends go out with rdmx_flush, and with a wait for one's token. */
void test_send_burst_pushed(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	rdmx_token tok;
	struct th_pair p;
	struct taker k;
	int rc;

	(void)state;
	o.max_msg_size = 4096;
	pair(&p, &o);
	take_start(&k, p.server, 8);
	for (uint64_t seq = 0; seq < 4; seq++)
		send_seq(p.client, seq, RDMX_SEND_MORE);
	rc = rdmx_flush(p.client, 20000);
	if (rc)
		fail_msg("%s: flush of 4 held sends: %s (%s)", cf_protocol(),
			 rdmx_strerror(rc), rdmx_conn_error(p.client));
	for (uint64_t seq = 4; seq < 8; seq++)
		tok = send_seq(p.client, seq, RDMX_SEND_MORE);
	wait_ok(p.client, tok, "a held send");
	take_join(&k);
	th_pair_close(&p);
}

/* Unknown flags: -EINVAL, nothing sent, the handle still the caller's. */
void test_send_burst_bad(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	struct rdmx_msg m;
	struct th_pair p;
	struct taker k;

	(void)state;
	o.max_msg_size = 4096;
	pair(&p, &o);
	assert_int_equal(rdmx_msg_alloc(p.client, mixed(0), &m, 10000), 0);
	th_fill(m.data, mixed(0), 0);
	m.len = mixed(0);
	assert_int_equal(rdmx_send_flags(p.client, &m, 1u << 7, NULL), -EINVAL);
	assert_int_equal(rdmx_send_flags(p.client, &m, RDMX_SEND_MORE | 2u, NULL),
			 -EINVAL);
	assert_int_equal(rdmx_send_flags(NULL, &m, 0, NULL), -EINVAL);
	assert_int_equal(rdmx_send_flags(p.client, NULL, RDMX_SEND_MORE, NULL),
			 -EINVAL);
	take_start(&k, p.server, 1);
	assert_int_equal(rdmx_send_flags(p.client, &m, 0, NULL), 0);
	take_join(&k);
	th_pair_close(&p);
}

/* @n messages in bursts of @burst (the last of each without the flag),
 * taken by @k; the last token completes. */
static void send_bursts(rdmx_conn *c, uint64_t n, unsigned burst)
{
	rdmx_token tok = 0;

	for (uint64_t seq = 0; seq < n; seq++)
		tok = send_seq(c, seq, (seq + 1) % burst && seq + 1 < n ? RDMX_SEND_MORE : 0);
	wait_ok(c, tok, "the last send of bursts longer than send_depth");
}

/* Bursts longer than send_depth (an alloc that would wait must ring what
 * is held, or it waits for itself), with signal_every at its edges: 1
 * (every send signaled), send_depth / 2 (two batches fill the queue) and
 * the default. */
void test_send_burst_deep(void **state)
{
	static const uint32_t every[] = { 1, 4, 0 };
	const uint64_t n = th_count(300);

	(void)state;
	for (size_t i = 0; i < sizeof(every) / sizeof(every[0]); i++) {
		struct rdmx_conn_opts o = cf_opts();
		struct th_pair p;
		struct taker k;

		o.max_msg_size = 4096;
		o.send_depth = 8;
		o.signal_every = every[i];
		pair(&p, &o);
		take_start(&k, p.server, n);
		send_bursts(p.client, n, 40);
		take_join(&k);
		th_pair_close(&p);
	}
}

/* A slow receiver with few receive buffers: long bursts meet
 * back-pressure (RNR, credits, ring space) and still arrive whole. */
void test_send_burst_slow_receiver(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	const uint64_t n = th_count(400);
	struct th_pair p;
	struct taker k;

	(void)state;
	o.max_msg_size = 4096;
	o.send_depth = 16;
	o.recv_depth = 8;
	o.signal_every = 8;
	pair(&p, &o);
	take_slow(&k, p.server, n, 8);
	send_bursts(p.client, n, 64);
	take_join(&k);
	th_pair_close(&p);
}

/* The peer closes while sends are held: the burst, a token wait and a
 * flush end (sent, or with the connection's error), never hang. */
void test_send_burst_peer_closes(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	rdmx_token tok = 0, t;
	struct rdmx_msg m;
	struct th_pair p;
	double t0;
	int rc = 0;

	(void)state;
	o.max_msg_size = 4096;
	pair(&p, &o);
	rdmx_conn_close(p.server);
	p.server = NULL;
	t0 = th_now_ms();
	for (uint64_t seq = 0; seq < 6 && !rc; seq++) {
		rc = rdmx_msg_alloc(p.client, 64, &m, 20000);
		if (rc)
			break;
		m.len = 64;
		rc = rdmx_send_flags(p.client, &m, RDMX_SEND_MORE, &t);
		if (rc)
			rdmx_msg_release(p.client, &m);
		else
			tok = t;
	}
	assert_true(rc != -ETIMEDOUT && rc != -EINVAL);
	if (tok) {
		rc = rdmx_wait(p.client, tok, 30000);
		assert_true(rc != -ETIMEDOUT && rc != -EINVAL);
	}
	rc = rdmx_flush(p.client, 30000);
	assert_true(rc != -ETIMEDOUT && rc != -EINVAL);
	assert_true(th_now_ms() - t0 < 25000);
	th_pair_close(&p);
}

/* The engine's counters when @c is a write_simplex/magic/duplex
 * connection that coalesces (notify poll): 1, else 0. */
static int ring_stats(rdmx_conn *c, struct rdmx__wring_stats *st)
{
	return !rdmx__wring_stats(c, st) && !st->imm;
}

/* Bursts of @burst (a ring of 4096 bytes), no wait between them. */
static void bursts(rdmx_conn *c, uint64_t n, unsigned burst)
{
	for (uint64_t seq = 0; seq < n; seq++)
		send_seq(c, seq, (seq + 1) % burst && seq + 1 < n ?
			 RDMX_SEND_MORE : 0);
}

static struct rdmx_conn_opts small_ring(void)
{
	struct rdmx_conn_opts o = cf_opts();

	o.ring_size = 4096;
	o.max_msg_size = 256;
	return o;
}

/* Coalesced records cross the ring's end (a pad, or the double mapping)
 * lap after lap; all arrive whole and in order. */
void test_send_burst_ring_wrap(void **state)
{
	struct rdmx_conn_opts o = small_ring();
	const uint64_t n = th_count(3000);
	struct rdmx__wring_stats st;
	struct th_pair p;
	struct taker k;

	(void)state;
	pair(&p, &o);
	take_start(&k, p.server, n);
	bursts(p.client, n, 13); /* 13: bursts fall across the end anywhere */
	assert_int_equal(rdmx_flush(p.client, 20000), 0);
	take_join(&k);
	if (ring_stats(p.client, &st)) {
		assert_true(st.coalesced > 0);
		/* a span across the end: one WRITE (magic), two pieces else */
		assert_true(st.magic ? st.crossings > 0 : st.split > 0);
	}
	th_pair_close(&p);
}

/* A slow receiver: the sender blocks for room with records held, which
 * must go out first (the receiver cannot release what it never got). */
void test_send_burst_backpressure(void **state)
{
	struct rdmx_conn_opts o = small_ring();
	const uint64_t n = th_count(600);
	struct rdmx__wring_stats st;
	struct th_pair p;
	struct taker k;

	(void)state;
	pair(&p, &o);
	take_slow(&k, p.server, n, 5); /* 1 ms every 5 */
	bursts(p.client, n, 16);
	assert_int_equal(rdmx_flush(p.client, 20000), 0);
	take_join(&k);
	if (ring_stats(p.client, &st))
		assert_true(st.blocked > 0 && st.coalesced > 0);
	th_pair_close(&p);
}

/* The peer leaves while sends are held: pushing them ends with the
 * connection's error, no hang; closing with sends held drops them. */
void test_send_burst_peer_close(void **state)
{
	struct rdmx_conn_opts o = small_ring();
	struct rdmx__wring_stats st;
	struct th_pair p;
	double t0;
	int rc, held;

	(void)state;
	pair(&p, &o);
	for (uint64_t seq = 0; seq < 5; seq++)
		send_seq(p.client, seq, RDMX_SEND_MORE);
	held = ring_stats(p.client, &st) && st.records_out == 5;
	rdmx_conn_close(p.server);
	p.server = NULL;
	t0 = th_now_ms();
	rc = rdmx_flush(p.client, 30000);
	assert_true(th_now_ms() - t0 < 25000);
	assert_int_not_equal(rc, -ETIMEDOUT);
	if (held) /* the held records' WRITE meets a peer that left */
		assert_true(rc < 0);
	th_pair_close(&p);
	pair(&p, &o); /* close with sends held */
	for (uint64_t seq = 0; seq < 3; seq++)
		send_seq(p.client, seq, RDMX_SEND_MORE);
	th_pair_close(&p);
}
