/* SPDX-License-Identifier: MIT */
/*
 * Many senders, one receiver: N connections dial one listener, each on its
 * own thread streams M messages carrying (sender, sequence) and a checked
 * pattern; the receiver takes them with rdmx_listener_recv() and checks
 * exactly-once, per-sender order, payload bytes and that every message of
 * a sender comes on the same connection. Then the senders close and the
 * receiver is told of each (-ECONNRESET once per connection) and, once it
 * closed them all, that nothing is left (-ENOTCONN).
 * Part of the conformance suite (both fabrics, every protocol).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "many_senders.h"

#define SENDERS 8
#define MAX_MSG 4096
/* Bound of every wait. Generous for emulated, loaded hosts (srq's senders
 * get fair shares of its SRQ now, test_fair_share; this test checks
 * delivery, not fairness). */
#define WAIT_MS 120000

struct sender {
	pthread_t thread;
	rdmx_ctx *ctx;
	const char *addr;
	uint16_t port;
	struct rdmx_conn_opts opts;
	uint32_t id;
	uint64_t count;
	int rc;
	char err[256];
};

static int send_all(rdmx_conn *c, struct sender *s)
{
	uint64_t rs = s->id + 1;
	struct rdmx_msg m;
	int rc = 0;

	for (uint64_t i = 0; !rc && i < s->count; i++) {
		size_t size = 8 + (size_t)(th_rand(&rs) % (MAX_MSG - 7));

		rc = rdmx_msg_alloc(c, size, &m, WAIT_MS);
		if (rc)
			break;
		th_fill(m.data, size, ((uint64_t)s->id << 32) | i);
		m.len = size;
		rc = rdmx_send(c, &m);
	}
	return rc ? rc : rdmx_flush(c, WAIT_MS);
}

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	rdmx_conn *c;

	s->rc = rdmx_dial(s->ctx, s->addr, s->port, &s->opts, &c);
	if (s->rc) {
		snprintf(s->err, sizeof(s->err), "dial: %s", rdmx_last_error());
		return NULL;
	}
	s->rc = send_all(c, s);
	if (s->rc)
		snprintf(s->err, sizeof(s->err), "send: %s", rdmx_conn_error(c));
	rdmx_conn_close(c);
	return NULL;
}

struct tally {
	uint64_t next[SENDERS];
	rdmx_conn *conn[SENDERS];
	uint64_t total;
};

/* Check one received message against what its sender must have sent. */
static void check_msg(struct tally *t, const struct rdmx_msg *m, const char *proto)
{
	uint64_t seq;
	uint32_t id;
	long bad;

	assert_true(m->len >= 8 && m->len <= MAX_MSG);
	memcpy(&seq, m->data, 8);
	id = (uint32_t)(seq >> 32);
	assert_in_range(id, 0, SENDERS - 1);
	if ((seq & 0xffffffffu) != t->next[id])
		fail_msg("%s: sender %u: got #%llu, expected #%llu", proto, id,
			 (unsigned long long)(seq & 0xffffffffu),
			 (unsigned long long)t->next[id]);
	bad = th_check(m->data, m->len, seq);
	if (bad >= 0)
		fail_msg("%s: sender %u #%llu differs at offset %ld", proto, id,
			 (unsigned long long)t->next[id], bad);
	if (!t->conn[id])
		t->conn[id] = rdmx_msg_conn(m);
	assert_ptr_equal(rdmx_msg_conn(m), t->conn[id]);
	t->next[id]++;
	t->total++;
}

/* Receive until every sender's connection was reported gone and closed. */
static void drain(rdmx_listener *lis, struct tally *t, const char *proto)
{
	struct rdmx_msg m;
	int resets = 0, rc;

	for (;;) {
		rc = rdmx_listener_recv(lis, &m, WAIT_MS);
		if (rc == -ECONNRESET) {
			assert_non_null(rdmx_msg_conn(&m));
			rdmx_conn_close(rdmx_msg_conn(&m));
			resets++;
			continue;
		}
		if (rc == -ENOTCONN)
			break;
		if (rc)
			fail_msg("%s: listener recv after %llu: %s (%s)", proto,
				 (unsigned long long)t->total, rdmx_strerror(rc),
				 rdmx_listener_error(lis));
		check_msg(t, &m, proto);
		assert_int_equal(rdmx_msg_release(rdmx_msg_conn(&m), &m), 0);
	}
	assert_int_equal(resets, SENDERS);
}

static void accept_all(rdmx_listener *lis)
{
	for (int i = 0; i < SENDERS; i++) {
		rdmx_conn *c;
		int rc = rdmx_accept(lis, 20000, &c);

		if (rc)
			fail_msg("accept %d: %s (%s)", i, rdmx_strerror(rc),
				 rdmx_listener_error(lis));
	}
}

void th_many_senders(const char *proto, uint64_t per_sender)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct sender s[SENDERS];
	struct tally t = { 0 };
	struct rdmx_conn_opts o;
	rdmx_listener *lis;
	rdmx_ctx *ctx;
	const char *addr = th_addr();
	struct rdmx_msg m;

	assert_non_null(addr);
	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	o.max_msg_size = MAX_MSG;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, addr, 0, &o, &lis), 0);
	assert_int_equal(rdmx_listener_recv(lis, &m, 0), -ENOTCONN);
	for (uint32_t i = 0; i < SENDERS; i++) {
		s[i] = (struct sender){ .ctx = ctx, .addr = addr, .opts = o, .id = i,
					.port = rdmx_listener_port(lis), .count = per_sender };
		pthread_create(&s[i].thread, NULL, sender_main, &s[i]);
	}
	accept_all(lis);
	drain(lis, &t, proto);
	for (int i = 0; i < SENDERS; i++) {
		pthread_join(s[i].thread, NULL);
		if (s[i].rc)
			fail_msg("%s: sender %d: %s (%s)", proto, i, rdmx_strerror(s[i].rc), s[i].err);
		assert_int_equal(t.next[i], per_sender);
	}
	assert_int_equal(t.total, SENDERS * per_sender);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(ctx);
}
