/* SPDX-License-Identifier: MIT */
/*
 * The one wait step (src/core/wait.c) on the fake fabric:
 *  - a zero-timeout poll that finds nothing returns -EAGAIN and records no
 *    message: the thread's and the objects' error text stay as they were;
 *  - an idle blocked (and adaptive) receive sleeps: its CPU time is a small
 *    part of the wall time (a property, bounded generously, not a speed);
 *  - the wait options are checked;
 *  - rdmx_conn_fd() turns readable when a message arrives and not before
 *    (after at most two spurious wakes of a receiver that publishes its
 *    sleep), on every protocol; rdmx_listener_fd() when a connection
 *    request comes;
 *  - a receiver blocked in BLOCK mode is woken by a message, and by its
 *    peer's leaving, well before the sleep's backstop (raised to 30 s
 *    here: a wake that only came from the backstop fails the test);
 *  - so is a blocked rdmx_listener_next by a message on a member, and a
 *    ping-pong through it; idle, it sleeps as rdmx_recv does;
 *  - a direct_write sender blocked for room by the receiver's release;
 *  - a blocked ring receiver of every notify x ack that polls memory, by
 *    the sender's doorbell (both ends count it), and a buffered_read one.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cmocka.h>

#include "harness.h"
#include "protocols/buffered_read.h"
#include "protocols/write_ring.h"

#define IDLE_CPU_MAX_PCT 20.0
#define BACKSTOP_MS 30000
#define WAKE_MAX_MS 3000.0 /* a wake well before the backstop */
/* ROUNDS round trips, every receive asleep first, with the backstop at
 * RT_BACKSTOP_MS: a protocol whose waits were woken by the backstop alone
 * would take 2 * ROUNDS * 2 s = 80 s; the bound is an eighth of that (a
 * loaded host's scheduling takes ~2 s; the ring protocols' doorbell race,
 * write_ring_conn.c, can leave a rare wake to the backstop) */
#define RT_BACKSTOP_MS 2000
#define ROUNDS_MAX_MS (2.0 * ROUNDS * RT_BACKSTOP_MS / 8)

extern int rdmx__wait_backstop_ms; /* src/core/waitset.c */

/* Every test runs with the backstop at BACKSTOP_MS: a wake that only the
 * backstop brought fails a wake bound by far. */
static int saved_backstop;

static int raise_backstop(void **state)
{
	(void)state;
	saved_backstop = rdmx__wait_backstop_ms;
	rdmx__wait_backstop_ms = BACKSTOP_MS;
	return 0;
}

static int restore_backstop(void **state)
{
	(void)state;
	rdmx__wait_backstop_ms = saved_backstop;
	return 0;
}

static struct rdmx_conn_opts opts(const char *proto, uint8_t mode)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	o.wait_mode = mode;
	return o;
}

static void open_pair(struct th_pair *p, const struct rdmx_conn_opts *o)
{
	int rc = th_pair_open(p, o, o);

	if (rc)
		fail_msg("%s: cannot connect a pair: %s (%s)", o->protocol,
			 rdmx_strerror(rc), rdmx_last_error());
}

/* Put a known message in the thread's last error; returns a copy. */
static void known_error(char *buf, size_t len)
{
	struct rdmx_ctx_opts co = { .fabric = "no-such-fabric" };
	rdmx_ctx *ctx;

	assert_int_equal(rdmx_ctx_create(&ctx, &co), -EINVAL);
	snprintf(buf, len, "%s", rdmx_last_error());
	assert_non_null(strstr(buf, "no-such-fabric"));
}

/* Every zero-timeout poll finds nothing and leaves every error text. */
static void quiet_polls(struct th_pair *p, const char *proto)
{
	char last[256], conn[256], lis[256];
	struct rdmx_event ev;
	struct rdmx_msg m;
	rdmx_conn *c;

	known_error(last, sizeof(last));
	snprintf(conn, sizeof(conn), "%s", rdmx_conn_error(p->server));
	snprintf(lis, sizeof(lis), "%s", rdmx_listener_error(p->lis));
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(rdmx_recv(p->server, &m, 0), -EAGAIN);
		assert_int_equal(rdmx_recv(p->client, &m, 0), -EAGAIN);
		assert_int_equal(rdmx_listener_recv(p->lis, &m, 0), -EAGAIN);
		assert_int_equal(rdmx_accept(p->lis, 0, &c), -EAGAIN);
		assert_int_equal(rdmx_listener_next(p->lis, &ev, 0), -EAGAIN);
	}
	if (strcmp(rdmx_last_error(), last))
		fail_msg("%s: a zero-timeout poll wrote '%s'", proto, rdmx_last_error());
	assert_string_equal(rdmx_conn_error(p->server), conn);
	assert_string_equal(rdmx_listener_error(p->lis), lis);
}

static void test_zero_timeout_formats_nothing(void **state)
{
	const char *const *names = rdmx_protocol_names();

	(void)state;
	for (int i = 0; names[i]; i++) {
		struct rdmx_conn_opts o = opts(names[i], RDMX_WAIT_DEFAULT);
		struct th_pair p;

		open_pair(&p, &o);
		quiet_polls(&p, names[i]);
		th_pair_close(&p);
	}
}

static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* An idle receive of @ms on @proto in @mode: the share of a core it used. */
static double idle_recv_pct(const char *proto, uint8_t mode, int listener, int ms)
{
	struct rdmx_conn_opts o = opts(proto, mode);
	struct th_pair p;
	struct rdmx_msg m;
	double c0, t0, pct;
	int rc;

	open_pair(&p, &o);
	c0 = cpu_ms();
	t0 = th_now_ms();
	rc = listener ? rdmx_listener_recv(p.lis, &m, ms) : rdmx_recv(p.server, &m, ms);
	pct = 100.0 * (cpu_ms() - c0) / (th_now_ms() - t0);
	assert_int_equal(rc, -ETIMEDOUT);
	assert_true(th_now_ms() - t0 >= ms - 10);
	th_pair_close(&p);
	print_message("idle %s(%d ms) on %s, wait mode %u: %.2f%% of a core\n",
		      listener ? "rdmx_listener_recv" : "rdmx_recv", ms, proto, mode, pct);
	return pct;
}

static void test_idle_block_sleeps(void **state)
{
	(void)state;
	/* a CQ receiver and a receiver polling ring memory */
	assert_true(idle_recv_pct("send_recv", RDMX_WAIT_BLOCK, 0, 2000) < IDLE_CPU_MAX_PCT);
	assert_true(idle_recv_pct("write_magic", RDMX_WAIT_BLOCK, 0, 2000) < IDLE_CPU_MAX_PCT);
	/* a receiver whose poll is a READ: asleep, it posts none */
	assert_true(idle_recv_pct("buffered_read", RDMX_WAIT_BLOCK, 0, 1000) < IDLE_CPU_MAX_PCT);
}

/* An idle rdmx_listener_next of @ms on @proto in @mode: its share of a core. */
static double idle_next_pct(const char *proto, uint8_t mode, int ms)
{
	struct rdmx_conn_opts o = opts(proto, mode);
	struct rdmx_event ev;
	struct th_pair p;
	double c0, t0, pct;
	int rc;

	open_pair(&p, &o);
	c0 = cpu_ms();
	t0 = th_now_ms();
	rc = rdmx_listener_next(p.lis, &ev, ms);
	pct = 100.0 * (cpu_ms() - c0) / (th_now_ms() - t0);
	assert_int_equal(rc, -ETIMEDOUT);
	assert_true(th_now_ms() - t0 >= ms - 10);
	th_pair_close(&p);
	print_message("idle rdmx_listener_next(%d ms) on %s, wait mode %u: %.2f%% of a core\n",
		      ms, proto, mode, pct);
	return pct;
}

static void test_idle_listener_next_sleeps(void **state)
{
	(void)state;
	assert_true(idle_next_pct("send_recv", RDMX_WAIT_BLOCK, 2000) < IDLE_CPU_MAX_PCT);
	assert_true(idle_next_pct("srq", RDMX_WAIT_BLOCK, 1000) < IDLE_CPU_MAX_PCT);
}

static void test_idle_adaptive_sleeps(void **state)
{
	(void)state;
	/* the default mode; the listener's waits (shared queue and ring) */
	assert_true(idle_recv_pct("srq", RDMX_WAIT_DEFAULT, 1, 1000) < IDLE_CPU_MAX_PCT);
	assert_true(idle_recv_pct("write_atomic", RDMX_WAIT_ADAPTIVE, 1, 1000) < IDLE_CPU_MAX_PCT);
}

static void test_bad_wait_options(void **state)
{
	struct rdmx_ctx_opts co;
	struct rdmx_conn_opts o = opts("send_recv", 9);
	rdmx_listener *lis;
	rdmx_ctx *ctx;

	(void)state;
	rdmx_ctx_opts_init(&co);
	co.fabric = "fake";
	co.wait_mode = 4;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "wait_mode"));
	co.wait_mode = RDMX_WAIT_BLOCK;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, "fake", 0, &o, &lis), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "wait_mode 9"));
	o = opts("send_recv", RDMX_WAIT_ADAPTIVE);
	o.spin_us = 2000000;
	assert_int_equal(rdmx_listen(ctx, "fake", 0, &o, &lis), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "spin_us"));
	rdmx_ctx_destroy(ctx);
}

/* Is @fd readable within @ms? */
static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) > 0 && (p.revents & POLLIN);
}

static void send_one(rdmx_conn *c, const char *what)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_msg_alloc(c, 32, &m, 5000), 0);
	snprintf(m.data, m.cap, "%s", what);
	m.len = strlen(what) + 1;
	assert_int_equal(rdmx_send(c, &m), 0);
}

/* Receive until -EAGAIN (which re-arms the fd); messages are released. */
static void drain(rdmx_conn *c)
{
	struct rdmx_msg m;
	int rc;

	while (!(rc = rdmx_recv(c, &m, 0)))
		assert_int_equal(rdmx_msg_release(c, &m), 0);
	assert_int_equal(rc, -EAGAIN);
}

/*
 * Drain @c and wait for its fd to settle: a receiver that polls memory
 * publishes its sleep with a WRITE whose completion makes the fd
 * readable once more (a spurious wake, rdmx.h); an -EAGAIN after it
 * leaves the fd quiet. At most 2 such wakes.
 */
static void settle(rdmx_conn *c, int fd, const char *proto)
{
	int spurious = 0;

	drain(c);
	while (readable(fd, 0) && spurious++ < 2)
		drain(c);
	if (readable(fd, 0))
		fail_msg("%s: fd readable with nothing to receive after %d drains", proto,
			 spurious + 1);
}

/* @o's server fd: readable once a message came, not before. */
static void fd_readiness_opts(const struct rdmx_conn_opts *o)
{
	const char *proto = o->protocol;
	struct th_pair p;
	struct rdmx_msg m;
	int fd;

	open_pair(&p, o);
	fd = rdmx_conn_fd(p.server);
	if (fd < 0)
		fail_msg("%s: no fd: %s (%s)", proto, rdmx_strerror(fd), rdmx_last_error());
	for (int round = 0; round < 3; round++) {
		settle(p.server, fd, proto);
		send_one(p.client, "ping");
		if (!readable(fd, 5000))
			fail_msg("%s: fd not readable 5 s after a message (round %d)", proto, round);
		assert_int_equal(rdmx_recv(p.server, &m, 0), 0);
		assert_string_equal(m.data, "ping");
		assert_int_equal(rdmx_msg_release(p.server, &m), 0);
	}
	print_message("rdmx_conn_fd on %s (notify %u, ack %u): readable on a message, not before\n",
		      proto, o->notify, o->ack);
	th_pair_close(&p);
}

static void fd_readiness(const char *proto, uint8_t notify)
{
	struct rdmx_conn_opts o = opts(proto, RDMX_WAIT_BLOCK);

	o.notify = notify;
	fd_readiness_opts(&o);
}

static void test_conn_fd(void **state)
{
	const char *const *names = rdmx_protocol_names();

	(void)state;
	assert_int_equal(rdmx_conn_fd(NULL), -EINVAL);
	for (int i = 0; names[i]; i++)
		fd_readiness(names[i], RDMX_NOTIFY_DEFAULT);
	/* write_simplex and write_magic may announce records with a
	 * completion (duplex avoids receives, write_atomic has no IMM) */
	fd_readiness("write_simplex", RDMX_NOTIFY_IMM);
	fd_readiness("write_magic", RDMX_NOTIFY_IMM);
}

struct dialer {
	rdmx_ctx *ctx;
	uint16_t port;
	rdmx_conn *c;
	int rc;
};

static void *dial_main(void *arg)
{
	struct dialer *d = arg;
	struct rdmx_conn_opts o = opts("send_recv", RDMX_WAIT_BLOCK);

	d->rc = rdmx_dial(d->ctx, th_addr(), d->port, &o, &d->c);
	return NULL;
}

static void test_listener_fd(void **state)
{
	struct rdmx_conn_opts o = opts("send_recv", RDMX_WAIT_BLOCK);
	struct dialer d = { 0 };
	struct th_pair p;
	rdmx_conn *c = NULL;
	pthread_t t;
	int fd, rc = -EAGAIN;

	(void)state;
	open_pair(&p, &o);
	fd = rdmx_listener_fd(p.lis);
	assert_true(fd >= 0);
	assert_int_equal(rdmx_accept(p.lis, 0, &c), -EAGAIN);
	assert_false(readable(fd, 0));
	d.ctx = p.ctx;
	d.port = rdmx_listener_port(p.lis);
	assert_int_equal(pthread_create(&t, NULL, dial_main, &d), 0);
	for (int i = 0; i < 100 && rc == -EAGAIN; i++) {
		if (!readable(fd, 5000))
			fail_msg("listener fd not readable 5 s after a dial");
		rc = rdmx_accept(p.lis, 0, &c);
	}
	assert_int_equal(rc, 0);
	pthread_join(t, NULL);
	assert_int_equal(d.rc, 0);
	assert_int_equal(rdmx_accept(p.lis, 0, &c), -EAGAIN);
	assert_false(readable(fd, 0));
	rdmx_conn_close(d.c);
	rdmx_conn_close(c);
	th_pair_close(&p);
}

struct sleeper {
	rdmx_conn *c;
	int rc;
	double woke_ms;
	char got[32];
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	struct rdmx_msg m;

	s->rc = rdmx_recv(s->c, &m, BACKSTOP_MS + 10000);
	s->woke_ms = th_now_ms();
	if (!s->rc) {
		snprintf(s->got, sizeof(s->got), "%s", (const char *)m.data);
		rdmx_msg_release(s->c, &m);
	}
	return NULL;
}

/* A BLOCK receive on @p's server, asleep for 300 ms, then a message
 * (@leave 0) or the client's close (@leave 1): how long after it the
 * receive returned. */
static double pair_blocked_wake(struct th_pair *p, const char *proto, int leave)
{
	struct sleeper s = { .c = p->server };
	struct timespec nap = { 0, 300000000L };
	pthread_t t;
	double t0, ms;

	assert_int_equal(pthread_create(&t, NULL, sleeper_main, &s), 0);
	nanosleep(&nap, NULL);
	t0 = th_now_ms();
	if (leave) {
		rdmx_conn_close(p->client);
		p->client = NULL;
	} else {
		send_one(p->client, "wake");
	}
	pthread_join(t, NULL);
	ms = s.woke_ms - t0;
	if (leave)
		assert_int_equal(s.rc, -ECONNRESET);
	else
		assert_string_equal(s.got, "wake");
	print_message("blocked rdmx_recv on %s woken by %s after %.2f ms\n", proto,
		      leave ? "the peer's close" : "a message", ms);
	return ms;
}

static double blocked_wake(const char *proto, int leave)
{
	struct rdmx_conn_opts o = opts(proto, RDMX_WAIT_BLOCK);
	struct th_pair p;
	double ms;

	open_pair(&p, &o);
	ms = pair_blocked_wake(&p, proto, leave);
	th_pair_close(&p);
	return ms;
}

/* The server side of ROUNDS round trips: echo in BLOCK mode, through
 * rdmx_listener_next (@next) or rdmx_recv; rc the first failure. */
#define ROUNDS 20
struct echoer {
	struct th_pair *p;
	int next;
	int rc;
};

static int echo_one(struct echoer *e)
{
	struct rdmx_event ev = { .conn = e->p->server };
	int rc;

	if (e->next)
		rc = rdmx_listener_next(e->p->lis, &ev, BACKSTOP_MS + 10000);
	else
		rc = rdmx_recv(ev.conn, &ev.msg, BACKSTOP_MS + 10000);
	if (!rc && e->next && ev.type != RDMX_EVENT_MSG)
		rc = -EPROTO;
	if (!rc)
		rc = rdmx_msg_release(ev.conn, &ev.msg);
	if (!rc)
		rc = rdmx_msg_alloc(ev.conn, 32, &ev.msg, 5000);
	if (!rc) {
		ev.msg.len = 5;
		memcpy(ev.msg.data, "pong", 5);
		rc = rdmx_send(ev.conn, &ev.msg);
	}
	return rc;
}

static void *echo_main(void *arg)
{
	struct echoer *e = arg;

	for (int i = 0; i < ROUNDS && !e->rc; i++)
		e->rc = echo_one(e);
	return NULL;
}

/* ROUNDS round trips against an echoer on its own thread, both ends in
 * BLOCK mode (every receive finds nothing and sleeps): the wall time. */
static double round_trips(struct th_pair *p, int next)
{
	struct echoer e = { .p = p, .next = next };
	struct rdmx_msg m;
	pthread_t t;
	double t0 = th_now_ms();

	assert_int_equal(pthread_create(&t, NULL, echo_main, &e), 0);
	for (int i = 0; i < ROUNDS; i++) {
		send_one(p->client, "ping");
		assert_int_equal(rdmx_recv(p->client, &m, BACKSTOP_MS + 10000), 0);
		assert_string_equal(m.data, "pong");
		assert_int_equal(rdmx_msg_release(p->client, &m), 0);
	}
	pthread_join(t, NULL);
	assert_int_equal(e.rc, 0);
	return th_now_ms() - t0;
}

/* ROUNDS round trips on @p (through rdmx_listener_next if @next) with the
 * backstop at RT_BACKSTOP_MS, checked against ROUNDS_MAX_MS. */
static void rt_check(struct th_pair *p, int next, const char *proto)
{
	double ms;

	rdmx__wait_backstop_ms = RT_BACKSTOP_MS;
	ms = round_trips(p, next);
	rdmx__wait_backstop_ms = BACKSTOP_MS;
	print_message("%d round trips, both ends blocked in %s, on %s: %.1f ms\n", ROUNDS,
		      next ? "rdmx_listener_next" : "rdmx_recv", proto, ms);
	assert_true(ms < ROUNDS_MAX_MS);
}

static void test_block_wakes(void **state)
{
	const char *const *names = rdmx_protocol_names();

	(void)state;
	for (int i = 0; names[i]; i++) {
		struct rdmx_conn_opts o = opts(names[i], RDMX_WAIT_BLOCK);
		struct th_pair p;

		assert_true(blocked_wake(names[i], 0) < WAKE_MAX_MS);
		assert_true(blocked_wake(names[i], 1) < WAKE_MAX_MS);
		open_pair(&p, &o);
		rt_check(&p, 0, names[i]);
		th_pair_close(&p);
	}
}

/*
 * A blocked buffered_read receiver (the sender posts nothing) is woken by
 * the sender's doorbell, both ends count it; a blocked ping-pong too.
 */
static void test_buffered_read_doorbell(void **state)
{
	struct rdmx_conn_opts o = opts("buffered_read", RDMX_WAIT_BLOCK);
	uint64_t sent, recv, unused;
	struct th_pair p;

	(void)state;
	open_pair(&p, &o);
	assert_true(pair_blocked_wake(&p, o.protocol, 0) < WAKE_MAX_MS);
	rdmx__br_bells(p.client, &sent, &unused);
	rdmx__br_bells(p.server, &unused, &recv);
	print_message("buffered_read: %llu doorbell(s) sent, %llu received\n",
		      (unsigned long long)sent, (unsigned long long)recv);
	assert_true(sent >= 1);
	assert_true(recv >= 1);
	rt_check(&p, 0, o.protocol);
	th_pair_close(&p);
}

/* The ring variants whose receiver polls memory, with each ack. */
static const struct ring_variant {
	const char *proto;
	uint8_t notify, ack;
} ring_variants[] = {
	{ "write_simplex", RDMX_NOTIFY_POLL, RDMX_ACK_SEND },
	{ "write_simplex", RDMX_NOTIFY_POLL, RDMX_ACK_READ },
	{ "write_simplex", RDMX_NOTIFY_OFF, RDMX_ACK_READ },
	{ "write_magic", RDMX_NOTIFY_POLL, RDMX_ACK_READ },
	{ "write_duplex", RDMX_NOTIFY_DEFAULT, RDMX_ACK_DEFAULT }, /* ack READ */
	{ "write_duplex", RDMX_NOTIFY_REV, RDMX_ACK_READ },
	{ "write_duplex", RDMX_NOTIFY_OFF, RDMX_ACK_SEND },
};

static struct rdmx_conn_opts variant_opts(const struct ring_variant *v)
{
	struct rdmx_conn_opts o = opts(v->proto, RDMX_WAIT_BLOCK);

	o.notify = v->notify;
	o.ack = v->ack;
	return o;
}

/*
 * A blocked ring receiver of every variant (ack SEND and READ alike) is
 * woken by the sender's doorbell: the message wakes it, the sender says
 * it rang and the receiver that a doorbell came (with the backstop at 30
 * s a timed park would show as no doorbell, not as a slow test); a
 * ping-pong of blocked ends wakes the same way; its fd is readable on a
 * message.
 */
static void test_ring_doorbells(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(ring_variants) / sizeof(ring_variants[0]); i++) {
		struct rdmx_conn_opts o = variant_opts(&ring_variants[i]);
		struct rdmx__wring_stats sst, cst;
		struct th_pair p;

		open_pair(&p, &o);
		assert_true(pair_blocked_wake(&p, o.protocol, 0) < WAKE_MAX_MS);
		assert_int_equal(rdmx__wring_stats(p.server, &sst), 0);
		assert_int_equal(rdmx__wring_stats(p.client, &cst), 0);
		print_message("%s notify %u ack %s: %llu doorbell(s) sent, %llu received\n",
			      o.protocol, sst.notify, sst.ack_read ? "read" : "send",
			      (unsigned long long)cst.doorbells_sent,
			      (unsigned long long)sst.doorbells_recv);
		assert_true(cst.doorbells_sent >= 1);
		assert_true(sst.doorbells_recv >= 1);
		rt_check(&p, 0, o.protocol);
		th_pair_close(&p);
		fd_readiness_opts(&o);
	}
}

struct next_sleeper {
	rdmx_listener *lis;
	int rc;
	double woke_ms;
	struct rdmx_event ev;
};

static void *next_sleeper_main(void *arg)
{
	struct next_sleeper *s = arg;

	s->rc = rdmx_listener_next(s->lis, &s->ev, BACKSTOP_MS + 10000);
	s->woke_ms = th_now_ms();
	return NULL;
}

/* A BLOCK rdmx_listener_next on @proto, idle for 300 ms, then a message on
 * the member: how long after the send it returned that message. */
static double next_wake(struct th_pair *p, const char *proto)
{
	struct next_sleeper s = { .lis = p->lis };
	struct timespec nap = { 0, 300000000L };
	pthread_t t;
	double t0, ms;

	assert_int_equal(pthread_create(&t, NULL, next_sleeper_main, &s), 0);
	nanosleep(&nap, NULL);
	t0 = th_now_ms();
	send_one(p->client, "wake");
	pthread_join(t, NULL);
	ms = s.woke_ms - t0;
	assert_int_equal(s.rc, 0);
	assert_int_equal(s.ev.type, RDMX_EVENT_MSG);
	assert_ptr_equal(s.ev.conn, p->server);
	assert_string_equal(s.ev.msg.data, "wake");
	assert_int_equal(rdmx_msg_release(p->server, &s.ev.msg), 0);
	print_message("blocked rdmx_listener_next on %s woken by a message after %.2f ms\n",
		      proto, ms);
	return ms;
}

struct holder {
	rdmx_conn *c;
	double released_ms;
	int rc;
};

/* Receive one message, hold it 300 ms, release it. */
static void *holder_main(void *arg)
{
	struct holder *h = arg;
	struct timespec nap = { 0, 300000000L };
	struct rdmx_msg m;

	h->rc = rdmx_recv(h->c, &m, 10000);
	if (h->rc)
		return NULL;
	nanosleep(&nap, NULL);
	h->released_ms = th_now_ms();
	h->rc = rdmx_msg_release(h->c, &m);
	return NULL;
}

/*
 * A sender out of room in BLOCK mode (direct_write with one receive
 * buffer: no descriptor until the receiver releases its message) is woken
 * by the release (the receiver's descriptor WRITE and doorbell), not by
 * the backstop (30 s here).
 */
static void test_sender_wakes_for_room(void **state)
{
	struct rdmx_conn_opts o = opts("direct_write", RDMX_WAIT_BLOCK);
	struct holder h = { 0 };
	struct th_pair p;
	struct rdmx_msg m;
	pthread_t t;
	double ms;

	(void)state;
	o.recv_depth = 1;
	open_pair(&p, &o);
	h.c = p.server;
	assert_int_equal(pthread_create(&t, NULL, holder_main, &h), 0);
	send_one(p.client, "hold");
	assert_int_equal(rdmx_msg_alloc(p.client, 32, &m, BACKSTOP_MS + 10000), 0);
	ms = th_now_ms();
	pthread_join(t, NULL);
	assert_int_equal(h.rc, 0);
	ms -= h.released_ms;
	print_message("direct_write sender blocked for room woken %.2f ms after the release\n", ms);
	assert_true(ms < WAKE_MAX_MS);
	assert_int_equal(rdmx_msg_release(p.client, &m), 0);
	th_pair_close(&p);
}

/*
 * An idle BLOCK rdmx_listener_next is woken by a message on a member
 * connection, and a ping-pong through it does not wait for the backstop
 * (30 s here: one missed wake-up fails the bound by far).
 */
static void test_listener_next_wakes(void **state)
{
	const char *const *names = rdmx_protocol_names();

	(void)state;
	for (int i = 0; names[i]; i++) {
		struct rdmx_conn_opts o = opts(names[i], RDMX_WAIT_BLOCK);
		struct th_pair p;

		open_pair(&p, &o);
		assert_true(next_wake(&p, names[i]) < WAKE_MAX_MS);
		rt_check(&p, 1, names[i]);
		th_pair_close(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero_timeout_formats_nothing),
		cmocka_unit_test(test_idle_block_sleeps),
		cmocka_unit_test(test_idle_adaptive_sleeps),
		cmocka_unit_test(test_bad_wait_options),
		cmocka_unit_test(test_conn_fd),
		cmocka_unit_test(test_listener_fd),
		cmocka_unit_test(test_block_wakes),
		cmocka_unit_test(test_idle_listener_next_sleeps),
		cmocka_unit_test(test_listener_next_wakes),
		cmocka_unit_test(test_sender_wakes_for_room),
		cmocka_unit_test(test_ring_doorbells),
		cmocka_unit_test(test_buffered_read_doorbell),
	};

	return cmocka_run_group_tests(tests, raise_backstop, restore_backstop);
}
