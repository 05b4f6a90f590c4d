/* SPDX-License-Identifier: MIT */
/*
 * rdmx_recv_many / rdmx_msg_release_many on every protocol: messages of
 * mixed sizes sent in bursts arrive whole and in order across vectors of
 * 1..16, never more than asked; a vector smaller than what is queued
 * takes the rest on the next calls; on a small ring the vectors span the
 * ring's end lap after lap; an idle connection says -EAGAIN for timeout
 * 0; a peer that leaves has every message it sent delivered, then
 * -ECONNRESET (kept, not lost, when met after messages of a vector);
 * bad arguments are -EINVAL, and a release of a vector with a spent
 * handle in it still releases the others.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "recv_many.h"
#include "send_tokens.h"

#define VEC_MAX 16

/* Message @seq's size: 1..200, small ones often (fits a 256-byte max). */
static size_t size_of(uint64_t seq)
{
	return seq % 4 ? 1 + (size_t)(seq * 37 % 64) : 1 + (size_t)(seq * 397 % 200);
}

static void send_one(rdmx_conn *c, uint64_t seq, unsigned flags)
{
	struct rdmx_msg m;
	size_t size = size_of(seq);
	int rc = rdmx_msg_alloc(c, size, &m, 20000);

	if (!rc) {
		th_fill(m.data, size, seq);
		m.len = size;
		rc = rdmx_send_flags(c, &m, flags, NULL);
	}
	if (rc)
		fail_msg("%s: send #%llu: %s (%s)", cf_protocol(),
			 (unsigned long long)seq, rdmx_strerror(rc), rdmx_conn_error(c));
}

/* Messages @from..@to-1 in bursts of @burst (RDMX_SEND_MORE but the last). */
static void send_bursts(rdmx_conn *c, uint64_t from, uint64_t to, unsigned burst)
{
	for (uint64_t seq = from; seq < to; seq++)
		send_one(c, seq, (seq + 1) % burst && seq + 1 < to ? RDMX_SEND_MORE : 0);
}

/* Vector @m of @n taken as messages @first.. : how many are wrong. */
static uint64_t check_vec(const struct rdmx_msg *m, int n, uint64_t first)
{
	uint64_t bad = 0;

	for (int i = 0; i < n; i++)
		bad += m[i].len != size_of(first + i) ||
		       th_check(m[i].data, m[i].len, first + i) != -1;
	return bad;
}

/* A receiver thread taking @n messages by vectors of @max (0: 1..16 in
 * turn), each checked and released with one rdmx_msg_release_many. */
struct vtaker {
	pthread_t t;
	rdmx_conn *c;
	uint64_t n, got, bad, over, multi;
	int max, rc;
};

static void *vtake(void *arg)
{
	struct vtaker *k = arg;
	struct rdmx_msg m[VEC_MAX];

	for (unsigned call = 0; k->got < k->n; call++) {
		int want = k->max ? k->max : 1 + (int)(call % VEC_MAX);
		int n = rdmx_recv_many(k->c, m, want, 20000);

		if (n < 0) {
			k->rc = n;
			break;
		}
		k->over += n > want;
		k->multi += n > 1;
		k->bad += check_vec(m, n, k->got);
		k->got += (uint64_t)n;
		if ((k->rc = rdmx_msg_release_many(k->c, m, n)))
			break;
	}
	return NULL;
}

static void vtake_start(struct vtaker *k, rdmx_conn *c, uint64_t n, int max)
{
	memset(k, 0, sizeof(*k));
	k->c = c;
	k->n = n;
	k->max = max;
	assert_int_equal(pthread_create(&k->t, NULL, vtake, k), 0);
}

static void vtake_join(struct vtaker *k)
{
	pthread_join(k->t, NULL);
	if (k->rc || k->bad || k->over || k->got != k->n)
		fail_msg("%s: vector receiver took %llu of %llu, %llu bad, %llu vectors over their max: %s (%s)",
			 cf_protocol(), (unsigned long long)k->got,
			 (unsigned long long)k->n, (unsigned long long)k->bad,
			 (unsigned long long)k->over, rdmx_strerror(k->rc),
			 rdmx_conn_error(k->c));
}

/* buffered_read's receiver pulls: its sender's flush needs a receiver. */
static int receiver_pulls(void)
{
	return !strcmp(cf_protocol(), "buffered_read");
}

void test_recv_many_in_order(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	const uint64_t n = th_count(1000);
	struct th_pair p;
	struct vtaker k;
	uint64_t seq = 0;

	(void)state;
	o.max_msg_size = 256;
	cf_pair(&p, &o, &o);
	vtake_start(&k, p.server, n, 0);
	for (unsigned burst = 1; seq < n; burst = burst % VEC_MAX + 1) {
		uint64_t to = seq + burst < n ? seq + burst : n;

		send_bursts(p.client, seq, to, burst);
		seq = to;
	}
	assert_int_equal(rdmx_flush(p.client, 20000), 0);
	vtake_join(&k);
	th_pair_close(&p);
}

/* Take @n messages from @c by vectors of at most 3, in one thread. The
 * messages are all in (flushed): on the fake fabric, where a flush
 * leaves nothing in flight, some vector must hold more than one. */
static void take_by_three(rdmx_conn *c, uint64_t n)
{
	struct rdmx_msg m[3];
	uint64_t got = 0, multi = 0;

	while (got < n) {
		int k = rdmx_recv_many(c, m, 3, 10000);

		if (k < 0)
			fail_msg("%s: rdmx_recv_many after %llu: %s (%s)", cf_protocol(),
				 (unsigned long long)got, rdmx_strerror(k), rdmx_conn_error(c));
		assert_true(k >= 1 && k <= 3);
		assert_int_equal(check_vec(m, k, got), 0);
		assert_int_equal(rdmx_msg_release_many(c, m, k), 0);
		got += (uint64_t)k;
		multi += k > 1;
	}
	if (!strcmp(th_fabric(), "fake"))
		assert_true(multi > 0);
}

void test_recv_many_max_smaller(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	struct th_pair p;
	struct vtaker k;

	(void)state;
	o.max_msg_size = 256;
	cf_pair(&p, &o, &o);
	if (receiver_pulls()) {
		vtake_start(&k, p.server, 10, 3);
		send_bursts(p.client, 0, 10, 1);
		assert_int_equal(rdmx_flush(p.client, 20000), 0);
		vtake_join(&k);
	} else {
		send_bursts(p.client, 0, 10, 1);
		assert_int_equal(rdmx_flush(p.client, 20000), 0);
		take_by_three(p.server, 10);
	}
	th_pair_close(&p);
}

/* A ring of 4096 bytes: vectors of records that cross its end. */
void test_recv_many_ring_wrap(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	const uint64_t n = th_count(1500);
	struct th_pair p;
	struct vtaker k;

	(void)state;
	o.ring_size = 4096;
	o.max_msg_size = 256;
	cf_pair(&p, &o, &o);
	vtake_start(&k, p.server, n, VEC_MAX);
	send_bursts(p.client, 0, n, 13); /* 13: bursts fall anywhere */
	assert_int_equal(rdmx_flush(p.client, 20000), 0);
	vtake_join(&k);
	th_pair_close(&p);
}

/* Timeout 0 on an idle connection: -EAGAIN, and nothing taken. */
void test_recv_many_again(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	struct rdmx_msg m[4];
	struct th_pair p;

	(void)state;
	o.max_msg_size = 256;
	cf_pair(&p, &o, &o);
	assert_int_equal(rdmx_recv_many(p.server, m, 4, 0), -EAGAIN);
	send_bursts(p.client, 0, 1, 1);
	assert_int_equal(rdmx_recv_many(p.server, m, 4, 10000), 1);
	assert_int_equal(check_vec(m, 1, 0), 0);
	assert_int_equal(rdmx_msg_release_many(p.server, m, 1), 0);
	assert_int_equal(rdmx_recv_many(p.server, m, 4, 0), -EAGAIN);
	th_pair_close(&p);
}

/* The sender sends 40 and leaves: all 40 arrive by vectors, then
 * -ECONNRESET, again on the next call. */
void test_recv_many_peer_close(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	struct rdmx_msg m[VEC_MAX];
	struct th_pair p;
	struct vtaker k;

	(void)state;
	o.max_msg_size = 256;
	cf_pair(&p, &o, &o);
	if (receiver_pulls())
		vtake_start(&k, p.server, 40, 7);
	send_bursts(p.client, 0, 40, 8);
	assert_int_equal(rdmx_flush(p.client, 20000), 0);
	rdmx_conn_close(p.client);
	p.client = NULL;
	if (receiver_pulls()) {
		vtake_join(&k);
	} else {
		for (uint64_t got = 0; got < 40;) {
			int n = rdmx_recv_many(p.server, m, 7, 10000);

			if (n < 0)
				fail_msg("%s: rdmx_recv_many after %llu of 40: %s (%s)", cf_protocol(),
					 (unsigned long long)got, rdmx_strerror(n),
					 rdmx_conn_error(p.server));
			assert_int_equal(check_vec(m, n, got), 0);
			assert_int_equal(rdmx_msg_release_many(p.server, m, n), 0);
			got += (uint64_t)n;
		}
	}
	assert_int_equal(rdmx_recv_many(p.server, m, VEC_MAX, 10000), -ECONNRESET);
	assert_int_equal(rdmx_recv_many(p.server, m, VEC_MAX, 0), -ECONNRESET);
	assert_int_equal(rdmx_recv(p.server, m, 0), -ECONNRESET);
	th_pair_close(&p);
}

/* Two messages taken; the first released alone, then both by vector. */
static void release_with_spent(rdmx_conn *c)
{
	struct rdmx_msg m[2];
	int got = 0;

	while (got < 2) {
		int n = rdmx_recv_many(c, m + got, 2 - got, 10000);

		assert_true(n >= 1);
		got += n;
	}
	assert_int_equal(rdmx_msg_release(c, &m[0]), 0);
	assert_int_equal(rdmx_msg_release_many(c, m, 2), -EINVAL);
	assert_null(rdmx_msg_conn(&m[1])); /* released all the same */
	assert_int_equal(rdmx_msg_release_many(c, &m[1], 1), -EINVAL);
}

void test_recv_many_bad_args(void **state)
{
	struct rdmx_conn_opts o = cf_opts();
	struct rdmx_msg m[2];
	struct th_pair p;

	(void)state;
	o.max_msg_size = 256;
	cf_pair(&p, &o, &o);
	assert_int_equal(rdmx_recv_many(NULL, m, 1, 0), -EINVAL);
	assert_int_equal(rdmx_recv_many(p.server, NULL, 1, 0), -EINVAL);
	assert_int_equal(rdmx_recv_many(p.server, m, 0, 0), -EINVAL);
	assert_int_equal(rdmx_recv_many(p.server, m, -1, 0), -EINVAL);
	assert_int_equal(rdmx_msg_release_many(NULL, m, 1), -EINVAL);
	assert_int_equal(rdmx_msg_release_many(p.server, NULL, 1), -EINVAL);
	assert_int_equal(rdmx_msg_release_many(p.server, m, -1), -EINVAL);
	assert_int_equal(rdmx_msg_release_many(p.server, m, 0), 0);
	/* an unsent buffer goes back by vector too */
	assert_int_equal(rdmx_msg_alloc(p.client, 8, &m[0], 10000), 0);
	assert_int_equal(rdmx_msg_release_many(p.client, m, 1), 0);
	assert_null(rdmx_msg_conn(&m[0]));
	send_bursts(p.client, 0, 2, 1);
	release_with_spent(p.server);
	th_pair_close(&p);
}
