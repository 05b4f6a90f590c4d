// SPDX-License-Identifier: MIT
/*
 * rdmx kv bench: one test - a workload on one path at one value size with
 * N clients, one thread and one connection each. The connections are made
 * (and the keys preloaded, untimed) before the threads start; each thread
 * then makes its share of --iters, each op timed on its own (CLOCK_MONOTONIC)
 * and every GET's value checked: its length, its key's index and its
 * stamp in every byte. The torn test adds a writer thread that rewrites
 * KB_HOT_KEYS keys by PUT RPCs while the clients GET them by READ: they
 * start once its first PUT is done, and it stops when they are; its PUTs
 * are counted, not timed.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_ep.h"
#include "kv_bench.h"

#define KEY_LEN 32

/* YCSB's Zipfian generator (Gray et al., "Quickly generating billion-record
 * synthetic databases"): rank 0 is the hottest key. */
struct zipf {
	uint64_t n;
	double theta, alpha, zetan, eta;
};

struct kb_client {
	const struct kb_cfg *cfg;
	const struct kb_target *tg;
	const struct kb_test *t;
	const struct zipf *z;
	atomic_bool *readers_done, *writing;
	bool writer;
	rdmx_kv_client *kv;
	struct kb_mc *mc;
	uint64_t quota, rng, stamp;
	uint64_t ops, gets, puts, misses, bad, t0, t1;
	struct rdmx_kv_client_stats st0, st1;
	struct hist *lat;
	unsigned char *val, *buf;
	pthread_t th;
	int rc;
	struct cli_err err;
};

const char *kb_path_name(enum kb_path p)
{
	static const char *const names[] = { "rpc", "read", "door", "memcached" };

	return names[p];
}

/* Record the first error of @c (and its status). */
#define cl_fail(cl, status, ...) cli_note(&(cl)->err, &(cl)->rc, (status), __VA_ARGS__)

/* xorshift64*: the clients' own random numbers. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static double zeta(uint64_t n, double theta)
{
	double s = 0;

	for (uint64_t i = 1; i <= n; i++)
		s += 1.0 / pow((double)i, theta);
	return s;
}

static void zipf_init(struct zipf *z, uint64_t n, double theta)
{
	z->n = n;
	z->theta = theta;
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zeta(n, theta);
	z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta(2, theta) / z->zetan);
}

/* The generator over @n keys: zeta(n) is computed once per n (the tests
 * are set up on the harness's one thread). */
static void zipf_get(struct zipf *z, uint64_t n)
{
	static struct zipf last;

	if (last.n != n)
		zipf_init(&last, n, KB_ZIPF_THETA);
	*z = last;
}

static uint64_t zipf_next(const struct zipf *z, uint64_t *s)
{
	double u = (double)(rnd(s) >> 11) / 9007199254740992.0; /* [0, 1) */
	double uz = u * z->zetan;
	uint64_t k;

	if (uz < 1.0)
		return 0;
	if (uz < 1.0 + pow(0.5, z->theta))
		return 1 % z->n;
	k = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
	return k < z->n ? k : z->n - 1;
}

/* The key of index @i. */
static size_t key_of(uint64_t i, char *k)
{
	return (size_t)snprintf(k, KEY_LEN, "kvb:%010llu", (unsigned long long)i);
}

/* The next key's index for @c's test. */
static uint64_t next_key(struct kb_client *c)
{
	uint64_t n = (uint64_t)c->cfg->keys;

	if (!strcmp(c->t->workload, "torn"))
		return rnd(&c->rng) % (n < KB_HOT_KEYS ? n : KB_HOT_KEYS);
	return c->t->zipf ? zipf_next(c->z, &c->rng) : rnd(&c->rng) % n;
}

/* The self-checking value of key @i: its index, a stamp, the stamp's low
 * byte in every other byte. */
static void fill_value(unsigned char *v, uint64_t size, uint64_t i, uint32_t stamp)
{
	uint32_t ki = (uint32_t)i;

	memcpy(v, &ki, 4);
	memcpy(v + 4, &stamp, 4);
	memset(v + 8, (int)(stamp & 0xff), size - 8);
}

/* Whether @v (@len bytes) is key @i's whole value of the test's size. */
static bool value_ok(const unsigned char *v, size_t len, uint64_t size, uint64_t i)
{
	uint32_t ki, stamp;

	if (len != size)
		return false;
	memcpy(&ki, v, 4);
	memcpy(&stamp, v + 4, 4);
	if (ki != (uint32_t)i)
		return false;
	for (size_t b = 8; b < len; b++)
		if (v[b] != (stamp & 0xff))
			return false;
	return true;
}

/* PUT key @i on @c's path. */
static int do_put(struct kb_client *c, uint64_t i)
{
	char k[KEY_LEN];
	size_t kl = key_of(i, k);
	int rc;

	fill_value(c->val, c->t->size, i, (uint32_t)(++c->stamp));
	if (c->mc) {
		rc = kb_mc_set(c->mc, k, c->val, c->t->size);
		return rc ? cl_fail(c, rc, "set %s: %s", k, kb_mc_error(c->mc)) : 0;
	}
	rc = rdmx_kv_put(c->kv, k, kl, c->val, c->t->size, 0, RDMX_KV_SET, NULL);
	return rc ? cl_fail(c, rc, "put %s: %s (%s)", k, rdmx_strerror(rc),
			    rdmx_kv_client_error(c->kv)) : 0;
}

/* GET key @i on @c's path and check what came. */
static int do_get(struct kb_client *c, uint64_t i)
{
	char k[KEY_LEN];
	size_t kl = key_of(i, k), len = 0;
	int rc;

	if (c->mc)
		rc = kb_mc_get(c->mc, k, c->buf, c->t->size, &len);
	else
		rc = rdmx_kv_get(c->kv, k, kl, c->buf, c->t->size, &len, NULL, NULL);
	c->gets++;
	if (rc == -ENOENT) {
		c->misses++;
		return 0;
	}
	if (rc == -EMSGSIZE) {
		c->bad++;
		return 0;
	}
	if (rc)
		return cl_fail(c, rc, "get %s: %s (%s)", k, rdmx_strerror(rc),
			       c->mc ? kb_mc_error(c->mc) : rdmx_kv_client_error(c->kv));
	if (!value_ok(c->buf, len, c->t->size, i))
		c->bad++;
	return 0;
}

/* One op of the mix, timed. */
static int one_op(struct kb_client *c)
{
	uint64_t i = next_key(c), t0 = bench_now_ns();
	bool get = (int)(rnd(&c->rng) % 100) < c->t->get_pct;
	int rc = get ? do_get(c, i) : do_put(c, i);

	hist_record(c->lat, bench_now_ns() - t0);
	c->puts += !get;
	c->ops++;
	return rc;
}

/* The torn test's writer: rewrite the hot keys until the readers are done. */
static void writer_loop(struct kb_client *c)
{
	uint64_t n = (uint64_t)c->cfg->keys < KB_HOT_KEYS ? (uint64_t)c->cfg->keys :
		     KB_HOT_KEYS;

	while (!atomic_load(c->readers_done) && !bench_stopped()) {
		if (do_put(c, c->puts++ % n))
			break;
		atomic_store(c->writing, true);
	}
	atomic_store(c->writing, true); /* a failed writer lets the readers go */
}

/* The torn test's readers start once the writer's first PUT is done, so
 * that every GET runs under the writer's PUTs. */
static void await_writer(struct kb_client *c)
{
	struct timespec nap = { 0, 50 * 1000 };

	while (!atomic_load(c->writing) && !bench_stopped())
		nanosleep(&nap, NULL);
}

static void *client_main(void *arg)
{
	struct kb_client *c = arg;

	if (!c->writer && !strcmp(c->t->workload, "torn"))
		await_writer(c);
	c->t0 = bench_now_ns();
	if (c->writer) {
		writer_loop(c);
	} else {
		while (c->ops < c->quota && !c->rc)
			if (bench_stopped())
				cl_fail(c, -EINTR, "stopped by a signal");
			else
				one_op(c);
	}
	c->t1 = bench_now_ns();
	return NULL;
}

/* Connect @c to its path. */
static int dial(struct kb_client *c)
{
	const struct kb_target *tg = c->tg;
	struct rdmx_kv_client_opts o;
	int rc;

	rdmx_kv_client_opts_init(&o);
	o.get_mode = c->t->path == KB_READ && !c->writer ? RDMX_KV_GET_READ : RDMX_KV_GET_RPC;
	o.transport = c->cfg->transport;
	o.protocol = c->cfg->protocol;
	o.timeout_ms = (int)c->cfg->timeout;

	if (c->t->path == KB_DOOR || c->t->path == KB_MEMCACHED)
		return kb_mc_dial(tg->tcp_addr, c->t->path == KB_DOOR ? tg->door_port :
				  tg->mc_port, (int)c->cfg->timeout, &c->mc, c->err.msg,
				  sizeof(c->err.msg));
	rc = rdmx_kv_client_create(tg->ctx, tg->addr, tg->port, &o, &c->kv);
	if (rc)
		return cl_fail(c, rc, "connect to %s port %u: %s (%s)", tg->addr, tg->port,
			       rdmx_strerror(rc), rdmx_last_error());
	rdmx_kv_client_stats(c->kv, &c->st0);
	return 0;
}

static void client_free(struct kb_client *c)
{
	rdmx_kv_client_destroy(c->kv);
	kb_mc_close(c->mc);
	free(c->lat);
	free(c->val);
	free(c->buf);
}

/* Set up client @idx of @n: buffers, its quota of the ops, its connection. */
static int client_init(struct kb_client *c, int idx, int n)
{
	uint64_t ops = (uint64_t)c->cfg->ops;

	c->quota = ops / (uint64_t)n + ((uint64_t)idx < ops % (uint64_t)n);
	c->rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(idx + 1) ^ bench_now_ns();
	c->stamp = (uint64_t)idx << 24;
	c->lat = malloc(sizeof(*c->lat));
	c->val = malloc(c->t->size);
	c->buf = malloc(c->t->size);
	if (!c->lat || !c->val || !c->buf)
		return cl_fail(c, -ENOMEM, "out of memory");
	hist_init(c->lat);
	return dial(c);
}

/* Every key of the test (the torn test: the hot ones), untimed. */
static int preload(struct kb_client *c)
{
	uint64_t n = (uint64_t)c->cfg->keys;

	if (!strcmp(c->t->workload, "torn") && n > KB_HOT_KEYS)
		n = KB_HOT_KEYS;
	for (uint64_t i = 0; i < n && !c->rc; i++) {
		if (bench_stopped())
			return cl_fail(c, -EINTR, "stopped by a signal");
		do_put(c, i);
	}
	c->puts = 0;
	return c->rc;
}

/* The clients' figures into @row. */
static void collect(struct kb_client *cl, int n, struct kb_row *row)
{
	uint64_t t0 = UINT64_MAX, t1 = 0;

	for (int i = 0; i < n; i++) {
		struct kb_client *c = &cl[i];

		row->puts += c->puts;
		if (c->writer) /* the row's time is the readers' */
			continue;
		if (c->t0 < t0)
			t0 = c->t0;
		if (c->t1 > t1)
			t1 = c->t1;
		row->client_ops[i] = c->ops;
		row->ops += c->ops;
		row->gets += c->gets;
		row->misses += c->misses;
		row->bad += c->bad;
		hist_merge(row->lat, c->lat);
		if (!c->kv)
			continue;
		rdmx_kv_client_stats(c->kv, &c->st1);
		row->gets_read += c->st1.gets_read - c->st0.gets_read;
		row->gets_rpc += c->st1.gets_rpc - c->st0.gets_rpc;
		row->retries += c->st1.retries - c->st0.retries;
		row->fallbacks += c->st1.fallbacks - c->st0.fallbacks;
	}
	row->wall_ns = t1 > t0 ? t1 - t0 : 0;
	row->rate = bench_msg_rate(row->ops, row->wall_ns);
}

/* Start every thread, join them, then the first error. */
static int run_threads(struct kb_client *cl, int n, int readers, atomic_bool *done,
		       char *err, size_t len)
{
	int i, started, rc = 0;

	for (started = 0; started < n; started++)
		if (pthread_create(&cl[started].th, NULL, client_main, &cl[started]))
			break;
	for (i = 0; i < started; i++) {
		pthread_join(cl[i].th, NULL);
		if (i == readers - 1)
			atomic_store(done, true); /* the writer (last) may stop */
	}
	if (started < n) {
		snprintf(err, len, "cannot start client threads");
		return -EAGAIN;
	}
	for (i = 0; i < n && !rc; i++)
		if (cl[i].rc) {
			rc = cl[i].rc;
			snprintf(err, len, "client %d: %s", i, cl[i].err.msg);
		}
	return rc;
}

int kb_run_test(const struct kb_cfg *cfg, const struct kb_target *tg,
		const struct kb_test *t, struct kb_row *row, char *err, size_t len)
{
	bool torn = !strcmp(t->workload, "torn");
	int i, n = t->clients + torn, rc = 0;
	atomic_bool done = false, writing = false;
	struct kb_client *cl = calloc((size_t)n, sizeof(*cl));
	struct zipf z = { 0 };

	*row = (struct kb_row){ .workload = t->workload,
		.dist = torn ? "hot" : t->zipf ? "zipf" : "uniform",
		.path = t->path, .size = t->size, .clients = t->clients,
		.lat = malloc(sizeof(*row->lat)) };
	if (!cl || !row->lat) {
		free(cl);
		snprintf(err, len, "out of memory");
		return -ENOMEM;
	}
	hist_init(row->lat);
	if (t->zipf)
		zipf_get(&z, (uint64_t)cfg->keys);
	for (i = 0; i < n && !rc; i++) {
		cl[i] = (struct kb_client){ .cfg = cfg, .tg = tg, .t = t, .z = &z,
			.readers_done = &done, .writing = &writing, .writer = torn && i == n - 1 };
		rc = client_init(&cl[i], i, n - torn);
		if (!rc && i == 0 && t->preload)
			rc = preload(&cl[i]);
		if (rc)
			snprintf(err, len, "client %d: %s", i, cl[i].err.msg);
	}
	if (!rc)
		rc = run_threads(cl, n, n - torn, &done, err, len);
	if (!rc)
		collect(cl, n, row);
	for (i = 0; i < n; i++)
		client_free(&cl[i]);
	free(cl);
	return rc;
}
