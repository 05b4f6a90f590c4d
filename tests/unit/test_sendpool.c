/* SPDX-License-Identifier: MIT */
/*
 * The send pool's bursts (sendpool.h, issue 10) on the fake fabric, for
 * the protocols whose sends are its posts (send_recv, srq): a burst of
 * RDMX_SEND_MORE sends goes out in one doorbell with one signaled work
 * request per signal_every and its last one signaled; unbatched sends
 * keep a doorbell and a completion each; a burst longer than the pool
 * rings when an alloc would wait and retires unsignaled slots with the
 * signaled completion after them. The fake counts the doorbells and
 * signaled requests of the sender's QP (rdmx__fake_sq_counts).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/internal.h"
#include "harness.h"

static const char *const protocols[] = { "send_recv", "srq" };

struct counts {
	unsigned long posts, signaled;
};

static void open_pair(struct th_pair *p, const char *proto, uint32_t depth,
		      uint32_t every)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	o.max_msg_size = 256;
	o.send_depth = depth;
	o.recv_depth = 64;
	o.signal_every = every;
	assert_int_equal(th_pair_open(p, &o, &o), 0);
}

static struct counts counts(const struct th_pair *p)
{
	struct counts k;

	rdmx__fake_sq_counts(p->client->ep, &k.posts, &k.signaled);
	return k;
}

/* @n sends of 64 bytes numbered from @seq, all but the last with @flags. */
static void burst(rdmx_conn *c, uint64_t seq, unsigned n, unsigned flags)
{
	for (unsigned i = 0; i < n; i++) {
		struct rdmx_msg m;

		assert_int_equal(rdmx_msg_alloc(c, 64, &m, 5000), 0);
		th_fill(m.data, 64, seq + i);
		m.len = 64;
		assert_int_equal(rdmx_send_flags(c, &m, i + 1 < n ? flags : 0, NULL), 0);
	}
}

/* Receive @n messages numbered from @seq, in order. */
static void take(rdmx_conn *c, uint64_t seq, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rdmx_msg m;

		assert_int_equal(rdmx_recv(c, &m, 5000), 0);
		assert_int_equal(m.len, 64);
		assert_int_equal(th_check(m.data, 64, seq + i), -1);
		assert_int_equal(rdmx_msg_release(c, &m), 0);
	}
}

/* A burst of 17 is one doorbell; default signal_every (16 here) signals
 * the 16th and the last; signal_every 1 signals all 17. */
static void test_burst_one_doorbell(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		for (uint32_t every = 0; every <= 1; every++) {
			struct th_pair p;
			struct counts a, b;

			open_pair(&p, protocols[i], 64, every);
			a = counts(&p);
			burst(p.client, 0, 17, RDMX_SEND_MORE);
			b = counts(&p);
			assert_int_equal(b.posts - a.posts, 1);
			assert_int_equal(b.signaled - a.signaled, every ? 17 : 2);
			take(p.server, 0, 17);
			assert_int_equal(rdmx_flush(p.client, 5000), 0);
			th_pair_close(&p);
		}
	}
}

/* Unbatched sends are what they were: a doorbell and a completion each. */
static void test_unbatched_unchanged(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct th_pair p;
		struct counts a, b;

		open_pair(&p, protocols[i], 64, 0);
		a = counts(&p);
		burst(p.client, 0, 17, 0);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 17);
		assert_int_equal(b.signaled - a.signaled, 17);
		take(p.server, 0, 17);
		th_pair_close(&p);
	}
}

/* A burst of 40 on 8 slots: every alloc that would wait rings what is
 * held (8 at a time), the slots come back through the signaled
 * completions (signal_every 4: two per chain), all 40 arrive in order,
 * and a flush afterwards finds nothing held. */
static void test_burst_longer_than_pool(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct th_pair p;
		struct counts a, b;

		open_pair(&p, protocols[i], 8, 4);
		a = counts(&p);
		burst(p.client, 0, 40, RDMX_SEND_MORE);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 5);
		assert_int_equal(b.signaled - a.signaled, 10);
		take(p.server, 0, 40);
		assert_int_equal(rdmx_flush(p.client, 5000), 0);
		/* every slot came back: 8 more allocations need no wait */
		burst(p.client, 40, 8, RDMX_SEND_MORE);
		take(p.server, 40, 8);
		th_pair_close(&p);
	}
}

/* A token wait rings what is held, and the token completes. */
static void test_token_rings(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct th_pair p;
		struct counts a, b;
		struct rdmx_msg m;
		rdmx_token tok;

		open_pair(&p, protocols[i], 64, 0);
		a = counts(&p);
		for (unsigned k = 0; k < 3; k++) {
			assert_int_equal(rdmx_msg_alloc(p.client, 64, &m, 5000), 0);
			th_fill(m.data, 64, k);
			m.len = 64;
			assert_int_equal(rdmx_send_flags(p.client, &m, RDMX_SEND_MORE, &tok), 0);
		}
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 0); /* held */
		assert_int_equal(rdmx_wait(p.client, tok, 5000), 0);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 1);
		assert_int_equal(b.signaled - a.signaled, 1);
		take(p.server, 0, 3);
		th_pair_close(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_one_doorbell),
		cmocka_unit_test(test_unbatched_unchanged),
		cmocka_unit_test(test_burst_longer_than_pool),
		cmocka_unit_test(test_token_rings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
