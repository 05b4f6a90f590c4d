/* SPDX-License-Identifier: MIT */
/*
 * buffered_read's own tests on the fake fabric: a sender that publishes
 * more than it wrote, a hostile record, torn progress words, and a
 * window released out of order (the conformance suite covers the rest).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/ring.h"
#include "harness.h"
#include "protocols/buffered_read.h"

static void open_br(struct th_pair *p, uint32_t depth)
{
	struct rdmx_conn_opts o = th_opts("buffered_read", 1024, 0, depth);

	o.ring_size = 65536;
	assert_int_equal(th_pair_open(p, &o, &o), 0);
}

static void expect(rdmx_conn *c, uint64_t seq, size_t len)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_recv(c, &m, 5000), 0);
	assert_int_equal(m.len, len);
	assert_int_equal(th_check(m.data, m.len, seq), -1);
	assert_int_equal(rdmx_msg_release(c, &m), 0);
}

/* A tail published beyond what was written (a torn or lying tail) shows
 * nothing: the records' stamps decide, and the receiver reports nothing
 * of that section as fetched (else the sender's rdmx_flush would return
 * and its close lose what comes); the next real message comes. */
static void test_tail_is_a_hint(void **state)
{
	struct rdmx__br_ctl *ctl;
	struct rdmx_msg m;
	struct th_pair p;
	uint32_t fetched = 0;
	uint64_t w;

	(void)state;
	open_br(&p, 8);
	ctl = rdmx__br_ctl_of(p.client);
	__atomic_store_n(&ctl->tail, rdmx__cword((uint32_t)4096), __ATOMIC_RELEASE);
	assert_int_equal(rdmx_recv(p.server, &m, 50), -ETIMEDOUT);
	w = __atomic_load_n(&rdmx__br_ctl_of(p.server)->pub[0], __ATOMIC_ACQUIRE);
	assert_true(w == 0 || !rdmx__cword_get(w, &fetched));
	assert_int_equal(fetched, 0);
	__atomic_store_n(&ctl->tail, rdmx__cword((uint32_t)0), __ATOMIC_RELEASE);
	assert_int_equal(th_send_seq(p.client, 1, 100, 1000), 0);
	expect(p.server, 1, 100);
	th_pair_close(&p);
}

/* A tail READ caught half written (rxe READs with a byte copy; here its
 * halves disagree) is read again, not taken: a mixed value can run past
 * what was written, and the receiver would report as fetched a section it
 * read before the records were there - rdmx_flush would then return and
 * a close lose them (conformance's peer close, under TSan). */
static void test_torn_tail_not_taken(void **state)
{
	struct rdmx__br_ctl *ctl;
	struct rdmx_msg m;
	struct th_pair p;
	uint64_t real;

	(void)state;
	open_br(&p, 8);
	assert_int_equal(th_send_seq(p.client, 1, 100, 1000), 0);
	expect(p.server, 1, 100);
	ctl = rdmx__br_ctl_of(p.client);
	real = __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE);
	assert_int_equal(real, rdmx__cword((uint32_t)rdmx__ring_rec_size(100)));
	/* the low half of a tail 4 KiB on, the high half of the real one */
	__atomic_store_n(&ctl->tail, (real & 0xffffffff00000000ull) |
			 (uint32_t)(rdmx__ring_rec_size(100) + 4096), __ATOMIC_RELEASE);
	assert_int_equal(rdmx_recv(p.server, &m, 50), -ETIMEDOUT);
	/* nothing past the real tail was fetched, nor reported so */
	assert_int_equal(__atomic_load_n(&rdmx__br_ctl_of(p.server)->pub[0], __ATOMIC_ACQUIRE),
			 real);
	assert_int_equal(th_send_seq(p.client, 2, 100, 1000), 0);
	expect(p.server, 2, 100);
	th_pair_close(&p);
}

/* A stamped record longer than max_msg fails the receiver's connection
 * with -EPROTO; another pair goes on. */
static void test_hostile_record(void **state)
{
	struct th_pair p, q;
	struct rdmx_msg m;
	uint64_t seed;
	uint8_t *ring;

	(void)state;
	open_br(&p, 8);
	open_br(&q, 8);
	ring = rdmx__br_ring(p.client, &seed);
	rdmx__ring_put_rec(ring, seed, 0, 2000, 0, 0);
	__atomic_store_n(&rdmx__br_ctl_of(p.client)->tail,
			 rdmx__cword((uint32_t)rdmx__ring_rec_size(2000)), __ATOMIC_RELEASE);
	assert_int_equal(rdmx_recv(p.server, &m, 5000), -EPROTO);
	assert_int_equal(th_send_seq(q.client, 3, 64, 1000), 0);
	expect(q.server, 3, 64);
	th_pair_close(&q);
	th_pair_close(&p);
}

/* Progress words whose halves disagree are not taken: a sender whose
 * window is full stays blocked until a real release. */
static void test_torn_progress(void **state)
{
	struct rdmx__br_ctl *ctl;
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	open_br(&p, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(th_send_seq(p.client, i, 32, 1000), 0);
	assert_int_equal(rdmx_msg_alloc(p.client, 32, &m, 0), -EAGAIN);
	ctl = rdmx__br_ctl_of(p.client);
	/* "4 released", with a complement that does not match */
	__atomic_store_n(&ctl->rep[2], 4 | (uint64_t)~5u << 32, __ATOMIC_RELEASE);
	assert_int_equal(rdmx_msg_alloc(p.client, 32, &m, 0), -EAGAIN);
	/* the receiver takes and releases one: the sender READs that */
	expect(p.server, 0, 32);
	assert_int_equal(th_send_seq(p.client, 4, 32, 5000), 0);
	for (int i = 1; i < 5; i++)
		expect(p.server, i, 32);
	th_pair_close(&p);
}

/* Held messages released newest first: the head moves only over the
 * released prefix, the sender fills the ring again and again. */
static void test_release_out_of_order(void **state)
{
	struct rdmx_msg held[4];
	struct th_pair p;
	uint64_t seq = 0;

	(void)state;
	open_br(&p, 4);
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < 4; i++)
			assert_int_equal(th_send_seq(p.client, seq + i, 500 + 97 * i, 5000), 0);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(rdmx_recv(p.server, &held[i], 5000), 0);
			assert_int_equal(th_check(held[i].data, held[i].len, seq + i), -1);
		}
		for (int i = 3; i >= 0; i--)
			assert_int_equal(rdmx_msg_release(p.server, &held[i]), 0);
		seq += 4;
	}
	th_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tail_is_a_hint),
		cmocka_unit_test(test_torn_tail_not_taken),
		cmocka_unit_test(test_hostile_record),
		cmocka_unit_test(test_torn_progress),
		cmocka_unit_test(test_release_out_of_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
