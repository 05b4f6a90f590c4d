// SPDX-License-Identifier: MIT
/*
 * rdmx rpc bench: one group - a transport at one size with N clients, one
 * thread each, into one server. Each client connects, makes its warmup
 * calls, and waits at a barrier; the harness asks the server for its
 * figures (the stats method, over a connection of its own), lets the
 * clients go, joins them and asks again. A client keeps --tx-depth calls in
 * flight; each call is timed from before its send to its completion
 * (CLOCK_MONOTONIC) and its echo's first 8 bytes (its sequence number)
 * are checked.
 *
 * Server CPU: the server's process CPU time over the run; in the
 * self-test (the server in this process) minus the CPU time of the
 * clients' and the harness's threads over the same run.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ep.h"
#include "rpc_bench.h"

/* A call in flight. */
struct rb_slot {
	uint64_t id, seq, t_sent;
	unsigned char *req, *resp;
};

/* Where the clients wait for the harness: each says it is ready, then
 * waits for GO (run) or STOP (skip the run). */
enum { GATE_WAIT, GATE_GO, GATE_STOP };

struct rb_gate {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int ready, state;
};

struct rb_client {
	const struct rb_cfg *cfg;
	const char *transport;
	const struct rb_target *t;
	uint64_t size;
	struct rb_gate *gate;
	rdmx_rpc_client *rpc;		/* or tcp */
	struct rb_tcp *tcp;
	struct rb_slot *slots;
	uint64_t seq, calls, t0, t1;
	struct bench_cpu cpu;		/* the timed run's */
	struct hist *rtt;
	pthread_t th;
	int rc;
	struct cli_err err;
};

/* Record the first error of @c (and its status). */
#define cl_fail(cl, status, ...) cli_note(&(cl)->err, &(cl)->rc, (status), __VA_ARGS__)

/* The TCP baseline rather than an RPC transport? */
static bool is_tcp(const char *transport)
{
	return !strcmp(transport, RB_TCP);
}

/* Connect one RPC or TCP client with @window calls in flight. */
static int dial(const struct rb_cfg *cfg, const char *transport, const struct rb_target *t,
		long long window, rdmx_rpc_client **rpc, struct rb_tcp **tcp,
		char *err, size_t len)
{
	struct rdmx_rpc_method m[2];
	struct rdmx_rpc_opts o;
	int rc;

	if (is_tcp(transport))
		return rb_tcp_dial(t->tcp_addr, t->port, cfg->max_size, (int)cfg->timeout,
				   tcp, err, len);
	rb_contract(cfg->max_size, m);
	rb_rpc_opts(cfg, transport, &o);
	o.window = (uint32_t)window;
	rc = rdmx_rpc_client_create(t->ctx, t->addr, t->port, m, 2, &o, rpc);
	if (rc)
		snprintf(err, len, "%s: connect: %s (%s)", transport, rdmx_strerror(rc),
			 rdmx_last_error());
	return rc;
}

/* Send call @i's request (its sequence number in the first 8 bytes). */
static int issue(struct rb_client *c, uint32_t i)
{
	struct rb_slot *s = &c->slots[i];
	size_t n = c->size < 8 ? c->size : 8;
	int rc;

	s->seq = c->seq++;
	memcpy(s->req, &s->seq, n);
	s->t_sent = bench_now_ns();
	if (c->tcp) {
		rc = rb_tcp_send(c->tcp, i, c->size);
		return rc ? cl_fail(c, rc, "tcp: %s", rb_tcp_error(c->tcp)) : 0;
	}
	rc = rdmx_rpc_call_async(c->rpc, RB_ECHO, s->req, c->size, s->resp, c->size, &s->id);
	return rc ? cl_fail(c, rc, "call: %s (%s)", rdmx_strerror(rc),
			    rdmx_rpc_client_error(c->rpc)) : 0;
}

/* The slot of RPC call @id. */
static int slot_of(const struct rb_client *c, uint64_t id, uint32_t *i)
{
	for (uint32_t k = 0; k < (uint32_t)c->cfg->window; k++)
		if (c->slots[k].id == id) {
			*i = k;
			return 0;
		}
	return -EPROTO;
}

/* Wait for a completion; its slot in *@i, checked. */
static int complete(struct rb_client *c, uint32_t *i)
{
	uint64_t id, len = 0;
	size_t n = c->size < 8 ? c->size : 8;
	int rc, status = 0;

	if (c->tcp) { /* the echo's slot and length are checked */
		rc = rb_tcp_recv(c->tcp, i, &len);
		if (rc)
			return cl_fail(c, rc, "tcp: %s", rb_tcp_error(c->tcp));
		n = 0;
	} else {
		size_t l;

		rc = rdmx_rpc_poll(c->rpc, &id, &status, &l, (int)c->cfg->timeout);
		if (rc)
			return cl_fail(c, rc, "wait: %s (%s)", rdmx_strerror(rc),
				       rdmx_rpc_client_error(c->rpc));
		len = l;
		if (slot_of(c, id, i))
			return cl_fail(c, -EPROTO, "a response to no call in flight");
	}
	if (*i >= (uint32_t)c->cfg->window || status || len != c->size ||
	    memcmp(c->slots[*i].req, c->slots[*i].resp, n))
		return cl_fail(c, -EPROTO, "a wrong echo: status %d, %" PRIu64 " bytes of %"
			       PRIu64, status, len, c->size);
	return 0;
}

/* More calls to send? @n: a count, else the duration from @t0. */
static bool more(const struct rb_client *c, uint64_t sent, uint64_t n, uint64_t t0)
{
	if (bench_stopped())
		return false;
	return n ? sent < n : bench_now_ns() - t0 < c->cfg->duration_ns;
}

/* @n calls (0: for the duration), @window in flight; timed: recorded. */
static int calls(struct rb_client *c, uint64_t n, bool timed)
{
	uint64_t sent = 0, done = 0, t0 = bench_now_ns();
	uint32_t w = (uint32_t)c->cfg->window, i;

	for (i = 0; i < w && more(c, sent, n, t0); i++, sent++)
		if (issue(c, i))
			return c->rc;
	while (done < sent) {
		if (complete(c, &i))
			return c->rc;
		done++;
		if (timed)
			hist_record(c->rtt, bench_now_ns() - c->slots[i].t_sent);
		if (more(c, sent, n, t0)) {
			if (issue(c, i))
				return c->rc;
			sent++;
		}
	}
	c->calls = timed ? done : c->calls;
	return 0;
}

/* The window's request and response buffers. */
static int slots_new(struct rb_client *c)
{
	uint32_t w = (uint32_t)c->cfg->window;
	size_t sz = c->size ? c->size : 1;

	c->slots = calloc(w, sizeof(*c->slots));
	for (uint32_t i = 0; c->slots && i < w; i++) {
		c->slots[i].req = calloc(1, sz);
		c->slots[i].resp = calloc(1, sz);
		if (!c->slots[i].req || !c->slots[i].resp)
			return cl_fail(c, -ENOMEM, "out of memory");
	}
	return c->slots ? 0 : cl_fail(c, -ENOMEM, "out of memory");
}

/* Close a client and free what it holds. */
static void client_free(struct rb_client *c)
{
	for (long long i = 0; c->slots && i < c->cfg->window; i++) {
		free(c->slots[i].req);
		free(c->slots[i].resp);
	}
	free(c->slots);
	free(c->rtt);
	rdmx_rpc_client_destroy(c->rpc);
	rb_tcp_close(c->tcp);
}

/* Ready; then true for GO, false for STOP. */
static bool gate_pass(struct rb_gate *g)
{
	bool go;

	pthread_mutex_lock(&g->lock);
	g->ready++;
	pthread_cond_broadcast(&g->cv);
	while (g->state == GATE_WAIT)
		pthread_cond_wait(&g->cv, &g->lock);
	go = g->state == GATE_GO;
	pthread_mutex_unlock(&g->lock);
	return go;
}

/* The harness: wait for @n clients to be ready. */
static void gate_wait(struct rb_gate *g, int n)
{
	pthread_mutex_lock(&g->lock);
	while (g->ready < n)
		pthread_cond_wait(&g->cv, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

/* The harness: let the clients run (@go) or skip the run. */
static void gate_open(struct rb_gate *g, bool go)
{
	pthread_mutex_lock(&g->lock);
	g->state = go ? GATE_GO : GATE_STOP;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->lock);
}

/* A client's thread: connect, warm up, wait at the gate, run timed. */
static void *client_main(void *arg)
{
	struct rb_client *c = arg;
	struct bench_cpu a, b;
	char err[512];
	int rc = c->rc ? c->rc : slots_new(c);

	if (!rc) {
		rc = dial(c->cfg, c->transport, c->t, c->cfg->window, &c->rpc, &c->tcp,
			  err, sizeof(err));
		if (rc)
			cl_fail(c, rc, "%s", err);
	}
	if (!rc && c->cfg->warmup)
		calls(c, (uint64_t)c->cfg->warmup, false);
	if (!gate_pass(c->gate) || c->rc)
		return NULL;
	bench_thread_cpu(&a);
	c->t0 = bench_now_ns();
	calls(c, c->cfg->duration_ns ? 0 : (uint64_t)c->cfg->iters, true);
	c->t1 = bench_now_ns();
	bench_thread_cpu(&b);
	c->cpu = bench_cpu_since(&a, &b);
	return NULL;
}

/* ------------------------------------------------------------- the group */

/* The harness's connection to the server, for its figures. */
struct ctl {
	rdmx_rpc_client *rpc;
	struct rb_tcp *tcp;
};

/* The server's figures now, over the harness's connection. */
static int ctl_snap(struct ctl *k, struct rb_snap *s, int timeout_ms, char *err,
		    size_t len)
{
	unsigned char b[RB_STATS_LEN];
	size_t got = 0;
	int rc, status = 0;

	if (k->tcp) {
		rc = rb_tcp_stats(k->tcp, s);
		if (rc)
			snprintf(err, len, "tcp: the server's figures: %s", rb_tcp_error(k->tcp));
		return rc;
	}
	rc = rdmx_rpc_call(k->rpc, RB_STATS, NULL, 0, b, sizeof(b), &got, &status,
			   timeout_ms);
	if (!rc && (status || got != RB_STATS_LEN))
		rc = -EPROTO;
	if (rc) {
		snprintf(err, len, "the server's figures: %s (%s)", rdmx_strerror(rc),
			 rdmx_rpc_client_error(k->rpc));
		return rc;
	}
	rb_snap_get(b, s);
	return 0;
}

/* The row's figures from the clients and the server's two snapshots. */
static void tally(struct rb_client *cl, int n, const struct rb_snap *s0,
		  const struct rb_snap *s1, const struct bench_cpu *self,
		  const struct rb_target *t, struct rb_result *row)
{
	uint64_t lo = UINT64_MAX, hi = 0, cli = 0, srv, calls;

	for (int i = 0; i < n; i++) {
		lo = cl[i].t0 < lo ? cl[i].t0 : lo;
		hi = cl[i].t1 > hi ? cl[i].t1 : hi;
		row->calls += cl[i].calls;
		row->client_calls[i] = cl[i].calls;
		row->client_rate[i] = bench_msg_rate(cl[i].calls, cl[i].t1 - cl[i].t0);
		cli += cl[i].cpu.user_ns + cl[i].cpu.sys_ns;
		hist_merge(row->rtt, cl[i].rtt);
	}
	row->wall_ns = hi - lo;
	row->rate = bench_msg_rate(row->calls, row->wall_ns);
	row->jain = bench_jain(row->client_rate, n);
	srv = s1->user_ns + s1->sys_ns - s0->user_ns - s0->sys_ns;
	if (t->self) /* this process: less the clients and the harness */
		srv -= srv > cli + self->user_ns + self->sys_ns ?
		       cli + self->user_ns + self->sys_ns : srv;
	calls = s1->calls - s0->calls;
	row->srv_cpu_us = calls ? (double)srv / 1e3 / (double)calls : NAN;
	row->srv_cpu_pct = bench_pct(srv, row->wall_ns);
	row->srv_wrs = is_tcp(row->transport) || !calls ? NAN :
		       (double)(s1->wrs - s0->wrs) / (double)calls;
	row->cli_cpu_pct = bench_pct(cli, row->wall_ns);
}

/* Start @n client threads; returns how many started. */
static int spawn(struct rb_client *cl, int n)
{
	for (int i = 0; i < n; i++)
		if (pthread_create(&cl[i].th, NULL, client_main, &cl[i]))
			return i;
	return n;
}

/* The timed run of the @n started clients: wait until they are ready,
 * snapshot, GO, join, snapshot. */
static int drive(struct rb_client *cl, int n, int clients, struct rb_gate *g,
		 struct ctl *k, const struct rb_target *t, struct rb_result *row,
		 char *err, size_t len)
{
	struct rb_snap s0 = { 0 }, s1 = { 0 };
	struct bench_cpu a, b, self;
	int rc = n < clients ? -EAGAIN : 0, i;

	gate_wait(g, n);
	if (rc)
		snprintf(err, len, "client %d: no thread", n);
	else
		rc = ctl_snap(k, &s0, (int)cl[0].cfg->timeout, err, len);
	for (i = 0; i < n && !rc; i++)
		if (cl[i].rc)
			rc = cl[i].rc;
	bench_thread_cpu(&a);
	gate_open(g, !rc);
	for (i = 0; i < n; i++)
		pthread_join(cl[i].th, NULL);
	bench_thread_cpu(&b);
	self = bench_cpu_since(&a, &b);
	for (i = 0; i < n && !rc; i++)
		if (cl[i].rc) {
			rc = cl[i].rc;
			snprintf(err, len, "client %d: %s", i, cl[i].err.msg);
		}
	if (!rc && !bench_stopped())
		rc = ctl_snap(k, &s1, (int)cl[0].cfg->timeout, err, len);
	if (!rc && bench_stopped()) {
		snprintf(err, len, "interrupted by signal %d", bench_stopped());
		rc = -EINTR;
	}
	if (!rc)
		tally(cl, n, &s0, &s1, &self, t, row);
	return rc;
}

/* The first client error (before the run), into @err. */
static void first_err(struct rb_client *cl, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		if (cl[i].rc && !err[0])
			snprintf(err, len, "client %d: %s", i, cl[i].err.msg);
}

int rb_run_group(const struct rb_cfg *cfg, const char *transport,
		 const struct rb_target *t, uint64_t size, int clients,
		 struct rb_result *row, char *err, size_t err_len)
{
	struct rb_client *cl = calloc((size_t)clients, sizeof(*cl));
	struct rb_gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
			     GATE_WAIT };
	struct ctl k = { 0 };
	int rc, i, n;

	*row = (struct rb_result){ .transport = transport, .size = size,
		.clients = clients, .warmup = (uint64_t)cfg->warmup,
		.protocol = strcmp(transport, "msg") ? NULL : cfg->protocol,
		.rtt = malloc(sizeof(struct hist)) };
	err[0] = '\0';
	if (!cl || !row->rtt) {
		free(cl);
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	hist_init(row->rtt);
	rc = dial(cfg, transport, t, 1, &k.rpc, &k.tcp, err, err_len);
	if (rc) {
		free(cl);
		return rc;
	}
	for (i = 0; i < clients; i++) {
		cl[i] = (struct rb_client){ .cfg = cfg, .transport = transport, .t = t,
			.size = size, .gate = &g,
			.rtt = malloc(sizeof(struct hist)) };
		if (cl[i].rtt)
			hist_init(cl[i].rtt);
		else
			cl[i].rc = -ENOMEM;
	}
	n = spawn(cl, clients);
	rc = drive(cl, n, clients, &g, &k, t, row, err, err_len);
	first_err(cl, n, err, err_len);
	for (i = 0; i < clients; i++)
		client_free(&cl[i]);
	free(cl);
	rdmx_rpc_client_destroy(k.rpc);
	rb_tcp_close(k.tcp);
	return rc;
}
