/* SPDX-License-Identifier: MIT */
/*
 * rdmx kv bench: rdmx KV's GETs and PUTs by each path against memcached.
 *   cmd_kv_bench.c   options and orchestration (the in-process server)
 *   kv_bench_run.c   the workloads: client threads, keys, values, figures
 *   kv_bench_mc.c    the memcached ASCII client (front door and memcached)
 *                    and Debian's memcached spawned on a free port
 *   kv_bench_out.c   table, targets, JSON, CSV and --plot
 *
 * Paths: "rpc" (rdmx KV's get method; PUTs are always RPCs), "read" (GET
 * by one-sided READ), "door" (rdmx KV's memcached front door over TCP) and
 * "memcached" (Debian's memcached over TCP). Every value carries its key's
 * index and a stamp repeated in every byte, so a GET that returns a torn
 * value is counted (bad values: must be 0).
 */
#ifndef RDMX_TOOLS_KV_BENCH_H
#define RDMX_TOOLS_KV_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rdmx/kv.h>

#include "bench.h"
#include "hist.h"
#include "json_out.h"

#define KB_MAX_CLIENTS 64
#define KB_MAX_PATHS 4
#define KB_MAX_MIXES 4
#define KB_ZIPF_THETA 0.99
#define KB_HOT_KEYS 16		/* the torn phase's hot set */

enum kb_path { KB_RPC, KB_READ, KB_DOOR, KB_MEMCACHED };

/* The settings of a run. */
struct kb_cfg {
	const char *values_s, *dist_s, *mix_s, *get_s, *paths_s, *fabric, *device;
	const char *json, *csv, *plot, *addr, *transport, *protocol;
	long long ops, clients, keys, port, door_port, mc_port, timeout, ib_port;
	bool mc_spawn;
	int argc;
	char **argv;
	/* derived */
	int n_sizes, n_mixes, n_dists;
	uint64_t sizes[BENCH_MAX_SIZES];
	int mix_get[KB_MAX_MIXES];	/* GET percentage of each mix */
	bool zipf[2];			/* the key distributions, in order */
	bool path_on[KB_MAX_PATHS];
};

/* One row: a workload on one path at one value size. */
struct kb_row {
	const char *workload;		/* put, get, 95/5, 50/50, torn */
	const char *dist;		/* uniform, zipf */
	enum kb_path path;
	uint64_t size;
	int clients;
	uint64_t ops, gets, puts, misses, wall_ns;
	double rate;			/* ops / wall */
	/* GETs by READ (rdmx_kv_client_stats deltas), and self-checks */
	uint64_t gets_read, gets_rpc, retries, fallbacks, bad;
	uint64_t client_ops[KB_MAX_CLIENTS];	/* each client's share of ops */
	struct hist *lat;		/* every op (torn: the GETs) */
};

/* Everything a run produced, for the writers. */
struct kb_report {
	struct jw_head head;
	uint64_t keys, ops;
	int n, cap;
	struct kb_row *rows;
};

/* Where the clients go. */
struct kb_target {
	rdmx_ctx *ctx;
	const char *addr;		/* RDMA door */
	uint16_t port;
	const char *tcp_addr;		/* front door and memcached */
	int door_port, mc_port;		/* -1: none */
};

/** kb_path_name - "rpc", "read", "door" or "memcached". */
const char *kb_path_name(enum kb_path p);

/* ------------------------------------------------------------ kv_bench_run.c */

/* One test: @workload ("put", "get", "95/5"... or "torn") on @path. */
struct kb_test {
	const char *workload;
	int get_pct;			/* GETs per 100 ops */
	bool zipf, preload;		/* preload: every key first, untimed */
	enum kb_path path;
	uint64_t size;
	int clients;
};

/**
 * kb_run_test - run @t against @tg with @cfg's counts: fills @row (its lat
 * allocated). 0, or -errno with the first error in @err.
 */
int kb_run_test(const struct kb_cfg *cfg, const struct kb_target *tg,
		const struct kb_test *t, struct kb_row *row, char *err, size_t len);

/* ------------------------------------------------------------- kv_bench_mc.c */

struct kb_mc;

/** kb_mc_dial - a memcached ASCII client of @addr:@port. 0 or -errno. */
int kb_mc_dial(const char *addr, int port, int timeout_ms, struct kb_mc **out,
	       char *err, size_t len);

/** kb_mc_set - "set": 0 on STORED, else -errno (kb_mc_error says why). */
int kb_mc_set(struct kb_mc *m, const char *key, const void *val, size_t vlen);

/** kb_mc_get - "get": 0 with the value in @buf, -ENOENT, -EMSGSIZE, -errno. */
int kb_mc_get(struct kb_mc *m, const char *key, void *buf, size_t cap, size_t *vlen);

/** kb_mc_error - the last failure's message. */
const char *kb_mc_error(const struct kb_mc *m);

void kb_mc_close(struct kb_mc *m);

/**
 * kb_mc_spawn - start @prog (Debian's memcached) on 127.0.0.1 and a free
 * port with @mem_mb MiB and @threads threads, and wait (bounded by
 * @timeout_ms) until it accepts. Its port to *@port, its pid to *@pid.
 */
int kb_mc_spawn(const char *prog, int mem_mb, int threads, int timeout_ms,
		int *port, int *pid, char *err, size_t len);

/** kb_mc_reap - stop a spawned memcached (SIGTERM, then wait for it). */
void kb_mc_reap(int pid);

/* ------------------------------------------------------------ kv_bench_out.c */

void kb_print_table(const struct kb_report *r, FILE *f);
int kb_write_json(const void *report, FILE *f);
int kb_write_csv(const void *report, FILE *f);

/** kb_plot - the GET latency CDFs and ops/s per path into @dir (gnuplot). */
int kb_plot(const struct kb_report *r, const char *dir);

int cmd_kv_bench(int argc, char **argv);

#endif /* RDMX_TOOLS_KV_BENCH_H */
