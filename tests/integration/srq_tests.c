/* SPDX-License-Identifier: MIT */
/*
 * srq protocol tests: many connections into one shared receive queue.
 * Sender identification, per-member receive next to the shared one, one
 * member leaving (either side) while the others go on, back-pressure into
 * a slow receiver, the SRQ really being shared, hello mismatches, and a
 * fair share of the SRQ for each of 8 senders.
 * Built twice like the conformance suite: test_srq_fake (unit, fake
 * fabric) and test_srq (integration, rxe in the sandbox).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "seam.h"
#include "protocols/srq.h"

#define MAXS 8
#define MAX_MSG 2048

struct sender;

/* Dialed connections and their accepted ends: dialed[i] <-> accepted[i]. */
struct fleet {
	rdmx_ctx *ctx;
	rdmx_listener *lis;
	int n;
	rdmx_conn *dialed[MAXS];
	rdmx_conn *accepted[MAXS];
	int accept_rc;
	struct sender *senders;  /* for failure reports */
};

static struct rdmx_conn_opts srq_opts(uint32_t recv_depth)
{
	struct rdmx_conn_opts o = th_opts("srq", MAX_MSG, 0, recv_depth);

	o.rnr_retry = 7;
	return o;
}

static void *accept_main(void *arg)
{
	struct fleet *f = arg;

	for (int i = 0; i < f->n && !f->accept_rc; i++)
		f->accept_rc = rdmx_accept(f->lis, 20000, &f->accepted[i]);
	return NULL;
}

/* Listen and connect @n dialers one after the other (so accept order is
 * dial order). */
static void fleet_open(struct fleet *f, int n, const struct rdmx_conn_opts *o)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	const char *addr = th_addr();
	pthread_t t;
	int rc = 0;

	memset(f, 0, sizeof(*f));
	assert_non_null(addr);
	f->n = n;
	assert_int_equal(rdmx_ctx_create(&f->ctx, &co), 0);
	assert_int_equal(rdmx_listen(f->ctx, addr, 0, o, &f->lis), 0);
	pthread_create(&t, NULL, accept_main, f);
	for (int i = 0; i < n && !rc; i++)
		rc = rdmx_dial(f->ctx, addr, rdmx_listener_port(f->lis), o, &f->dialed[i]);
	pthread_join(t, NULL);
	if (rc || f->accept_rc)
		fail_msg("connect: %s / accept: %s (%s)", rdmx_strerror(rc),
			 rdmx_strerror(f->accept_rc), rdmx_last_error());
}

static void fleet_close(struct fleet *f)
{
	for (int i = 0; i < f->n; i++) {
		rdmx_conn_close(f->dialed[i]);
		rdmx_conn_close(f->accepted[i]);
	}
	rdmx_listener_destroy(f->lis);
	rdmx_ctx_destroy(f->ctx);
}

static int sender_of(const struct fleet *f, const rdmx_conn *c)
{
	for (int i = 0; i < f->n; i++)
		if (f->accepted[i] == c)
			return i;
	return -1;
}

/* ----------------------------------------------------------- senders */

struct sender {
	pthread_t thread;
	rdmx_conn *c;
	uint32_t id;
	uint64_t count;       /* messages to send; UINT64_MAX: until an error */
	uint64_t sent;
	int close_when_done;  /* flush and close the connection at the end */
	int *stop;            /* set: stop sending (test_fair_share) */
	int done;             /* atomic: sender_main is over */
	int wait_ms;          /* bound on one alloc / the flush, 0: 60 s */
	int rc;
	char err[256];
};

static int send_one(struct sender *s, uint64_t i)
{
	uint64_t rs = ((uint64_t)s->id << 32) | i;
	size_t size = 8 + (size_t)(th_rand(&rs) % (MAX_MSG - 7));
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(s->c, size, &m, s->wait_ms ? s->wait_ms : 60000);

	if (rc)
		return rc;
	th_fill(m.data, size, ((uint64_t)s->id << 32) | i);
	m.len = size;
	m.imm = 0x5a000000u | s->id;
	m.flags = RDMX_MSG_IMM;
	return rdmx_send(s->c, &m);
}

static void *sender_main(void *arg)
{
	struct sender *s = arg;

	while (!s->rc && s->sent < s->count &&
	       !(s->stop && __atomic_load_n(s->stop, __ATOMIC_RELAXED))) {
		s->rc = send_one(s, s->sent);
		if (!s->rc)
			__atomic_store_n(&s->sent, s->sent + 1, __ATOMIC_RELAXED);
	}
	if (!s->rc)
		s->rc = rdmx_flush(s->c, s->wait_ms ? s->wait_ms : 60000);
	if (s->rc)
		snprintf(s->err, sizeof(s->err), "%s", rdmx_conn_error(s->c));
	if (s->close_when_done) {
		rdmx_conn_close(s->c);
		s->c = NULL;
	}
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void senders_start(struct fleet *f, struct sender *s, uint64_t count,
			  int wait_ms)
{
	f->senders = s;
	for (int i = 0; i < f->n; i++) {
		s[i] = (struct sender){ .c = f->dialed[i], .id = (uint32_t)i, .count = count,
					.wait_ms = wait_ms };
		pthread_create(&s[i].thread, NULL, sender_main, &s[i]);
	}
}

static void senders_join(struct fleet *f, struct sender *s)
{
	for (int i = 0; i < f->n; i++) {
		pthread_join(s[i].thread, NULL);
		if (s[i].close_when_done)
			f->dialed[i] = NULL;
	}
}

/* Join @f's senders: each must have sent all it had to. */
static void senders_end(struct fleet *f, struct sender *s)
{
	senders_join(f, s);
	for (int i = 0; i < f->n; i++)
		if (s[i].rc)
			fail_msg("sender %d: %s (%s)", i, rdmx_strerror(s[i].rc), s[i].err);
}

/* ------------------------------------------------------------ receiving */

struct tally {
	uint64_t next[MAXS];
	uint64_t total;
};

/* Check one message of sender @id: its order, bytes, immediate data. */
static void check_msg(struct tally *t, const struct rdmx_msg *m, int id)
{
	uint64_t seq;
	long bad;

	assert_true(m->len >= 8 && m->len <= MAX_MSG);
	memcpy(&seq, m->data, 8);
	if ((int)(seq >> 32) != id)
		fail_msg("message of sender %d on the connection of sender %d",
			 (int)(seq >> 32), id);
	if ((seq & 0xffffffffu) != t->next[id])
		fail_msg("sender %d: got #%llu, expected #%llu", id,
			 (unsigned long long)(seq & 0xffffffffu),
			 (unsigned long long)t->next[id]);
	bad = th_check(m->data, m->len, seq);
	if (bad >= 0)
		fail_msg("sender %d #%llu differs at offset %ld", id,
			 (unsigned long long)t->next[id], bad);
	assert_true(m->flags & RDMX_MSG_IMM);
	assert_int_equal(m->imm, 0x5a000000u | (uint32_t)id);
	t->next[id]++;
	t->total++;
}

/* What each sender sent so far, next to what was received from it. */
static void senders_report(const struct fleet *f, const struct tally *t)
{
	for (int i = 0; f->senders && i < f->n; i++)
		print_message("sender %d: sent %llu, received %llu\n", i,
			      (unsigned long long)__atomic_load_n(&f->senders[i].sent,
								  __ATOMIC_RELAXED),
			      (unsigned long long)t->next[i]);
}

/* One message from the listener, checked and released; the sender id. */
static int take_one(struct fleet *f, struct tally *t, int usleep_us)
{
	struct rdmx_msg m;
	int rc = rdmx_listener_recv(f->lis, &m, 20000);
	int id;

	if (rc)
		senders_report(f, t);
	if (rc)
		fail_msg("listener recv after %llu: %s (%s)", (unsigned long long)t->total,
			 rdmx_strerror(rc), rdmx_listener_error(f->lis));
	id = sender_of(f, rdmx_msg_conn(&m));
	assert_true(id >= 0);
	check_msg(t, &m, id);
	if (usleep_us)
		usleep((useconds_t)usleep_us);
	assert_int_equal(rdmx_msg_release(rdmx_msg_conn(&m), &m), 0);
	return id;
}

/* Start @f's senders, @per messages each (a sender waits up to @wait_ms),
 * take them all (holding every other one @hold_us before its release),
 * and end the senders: each must have succeeded, all its messages taken. */
static void stream_all(struct fleet *f, struct sender *s, struct tally *t, uint64_t per,
		       int wait_ms, int hold_us)
{
	senders_start(f, s, per, wait_ms);
	while (t->total < (uint64_t)f->n * per)
		take_one(f, t, t->total % 2 ? 0 : hold_us);
	senders_end(f, s);
	for (int i = 0; i < f->n; i++)
		assert_int_equal(t->next[i], per);
}

/* Every remaining member is reported gone once, then -ENOTCONN. */
static void expect_all_gone(struct fleet *f, int expect)
{
	struct rdmx_msg m;
	int resets = 0, rc, id;

	while ((rc = rdmx_listener_recv(f->lis, &m, 20000)) == -ECONNRESET) {
		id = sender_of(f, rdmx_msg_conn(&m));
		assert_true(id >= 0);
		rdmx_conn_close(f->accepted[id]);
		f->accepted[id] = NULL;
		resets++;
	}
	assert_int_equal(rc, -ENOTCONN);
	assert_int_equal(resets, expect);
}

static uint64_t sum_posted_recv(const struct fleet *f)
{
	uint64_t n = 0;

	for (int i = 0; i < f->n; i++)
		n += f->accepted[i] ? f->accepted[i]->posted_recv : 0;
	return n;
}

/* ---------------------------------------------------------------- tests */

/* Eight senders: each message names the accepted end of its own sender,
 * in order, exactly once; the leavers are reported once each. */
static void test_sender_identification(void **state)
{
	struct rdmx_conn_opts o = srq_opts(64);
	uint64_t per = th_count(1000);
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct fleet f;

	(void)state;
	fleet_open(&f, MAXS, &o);
	stream_all(&f, s, &t, per, 0, 0);
	for (int i = 0; i < MAXS; i++) {
		rdmx_conn_close(f.dialed[i]);
		f.dialed[i] = NULL;
	}
	expect_all_gone(&f, MAXS);
	fleet_close(&f);
}

/* rdmx_recv on one member while the others' messages sit in the shared
 * CQ: they are kept for their members, in order. */
static void test_per_member_recv(void **state)
{
	struct rdmx_conn_opts o = srq_opts(64);
	const int order[3] = { 2, 0, 1 };
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct rdmx_msg m;
	struct fleet f;

	(void)state;
	fleet_open(&f, 3, &o);
	senders_start(&f, s, 20, 0); /* 60 messages fit the SRQ */
	senders_join(&f, s);
	for (int k = 0; k < 3; k++) {
		int id = order[k];

		assert_int_equal(s[id].rc, 0);
		for (int i = 0; i < 20; i++) {
			int rc = rdmx_recv(f.accepted[id], &m, 20000);

			if (rc)
				fail_msg("member %d recv %d: %s", id, i, rdmx_strerror(rc));
			assert_ptr_equal(rdmx_msg_conn(&m), f.accepted[id]);
			check_msg(&t, &m, id);
			assert_int_equal(rdmx_msg_release(f.accepted[id], &m), 0);
		}
		assert_int_equal(rdmx_recv(f.accepted[id], &m, 0), -EAGAIN);
	}
	assert_int_equal(rdmx__srq_posted(f.accepted[0]), 64);
	fleet_close(&f);
}

/* One of three senders closes mid-stream: all it sent is delivered, it is
 * reported once, and the other two finish undisturbed. */
static void test_sender_leaves_others_continue(void **state)
{
	struct rdmx_conn_opts o = srq_opts(16);
	uint64_t per = th_count(2000), early = per / 8;
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct rdmx_msg m;
	struct fleet f;
	int rc, id;

	(void)state;
	fleet_open(&f, 3, &o);
	for (int i = 0; i < 3; i++) {
		s[i] = (struct sender){ .c = f.dialed[i], .id = (uint32_t)i,
					.count = i == 1 ? early : per, .close_when_done = i == 1 };
		pthread_create(&s[i].thread, NULL, sender_main, &s[i]);
	}
	while (t.next[0] < per || t.next[2] < per || !t.next[1] || f.accepted[1]) {
		rc = rdmx_listener_recv(f.lis, &m, 20000);
		if (rc == -ECONNRESET) {
			assert_ptr_equal(rdmx_msg_conn(&m), f.accepted[1]);
			assert_int_equal(t.next[1], early);
			rdmx_conn_close(f.accepted[1]);
			f.accepted[1] = NULL;
			continue;
		}
		if (rc)
			fail_msg("listener recv: %s (%s)", rdmx_strerror(rc), rdmx_listener_error(f.lis));
		id = sender_of(&f, rdmx_msg_conn(&m));
		assert_true(id >= 0);
		check_msg(&t, &m, id);
		assert_int_equal(rdmx_msg_release(rdmx_msg_conn(&m), &m), 0);
	}
	senders_end(&f, s);
	assert_int_equal(t.next[1], early);
	assert_int_equal(rdmx__srq_posted(f.accepted[0]), 16);
	fleet_close(&f);
}

/* The receiver closes one member while it streams and while it holds and
 * has queued some of that member's messages: the shared buffers come
 * back, its sender is told, the other two finish. */
static void test_receiver_closes_one_member(void **state)
{
	struct rdmx_conn_opts o = srq_opts(8);
	uint64_t per = th_count(2000);
	struct rdmx_msg held[2];
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct rdmx_msg m;
	struct fleet f;
	int nheld = 0, id;

	(void)state;
	fleet_open(&f, 3, &o);
	for (int i = 0; i < 3; i++) {
		s[i] = (struct sender){ .c = f.dialed[i], .id = (uint32_t)i,
					.count = i == 1 ? UINT64_MAX : per };
		pthread_create(&s[i].thread, NULL, sender_main, &s[i]);
	}
	while (t.next[0] < per || t.next[2] < per || f.accepted[1]) {
		assert_int_equal(rdmx_listener_recv(f.lis, &m, 20000), 0);
		id = sender_of(&f, rdmx_msg_conn(&m));
		assert_true(id >= 0);
		check_msg(&t, &m, id);
		if (id == 1 && t.next[1] > 50 && nheld < 2) {
			held[nheld++] = m; /* kept across the close */
			if (nheld < 2)
				continue;
			rdmx_conn_close(f.accepted[1]);
			f.accepted[1] = NULL;
			continue;
		}
		assert_int_equal(rdmx_msg_release(rdmx_msg_conn(&m), &m), 0);
	}
	(void)held;
	senders_join(&f, s);
	assert_int_equal(s[0].rc, 0);
	assert_int_equal(s[2].rc, 0);
	assert_int_not_equal(s[1].rc, 0); /* its receiver went away */
	assert_null(f.accepted[1]);
	assert_int_equal(rdmx__srq_posted(f.accepted[0]), 8);
	fleet_close(&f);
}

/* A slow receiver and eight senders into a 4-deep SRQ: the senders wait
 * (RNR, rnr_retry 7), nothing is lost. */
static void test_backpressure_slow_receiver(void **state)
{
	struct rdmx_conn_opts o = srq_opts(4);
	uint64_t per = th_count(200);
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct fleet f;

	(void)state;
	o.send_depth = 16;
	fleet_open(&f, MAXS, &o);
	/* Each sender has a share (4 / 8 rounds to one credit each: more
	 * senders than buffers, RNR covers the excess), so the bound on a
	 * sender's wait stays generous. */
	stream_all(&f, s, &t, per, 300000, 1000);
	assert_int_equal(rdmx__srq_posted(f.accepted[0]), 4);
	fleet_close(&f);
}

/* Eight connections, one SRQ: recv_depth buffers posted for the whole
 * listener, one more per message released; each dialer has its own. */
static void test_srq_is_shared(void **state)
{
	struct rdmx_conn_opts o = srq_opts(16);
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct fleet f;

	(void)state;
	fleet_open(&f, MAXS, &o);
	assert_int_equal(sum_posted_recv(&f), 16);
	assert_int_equal(f.accepted[0]->posted_recv, 16);
	for (int i = 0; i < MAXS; i++) {
		assert_int_equal(f.dialed[i]->posted_recv, 16);
		assert_int_equal(rdmx__srq_posted(f.accepted[i]), 16);
		assert_ptr_equal(f.accepted[i]->group, f.accepted[0]->group);
		assert_ptr_not_equal(f.dialed[i]->group, f.accepted[0]->group);
	}
	senders_start(&f, s, 50, 0);
	while (t.total < MAXS * 50)
		take_one(&f, &t, 0);
	senders_join(&f, s);
	assert_int_equal(sum_posted_recv(&f), 16 + MAXS * 50);
	assert_int_equal(rdmx__srq_posted(f.accepted[3]), 16);
	fleet_close(&f);
}

/* A zero-timeout poller learns that a peer left (no flushed receive
 * tells it): messages first, then -ECONNRESET once, then -ENOTCONN. */
static void test_zero_timeout_sees_leaver(void **state)
{
	struct rdmx_conn_opts o = srq_opts(16);
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct rdmx_msg m;
	struct fleet f;
	double t0 = th_now_ms();
	int rc = -EAGAIN;

	(void)state;
	fleet_open(&f, 1, &o);
	senders_start(&f, s, 5, 0);
	senders_join(&f, s);
	rdmx_conn_close(f.dialed[0]);
	f.dialed[0] = NULL;
	while (th_now_ms() - t0 < 20000) {
		rc = rdmx_listener_recv(f.lis, &m, 0);
		if (rc == -EAGAIN)
			continue;
		if (rc)
			break;
		check_msg(&t, &m, 0);
		assert_int_equal(rdmx_msg_release(f.accepted[0], &m), 0);
	}
	assert_int_equal(rc, -ECONNRESET);
	assert_int_equal(t.next[0], 5);
	assert_ptr_equal(rdmx_msg_conn(&m), f.accepted[0]);
	assert_int_equal(rdmx_recv(f.accepted[0], &m, 0), -ECONNRESET);
	rdmx_conn_close(f.accepted[0]);
	f.accepted[0] = NULL;
	assert_int_equal(rdmx_listener_recv(f.lis, &m, 0), -ENOTCONN);
	fleet_close(&f);
}

/* Per-sender counts over the window: min, max, and each printed. */
static double fair_ratio(const uint64_t *n, int senders, int window_ms)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (int i = 0; i < senders; i++) {
		print_message("fair share: sender %d: %llu messages in %d ms (%.0f/s)\n", i,
			      (unsigned long long)n[i], window_ms, n[i] * 1000.0 / window_ms);
		lo = n[i] < lo ? n[i] : lo;
		hi = n[i] > hi ? n[i] : hi;
	}
	print_message("fair share: min %llu, max %llu, max/min %.2f\n",
		      (unsigned long long)lo, (unsigned long long)hi,
		      lo ? (double)hi / (double)lo : 0.0);
	assert_true(lo > 0);
	return (double)hi / (double)lo;
}

/* One message, held @hold_us before its release: the receiver is the
 * bottleneck, so the senders contend for the SRQ's buffers. */
static void fair_take(struct fleet *f, struct tally *t, int hold_us)
{
	struct rdmx_msg m;
	double t0;
	int rc = rdmx_listener_recv(f->lis, &m, 20000);

	if (rc) {
		senders_report(f, t);
		fail_msg("listener recv after %llu: %s (%s)", (unsigned long long)t->total,
			 rdmx_strerror(rc), rdmx_listener_error(f->lis));
	}
	check_msg(t, &m, sender_of(f, rdmx_msg_conn(&m)));
	t0 = th_now_ms();
	while (th_now_ms() - t0 < hold_us / 1000.0)
		;
	assert_int_equal(rdmx_msg_release(rdmx_msg_conn(&m), &m), 0);
}

/* Every sender done (stopped and flushed)? */
static int senders_done(const struct sender *s, int n, uint64_t *sent)
{
	int done = 1;

	*sent = 0;
	for (int i = 0; i < n; i++) {
		done &= __atomic_load_n(&s[i].done, __ATOMIC_ACQUIRE);
		*sent += __atomic_load_n(&s[i].sent, __ATOMIC_RELAXED);
	}
	return done;
}

/* Receive until every sender stopped and flushed: nothing is lost. */
static void fair_drain(struct fleet *f, struct sender *s, struct tally *t)
{
	double t0 = th_now_ms();
	uint64_t sent;
	int done;

	for (;;) {
		done = senders_done(s, f->n, &sent);
		if (done && t->total == sent)
			break;
		if (th_now_ms() - t0 > 120000)
			fail_msg("senders not done after 120 s (%llu of %llu received)",
				 (unsigned long long)t->total, (unsigned long long)sent);
		if (t->total < sent)
			take_one(f, t, 0);
		else
			usleep(1000);
	}
	senders_end(f, s);
}

/*
 * Fair share (issue 8 §4): 8 senders on 8 threads stream into one
 * listener (a 64-deep SRQ) read by one thread with rdmx_listener_recv;
 * the receiver is the bottleneck (fair_take), so the senders contend for
 * the SRQ. The messages each sender gets delivered in a fixed window
 * (after a warm-up) are within 2x of each other, and none is starved.
 * With RNR as the flow control (before credits) this fails: on the fake
 * fabric, whose SRQ serves waiting senders in list order, one sender got
 * 0 messages and another 84,090; on rxe 730 against 2,689 (3.7x).
 */
static void test_fair_share(void **state)
{
	struct rdmx_conn_opts o = srq_opts(64);
	int fake = !strcmp(th_fabric(), "fake");
	int warm_ms = fake ? 500 : 2000, window_ms = fake ? 5000 : 15000;
	int hold_us = fake ? 50 : 500; /* rxe in a VM is slow to deliver */
	uint64_t from[MAXS], n[MAXS];
	struct sender s[MAXS];
	struct tally t = { 0 };
	struct fleet f;
	int stop = 0;
	double t0;

	(void)state;
	o.send_depth = 16;
	fleet_open(&f, MAXS, &o);
	f.senders = s;
	for (int i = 0; i < MAXS; i++) {
		s[i] = (struct sender){ .c = f.dialed[i], .id = (uint32_t)i, .count = UINT64_MAX,
					.stop = &stop, .wait_ms = 120000 };
		pthread_create(&s[i].thread, NULL, sender_main, &s[i]);
	}
	t0 = th_now_ms();
	while (th_now_ms() - t0 < warm_ms)
		fair_take(&f, &t, hold_us);
	memcpy(from, t.next, sizeof(from));
	t0 = th_now_ms();
	while (th_now_ms() - t0 < window_ms)
		fair_take(&f, &t, hold_us);
	for (int i = 0; i < MAXS; i++)
		n[i] = t.next[i] - from[i];
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	fair_drain(&f, s, &t);
	assert_true(fair_ratio(n, MAXS, window_ms) <= 2.0);
	fleet_close(&f);
}

/* Write @w (and, if @good, its complement) into @c's credit word, as its
 * peer's NIC would. */
static void poke_credit(rdmx_conn *c, uint32_t w, int good)
{
	uint8_t b[8];
	uint64_t v;

	rdmx__put_u32(b, w);
	rdmx__put_u32(b + 4, good ? ~w : w);
	memcpy(&v, b, 8);
	__atomic_store_n((uint64_t *)(void *)rdmx__srq_credit_word(c), v, __ATOMIC_RELEASE);
}

/* A hostile peer's grants: a word whose halves do not match is no grant;
 * one beyond the peer's SRQ depth fails the connection (-EPROTO), and so
 * does, on the receiving side, a message beyond the credits granted. */
static void test_hostile_credits(void **state)
{
	struct rdmx_conn_opts o = srq_opts(16);
	struct rdmx_msg m;
	struct fleet f;
	int rc = 0, i;

	(void)state;
	fleet_open(&f, 2, &o); /* shares: 16 for the first, 8 for the second */
	poke_credit(f.dialed[0], 1000, 0);
	assert_int_equal(rdmx_msg_alloc(f.dialed[0], 8, &m, 0), 0);
	assert_int_equal(rdmx_msg_release(f.dialed[0], &m), 0);
	poke_credit(f.dialed[0], 1000, 1);
	rc = rdmx_msg_alloc(f.dialed[0], 8, &m, 0);
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(rdmx_conn_error(f.dialed[0]), "more than its shared receive depth 16"));
	/* 8 more than granted, within the SRQ: the receiver notices. */
	poke_credit(f.dialed[1], 8, 1);
	rc = 0;
	for (i = 0; i < 16 && !rc; i++) {
		rc = rdmx_msg_alloc(f.dialed[1], 8, &m, 1000);
		if (!rc) {
			memset(m.data, 0, 8);
			m.len = 8;
			rc = rdmx_send(f.dialed[1], &m);
		}
	}
	if (rc)
		fail_msg("send %d: %s (%s)", i, rdmx_strerror(rc), rdmx_conn_error(f.dialed[1]));
	assert_int_equal(rdmx_flush(f.dialed[1], 10000), 0);
	for (i = 0; i < 8; i++) {
		assert_int_equal(rdmx_recv(f.accepted[1], &m, 10000), 0);
		assert_int_equal(rdmx_msg_release(f.accepted[1], &m), 0);
	}
	assert_int_equal(rdmx_recv(f.accepted[1], &m, 10000), -EPROTO);
	assert_non_null(strstr(rdmx_conn_error(f.accepted[1]), "none of its credits left"));
	fleet_close(&f);
}

/* One side of test_both_send: streams @n messages to its peer while it
 * receives the peer's, never blocking in either, with the one-sided slots
 * kept full of FETCH_ADDs on the peer's counter. */
struct duplex {
	pthread_t thread;
	rdmx_conn *c;
	rdmx_region *peer;      /* the peer's counter */
	rdmx_mr *mr;            /* ours: [0] the counter, [8..] old values */
	uint64_t n, sent, got, adds;
	int rc;
	char err[256];
};

/* Post FETCH_ADDs until every one-sided slot is busy, then wait for them. */
static int duplex_adds(struct duplex *d)
{
	rdmx_token tok[RDMX_ONESIDED_MAX];
	int k = 0, rc = 0;

	while (k < RDMX_ONESIDED_MAX &&
	       !(rc = rdmx_fetch_add(d->c, d->peer, 0, 1, d->mr, 8 + 8 * (size_t)k, &tok[k])))
		k++;
	if (rc == -ENOBUFS)
		rc = 0;
	for (int i = 0; i < k; i++) {
		int w = rdmx_wait(d->c, tok[i], 20000);

		rc = rc ? rc : w;
	}
	d->adds += (uint64_t)k;
	return rc;
}

/* Send when a credit is there, receive when a message is: 0 or -errno. */
static int duplex_step(struct duplex *d)
{
	struct rdmx_msg m;
	int rc;

	if (d->sent < d->n && !(rc = rdmx_msg_alloc(d->c, 64, &m, 0))) {
		th_fill(m.data, 64, d->sent);
		m.len = 64;
		if ((rc = rdmx_send(d->c, &m)))
			return rc;
		if (++d->sent % 64 == 0 && (rc = duplex_adds(d)))
			return rc;
	} else if (d->sent < d->n && rc != -EAGAIN) {
		return rc;
	}
	rc = rdmx_recv(d->c, &m, 0);
	if (rc == -EAGAIN)
		return 0;
	if (rc)
		return rc;
	if (m.len != 64 || th_check(m.data, 64, d->got) >= 0)
		return -EBADMSG;
	d->got++;
	return rdmx_msg_release(d->c, &m);
}

static void *duplex_main(void *arg)
{
	struct duplex *d = arg;
	double t0 = th_now_ms();

	while (!d->rc && (d->sent < d->n || d->got < d->n)) {
		if (th_now_ms() - t0 > 120000)
			d->rc = -ETIMEDOUT;
		else
			d->rc = duplex_step(d);
	}
	if (!d->rc)
		d->rc = rdmx_flush(d->c, 20000);
	if (d->rc)
		snprintf(d->err, sizeof(d->err), "sent %llu, got %llu: %s",
			 (unsigned long long)d->sent, (unsigned long long)d->got,
			 rdmx_conn_error(d->c));
	return NULL;
}

/* @a's counter, exported to its peer and imported there as @b's region. */
static void duplex_link(struct fleet *f, struct duplex *a, struct duplex *b,
			uint64_t *mem)
{
	uint8_t desc[RDMX_REGION_DESC_LEN];
	size_t len = sizeof(desc);

	assert_int_equal(rdmx_mr_reg(f->ctx, mem, 8 * (1 + RDMX_ONESIDED_MAX),
				     RDMX_ACCESS_REMOTE_ATOMIC, &a->mr), 0);
	assert_int_equal(rdmx_mr_export(a->c, a->mr, 0, 8, RDMX_ACCESS_REMOTE_ATOMIC,
					desc, &len), 0);
	assert_int_equal(rdmx_region_import(b->c, desc, len, &b->peer), 0);
}

/*
 * Both sides send at once into 4-deep SRQs (credits both ways, each side
 * waiting for the other's) while one-sided operations take every slot of
 * theirs on the same send queues: credits still flow, nothing deadlocks,
 * every message and every FETCH_ADD arrives (test_onesided broke on this
 * once: credit traffic and one-sided operations shared the send queue).
 */
static void test_both_send(void **state)
{
	struct rdmx_conn_opts o = srq_opts(4);
	uint64_t mem[2][1 + RDMX_ONESIDED_MAX] __attribute__((aligned(8))) = { { 0 } };
	struct duplex d[2];
	struct fleet f;

	(void)state;
	o.send_depth = 16;
	fleet_open(&f, 1, &o);
	d[0] = (struct duplex){ .c = f.dialed[0], .n = th_count(20000) };
	d[1] = (struct duplex){ .c = f.accepted[0], .n = th_count(20000) };
	duplex_link(&f, &d[0], &d[1], mem[0]);
	duplex_link(&f, &d[1], &d[0], mem[1]);
	for (int i = 0; i < 2; i++)
		pthread_create(&d[i].thread, NULL, duplex_main, &d[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(d[i].thread, NULL);
	for (int i = 0; i < 2; i++)
		if (d[i].rc)
			fail_msg("side %d: %s (%s)", i, rdmx_strerror(d[i].rc), d[i].err);
	assert_int_equal(__atomic_load_n(&mem[0][0], __ATOMIC_ACQUIRE), d[1].adds);
	assert_int_equal(__atomic_load_n(&mem[1][0], __ATOMIC_ACQUIRE), d[0].adds);
	assert_true(d[0].adds > 0 && d[1].adds > 0);
	for (int i = 0; i < 2; i++) {
		rdmx_region_free(d[i].peer);
		rdmx_mr_dereg(d[i].mr);
	}
	fleet_close(&f);
}

/* Send @n small messages on @c, each within 10 s. */
static void send_n(rdmx_conn *c, int n)
{
	struct rdmx_msg m;

	for (int i = 0; i < n; i++) {
		int rc = rdmx_msg_alloc(c, 8, &m, 10000);

		if (rc)
			fail_msg("send %d: %s (%s)", i, rdmx_strerror(rc), rdmx_conn_error(c));
		memset(m.data, 0, 8);
		m.len = 8;
		assert_int_equal(rdmx_send(c, &m), 0);
	}
}

/* The server end sent send_depth (64) messages it never reaps, so the
 * core's stash of its send completions fills: the completions of its
 * credit WRITEs queue behind them and must still be reaped, or its grants
 * stop and the client waits for credits (2 at a time) forever. */
static void test_credits_behind_full_stash(void **state)
{
	struct rdmx_conn_opts so = srq_opts(2), co = srq_opts(128);
	struct rdmx_msg m;
	struct th_pair p;

	(void)state;
	so.send_depth = 64;
	assert_int_equal(th_pair_open(&p, &so, &co), 0);
	send_n(p.server, 64);
	for (int i = 0; i < 40; i++) {
		send_n(p.client, 1);
		assert_int_equal(rdmx_recv(p.server, &m, 10000), 0);
		assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	}
	for (int i = 0; i < 64; i++) {
		assert_int_equal(rdmx_recv(p.client, &m, 10000), 0);
		assert_int_equal(rdmx_msg_release(p.client, &m), 0);
	}
	th_pair_close(&p);
}

/* Connect with a hand-made srq hello; the reject reason lands in @why. */
static int raw_connect(rdmx_ctx *ctx, uint16_t port, const uint8_t *blk,
		       uint8_t blen, char *why, size_t wlen)
{
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION, .protocol = RDMX__PROTO_SRQ,
				 .max_msg = MAX_MSG, .recv_depth = 16 };

	return th_hello_connect(ctx, port, &h, blk, blen, why, wlen);
}

static void *accept_any(void *arg)
{
	struct fleet *f = arg;

	f->accept_rc = rdmx_accept(f->lis, 20000, &f->accepted[0]);
	return NULL;
}

/* A well-formed version-2 block (credits), @bytes per buffer. */
static void good_block(uint8_t *blk, uint32_t bytes)
{
	memset(blk, 0, 28);
	blk[0] = 2;
	rdmx__put_u32(blk + 4, 16);
	rdmx__put_u32(blk + 8, bytes);
	rdmx__put_u32(blk + 12, 4);        /* credits granted */
	rdmx__put_u32(blk + 16, 0x1234);   /* credit word rkey */
	rdmx__put_u64(blk + 20, 0x10000);  /* and address */
}

/* A protocol block that does not match is refused with what did not: an
 * rdmx from before credits (version 1) included. */
static void test_hello_mismatch_rejected(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = srq_opts(16);
	uint8_t blk[28];
	struct fleet f = { .n = 1 };
	char why[160];
	uint16_t port;
	pthread_t t;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&f.ctx, &co), 0);
	assert_int_equal(rdmx_listen(f.ctx, th_addr(), 0, &o, &f.lis), 0);
	port = rdmx_listener_port(f.lis);
	pthread_create(&t, NULL, accept_any, &f);
	good_block(blk, 64); /* buffers smaller than max_msg */
	assert_int_equal(raw_connect(f.ctx, port, blk, 28, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "hold 64 bytes"));
	blk[0] = 9;
	assert_int_equal(raw_connect(f.ctx, port, blk, 28, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "block version 9"));
	good_block(blk, MAX_MSG);
	blk[0] = 1; /* RNR flow control, 12 bytes */
	assert_int_equal(raw_connect(f.ctx, port, blk, 12, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "block version 1, expected 2"));
	blk[0] = 2;
	assert_int_equal(raw_connect(f.ctx, port, blk, 4, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "4 bytes"));
	rdmx__put_u32(blk + 4, 99);
	assert_int_equal(raw_connect(f.ctx, port, blk, 28, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "depth 99"));
	good_block(blk, MAX_MSG);
	rdmx__put_u32(blk + 12, 17); /* more credits than its SRQ holds */
	assert_int_equal(raw_connect(f.ctx, port, blk, 28, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "grants 17 credits"));
	good_block(blk, MAX_MSG);
	rdmx__put_u64(blk + 20, 0x10004); /* a credit word not 8-aligned */
	assert_int_equal(raw_connect(f.ctx, port, blk, 28, why, sizeof(why)), -ECONNREFUSED);
	assert_non_null(strstr(why, "not 8-aligned"));
	/* A proper dialer still gets in. */
	assert_int_equal(rdmx_dial(f.ctx, th_addr(), port, &o, &f.dialed[0]), 0);
	pthread_join(t, NULL);
	assert_int_equal(f.accept_rc, 0);
	assert_int_equal(rdmx_listener_rejected(f.lis), 7);
	fleet_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sender_identification),
		cmocka_unit_test(test_per_member_recv),
		cmocka_unit_test(test_sender_leaves_others_continue),
		cmocka_unit_test(test_receiver_closes_one_member),
		cmocka_unit_test(test_backpressure_slow_receiver),
		cmocka_unit_test(test_srq_is_shared),
		cmocka_unit_test(test_zero_timeout_sees_leaver),
		cmocka_unit_test(test_hello_mismatch_rejected),
		cmocka_unit_test(test_fair_share),
		cmocka_unit_test(test_hostile_credits),
		cmocka_unit_test(test_both_send),
		cmocka_unit_test(test_credits_behind_full_stash),
	};

	print_message("=== srq on the %s fabric ===\n", th_fabric());
	if (getenv("RDMX_TEST_FILTER"))
		cmocka_set_test_filter(getenv("RDMX_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
