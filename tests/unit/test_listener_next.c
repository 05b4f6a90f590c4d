/* SPDX-License-Identifier: MIT */
/*
 * rdmx_listener_next, every protocol, on the fake fabric (and on rxe in
 * the integration build): a server that is one loop over it sees each of
 * several clients come up (RDMX_EVENT_CONN) before any of its messages,
 * every message once and in order per client with its payload intact
 * (RDMX_EVENT_MSG), and each client's departure (RDMX_EVENT_CLOSED) after
 * its last message; clients that dial while others stream are taken; an
 * idle listener times out; a shut-down one returns -ESHUTDOWN; a loop of
 * zero-timeout polls that parks by itself sees a dial at once.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmx/rdmx.h>

#include "core/event.h"
#include "core/waitset.h"
#include "harness.h"

#define NCLIENTS 3
#define MSG_BYTES 100
#define WAIT_MS 20000

static const char *protocol;

struct client {
	pthread_t t;
	rdmx_ctx *ctx;
	uint16_t port;
	uint32_t id;
	uint64_t count;
	int rc;
	char err[256];
};

static struct rdmx_conn_opts opts(void)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	o.max_msg_size = 4096;
	o.ring_size = 64 * 1024;
	return o;
}

/* Payload: client id, sequence number, then th_fill's pattern. */
static int client_send(rdmx_conn *c, uint32_t id, uint64_t seq)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, MSG_BYTES, &m, WAIT_MS);

	if (rc)
		return rc;
	memcpy(m.data, &id, sizeof(id));
	memcpy((char *)m.data + 4, &seq, sizeof(seq));
	th_fill((char *)m.data + 12, MSG_BYTES - 12, seq * NCLIENTS + id);
	m.len = MSG_BYTES;
	return rdmx_send(c, &m);
}

static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct rdmx_conn_opts o = opts();
	rdmx_conn *c;

	cl->rc = rdmx_dial(cl->ctx, th_addr(), cl->port, &o, &c);
	if (cl->rc) {
		snprintf(cl->err, sizeof(cl->err), "dial: %s", rdmx_last_error());
		return NULL;
	}
	for (uint64_t i = 0; !cl->rc && i < cl->count; i++)
		cl->rc = client_send(c, cl->id, i);
	if (!cl->rc)
		cl->rc = rdmx_flush(c, WAIT_MS);
	if (cl->rc)
		snprintf(cl->err, sizeof(cl->err), "%s", rdmx_conn_error(c));
	rdmx_conn_close(c);
	return NULL;
}

struct seen {
	rdmx_conn *conn[NCLIENTS];
	uint64_t next[NCLIENTS];
	int up, closed;
	uint64_t msgs;
};

static int conn_index(const struct seen *s, const rdmx_conn *c)
{
	for (int i = 0; i < s->up; i++)
		if (s->conn[i] == c)
			return i;
	return -1;
}

static void on_msg(struct seen *s, const struct rdmx_event *ev)
{
	int k = conn_index(s, ev->conn);
	uint32_t id;
	uint64_t seq;

	if (k < 0)
		fail_msg("%s: a message on a connection never announced", protocol);
	assert_int_equal(ev->msg.len, MSG_BYTES);
	memcpy(&id, ev->msg.data, sizeof(id));
	memcpy(&seq, (const char *)ev->msg.data + 4, sizeof(seq));
	assert_true(id < NCLIENTS);
	assert_int_equal(seq, s->next[k]);
	assert_int_equal(th_check((const char *)ev->msg.data + 12, MSG_BYTES - 12,
				  seq * NCLIENTS + id), -1);
	s->next[k]++;
	s->msgs++;
	assert_int_equal(rdmx_msg_release(ev->conn, (struct rdmx_msg *)&ev->msg), 0);
}

static void serve(rdmx_listener *lis, struct seen *s, uint64_t per_client)
{
	struct rdmx_event ev;

	while (s->closed < NCLIENTS) {
		int rc = rdmx_listener_next(lis, &ev, WAIT_MS);

		if (rc)
			fail_msg("%s: listener_next after %llu messages: %s (%s)", protocol,
				 (unsigned long long)s->msgs, rdmx_strerror(rc),
				 rdmx_listener_error(lis));
		if (ev.type == RDMX_EVENT_CONN) {
			assert_true(s->up < NCLIENTS);
			s->conn[s->up++] = ev.conn;
		} else if (ev.type == RDMX_EVENT_MSG) {
			on_msg(s, &ev);
		} else {
			int k = conn_index(s, ev.conn);

			assert_int_equal(ev.type, RDMX_EVENT_CLOSED);
			assert_true(k >= 0);
			assert_int_equal(s->next[k], per_client); /* after its last message */
			s->conn[k] = NULL; /* closed: never named again */
			rdmx_conn_close(ev.conn);
			s->closed++;
		}
	}
}

static void test_one_loop(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = opts();
	uint64_t per = th_count(2000);
	struct client cl[NCLIENTS];
	struct seen s = { 0 };
	rdmx_listener *lis;
	rdmx_ctx *ctx;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &lis), 0);
	for (uint32_t i = 0; i < NCLIENTS; i++) {
		cl[i] = (struct client){ .ctx = ctx, .port = rdmx_listener_port(lis), .id = i,
					 .count = per };
		pthread_create(&cl[i].t, NULL, client_main, &cl[i]);
	}
	serve(lis, &s, per);
	for (int i = 0; i < NCLIENTS; i++) {
		pthread_join(cl[i].t, NULL);
		if (cl[i].rc)
			fail_msg("%s: client %d: %s (%s)", protocol, i, rdmx_strerror(cl[i].rc), cl[i].err);
	}
	assert_int_equal(s.up, NCLIENTS);
	assert_int_equal(s.msgs, per * NCLIENTS);
	print_message("%s: %d connections, %llu messages, %d departures\n", protocol, s.up,
		      (unsigned long long)s.msgs, s.closed);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(ctx);
}

static void test_idle_and_shutdown(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = opts();
	struct rdmx_event ev;
	rdmx_listener *lis;
	rdmx_ctx *ctx;
	double t0;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &lis), 0);
	assert_int_equal(rdmx_listener_next(lis, &ev, 0), -EAGAIN);
	t0 = th_now_ms();
	assert_int_equal(rdmx_listener_next(lis, &ev, 100), -ETIMEDOUT);
	assert_true(th_now_ms() - t0 >= 90);
	assert_non_null(strstr(rdmx_listener_error(lis), "within 100 ms"));
	rdmx_listener_shutdown(lis);
	assert_int_equal(rdmx_listener_next(lis, &ev, -1), -ESHUTDOWN);
	assert_int_equal(rdmx_listener_next(NULL, &ev, 0), -EINVAL);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(ctx);
}

/*
 * A loop that polls with no wait and parks by itself (rpc herd's server)
 * says so with rdmx__listener_parked(): its next poll looks for a dial
 * first. A zero-timeout poll otherwise looks every 64th time: after 5
 * polls with nothing pending, the next 50 never look, and without the
 * call the test fails. Counted in polls (10 ms apart), not in time.
 */
static void test_parked_looks_for_dials(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o = opts();
	struct client cl = { 0 };
	struct rdmx_event ev;
	rdmx_listener *lis;
	int polls, rc = -EAGAIN;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&cl.ctx, &co), 0);
	assert_int_equal(rdmx_listen(cl.ctx, th_addr(), 0, &o, &lis), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rdmx_listener_next(lis, &ev, 0), -EAGAIN);
	cl.port = rdmx_listener_port(lis);
	assert_int_equal(pthread_create(&cl.t, NULL, client_main, &cl), 0);
	for (polls = 0; rc == -EAGAIN && polls < 50; polls++) {
		usleep(10 * 1000);
		rdmx__listener_parked(lis);
		rc = rdmx_listener_next(lis, &ev, 0);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(ev.type, RDMX_EVENT_CONN);
	pthread_join(cl.t, NULL);
	assert_int_equal(cl.rc, 0);
	rdmx_conn_close(ev.conn);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(cl.ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_loop),
		cmocka_unit_test(test_idle_and_shutdown),
		cmocka_unit_test(test_parked_looks_for_dials),
	};
	int failed = 0, i = 0;

	while ((protocol = th_next_protocol(&i)))
		failed += _cmocka_run_group_tests(protocol, tests, sizeof(tests) / sizeof(tests[0]),
						  NULL, NULL);
	return failed ? 1 : 0;
}
