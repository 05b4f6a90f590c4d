/* SPDX-License-Identifier: MIT */
/*
 * Per-send completions on every protocol: rdmx_send_tok()'s tokens
 * complete in send order, a wait for one does not wait for later sends,
 * bad tokens are -EINVAL, a pending send of a connection whose peer left
 * ends with the connection's error within the wait's bound. And what
 * rdmx.h says about a failed send's buffer (still the caller's) and about
 * rdmx_conn_close (it does not drain: complete sends are delivered, the
 * others are not).
 *
 * "Pending" needs a send that cannot complete while the receiver holds
 * its buffers: send_recv (the SEND meets no posted receive: RNR, retried
 * forever) and read (no receive buffer: no READ, no ack). The others
 * complete every send they let the sender allocate (srq's credits, the
 * rings' window and space are checked at rdmx_msg_alloc).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "send_tokens.h"

#define HELD 4      /* the receiver's recv_depth: messages it holds */
#define BURST 8     /* sends tried against it */
#define SIZE 2048   /* above read's eager_max: a READ per message */

static int can_pend(void)
{
	return !strcmp(cf_protocol(), "send_recv") || !strcmp(cf_protocol(), "read");
}


/* Send message @seq of @size bytes; its token. */
static rdmx_token send_one(rdmx_conn *c, size_t size, uint64_t seq)
{
	struct rdmx_msg m;
	rdmx_token tok = 0;
	int rc = rdmx_msg_alloc(c, size, &m, 10000);

	if (rc)
		fail_msg("alloc: %s (%s)", rdmx_strerror(rc), rdmx_conn_error(c));
	th_fill(m.data, size, seq);
	m.len = size;
	rc = rdmx_send_tok(c, &m, &tok);
	if (rc)
		fail_msg("send: %s (%s)", rdmx_strerror(rc), rdmx_conn_error(c));
	return tok;
}

/* Receive message @seq; kept in @held, else released. */
static void recv_one(rdmx_conn *c, size_t size, uint64_t seq,
		     struct rdmx_msg *held)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(c, &m, 20000);

	if (rc)
		fail_msg("recv #%llu: %s (%s)", (unsigned long long)seq,
			 rdmx_strerror(rc), rdmx_conn_error(c));
	assert_int_equal(m.len, size);
	assert_int_equal(th_check(m.data, m.len, seq), -1);
	if (held)
		*held = m;
	else
		assert_int_equal(rdmx_msg_release(c, &m), 0);
}

static void wait_ok(rdmx_conn *c, rdmx_token tok, int timeout_ms)
{
	int rc = rdmx_wait(c, tok, timeout_ms);

	if (rc)
		fail_msg("%s: rdmx_wait(%d ms): %s (%s)", cf_protocol(), timeout_ms,
			 rdmx_strerror(rc), rdmx_conn_error(c));
}

/* Sizes 1..4096 mixed: read sends some eagerly (acked as soon as copied)
 * and some by READ (acked after it), so its acks come out of order. */
static size_t mixed(uint64_t i)
{
	return 1 + (size_t)(i * 397 % 4096);
}

/* Tokens of a stream, 16 in flight: increasing, and a completed one
 * means every earlier one completed (polls give 0, again and again). */
void test_send_tokens_in_order(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	const uint64_t n = th_count(2000);
	rdmx_token *tok = calloc(n, sizeof(*tok));
	struct th_pair p;

	(void)state;
	assert_non_null(tok);
	o.max_msg_size = 4096;
	cf_pair(&p, &o, &o);
	for (uint64_t sent = 0, got = 0; got < n;) {
		while (sent < n && sent - got < 16) {
			tok[sent] = send_one(p.client, mixed(sent), sent);
			if (sent)
				assert_true(tok[sent] > tok[sent - 1]);
			sent++;
		}
		recv_one(p.server, mixed(got), got, NULL);
		if (++got % 5)
			continue;
		wait_ok(p.client, tok[got - 1], 10000);
		for (uint64_t j = got - 5; j < got; j++)
			wait_ok(p.client, tok[j], 0);
	}
	wait_ok(p.client, tok[n - 1], 10000);
	for (uint64_t i = 0; i < n; i++)
		wait_ok(p.client, tok[i], 0);
	free(tok);
	th_pair_close(&p);
}

/*
 * The receiver (recv_depth HELD) takes HELD messages and holds them; the
 * sender tried BURST. Returns how many it sent, tokens in @tok, the held
 * messages in @held.
 */
static unsigned burst_held(struct th_pair *p, rdmx_token *tok,
			   struct rdmx_msg *held)
{
	struct rdmx_conn_opts so = cf_opts(), co = cf_opts();
	unsigned sent = 0;
	struct rdmx_msg m;
	int rc;

	so.recv_depth = HELD;
	co.send_depth = 16;
	cf_pair(p, &so, &co);
	for (; sent < BURST; sent++) {
		rc = rdmx_msg_alloc(p->client, SIZE, &m, 300);
		if (rc == -ETIMEDOUT)
			break;
		assert_int_equal(rc, 0);
		th_fill(m.data, SIZE, sent);
		m.len = SIZE;
		assert_int_equal(rdmx_send_tok(p->client, &m, &tok[sent]), 0);
	}
	assert_true(sent >= HELD);
	for (unsigned i = 0; i < HELD; i++)
		recv_one(p->server, SIZE, i, &held[i]);
	/* read: the receiver's acks go out at its next call */
	assert_int_equal(rdmx_flush(p->server, 0), 0);
	return sent;
}

static void release_all(rdmx_conn *c, struct rdmx_msg *held, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(rdmx_msg_release(c, &held[i]), 0);
}

/* Waiting for the HELD-th send returns while later ones cannot complete
 * (send_recv, read): they stay pending, the connection unflushed. */
void test_send_tokens_no_flush(void **state)
{
	struct rdmx_msg held[HELD];
	rdmx_token tok[BURST];
	struct th_pair p;
	unsigned sent;

	(void)state;
	sent = burst_held(&p, tok, held);
	wait_ok(p.client, tok[HELD - 1], 10000);
	for (unsigned i = 0; i < HELD; i++)
		wait_ok(p.client, tok[i], 0);
	if (can_pend()) {
		assert_int_equal(sent, BURST);
		assert_int_equal(rdmx_wait(p.client, tok[HELD], 0), -EAGAIN);
		assert_int_equal(rdmx_wait(p.client, tok[sent - 1], 0), -EAGAIN);
		assert_int_equal(rdmx_wait(p.client, tok[sent - 1], 30), -ETIMEDOUT);
		assert_non_null(strstr(rdmx_conn_error(p.client), "not complete within"));
		assert_int_equal(rdmx_flush(p.client, 0), -ETIMEDOUT);
	} else {
		wait_ok(p.client, tok[sent - 1], 10000);
	}
	release_all(p.server, held, HELD);
	for (unsigned i = HELD; i < sent; i++)
		recv_one(p.server, SIZE, i, NULL);
	wait_ok(p.client, tok[sent - 1], 10000);
	th_pair_close(&p);
}

/* Another connection's token, a closed connection's, forged ones. */
void test_send_tokens_bad(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	rdmx_token tc, ts, tq, tok = 12345;
	struct th_pair p, q;
	struct rdmx_msg m;

	(void)state;
	cf_pair(&p, &o, &o);
	cf_pair(&q, &o, &o);
	tc = send_one(p.client, 8, 0);
	ts = send_one(p.server, 8, 1);
	tq = send_one(q.client, 8, 2);
	recv_one(q.server, 8, 2, NULL);
	wait_ok(q.client, tq, 10000);
	th_pair_close(&q);
	assert_int_equal(rdmx_wait(NULL, tc, 0), -EINVAL);
	assert_int_equal(rdmx_wait(p.client, ts, 0), -EINVAL);
	assert_int_equal(rdmx_wait(p.server, tc, 0), -EINVAL);
	assert_int_equal(rdmx_wait(p.client, tq, 0), -EINVAL);
	assert_int_equal(rdmx_wait(p.client, tc + 1, 0), -EINVAL);   /* not sent */
	assert_int_equal(rdmx_wait(p.client, tc - 1, 0), -EINVAL);   /* send #0 */
	assert_int_equal(rdmx_wait(p.client, tc ^ (UINT64_C(1) << 50), 0), -EINVAL);
	assert_int_equal(rdmx_wait(p.client, tc | (UINT64_C(1) << 40), 1000), -EINVAL);
	/* the real ones still work; a failed send sets no token */
	recv_one(p.server, 8, 0, NULL);
	recv_one(p.client, 8, 1, NULL);
	wait_ok(p.client, tc, 10000);
	wait_ok(p.server, ts, 10000);
	assert_int_equal(rdmx_msg_alloc(p.client, 8, &m, 1000), 0);
	m.len = m.cap + 1;
	assert_int_equal(rdmx_send_tok(p.client, &m, &tok), -EMSGSIZE);
	assert_int_equal(tok, 12345);
	m.len = 8;
	th_fill(m.data, 8, 3);
	assert_int_equal(rdmx_send_tok(p.client, &m, NULL), 0);
	recv_one(p.server, 8, 3, NULL);
	th_pair_close(&p);
}

/*
 * The receiver leaves while sends are pending (send_recv, read) or after
 * they completed (the others): a completed send's token still says 0, a
 * pending one's wait ends with the connection's error, within its bound.
 */
void test_send_tokens_peer_gone(void **state)
{
	struct rdmx_msg held[HELD];
	rdmx_token tok[BURST];
	struct th_pair p;
	unsigned sent;
	double t0;
	int rc;

	(void)state;
	sent = burst_held(&p, tok, held);
	wait_ok(p.client, tok[can_pend() ? HELD - 1 : sent - 1], 10000);
	rdmx_conn_close(p.server); /* holding HELD messages */
	p.server = NULL;
	t0 = th_now_ms();
	rc = rdmx_wait(p.client, tok[sent - 1], 30000);
	if (can_pend()) {
		assert_true(rc < 0 && rc != -ETIMEDOUT && rc != -EINVAL);
		assert_true(th_now_ms() - t0 < 25000);
		assert_int_equal(rdmx_flush(p.client, 1000), rc);
	} else {
		assert_int_equal(rc, 0);
	}
	wait_ok(p.client, tok[HELD - 1], 0);
	th_pair_close(&p);
}

/* Check @m is still the caller's on @c, then give it back. */
static void still_mine(rdmx_conn *c, struct rdmx_msg *m)
{
	assert_ptr_equal(rdmx_msg_conn(m), c);
	assert_int_equal(rdmx_msg_release(c, m), 0);
	assert_null(rdmx_msg_conn(m));
}

/* A failed send leaves the buffer the caller's: too long, or on a
 * connection that is down; it is released (or sent) afterwards. */
void test_send_failed_keeps_buffer(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	struct rdmx_msg m, r;
	struct th_pair p;
	double t0;
	int rc;

	(void)state;
	cf_pair(&p, &o, &o);
	assert_int_equal(rdmx_msg_alloc(p.client, 64, &m, 1000), 0);
	m.len = m.cap + 1;
	assert_int_equal(rdmx_send(p.client, &m), -EMSGSIZE);
	still_mine(p.client, &m);
	assert_int_equal(rdmx_msg_alloc(p.client, 64, &m, 1000), 0);
	rdmx_conn_close(p.server);
	p.server = NULL;
	t0 = th_now_ms();
	do
		rc = rdmx_recv(p.client, &r, 1000);
	while (rc == -ETIMEDOUT && th_now_ms() - t0 < 20000);
	assert_int_equal(rc, -ECONNRESET);
	m.len = 64;
	assert_int_equal(rdmx_send(p.client, &m), -ECONNRESET);
	still_mine(p.client, &m);
	th_pair_close(&p);
}

/*
 * rdmx_conn_close does not drain: it returns at once with sends pending,
 * the peer receives exactly the sends that had completed, and no other.
 */
void test_send_close_no_drain(void **state)
{
	struct rdmx_msg held[HELD], r;
	rdmx_token tok[BURST];
	unsigned sent, done = 0, got = HELD;
	struct th_pair p;
	double t0;
	int rc;

	(void)state;
	sent = burst_held(&p, tok, held);
	wait_ok(p.client, tok[HELD - 1], 10000);
	if (!can_pend())
		wait_ok(p.client, tok[sent - 1], 10000);
	while (done < sent && !rdmx_wait(p.client, tok[done], 0))
		done++;
	assert_int_equal(done, can_pend() ? HELD : sent);
	t0 = th_now_ms();
	rdmx_conn_close(p.client);
	p.client = NULL;
	assert_true(th_now_ms() - t0 < 2000);
	release_all(p.server, held, HELD);
	while (!(rc = rdmx_recv(p.server, &r, 20000))) {
		assert_int_equal(th_check(r.data, r.len, got), -1);
		assert_int_equal(rdmx_msg_release(p.server, &r), 0);
		got++;
	}
	assert_true(rc < 0 && rc != -ETIMEDOUT);
	assert_int_equal(got, done);
	th_pair_close(&p);
}
