// SPDX-License-Identifier: MIT
/*
 * rdmx bench: the client side of one group, that is one protocol on N
 * connections. Each connection has its own thread; the threads meet at a
 * barrier before every test so that all N measure the same size and mode at
 * the same time, and merge their figures into the test's result row.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_client.h"
#include "cmds.h"
#include "opts.h"

struct group;

struct gthread {
	struct group *g;
	int idx;
	pthread_t t;
	struct bench_ep *ep;
	struct hist *rtt;
};

struct group {
	rdmx_ctx *ctx;
	const struct bench_cfg *cfg;
	const char *proto;
	const struct bench_target *target;
	int conns, n_rows;
	int bad_row;			/* first row not measured by every thread */
	struct bench_result *rows;
	uint64_t *t0, *t1;		/* per row: first start, last end */
	pthread_barrier_t bar;
	pthread_mutex_t mu;
	atomic_bool failed;
	struct cli_err err;
};

static int oom(struct cli_err *e)
{
	cli_set_err(e, "out of memory");
	return -ENOMEM;
}

static int check_max_msg(const struct bench_cfg *cfg, rdmx_conn *c,
			 struct cli_err *e)
{
	size_t max = rdmx_conn_max_msg(c);
	char a[32], b[32];

	if (max >= cfg->max_size)
		return 0;
	cli_set_err(e, "the connection's largest message is %s, below --size's "
		    "largest (%s): start the server with --size up to %s too",
		    opts_format_size(max, a, sizeof(a)),
		    opts_format_size(cfg->max_size, b, sizeof(b)), b);
	return -EMSGSIZE;
}

int bench_dial(rdmx_ctx *ctx, const struct bench_cfg *cfg, const char *proto,
	       const struct bench_target *t, struct bench_ep **out,
	       struct cli_err *e)
{
	struct rdmx_conn_opts o = cfg->copts;
	char what[160];
	rdmx_conn *c;
	int rc;

	if (!strcmp(proto, BENCH_TCP))
		return bench_tcp_dial(t->tcp_addr, t->port, o.max_msg_size,
				      (int)cfg->timeout, out, e);
	o.protocol = proto;
	cli_ring_variant_only(proto, &o);
	rc = rdmx_dial(ctx, t->addr, t->port, &o, &c);
	if (rc) {
		snprintf(what, sizeof(what), "connect to %s port %u", t->addr, t->port);
		return cli_fail(e, what, rc, NULL), rc;
	}
	rc = check_max_msg(cfg, c, e);
	if (!rc) {
		*out = bench_ep_rdmx(c, (int)cfg->timeout);
		rc = *out ? 0 : oom(e);
	}
	if (rc)
		rdmx_conn_close(c);
	return rc;
}

/* ------------------------------------------------------------------ rows */

static void label(const struct group *g, const struct bench_result *r,
		  char *buf, size_t len)
{
	char sz[32];

	snprintf(buf, len, "%s %s %s x%d", g->proto,
		 opts_format_size(r->size, sz, sizeof(sz)),
		 r->mode == BENCH_LAT ? "lat" : "bw", g->conns);
}

static void merge(struct group *g, int row, const struct gthread *th,
		  const struct bench_job *j)
{
	struct bench_result *r = &g->rows[row];

	pthread_mutex_lock(&g->mu);
	r->msgs += j->msgs;
	if (!g->t0[row] || j->t0 < g->t0[row])
		g->t0[row] = j->t0;
	if (j->t1 > g->t1[row])
		g->t1[row] = j->t1;
	r->thread_rate[th->idx] = bench_msg_rate(j->msgs, j->t1 - j->t0);
	r->client.user_ns += j->cpu.user_ns;
	r->client.sys_ns += j->cpu.sys_ns;
	if (r->single_receiver) { /* one thread: each ACK counts its time */
		if (j->server.user_ns + j->server.sys_ns >
		    r->server.user_ns + r->server.sys_ns)
			r->server = j->server;
	} else {
		r->server.user_ns += j->server.user_ns;
		r->server.sys_ns += j->server.sys_ns;
	}
	if (r->rtt)
		hist_merge(r->rtt, j->rtt);
	pthread_mutex_unlock(&g->mu);
}

static void fail_group(struct group *g, int row, const struct cli_err *e)
{
	pthread_mutex_lock(&g->mu);
	if (!atomic_load(&g->failed))
		cli_set_err(&g->err, "%s", e->msg[0] ? e->msg : "failed");
	if (row < g->bad_row)
		g->bad_row = row;
	pthread_mutex_unlock(&g->mu);
	atomic_store(&g->failed, true);
}

static void run_row(struct gthread *th, int row)
{
	struct group *g = th->g;
	struct bench_result *r = &g->rows[row];
	struct bench_job j = {
		.ep = th->ep, .mode = r->mode, .size = r->size,
		.warmup = (uint64_t)g->cfg->warmup, .iters = (uint64_t)g->cfg->iters,
		.duration_ns = g->cfg->duration_ns,
		.progress = th->idx == 0 ? g->cfg->progress_mode : BENCH_PROGRESS_NEVER,
		.rtt = th->rtt, .single_receiver = r->single_receiver,
		.batch = (uint64_t)r->batch,
	};
	char lbl[96];

	label(g, r, lbl, sizeof(lbl));
	j.label = lbl;
	th->ep->vec = r->sendv; /* bandwidth rows of --sendv */
	hist_init(th->rtt);
	if (bench_job_run(&j)) {
		fail_group(g, row, &th->ep->err);
		return;
	}
	merge(g, row, th, &j);
}

static void *thread_main(void *arg)
{
	struct gthread *th = arg;
	struct group *g = th->g;
	struct cli_err e = { "" };
	int row;

	if (bench_dial(g->ctx, g->cfg, g->proto, g->target, &th->ep, &e))
		fail_group(g, 0, &e);
	for (row = 0; row < g->n_rows; row++) {
		pthread_barrier_wait(&g->bar);
		if (!atomic_load(&g->failed))
			run_row(th, row);
	}
	if (th->ep && !atomic_load(&g->failed) && th->ep->ops->flush(th->ep))
		fail_group(g, g->n_rows, &th->ep->err);
	bench_ep_close(th->ep);
	return NULL;
}

/* ---------------------------------------------------------------- groups */

static int add_row(struct group *g, int m, uint64_t size, int batch)
{
	const struct bench_cfg *cfg = g->cfg;
	struct bench_result *r = &g->rows[g->n_rows++];

	*r = (struct bench_result){ .protocol = g->proto, .mode = m,
		.notify = cli_is_ring(g->proto) ? cfg->notify : NULL,
		.ack = cli_is_ring(g->proto) ? cfg->ack : NULL,
		.size = size, .conns = g->conns,
		.single_receiver = cfg->single_receiver &&
				   strcmp(g->proto, BENCH_TCP),
		.batch = batch, .coalesce = cfg->coalesce,
		.sendv = cfg->sendv && m == BENCH_BW && strcmp(g->proto, BENCH_TCP),
		.warmup = (uint64_t)cfg->warmup };
	if (m == BENCH_LAT && !(r->rtt = malloc(sizeof(*r->rtt))))
		return -ENOMEM;
	if (r->rtt)
		hist_init(r->rtt);
	return 0;
}

/* Per size: a latency row, and a bandwidth row per --batch value. */
static int make_rows(struct group *g)
{
	const struct bench_cfg *cfg = g->cfg;
	int nb = cfg->n_batches ? cfg->n_batches : 1;
	size_t n = (size_t)cfg->n_sizes * (size_t)(1 + nb);
	int s, b;

	g->rows = calloc(n, sizeof(*g->rows));
	g->t0 = calloc(n, sizeof(*g->t0));
	g->t1 = calloc(n, sizeof(*g->t1));
	if (!g->rows || !g->t0 || !g->t1)
		return -ENOMEM;
	for (s = 0; s < cfg->n_sizes; s++) {
		if ((cfg->modes & BENCH_LAT) &&
		    add_row(g, BENCH_LAT, cfg->sizes[s], 1))
			return -ENOMEM;
		for (b = 0; (cfg->modes & BENCH_BW) && b < nb; b++)
			if (add_row(g, BENCH_BW, cfg->sizes[s],
				    cfg->n_batches ? (int)cfg->batches[b] : 1))
				return -ENOMEM;
	}
	return 0;
}

static void free_rows(struct bench_result *rows, int n)
{
	int i;

	for (i = 0; rows && i < n; i++)
		free(rows[i].rtt);
	free(rows);
}

/* Move the rows of @g every thread finished to the end of @rep. */
static int append_rows(struct group *g, struct bench_report *rep)
{
	struct bench_result *all, *r;
	int i;

	all = realloc(rep->results, (size_t)(rep->n_results + g->n_rows) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	rep->results = all;
	for (i = 0; i < g->bad_row; i++) {
		r = &g->rows[i];
		r->wall_ns = g->t1[i] - g->t0[i];
		r->msg_rate = bench_msg_rate(r->msgs, r->wall_ns);
		r->gbps = bench_gbps(r->msgs, r->size, r->wall_ns);
		bench_range(r->thread_rate, r->conns, &r->conn_min, &r->conn_max);
		r->jain = bench_jain(r->thread_rate, r->conns);
		all[rep->n_results++] = *r;
		r->rtt = NULL; /* owned by the report now */
	}
	return 0;
}

static int run_threads(struct group *g, struct gthread *th)
{
	int i, n = 0, rc = 0;

	for (i = 0; i < g->conns; i++) {
		th[i] = (struct gthread){ .g = g, .idx = i };
		th[i].rtt = malloc(sizeof(*th[i].rtt));
		if (!th[i].rtt)
			return -ENOMEM;
	}
	for (i = 0; i < g->conns && !rc; i++, n++)
		rc = -pthread_create(&th[i].t, NULL, thread_main, &th[i]);
	if (rc) { /* the started threads would wait at the barrier forever */
		fprintf(stderr, "rdmx bench: cannot start thread %d: %s\n", n,
			strerror(-rc));
		exit(EXIT_FAIL);
	}
	for (i = 0; i < n; i++)
		pthread_join(th[i].t, NULL);
	return 0;
}

int bench_run_group(rdmx_ctx *ctx, const struct bench_cfg *cfg,
		    const char *proto, const struct bench_target *t, int conns,
		    struct bench_report *rep, struct cli_err *e)
{
	struct group g = { .ctx = ctx, .cfg = cfg, .proto = proto, .target = t,
			   .conns = conns };
	struct gthread *th = calloc((size_t)conns, sizeof(*th));
	int i, rc;

	rc = th ? make_rows(&g) : -ENOMEM;
	g.bad_row = g.n_rows;
	if (!rc) {
		pthread_barrier_init(&g.bar, NULL, (unsigned)conns);
		pthread_mutex_init(&g.mu, NULL);
		rc = run_threads(&g, th);
		pthread_barrier_destroy(&g.bar);
		pthread_mutex_destroy(&g.mu);
	}
	if (rc)
		oom(e);
	else if (append_rows(&g, rep)) /* also the rows before a failure */
		rc = oom(e);
	if (!rc && atomic_load(&g.failed)) {
		cli_set_err(e, "%s", g.err.msg);
		rc = bench_stopped() ? -EINTR : -EIO;
	}
	for (i = 0; th && i < conns; i++)
		free(th[i].rtt);
	free(th);
	free_rows(g.rows, g.n_rows);
	free(g.t0);
	free(g.t1);
	return rc;
}

void bench_report_free(struct bench_report *rep)
{
	free_rows(rep->results, rep->n_results);
	rep->results = NULL;
	rep->n_results = 0;
}
