// SPDX-License-Identifier: MIT
/*
 * rdmx bench: the server. One listener per protocol (rdmx protocol number i
 * of rdmx_protocol_names() on port + i, tcp on port + the number of
 * protocols; port 0: ephemeral ports, for the self-test), an accept thread
 * that polls them in turn, and one worker thread per connection running
 * bench_serve_ep() until its client disconnects.
 *
 * --single-receiver (the thesis's N:1): no worker threads for the rdmx
 * protocols; one receiver thread per listener takes every event of it with
 * rdmx_listener_next() (new connections, messages of any of them, closed
 * ones) and answers each message on its connection, so one thread serves
 * all N clients of a protocol. tcp has no listener call: its connections
 * keep a worker each.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_server.h"
#include "cli.h"
#include "cmds.h"

#define ACCEPT_SLICE_MS 10
#define RECV_SLICE_MS 50
#define IDLE_POLL_MS 5	/* a receiver without connections: poll this often */

struct bench_server;

/* --single-receiver: the thread that serves every connection of lis[i]. */
struct srx {
	struct bench_server *s;
	int i;
	int n;			/* connections open */
	bool started;
	pthread_t thread;
};

struct bench_server {
	struct bench_server_cfg cfg;
	rdmx_ctx *ctx;
	int n;
	const char *proto[BENCH_MAX_PROTOS];
	rdmx_listener *lis[BENCH_MAX_PROTOS];	/* NULL for tcp */
	uint16_t port[BENCH_MAX_PROTOS];
	int tcp_fd;
	atomic_bool stop, shutdown;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int active, failed;
	pthread_t thread;
	struct srx srx[BENCH_MAX_PROTOS];
};

struct worker {
	struct bench_server *s;
	struct bench_ep *ep;
	const char *proto;
};

/* The port of @name under base port @base: see the comment at the top. */
uint16_t bench_proto_port(uint16_t base, const char *name)
{
	const char *const *names = rdmx_protocol_names();
	int i;

	if (!base)
		return 0;
	for (i = 0; names[i]; i++)
		if (!strcmp(names[i], name))
			return (uint16_t)(base + i);
	return (uint16_t)(base + i); /* tcp */
}

static void conn_up(struct bench_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->active++;
	pthread_mutex_unlock(&s->mu);
}

static void worker_done(struct bench_server *s, int rc)
{
	pthread_mutex_lock(&s->mu);
	s->active--;
	if (rc)
		s->failed++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct bench_server *s = w->s;
	uint64_t tests = 0;
	int rc;

	rc = bench_serve_ep(w->ep, &s->shutdown, &tests);
	if (rc)
		fprintf(stderr, "rdmx bench: server: %s connection: %s\n", w->proto,
			w->ep->err.msg[0] ? w->ep->err.msg : "failed");
	else if (s->cfg.verbose)
		printf("served a %s connection (%llu tests)\n", w->proto,
		       (unsigned long long)tests);
	fflush(stdout);
	bench_ep_close(w->ep);
	free(w);
	worker_done(s, rc);
	return NULL;
}

static void start_worker(struct bench_server *s, struct bench_ep *ep,
			 const char *proto)
{
	struct worker *w = calloc(1, sizeof(*w));
	pthread_attr_t a;
	pthread_t t;
	int rc = ENOMEM;

	if (w) {
		*w = (struct worker){ s, ep, proto };
		conn_up(s);
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &a, worker_main, w);
		pthread_attr_destroy(&a);
	}
	if (!rc)
		return;
	fprintf(stderr, "rdmx bench: server: cannot start a worker: %s\n", strerror(rc));
	bench_ep_close(ep);
	free(w);
	if (w)
		worker_done(s, rc);
}

/* Take one connection from listener @i if one comes within a slice. */
static void accept_one(struct bench_server *s, int i)
{
	struct cli_err e = { "" };
	struct bench_ep *ep = NULL;
	rdmx_conn *c;
	int rc;

	if (s->lis[i]) {
		rc = rdmx_accept(s->lis[i], ACCEPT_SLICE_MS, &c);
		if (!rc) {
			ep = bench_ep_rdmx(c, -1);
			if (!ep)
				rdmx_conn_close(c);
		} else if (rc != -ETIMEDOUT) {
			cli_fail(&e, "accept", rc, NULL);
		}
	} else {
		rc = bench_tcp_accept(s->tcp_fd, ACCEPT_SLICE_MS, s->cfg.max_msg, -1,
				      &ep, &e);
	}
	if (e.msg[0]) {
		fprintf(stderr, "rdmx bench: server: %s: %s\n", s->proto[i], e.msg);
		usleep(ACCEPT_SLICE_MS * 1000);
	}
	if (ep)
		start_worker(s, ep, s->proto[i]);
}

static bool finished(struct bench_server *s)
{
	bool done;

	if (atomic_load(&s->stop))
		return true;
	if (!s->cfg.until_shutdown || !atomic_load(&s->shutdown))
		return false;
	pthread_mutex_lock(&s->mu);
	done = s->active == 0;
	pthread_mutex_unlock(&s->mu);
	return done;
}

static void *accept_main(void *arg)
{
	struct bench_server *s = arg;
	int i, n;

	while (!finished(s)) {
		for (i = n = 0; i < s->n && !atomic_load(&s->stop); i++)
			if (!s->srx[i].started) {
				accept_one(s, i);
				n++;
			}
		if (!n) /* every listener has its receiver */
			usleep(ACCEPT_SLICE_MS * 1000);
	}
	return NULL;
}

/* ------------------------------------------------- --single-receiver */

static void srx_conn_up(struct srx *x, rdmx_conn *c)
{
	struct bench_serve *sv = calloc(1, sizeof(*sv));

	if (sv) {
		sv->ep = bench_ep_rdmx(c, -1);
		sv->single_receiver = true;
	}
	if (!sv || !sv->ep) {
		fprintf(stderr, "rdmx bench: server: %s: no memory for a connection\n",
			x->s->proto[x->i]);
		free(sv);
		rdmx_conn_close(c);
		return;
	}
	rdmx_conn_set_user(c, sv);
	x->n++;
	conn_up(x->s);
}

static void srx_conn_end(struct srx *x, struct bench_serve *sv, int rc)
{
	struct bench_server *s = x->s;

	if (rc)
		fprintf(stderr, "rdmx bench: server: %s connection: %s\n", s->proto[x->i],
			sv->ep->err.msg[0] ? sv->ep->err.msg : "failed");
	else if (s->cfg.verbose)
		printf("served a %s connection (%llu tests, single receiver)\n",
		       s->proto[x->i], (unsigned long long)sv->tests);
	fflush(stdout);
	bench_ep_close(sv->ep);
	free(sv);
	x->n--;
	worker_done(s, rc);
}

static void srx_event(struct srx *x, struct rdmx_event *ev)
{
	struct bench_serve *sv;
	struct bench_rx rx;
	int rc;

	if (ev->type == RDMX_EVENT_CONN) {
		srx_conn_up(x, ev->conn);
		return;
	}
	sv = rdmx_conn_get_user(ev->conn);
	if (!sv) /* not one of ours: cannot happen */
		return;
	if (ev->type == RDMX_EVENT_CLOSED) {
		srx_conn_end(x, sv, 0);
		return;
	}
	rc = bench_rx_take(sv->ep, &ev->msg, &rx);
	if (!rc)
		rc = bench_serve_rx(sv, &rx, &x->s->shutdown);
	if (rc)
		srx_conn_end(x, sv, rc);
}

/*
 * Until the server stops and the last client has gone. A receiver with no
 * connection polls and sleeps, as the accept thread does: the receivers of
 * the protocols not under test would otherwise spin in their waits (the
 * adaptive mode's spin phase) beside the one that is measured, which cost
 * rxe's N:1 rates up to a factor of 10 with nine protocols on two vCPUs.
 */
static void *srx_main(void *arg)
{
	struct srx *x = arg;
	struct bench_server *s = x->s;
	rdmx_listener *lis = s->lis[x->i];
	struct rdmx_event ev;
	int rc;

	while (!atomic_load(&s->stop) || x->n > 0) {
		rc = rdmx_listener_next(lis, &ev, x->n ? RECV_SLICE_MS : 0);
		if (!rc) {
			srx_event(x, &ev);
		} else if (rc == -ETIMEDOUT || rc == -EAGAIN) {
			if (!x->n)
				usleep(IDLE_POLL_MS * 1000);
		} else {
			fprintf(stderr, "rdmx bench: server: %s: waiting for the next "
				"event of its listener: %s\n", s->proto[x->i],
				rdmx_listener_error(lis));
			usleep(RECV_SLICE_MS * 1000);
		}
	}
	return NULL;
}

/* One receiver thread per rdmx listener; 0 or -errno. */
static int srx_start(struct bench_server *s)
{
	int i, rc;

	for (i = 0; i < s->n; i++) {
		if (!s->lis[i])
			continue;
		s->srx[i] = (struct srx){ .s = s, .i = i };
		rc = -pthread_create(&s->srx[i].thread, NULL, srx_main, &s->srx[i]);
		if (rc)
			return rc;
		s->srx[i].started = true;
	}
	return 0;
}

static void srx_join(struct bench_server *s)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (s->srx[i].started)
			pthread_join(s->srx[i].thread, NULL);
}

/* A benchmark's caps (cli_lab_caps): memory and per-peer lifted. */
static int lift_mem_cap(rdmx_listener *lis)
{
	struct rdmx_listener_opts lo;

	cli_lab_caps(&lo);
	return rdmx_listener_set_opts(lis, &lo);
}

static int listen_one(struct bench_server *s, const char *name)
{
	struct rdmx_conn_opts o = s->cfg.copts;
	uint16_t port = bench_proto_port(s->cfg.port, name);
	struct cli_err e = { "" };
	int i = s->n, rc;

	s->proto[i] = name;
	if (!strcmp(name, BENCH_TCP)) {
		rc = bench_tcp_listen(s->cfg.tcp_addr, port, &s->tcp_fd,
				      &s->port[i], &e);
	} else {
		o.protocol = name;
		cli_ring_variant_only(name, &o);
		rc = rdmx_listen(s->ctx, s->cfg.addr, port, &o, &s->lis[i]);
		if (!rc)
			rc = lift_mem_cap(s->lis[i]);
		if (rc)
			cli_fail(&e, "listen", rc, NULL);
		else
			s->port[i] = rdmx_listener_port(s->lis[i]);
	}
	if (rc) {
		fprintf(stderr, "rdmx bench: %s on %s port %u: %s\n", name,
			s->cfg.addr ? s->cfg.addr : "any address", port, e.msg);
		return rc;
	}
	s->n++;
	return 0;
}

static void close_listeners(struct bench_server *s)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (s->lis[i])
			rdmx_listener_destroy(s->lis[i]);
	if (s->tcp_fd >= 0)
		close(s->tcp_fd);
}

int bench_server_start(rdmx_ctx *ctx, const struct bench_server_cfg *cfg,
		       struct bench_server **out)
{
	struct bench_server *s = calloc(1, sizeof(*s));
	int i, rc = 0;

	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->ctx = ctx;
	s->tcp_fd = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	for (i = 0; i < cfg->n_protos; i++)
		listen_one(s, cfg->protos[i]); /* the others still run */
	rc = s->n ? 0 : -EADDRNOTAVAIL;
	if (!rc && cfg->single_receiver)
		rc = srx_start(s);
	if (!rc)
		rc = -pthread_create(&s->thread, NULL, accept_main, s);
	if (rc) {
		atomic_store(&s->stop, true);
		srx_join(s);
		close_listeners(s);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

uint16_t bench_server_port(const struct bench_server *s, const char *proto)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->proto[i], proto))
			return s->port[i];
	return 0;
}

void bench_server_print(const struct bench_server *s, FILE *f)
{
	int i;

	fprintf(f, "listening on %s:", s->cfg.addr ? s->cfg.addr : "any address");
	for (i = 0; i < s->n; i++)
		fprintf(f, " %s port %u%s", s->proto[i], s->port[i],
			i + 1 < s->n ? "," : "\n");
	fflush(f);
}

int bench_server_stop(struct bench_server *s)
{
	int failed;

	if (!s->cfg.until_shutdown)
		atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	atomic_store(&s->stop, true);
	pthread_mutex_lock(&s->mu);
	while (s->active > 0)
		pthread_cond_wait(&s->cv, &s->mu); /* workers end on disconnect */
	failed = s->failed;
	pthread_mutex_unlock(&s->mu);
	srx_join(s);
	close_listeners(s);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return failed;
}
