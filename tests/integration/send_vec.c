/* SPDX-License-Identifier: MIT */
/*
 * rdmx_sendv on every protocol (issue 10): vectors of 1..64 messages of
 * mixed sizes (empty, small enough to pack, up to max_msg) arrive whole
 * and in order, the last token completes; a vector larger than the room
 * the peer gives, with timeout 0, sends a part and says how much, and the
 * rest goes after; a peer that leaves ends a vector with an error, never
 * a hang; bad arguments and an oversize message are refused with nothing
 * sent.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "send_tokens.h"
#include "send_vec.h"

#define VEC 64
#define MAX_MSG 4096

/* Message @seq's size: 0..MAX_MSG, mostly small (packed), some large. */
static size_t size_of(uint64_t seq)
{
	if (seq % 29 == 5)
		return 0;
	return seq % 7 ? 1 + (size_t)(seq * 37 % 120) : 1 + (size_t)(seq * 397 % MAX_MSG);
}

/* The messages' bytes: message @seq at buf + (seq % VEC) * MAX_MSG. */
struct vbuf {
	uint8_t *b;
	struct iovec iov[VEC];
};

/* @v's iovec for messages @first..@first+@n-1, filled. */
static struct iovec *vec_of(struct vbuf *v, uint64_t first, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t seq = first + (uint64_t)i;

		v->iov[i].iov_base = v->b + (size_t)i * MAX_MSG;
		v->iov[i].iov_len = size_of(seq);
		th_fill(v->iov[i].iov_base, v->iov[i].iov_len, seq);
	}
	return v->iov;
}

/* A receiver thread taking @n messages, each checked, in order. */
struct taker {
	pthread_t t;
	rdmx_conn *c;
	uint64_t n, got, bad;
	int rc;
};

static void *take(void *arg)
{
	struct taker *k = arg;
	struct rdmx_msg m[16];

	while (k->got < k->n) {
		int n = rdmx_recv_many(k->c, m, 16, 20000);

		if (n < 0) {
			k->rc = n;
			break;
		}
		for (int i = 0; i < n; i++, k->got++)
			k->bad += m[i].len != size_of(k->got) ||
				  (m[i].len && th_check(m[i].data, m[i].len, k->got) != -1);
		if ((k->rc = rdmx_msg_release_many(k->c, m, n)))
			break;
	}
	return NULL;
}

static void take_start(struct taker *k, rdmx_conn *c, uint64_t n)
{
	memset(k, 0, sizeof(*k));
	k->c = c;
	k->n = n;
	assert_int_equal(pthread_create(&k->t, NULL, take, k), 0);
}

static void take_join(struct taker *k)
{
	pthread_join(k->t, NULL);
	if (k->rc || k->bad || k->got != k->n)
		fail_msg("%s: receiver took %llu of %llu, %llu bad: %s (%s)", cf_protocol(),
			 (unsigned long long)k->got, (unsigned long long)k->n,
			 (unsigned long long)k->bad, rdmx_strerror(k->rc), rdmx_conn_error(k->c));
}

/* Send messages @from..@to-1 by vectors of up to @vec, each call waiting
 * for room; a call may send part of its vector. */
static void send_range(rdmx_conn *c, struct vbuf *v, uint64_t from, uint64_t to,
		       int vec, rdmx_token *last)
{
	while (from < to) {
		int n = to - from < (uint64_t)vec ? (int)(to - from) : vec;
		int rc = rdmx_sendv(c, vec_of(v, from, n), n, 20000, last);

		if (rc < 1 || rc > n)
			fail_msg("%s: rdmx_sendv of %d from #%llu: %d %s (%s)", cf_protocol(), n,
				 (unsigned long long)from, rc, rc < 0 ? rdmx_strerror(rc) : "",
				 rdmx_conn_error(c));
		from += (uint64_t)rc;
	}
}

static void vbuf_open(struct vbuf *v)
{
	v->b = malloc((size_t)VEC * MAX_MSG);
	assert_non_null(v->b);
}

static struct rdmx_conn_opts vec_opts(void)
{
	struct rdmx_conn_opts o = cf_opts();

	o.max_msg_size = MAX_MSG;
	return o;
}

void test_sendv_in_order(void **state)
{
	struct rdmx_conn_opts o = vec_opts();
	const uint64_t n = th_count(3000);
	rdmx_token last = 0;
	struct th_pair p;
	struct taker k;
	struct vbuf v;
	uint64_t seq = 0;

	(void)state;
	vbuf_open(&v);
	cf_pair(&p, &o, &o);
	take_start(&k, p.server, n);
	for (int vec = 1; seq < n; vec = vec % VEC + 1) {
		uint64_t to = seq + (uint64_t)vec < n ? seq + (uint64_t)vec : n;

		send_range(p.client, &v, seq, to, vec, &last);
		seq = to;
	}
	take_join(&k); /* read's sends complete as they are taken */
	assert_int_equal(rdmx_wait(p.client, last, 20000), 0);
	th_pair_close(&p);
	free(v.b);
}

/* Vectors of large messages with timeout 0 against a receiver that takes
 * nothing: each call sends what there is room for (some, not all of a
 * vector, or -EAGAIN once there is none); all of it arrives, in order,
 * and the rest follows once the receiver takes. */
void test_sendv_partial(void **state)
{
	struct rdmx_conn_opts o = vec_opts();
	uint64_t sent = 0, total;
	int partial = 0, rc = 1;
	struct th_pair p;
	struct taker k;
	struct vbuf v;

	(void)state;
	vbuf_open(&v);
	cf_pair(&p, &o, &o);
	for (int calls = 0; rc > 0 && calls < 1000; calls++) {
		rc = rdmx_sendv(p.client, vec_of(&v, sent, VEC), VEC, 0, NULL);
		if (rc > 0)
			sent += (uint64_t)rc;
		partial += rc > 0 && rc < VEC;
	}
	assert_int_equal(rc, -EAGAIN); /* room ran out; none left */
	assert_true(sent > 0);
	assert_true(partial > 0 || sent % VEC == 0);
	total = sent + 200;
	take_start(&k, p.server, total);
	send_range(p.client, &v, sent, total, VEC, NULL);
	take_join(&k);
	th_pair_close(&p);
	free(v.b);
}

void test_sendv_bad_args(void **state)
{
	struct rdmx_conn_opts o = vec_opts();
	struct iovec iov[4];
	struct th_pair p;
	struct rdmx_msg m;
	struct vbuf v;

	(void)state;
	vbuf_open(&v);
	cf_pair(&p, &o, &o);
	memcpy(iov, vec_of(&v, 0, 4), sizeof(iov));
	assert_int_equal(rdmx_sendv(NULL, iov, 4, 0, NULL), -EINVAL);
	assert_int_equal(rdmx_sendv(p.client, NULL, 4, 0, NULL), -EINVAL);
	assert_int_equal(rdmx_sendv(p.client, iov, 0, 0, NULL), -EINVAL);
	iov[2].iov_len = MAX_MSG + 1;
	assert_int_equal(rdmx_sendv(p.client, iov, 4, 0, NULL), -EMSGSIZE);
	iov[2].iov_len = 8;
	iov[2].iov_base = NULL;
	assert_int_equal(rdmx_sendv(p.client, iov, 4, 0, NULL), -EINVAL);
	assert_int_equal(rdmx_recv(p.server, &m, 200), -ETIMEDOUT); /* none sent */
	memcpy(iov, vec_of(&v, 0, 4), sizeof(iov));
	assert_int_equal(rdmx_sendv(p.client, iov, 4, 20000, NULL), 4);
	for (uint64_t i = 0; i < 4; i++) {
		assert_int_equal(rdmx_recv(p.server, &m, 20000), 0);
		assert_int_equal(m.len, size_of(i));
		if (m.len)
			assert_int_equal(th_check(m.data, m.len, i), -1);
		assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	}
	th_pair_close(&p);
	free(v.b);
}

/* The receiver closes while vectors keep coming: a call ends with the
 * peer's departure (not a timeout) within 25 s, never hangs, and so do
 * the calls after it. */
void test_sendv_peer_close(void **state)
{
	struct rdmx_conn_opts o = vec_opts();
	struct th_pair p;
	struct vbuf v;
	uint64_t seq;
	double t0;
	int rc;

	(void)state;
	vbuf_open(&v);
	cf_pair(&p, &o, &o);
	assert_int_equal(rdmx_sendv(p.client, vec_of(&v, 0, 8), 8, 20000, NULL), 8);
	rdmx_conn_close(p.server);
	p.server = NULL;
	t0 = th_now_ms();
	for (rc = 1, seq = 8; rc > 0 && th_now_ms() - t0 < 25000; seq += (uint64_t)rc)
		rc = rdmx_sendv(p.client, vec_of(&v, seq, VEC), VEC, 20000, NULL);
	assert_true(rc < 0);
	assert_true(rc != -ETIMEDOUT && rc != -EINVAL && rc != -EMSGSIZE);
	assert_true(th_now_ms() - t0 < 25000);
	assert_true(rdmx_sendv(p.client, vec_of(&v, 0, 1), 1, 2000, NULL) < 0);
	th_pair_close(&p);
	free(v.b);
}
