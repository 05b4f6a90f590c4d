/* SPDX-License-Identifier: MIT */
/*
 * direct_write's own tests on the fake fabric: the window is the
 * receiver's advertised buffers, released buffers are advertised again
 * in any order, and a hostile peer's descriptor or footer fails only the
 * connection it was written on (the conformance suite covers the rest).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/wire.h"
#include "harness.h"
#include "protocols/direct_write.h"

static void open_dw(struct th_pair *p, uint16_t depth)
{
	struct rdmx_conn_opts o = th_opts("direct_write", 1024, depth, depth);

	assert_int_equal(th_pair_open(p, &o, &o), 0);
}

/* Messages held out of order, released in reverse: each buffer is
 * advertised again, every later message intact, the sender never blocked
 * beyond the receiver's buffers. */
static void test_release_out_of_order(void **state)
{
	struct rdmx_msg held[4], m;
	struct th_pair p;
	uint64_t seq = 0;

	(void)state;
	open_dw(&p, 4);
	for (int round = 0; round < 50; round++) {
		for (int i = 0; i < 4; i++)
			assert_int_equal(th_send_seq(p.client, seq + i, 8 + 37 * i, 5000), 0);
		/* the window is four buffers: a fifth does not fit */
		assert_int_equal(rdmx_msg_alloc(p.client, 8, &m, 0), -EAGAIN);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(rdmx_recv(p.server, &held[i], 5000), 0);
			assert_int_equal(held[i].len, 8 + 37 * i);
			assert_int_equal(th_check(held[i].data, held[i].len, seq + i), -1);
			assert_int_equal((uintptr_t)held[i].data % 8, 0);
		}
		for (int i = 3; i >= 0; i--)
			assert_int_equal(rdmx_msg_release(p.server, &held[i]), 0);
		seq += 4;
	}
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

/* Immediate data travels in the footer. */
static void test_imm(void **state)
{
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	open_dw(&p, 4);
	assert_int_equal(rdmx_msg_alloc(p.client, 0, &m, 1000), 0);
	m.len = 0;
	m.imm = 0xfeedbeef;
	m.flags = RDMX_MSG_IMM;
	assert_int_equal(rdmx_send(p.client, &m), 0);
	assert_int_equal(rdmx_recv(p.server, &m, 5000), 0);
	assert_int_equal(m.len, 0);
	assert_int_equal(m.flags, RDMX_MSG_IMM);
	assert_int_equal(m.imm, 0xfeedbeef);
	assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	th_pair_close(&p);
}

/* Write descriptor @n naming buffer @idx into @c's ring, as its peer
 * would (number last). */
static void poke_desc(rdmx_conn *c, uint64_t n, uint32_t idx)
{
	uint8_t *e = rdmx__dw_desc_at(c, n);
	uint64_t v;

	rdmx__put_u32(e, idx);
	rdmx__put_u64((uint8_t *)&v, n);
	__atomic_store_n((uint64_t *)(void *)(e + 8), v, __ATOMIC_RELEASE);
}

/* A descriptor naming a buffer the peer does not have fails the sender's
 * connection (-EPROTO with a message); a second pair is untouched. */
static void test_hostile_descriptor(void **state)
{
	struct th_pair p, q;
	struct rdmx_msg m;

	(void)state;
	open_dw(&p, 4);
	open_dw(&q, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(th_send_seq(p.client, i, 16, 1000), 0);
	poke_desc(p.client, 5, 4); /* the peer has buffers 0..3 */
	assert_int_equal(rdmx_msg_alloc(p.client, 16, &m, 1000), -EPROTO);
	assert_non_null(strstr(rdmx_conn_error(p.client), "descriptor 5 names buffer 4 of 4"));
	assert_int_equal(th_send_seq(q.client, 0, 16, 1000), 0);
	assert_int_equal(rdmx_recv(q.server, &m, 5000), 0);
	assert_int_equal(th_check(m.data, m.len, 0), -1);
	assert_int_equal(rdmx_msg_release(q.server, &m), 0);
	th_pair_close(&q);
	th_pair_close(&p);
}

/* Write a footer for the next message into @c's buffer, as its peer's
 * WRITE would (number last). */
static void poke_footer(rdmx_conn *c, uint32_t len, uint32_t flags, uint64_t n)
{
	uint8_t *f = rdmx__dw_next_footer(c);
	uint64_t v;

	rdmx__put_u32(f, len);
	rdmx__put_u32(f + 4, 0);
	rdmx__put_u32(f + 8, flags);
	rdmx__put_u64((uint8_t *)&v, n);
	__atomic_store_n((uint64_t *)(void *)(f + 16), v, __ATOMIC_RELEASE);
}

/* Footers that cannot be: a length above max_msg, an unknown flag. The
 * receiver's connection fails with -EPROTO; a footer with another number
 * is not a message at all. */
static void test_hostile_footer(void **state)
{
	static const struct { uint32_t len, flags; const char *msg; } bad[] = {
		{ 1025, 0, "says 1025 bytes" },
		{ UINT32_MAX, 0, "says 4294967295 bytes" },
		{ 8, 0x80, "flags 0x80" },
	};
	struct rdmx_msg m;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct th_pair p;

		open_dw(&p, 4);
		poke_footer(p.server, 8, 0, 7); /* not message 1: nothing */
		assert_int_equal(rdmx_recv(p.server, &m, 0), -EAGAIN);
		poke_footer(p.server, bad[i].len, bad[i].flags, 1);
		assert_int_equal(rdmx_recv(p.server, &m, 1000), -EPROTO);
		assert_non_null(strstr(rdmx_conn_error(p.server), bad[i].msg));
		th_pair_close(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_out_of_order),
		cmocka_unit_test(test_imm),
		cmocka_unit_test(test_hostile_descriptor),
		cmocka_unit_test(test_hostile_footer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
