/* SPDX-License-Identifier: MIT */
/*
 * The threading contract of rdmx.h, exercised for every protocol on the
 * fake fabric: one thread receives on the listener (rdmx_listener_recv),
 * worker threads reply on the member connections (rdmx_msg_alloc,
 * rdmx_send, rdmx_flush, rdmx_msg_release of the received message), and
 * members are closed by their worker while the listener goes on
 * receiving. Clients check every echoed payload (sequence number and
 * pattern). Meant to run under TSan too (RDMX_TEST_QUICK counts).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmx/rdmx.h>

#include "harness.h"

#define NCLIENTS 4
#define NWORKERS 2
#define QUITTER 0            /* client whose member the server closes */
#define QUIT_AFTER 8         /* messages the quitter sends */
#define MSG_BYTES 200
#define QCAP 256
#define WAIT_MS 20000

struct job {
	struct rdmx_msg m;   /* received; m.len 0 and conn set: close it */
	rdmx_conn *conn;
};

struct worker {
	pthread_t t;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct job q[QCAP];
	unsigned head, tail;
	int stop;
	long replied, closed;
	int rc;
};

struct client {
	pthread_t t;
	rdmx_conn *conn;
	uint64_t n;
	long bad;
	int rc;
};

struct server {
	rdmx_listener *lis;
	struct worker w[NWORKERS];
	rdmx_conn *members[NCLIENTS];
	int stop;
	long received, gone;
	pthread_mutex_t lock;
};

static struct worker *worker_of(struct server *s, rdmx_conn *c)
{
	for (int i = 0; i < NCLIENTS; i++)
		if (s->members[i] == c)
			return &s->w[i % NWORKERS];
	return NULL;
}

static void job_push(struct worker *w, const struct job *j)
{
	pthread_mutex_lock(&w->lock);
	while (w->tail - w->head == QCAP)
		pthread_cond_wait(&w->cv, &w->lock);
	w->q[w->tail++ % QCAP] = *j;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

static void bump(struct worker *w, long *counter)
{
	pthread_mutex_lock(&w->lock);
	(*counter)++;
	pthread_mutex_unlock(&w->lock);
}

static int job_pop(struct worker *w, struct job *j)
{
	int got = 0;

	pthread_mutex_lock(&w->lock);
	while (w->head == w->tail && !w->stop)
		pthread_cond_wait(&w->cv, &w->lock);
	if (w->head != w->tail) {
		*j = w->q[w->head++ % QCAP];
		got = 1;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->lock);
	return got;
}

/* Echo @j's message on its connection; the quitter's last one closes it. */
static int reply(struct worker *w, struct job *j)
{
	struct rdmx_msg out;
	uint64_t seq = 0;
	int rc;

	if (!j->m.len) { /* the listener reported the member gone */
		rdmx_conn_close(j->conn);
		bump(w, &w->closed);
		return 0;
	}
	memcpy(&seq, j->m.data, sizeof(seq));
	rc = rdmx_msg_alloc(j->conn, j->m.len, &out, WAIT_MS);
	if (!rc) {
		memcpy(out.data, j->m.data, j->m.len);
		out.len = j->m.len;
		rc = rdmx_send(j->conn, &out);
	}
	if (!rc)
		rc = rdmx_flush(j->conn, WAIT_MS);
	rdmx_msg_release(j->conn, &j->m);
	bump(w, &w->replied);
	if (!rc && (seq >> 56) == 0xff) { /* the quitter's last message */
		rdmx_conn_close(j->conn);
		bump(w, &w->closed);
	}
	return rc;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct job j;

	while (job_pop(w, &j)) {
		int rc = reply(w, &j);

		if (rc && !w->rc && rc != -ECONNRESET)
			w->rc = rc;
	}
	return NULL;
}

static void *listener_main(void *arg)
{
	struct server *s = arg;
	struct job j;
	int rc, stop;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		stop = s->stop;
		pthread_mutex_unlock(&s->lock);
		if (stop)
			break;
		memset(&j, 0, sizeof(j));
		rc = rdmx_listener_recv(s->lis, &j.m, 50);
		j.conn = rdmx_msg_conn(&j.m);
		if (rc == -EAGAIN || rc == -ETIMEDOUT || rc == -ENOTCONN || !j.conn)
			continue;
		if (rc) { /* a member left: its worker closes it */
			j.m.len = 0;
			s->gone++;
		} else {
			s->received++;
		}
		job_push(worker_of(s, j.conn), &j);
	}
	return NULL;
}

static int client_one(struct client *cl, uint64_t seq)
{
	struct rdmx_msg m;
	uint64_t got;
	int rc = rdmx_msg_alloc(cl->conn, MSG_BYTES, &m, WAIT_MS);

	if (rc)
		return rc;
	th_fill(m.data, MSG_BYTES, seq);
	m.len = MSG_BYTES;
	rc = rdmx_send(cl->conn, &m);
	if (!rc)
		rc = rdmx_recv(cl->conn, &m, WAIT_MS);
	if (rc)
		return rc;
	memcpy(&got, m.data, sizeof(got));
	if (m.len != MSG_BYTES || got != seq || th_check(m.data, MSG_BYTES, seq) >= 0)
		cl->bad++;
	return rdmx_msg_release(cl->conn, &m);
}

static void *client_main(void *arg)
{
	struct client *cl = arg;
	uint64_t flag = cl->n == QUIT_AFTER ? 0xffull << 56 : 0;

	for (uint64_t i = 0; i < cl->n && !cl->rc; i++)
		cl->rc = client_one(cl, i + 1 == cl->n ? (i | flag) : i);
	return NULL;
}

static void server_start(struct server *s, pthread_t *lt)
{
	pthread_mutex_init(&s->lock, NULL);
	for (int i = 0; i < NWORKERS; i++) {
		pthread_mutex_init(&s->w[i].lock, NULL);
		pthread_cond_init(&s->w[i].cv, NULL);
		assert_int_equal(pthread_create(&s->w[i].t, NULL, worker_main, &s->w[i]), 0);
	}
	assert_int_equal(pthread_create(lt, NULL, listener_main, s), 0);
}

static void server_stop(struct server *s, pthread_t lt)
{
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_mutex_unlock(&s->lock);
	pthread_join(lt, NULL);
	for (int i = 0; i < NWORKERS; i++) {
		pthread_mutex_lock(&s->w[i].lock);
		s->w[i].stop = 1;
		pthread_cond_broadcast(&s->w[i].cv);
		pthread_mutex_unlock(&s->w[i].lock);
		pthread_join(s->w[i].t, NULL);
		pthread_cond_destroy(&s->w[i].cv);
		pthread_mutex_destroy(&s->w[i].lock);
		assert_int_equal(s->w[i].rc, 0);
	}
}

static void connect_all(rdmx_ctx *ctx, struct server *s, struct client *cl,
			const struct rdmx_conn_opts *o)
{
	for (int i = 0; i < NCLIENTS; i++) {
		struct th_acceptor a = { .lis = s->lis };

		th_accept_start(&a);
		assert_int_equal(rdmx_dial(ctx, th_addr(), rdmx_listener_port(s->lis),
					   o, &cl[i].conn), 0);
		assert_int_equal(th_accept_join(&a), 0);
		s->members[i] = a.conn;
	}
}

static void run_protocol(const char *proto)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() };
	struct rdmx_conn_opts o;
	struct server s;
	struct client cl[NCLIENTS];
	rdmx_ctx *ctx;
	pthread_t lt;
	long replied = 0, closed = 0;

	memset(&s, 0, sizeof(s));
	memset(cl, 0, sizeof(cl));
	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	o.max_msg_size = 1024;
	o.send_depth = 8;
	o.recv_depth = 16;
	o.ring_size = 1 << 14;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &s.lis), 0);
	connect_all(ctx, &s, cl, &o);
	server_start(&s, &lt);
	for (int i = 0; i < NCLIENTS; i++) {
		cl[i].n = i == QUITTER ? QUIT_AFTER : th_count(1000);
		assert_int_equal(pthread_create(&cl[i].t, NULL, client_main, &cl[i]), 0);
	}
	for (int i = 0; i < NCLIENTS; i++) {
		pthread_join(cl[i].t, NULL);
		if (cl[i].rc)
			fprintf(stderr, "%s client %d: %s (%s)\n", proto, i,
				rdmx_strerror(cl[i].rc), rdmx_conn_error(cl[i].conn));
		assert_int_equal(cl[i].rc, 0);
		assert_int_equal(cl[i].bad, 0);
	}
	/* The rest leave now, while the listener is still receiving. */
	for (int i = 0; i < NCLIENTS; i++)
		if (i != QUITTER)
			rdmx_conn_close(cl[i].conn);
	for (double t0 = th_now_ms(); th_now_ms() - t0 < WAIT_MS;) {
		closed = 0;
		for (int i = 0; i < NWORKERS; i++) {
			pthread_mutex_lock(&s.w[i].lock);
			closed += s.w[i].closed;
			pthread_mutex_unlock(&s.w[i].lock);
		}
		if (closed >= NCLIENTS)
			break;
		usleep(1000);
	}
	server_stop(&s, lt);
	for (int i = 0; i < NWORKERS; i++)
		replied += s.w[i].replied;
	fprintf(stderr, "%s: %ld echoed, %ld members closed by workers\n",
		proto, replied, closed);
	assert_int_equal(replied, s.received);
	assert_int_equal(closed, NCLIENTS);
	pthread_mutex_destroy(&s.lock);
	rdmx_conn_close(cl[QUITTER].conn);
	rdmx_listener_destroy(s.lis);
	rdmx_ctx_destroy(ctx);
}

static void t_send_recv(void **st) { (void)st; run_protocol("send_recv"); }
static void t_srq(void **st) { (void)st; run_protocol("srq"); }
static void t_read(void **st) { (void)st; run_protocol("read"); }
static void t_write_simplex(void **st) { (void)st; run_protocol("write_simplex"); }
static void t_write_magic(void **st) { (void)st; run_protocol("write_magic"); }
static void t_write_duplex(void **st) { (void)st; run_protocol("write_duplex"); }
static void t_write_atomic(void **st) { (void)st; run_protocol("write_atomic"); }
static void t_direct_write(void **st) { (void)st; run_protocol("direct_write"); }
static void t_buffered_read(void **st) { (void)st; run_protocol("buffered_read"); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_send_recv),
		cmocka_unit_test(t_srq),
		cmocka_unit_test(t_read),
		cmocka_unit_test(t_write_simplex),
		cmocka_unit_test(t_write_magic),
		cmocka_unit_test(t_write_duplex),
		cmocka_unit_test(t_write_atomic),
		cmocka_unit_test(t_direct_write),
		cmocka_unit_test(t_buffered_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
