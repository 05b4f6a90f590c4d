/* SPDX-License-Identifier: MIT */
/*
 * The ring variants' peer-written words against a hostile peer, on the
 * fake fabric: notify OFF's tail word and notify REV's records. The test
 * writes into the receiver's memory what a peer's RDMA WRITE could put
 * there; the receiver must read each word once, refuse a bad one with
 * -EPROTO on that connection only (a second pair keeps working), and
 * never hand out a message from it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/ring.h"
#include "core/wire.h"
#include "harness.h"
#include "protocols/write_ring_priv.h"

#define RING 16384u

static struct rdmx_conn_opts ring_opts(const char *proto, uint8_t notify)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	o.ring_size = RING;
	o.max_msg_size = 2048;
	o.notify = notify;
	return o;
}

static void open_pair(struct th_pair *p, const struct rdmx_conn_opts *o)
{
	int rc = th_pair_open(p, o, o);

	if (rc)
		fail_msg("cannot connect a pair: %s (%s)", rdmx_strerror(rc),
			 rdmx_last_error());
}

static void send_one(rdmx_conn *c, size_t size, uint64_t seq)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_msg_alloc(c, size, &m, 5000), 0);
	th_fill(m.data, size, seq);
	m.len = size;
	assert_int_equal(rdmx_send(c, &m), 0);
}

static void recv_one(rdmx_conn *c, size_t size, uint64_t seq)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_recv(c, &m, 5000), 0);
	assert_int_equal(m.len, size);
	assert_true(th_check(m.data, m.len, seq) < 0);
	assert_int_equal(rdmx_msg_release(c, &m), 0);
}

/* The victim's receiver sees the forgery: -EPROTO naming @why, the
 * connection down; the bystander pair still carries messages. */
static void expect_refused(struct th_pair *victim, struct th_pair *bystander,
			   const char *why)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(victim->server, &m, 1000);

	if (rc != -EPROTO)
		fail_msg("expected -EPROTO (%s), got %s (%s)", why, rdmx_strerror(rc),
			 rdmx_conn_error(victim->server));
	if (!strstr(rdmx_conn_error(victim->server), why))
		fail_msg("error '%s' does not say '%s'", rdmx_conn_error(victim->server), why);
	assert_int_equal(rdmx_recv(victim->server, &m, 0), -EPROTO);
	send_one(bystander->client, 100, 9);
	recv_one(bystander->server, 100, 9);
}

/* The receiver's own state and control words (the fake fabric runs both
 * ends in this process). */
static struct wring *wr(rdmx_conn *c)
{
	return c->priv;
}

/* One OFF forgery: after one honest message, the word @forge makes is
 * written into the victim receiver's tail word. */
static void off_case(const char *proto, uint64_t (*forge)(struct wring *p),
		     const char *why)
{
	struct rdmx_conn_opts o = ring_opts(proto, RDMX_NOTIFY_OFF);
	struct th_pair v, b;
	struct wring *p;

	open_pair(&v, &o);
	open_pair(&b, &o);
	send_one(v.client, 100, 1);
	recv_one(v.server, 100, 1);
	p = wr(v.server);
	assert_int_equal(p->tail_seen, p->rd);
	__atomic_store_n(&p->ctl->tail, forge(p), __ATOMIC_RELEASE);
	expect_refused(&v, &b, why);
	th_pair_close(&b);
	th_pair_close(&v);
}

static uint64_t tail_back(struct wring *p)
{
	return rdmx__cword((uint32_t)p->rd - 16);
}

static uint64_t tail_far(struct wring *p)
{
	return rdmx__cword((uint32_t)p->rd + RING + 16);
}

static uint64_t tail_odd(struct wring *p)
{
	return rdmx__cword((uint32_t)p->rd + 8);
}

static uint64_t tail_empty(struct wring *p) /* no record behind it */
{
	return rdmx__cword((uint32_t)p->rd + 64);
}

/* Halves that disagree, and stay so: not a WRITE landing, a forgery. */
static uint64_t tail_torn(struct wring *p)
{
	return rdmx__cword((uint32_t)p->rd + 64) ^ 0x0000ff0000000000ull;
}

static uint64_t tail_short(struct wring *p) /* a record ending past it */
{
	struct rdmx__ring_rec_view v;
	uint8_t *rec = p->ring + (p->rd & p->rgeo.mask);

	memset(rec + RDMX__RING_HDR, 0, 200);
	rdmx__ring_put_rec(rec, p->rseed, p->rd, 200, 0, 0);
	assert_int_equal(rdmx__ring_peek(&p->rgeo, rec, p->rseed, p->rd, 2048, 1, &v), 1);
	return rdmx__cword((uint32_t)p->rd + 32);
}

static void test_off_tail_word(void **state)
{
	static const char *const protos[] = { "write_simplex", "write_magic", "write_duplex" };

	(void)state;
	rdmx__wring_torn_ms = 50;
	for (int i = 0; i < 3; i++) {
		off_case(protos[i], tail_torn, "fails its check");
		off_case(protos[i], tail_back, "tail word");
		off_case(protos[i], tail_far, "tail word");
		off_case(protos[i], tail_odd, "tail word");
		off_case(protos[i], tail_empty, "tail word without a record");
		off_case(protos[i], tail_short, "ends past the tail word");
	}
	rdmx__wring_torn_ms = RDMX__WRING_TORN_MS;
}

/* A tail word caught half written (rxe places a WRITE's bytes with
 * memcpy: some new, some old) is neither a record nor an error: the
 * receive finds nothing, and the next whole word delivers. */
static void test_off_torn_word_read_again(void **state)
{
	struct rdmx_conn_opts o = ring_opts("write_magic", RDMX_NOTIFY_OFF);
	struct th_pair v;
	struct rdmx_msg m;
	struct wring *p;
	uint64_t was;

	(void)state;
	open_pair(&v, &o);
	send_one(v.client, 100, 1);
	recv_one(v.server, 100, 1);
	p = wr(v.server);
	was = p->ctl->tail;
	/* the low half of the next tail, the high half still the last one's */
	__atomic_store_n(&p->ctl->tail, (rdmx__cword((uint32_t)p->rd + 160) & 0xffffffffull) |
			 (was & 0xffffffff00000000ull), __ATOMIC_RELEASE);
	assert_int_equal(rdmx_recv(v.server, &m, 0), -EAGAIN);
	assert_int_equal(rdmx_recv(v.server, &m, 20), -ETIMEDOUT);
	send_one(v.client, 100, 2); /* its tail WRITE makes the word whole */
	recv_one(v.server, 100, 2);
	th_pair_close(&v);
}

/* One REV forgery: a trailer with @len, @size, @valid, @flags at the top
 * of the victim receiver's next slot. */
static void rev_case(const char *proto, uint32_t len, uint32_t size,
		     uint8_t valid, uint16_t flags, const char *why)
{
	struct rdmx_conn_opts o = ring_opts(proto, RDMX_NOTIFY_REV);
	struct rdmx__ring_rev_trl *t;
	struct th_pair v, b;
	struct wring *p;
	uint64_t top;

	open_pair(&v, &o);
	open_pair(&b, &o);
	send_one(v.client, 100, 1);
	recv_one(v.server, 100, 1);
	p = wr(v.server);
	top = RING - (p->rd & p->rgeo.mask);
	t = (void *)(p->ring + top - RDMX__RING_REV_TRL);
	t->len = len;
	t->size = size;
	t->flags = flags;
	__atomic_store_n(&t->valid, valid, __ATOMIC_RELEASE);
	expect_refused(&v, &b, why);
	th_pair_close(&b);
	th_pair_close(&v);
}

static void test_rev_records(void **state)
{
	static const char *const protos[] = { "write_simplex", "write_duplex" };

	(void)state;
	for (int i = 0; i < 2; i++) {
		rev_case(protos[i], 100, 128, 2, 0, "valid byte");
		rev_case(protos[i], 4000, 4096, 1, 0, "does not fit");
		rev_case(protos[i], 100, 120, 1, 0, "does not fit");
		rev_case(protos[i], 100, 64, 1, 0, "does not fit");
		rev_case(protos[i], 100, 2 * RING, 1, 0, "does not fit");
	}
}

/* A forged pad at a lap's start (where none can be) on REV. */
static void test_rev_pad_at_lap_start(void **state)
{
	struct rdmx_conn_opts o = ring_opts("write_simplex", RDMX_NOTIFY_REV);
	struct th_pair v, b;
	struct wring *p;

	(void)state;
	open_pair(&v, &o);
	open_pair(&b, &o);
	p = wr(v.server);
	assert_int_equal(p->rd, 0);
	rdmx__ring_rev_put(p->ring + RING - 16, 16, 0, 0, RDMX__RING_REC_PAD);
	expect_refused(&v, &b, "pad record");
	th_pair_close(&b);
	th_pair_close(&v);
}

/* Dial a listener of @so with @co: the refusal's text has @why. */
static void dial_refused(const struct rdmx_conn_opts *so,
			 const struct rdmx_conn_opts *co, const char *why)
{
	struct rdmx_ctx_opts xo = { .fabric = th_fabric() };
	struct th_acceptor a = { .timeout_ms = 300 };
	rdmx_conn *c = NULL;
	rdmx_ctx *ctx;

	assert_int_equal(rdmx_ctx_create(&ctx, &xo), 0);
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, so, &a.lis), 0);
	th_accept_start(&a);
	assert_int_not_equal(rdmx_dial(ctx, th_addr(), rdmx_listener_port(a.lis), co, &c), 0);
	if (!strstr(rdmx_ctx_error(ctx), why))
		fail_msg("refusal '%s' does not say '%s'", rdmx_ctx_error(ctx), why);
	assert_null(c);
	assert_int_not_equal(th_accept_join(&a), 0); /* nothing came up */
	rdmx_listener_destroy(a.lis);
	rdmx_ctx_destroy(ctx);
}

/* A mismatch of notify or ack is refused at connect, naming both. */
static void test_variant_mismatch(void **state)
{
	struct rdmx_conn_opts so = ring_opts("write_simplex", RDMX_NOTIFY_OFF);
	struct rdmx_conn_opts co = ring_opts("write_simplex", RDMX_NOTIFY_REV);
	struct th_pair p;

	(void)state;
	dial_refused(&so, &co, "notify mismatch: this side off, peer rev");
	co.notify = RDMX_NOTIFY_OFF;
	co.ack = RDMX_ACK_READ;
	dial_refused(&so, &co, "ack mismatch: this side send, peer read");
	co.ack = RDMX_ACK_SEND; /* write_simplex's default, spelled out */
	assert_int_equal(th_pair_open(&p, &so, &co), 0);
	send_one(p.client, 10, 3);
	recv_one(p.server, 10, 3);
	th_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_tail_word),
		cmocka_unit_test(test_off_torn_word_read_again),
		cmocka_unit_test(test_rev_records),
		cmocka_unit_test(test_rev_pad_at_lap_start),
		cmocka_unit_test(test_variant_mismatch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
