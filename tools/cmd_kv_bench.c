// SPDX-License-Identifier: MIT
/*
 * rdmx kv bench: rdmx KV's PUTs and GETs (by RPC and by one-sided READ)
 * against rdmx KV's memcached front door and Debian's memcached over TCP.
 *   ADDR      the clients, against an rdmx kv serve at ADDR
 *   no ADDR   self-test: the server on a thread of this process, on the
 *             address rdmx would use (or the fake fabric)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cmd.h"
#include "bench_ep.h"
#include "bench_pre.h"
#include "cli.h"
#include "cmds.h"
#include "json_out.h"
#include "kv_bench.h"

#define LAB_OPS 100000
#define MEMCACHED_BIN "/usr/bin/memcached"

static const struct opts_page page = {
	.name = "rdmx-kv-bench - rdmx KV's GETs by RPC and READ against memcached",
	.synopsis =
		"rdmx kv bench [OPTIONS] ADDR\n"
		"rdmx kv bench [OPTIONS]",
	.description =
		"First the classic lab's three measurements, one client each: --iters\n"
		"PUTs, --iters GETs by RPC and --iters GETs by one-sided RDMA READ (the\n"
		"lab's count is 100,000, the default), and the same PUTs and GETs\n"
		"over TCP against rdmx KV's memcached front door ('door') and Debian's\n"
		"memcached ('memcached'). Then the mixed workloads of --mix (GET/PUT\n"
		"percentages) with --dist keys (uniform, or Zipf with theta 0.99 over\n"
		"--keys keys) and --conns clients, one thread and connection each,\n"
		"on every path: rpc, read, door, memcached. Last, the torn test: the\n"
		"clients GET 16 hot keys ('hot') by READ while one more thread\n"
		"rewrites them by PUT RPCs; it reports the torn copies the clients\n"
		"detected and read again (retries, from rdmx_kv_client_stats), per\n"
		"million GETs, and the GETs that fell back to the RPC.\n"
		"\n"
		"Every test runs at each size of --size; the keys are stored\n"
		"(untimed) before the first test of a size. Each op is timed on its\n"
		"own (CLOCK_MONOTONIC) and every GET's value is checked: a value\n"
		"carries its key's index and a stamp in every byte, so a torn value\n"
		"returned would be counted in 'bad' (expected: 0). A row reports\n"
		"ops, ops/s of all clients, the op's p50, p99 and p99.9 in\n"
		"microseconds, and for GETs by READ the torn retries per million\n"
		"GETs. Below the table: GET by READ's p50 against GET by RPC's and\n"
		"memcached's, and the front door's ops/s against memcached's (the\n"
		"issue's targets: at most 0.5x, at most 0.3x, at least 0.8x).\n"
		"\n"
		"With no ADDR, the KV server (both doors) runs in this process on\n"
		"the address rdmx would use (see rdmx devices), or on the fake\n"
		"fabric; the front door on 127.0.0.1. With ADDR, the clients go to an\n"
		"'rdmx kv serve' there (RDMA door on --port, front door on\n"
		"--door-port: that server must open it with --memcached-addr, its\n"
		"default is 127.0.0.1). memcached: with --memcached 0 (the default) Debian's\n"
		"/usr/bin/memcached is started on 127.0.0.1 and a free port with\n"
		"--conns threads when it is installed (--memcached-spawn: it must\n"
		"be), and stopped at the end; --memcached PORT uses one running on\n"
		"ADDR (or 127.0.0.1); -1 runs without memcached.\n"
		"\n"
		"--json and --csv write every figure (the JSON also each client's\n"
		"ops), rewritten whole as each test finishes; --plot writes PNG and\n"
		"SVG charts with gnuplot: the GET latency CDF per path at the\n"
		"smallest size (the lab's GETs), and ops/s per path and mixed\n"
		"workload. SIGINT or SIGTERM ends the test\n"
		"under way (its row is dropped) and writes the rows finished before\n"
		"it.",
	.exit_status =
		"0   every test ran (and no GET returned a bad value)\n"
		"1   a test or an rdmx call failed, or a GET returned a bad value\n"
		"2   usage error\n"
		"130, 143  stopped by SIGINT, SIGTERM (the finished rows are written)",
	.examples =
		"rdmx kv bench --fabric fake --iters 2000 --size 32   # no RDMA device\n"
		"rdmx kv bench --conns 4 --size 32,1K,4K --json kv.json --plot kvplots\n"
		"rdmx kv serve --memcached-addr 0.0.0.0               # on host A (door open to B)\n"
		"rdmx kv bench --get-path read --memcached 11211 HOST_A  # on host B\n"
		"sandbox/run -- rdmx kv bench --iters 5000",
	.see_also = "rdmx(1), rdmx-kv(1), rdmx-rpc-bench(1), rdmx-bench(1), memcached(1)",
};

static const char *const get_paths[] = { "both", "rpc", "read", NULL };
static const char *const transports[] = { "msg", NULL };

#define usage_err(...) cmd_usage_err("kv bench", __VA_ARGS__)

/* --mix "95/5,50/50": the GET percentage of each. */
static int parse_mix(struct kb_cfg *cfg)
{
	char buf[128], *item, *save = NULL;
	int g, p, used;

	if (strlen(cfg->mix_s) >= sizeof(buf))
		return usage_err("--mix: too long");
	strcpy(buf, cfg->mix_s);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (sscanf(item, "%d/%d%n", &g, &p, &used) != 2 || item[used] || g < 0 ||
		    p < 0 || g + p != 100)
			return usage_err("--mix: '%s' is not GET/PUT percentages that add up "
					 "to 100 (e.g. 95/5)", item);
		if (cfg->n_mixes == KB_MAX_MIXES)
			return usage_err("--mix: at most %d workloads", KB_MAX_MIXES);
		cfg->mix_get[cfg->n_mixes++] = g;
	}
	return cfg->n_mixes ? CMD_CONTINUE : usage_err("--mix: expected e.g. 95/5,50/50");
}

/* --dist "uniform,zipf". */
static int parse_dist(struct kb_cfg *cfg)
{
	char buf[64], *item, *save = NULL;

	if (strlen(cfg->dist_s) >= sizeof(buf))
		return usage_err("--dist: too long");
	strcpy(buf, cfg->dist_s);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (strcmp(item, "uniform") && strcmp(item, "zipf"))
			return usage_err("--dist: '%s' is not uniform or zipf", item);
		if (cfg->n_dists == 2)
			return usage_err("--dist: each of uniform and zipf once");
		cfg->zipf[cfg->n_dists++] = !strcmp(item, "zipf");
	}
	return cfg->n_dists ? CMD_CONTINUE : usage_err("--dist: expected uniform, zipf or both");
}

/* Derive the settings; usage errors print and return EXIT_USAGE. */
static int check_cfg(void *arg)
{
	struct kb_cfg *cfg = arg;
	char err[600];
	int rc;

	if (bench_parse_sizes(cfg->values_s, cfg->sizes, BENCH_MAX_SIZES, &cfg->n_sizes,
			      err, sizeof(err)))
		return usage_err("%s", err);
	for (int i = 0; i < cfg->n_sizes; i++)
		if (cfg->sizes[i] < 8 || cfg->sizes[i] > RDMX_KV_RPC_VALUE_MAX)
			return usage_err("--size: %llu is outside 8..64K (a value carries "
					 "its key and a stamp; a PUT carries at most 64K)",
					 (unsigned long long)cfg->sizes[i]);
	rc = parse_mix(cfg);
	if (rc == CMD_CONTINUE)
		rc = parse_dist(cfg);
	if (rc != CMD_CONTINUE)
		return rc;
	if (strcmp(cfg->fabric, "verbs") && cfg->addr)
		return usage_err("--fabric fake (or RDMX_FABRIC=fake) runs only the "
				 "self-test (no ADDR)");
	if (cfg->addr && cfg->port == 0)
		return usage_err("--port: with ADDR, the RDMA door's port (1-65535)");
	if (cfg->mc_spawn && cfg->mc_port > 0)
		return usage_err("--memcached-spawn and --memcached PORT exclude each other");
	if (bench_check_outputs(cfg->json, cfg->csv, cfg->plot, err, sizeof(err)))
		return usage_err("%s", err);
	cfg->path_on[KB_RPC] = strcmp(cfg->get_s, "read");
	cfg->path_on[KB_READ] = strcmp(cfg->get_s, "rpc");
	cfg->path_on[KB_DOOR] = !cfg->addr || cfg->door_port >= 0;
	return CMD_CONTINUE;
}

/* ------------------------------------------------------------ the run */

struct run {
	const struct kb_cfg *cfg;
	struct kb_target tg;
	rdmx_kv_server *srv;
	pthread_t srv_th;
	bool srv_running;
	int mc_pid, failures;
	uint64_t loaded[2];	/* the size each store holds (0: none) */
	char local[64];
	struct bench_head_buf head;
	struct kb_report rep;
};

static int save_files(struct run *r, bool final)
{
	return jw_save("kv bench", r->cfg->json, r->cfg->csv, final, &r->rep,
		       kb_write_json, kb_write_csv) ? EXIT_FAIL : 0;
}

static void *serve_main(void *arg)
{
	struct run *r = arg;

	if (rdmx_kv_server_run(r->srv))
		fprintf(stderr, "rdmx kv bench: server: %s\n", rdmx_kv_server_error(r->srv));
	return NULL;
}

/* Bytes of every key at the largest value, twice over (room for rewrites). */
static uint64_t store_bytes(const struct kb_cfg *cfg)
{
	uint64_t big = 0;

	for (int i = 0; i < cfg->n_sizes; i++)
		big = cfg->sizes[i] > big ? cfg->sizes[i] : big;
	return (uint64_t)cfg->keys * (big + 128) * 2;
}

/* The self-test's server: both doors, sized by store_bytes(). */
static int server_start(struct run *r)
{
	const struct kb_cfg *cfg = r->cfg;
	uint64_t keys = (uint64_t)cfg->keys;
	struct rdmx_listener_opts caps;
	struct rdmx_kv_server_opts o;

	rdmx_kv_server_opts_init(&o);
	o.capacity = keys * 2 > 1024 ? keys * 2 : 1024;
	o.memory = store_bytes(cfg) + (1 << 20);
	o.memcached_addr = "127.0.0.1";
	o.memcached_port = 0;
	o.ctx = r->tg.ctx;
	o.rdma_addr = r->local;
	o.rdma_port = 0;
	o.transport = cfg->transport;
	o.protocol = cfg->protocol;
	o.rpc_caps = &caps;
	o.read_caps = &caps;
	o.max_clients_per_peer = -1;
	cli_lab_caps(&caps); /* a lab's clients share one host */
	if (rdmx_kv_server_create(&o, &r->srv)) {
		fprintf(stderr, "rdmx kv bench: server: %s\n", rdmx_last_error());
		return EXIT_FAIL;
	}
	if (pthread_create(&r->srv_th, NULL, serve_main, r)) {
		fprintf(stderr, "rdmx kv bench: cannot start the server's thread\n");
		return EXIT_FAIL;
	}
	r->srv_running = true;
	r->tg.addr = r->local;
	r->tg.port = (uint16_t)rdmx_kv_server_rdma_port(r->srv);
	r->tg.tcp_addr = "127.0.0.1";
	r->tg.door_port = rdmx_kv_server_port(r->srv);
	return EXIT_OK;
}

static void server_stop(struct run *r)
{
	if (r->srv_running) {
		rdmx_kv_server_stop(r->srv);
		pthread_join(r->srv_th, NULL);
	}
	rdmx_kv_server_destroy(r->srv);
}

/* memcached: spawned, given, or none (said on stderr). */
static int memcached_start(struct run *r)
{
	const struct kb_cfg *cfg = r->cfg;
	uint64_t mb = (store_bytes(cfg) >> 20) + 64;
	char err[512];

	r->tg.mc_port = -1;
	if (cfg->mc_port > 0) {
		r->tg.mc_port = (int)cfg->mc_port;
		return EXIT_OK;
	}
	if (cfg->mc_port < 0)
		return EXIT_OK;
	if (!cfg->mc_spawn && access(MEMCACHED_BIN, X_OK)) {
		fprintf(stderr, "rdmx kv bench: no memcached rows: %s is not installed "
			"(scripts/install-deps installs it)\n", MEMCACHED_BIN);
		return EXIT_OK;
	}
	if (kb_mc_spawn(MEMCACHED_BIN, (int)(mb < 65536 ? mb : 65536), (int)cfg->clients,
			(int)cfg->timeout, &r->tg.mc_port, &r->mc_pid, err, sizeof(err))) {
		fprintf(stderr, "rdmx kv bench: memcached: %s\n", err);
		return EXIT_FAIL;
	}
	if (cfg->addr) /* a spawned memcached is local: its rows compare less */
		fprintf(stderr, "rdmx kv bench: memcached runs on this host (127.0.0.1), "
			"not on %s\n", cfg->addr);
	return EXIT_OK;
}

/* One test into the next row (a failure is said and counted). */
static void run_test(struct run *r, struct kb_test *t)
{
	struct kb_row *row = &r->rep.rows[r->rep.n];
	int store = t->path == KB_MEMCACHED;
	char err[1024];

	t->preload = r->loaded[store] != t->size || !strcmp(t->workload, "torn");
	if (kb_run_test(r->cfg, &r->tg, t, row, err, sizeof(err))) {
		free(row->lat);
		r->loaded[store] = 0;
		if (bench_stopped())
			return;
		fprintf(stderr, "rdmx kv bench: %s %s on %s, %llu bytes: %s\n", t->workload,
			t->zipf ? "zipf" : "uniform", kb_path_name(t->path),
			(unsigned long long)t->size, err);
		r->failures++;
		return;
	}
	r->loaded[store] = t->size;
	r->rep.n++;
	save_files(r, false);
}

/* Is @p on for this run (memcached: when there is one)? */
static bool path_on(const struct run *r, enum kb_path p)
{
	return p == KB_MEMCACHED ? r->tg.mc_port > 0 : r->cfg->path_on[p];
}

/* The lab: PUTs, then GETs, one client, per path and size. */
static void run_lab(struct run *r)
{
	for (int si = 0; si < r->cfg->n_sizes; si++)
		for (int p = KB_RPC; p <= KB_MEMCACHED && !bench_stopped(); p++) {
			struct kb_test t = { .workload = "put", .path = (enum kb_path)p,
				.size = r->cfg->sizes[si], .clients = 1 };

			if (!path_on(r, (enum kb_path)p))
				continue;
			if (p != KB_READ) /* a PUT by READ is a PUT by RPC */
				run_test(r, &t);
			t.workload = "get";
			t.get_pct = 100;
			if (!bench_stopped())
				run_test(r, &t);
		}
}

/* The mixed workloads, then the torn test, with --conns clients. */
static void run_mixed(struct run *r)
{
	const struct kb_cfg *cfg = r->cfg;
	static const char *const names[] = { "95/5", "50/50" };
	static char other[KB_MAX_MIXES][16];

	for (int mi = 0; mi < cfg->n_mixes; mi++) {
		const char *w = cfg->mix_get[mi] == 95 ? names[0] :
				cfg->mix_get[mi] == 50 ? names[1] : other[mi];

		snprintf(other[mi], sizeof(other[mi]), "%d/%d", cfg->mix_get[mi],
			 100 - cfg->mix_get[mi]);
		for (int di = 0; di < cfg->n_dists; di++)
			for (int si = 0; si < cfg->n_sizes; si++)
				for (int p = KB_RPC; p <= KB_MEMCACHED && !bench_stopped(); p++) {
					struct kb_test t = { .workload = w,
						.get_pct = cfg->mix_get[mi], .zipf = cfg->zipf[di],
						.path = (enum kb_path)p, .size = cfg->sizes[si],
						.clients = (int)cfg->clients };

					if (path_on(r, (enum kb_path)p))
						run_test(r, &t);
				}
	}
	for (int si = 0; si < cfg->n_sizes && cfg->path_on[KB_READ] && !bench_stopped(); si++) {
		struct kb_test t = { .workload = "torn", .get_pct = 100, .path = KB_READ,
			.size = cfg->sizes[si], .clients = (int)cfg->clients };

		run_test(r, &t);
	}
}

/* The effective settings as a JSON object. */
static void config_json(const struct kb_cfg *cfg, const struct run *r, char *buf, size_t len)
{
	static const char *const names[] = { "put", "get" };
	size_t n;

	jw_config_head(buf, len, "lab", names, 2, cfg->sizes, cfg->n_sizes);
	n = strlen(buf);
	n += (size_t)snprintf(buf + n, len - n, ", \"ops\": %lld, \"clients\": %lld, "
			      "\"keys\": %lld, \"dist\": \"%s\", \"mix\": \"%s\", \"get\": "
			      "\"%s\", \"transport\": \"%s\", \"protocol\": \"%s\", "
			      "\"zipf_theta\": %.2f, \"hot_keys\": %d, \"memcached\": %s, "
			      "\"timeout_ms\": %lld}", cfg->ops, cfg->clients, cfg->keys,
			      cfg->dist_s, cfg->mix_s, cfg->get_s, cfg->transport,
			      cfg->protocol, KB_ZIPF_THETA, KB_HOT_KEYS,
			      r->mc_pid ? "\"spawned\"" : r->tg.mc_port > 0 ? "\"given\"" :
			      "null", cfg->timeout);
	(void)n;
}

/* The report's header fields and room for every row. */
static int report_init(struct run *r)
{
	const struct kb_cfg *cfg = r->cfg;

	r->rep = (struct kb_report){
		.keys = (uint64_t)cfg->keys, .ops = (uint64_t)cfg->ops,
		.cap = cfg->n_sizes * (2 * KB_MAX_PATHS + cfg->n_mixes * cfg->n_dists *
				       KB_MAX_PATHS + 1),
	};
	r->rep.rows = calloc((size_t)r->rep.cap, sizeof(struct kb_row));
	if (!r->rep.rows) {
		fprintf(stderr, "rdmx kv bench: out of memory\n");
		return EXIT_FAIL;
	}
	bench_head_init(&r->rep.head, &r->head, cfg->fabric, cfg->addr, r->local,
			cfg->argc, cfg->argv);
	config_json(cfg, r, r->head.config, sizeof(r->head.config));
	return EXIT_OK;
}

/* The table, the files and the charts; the exit status. */
static int finish(struct run *r)
{
	const struct kb_cfg *cfg = r->cfg;
	uint64_t bad = 0;
	int rc;

	kb_print_table(&r->rep, jw_table_file(cfg->json, cfg->csv));
	rc = save_files(r, true);
	if (cfg->plot && r->rep.n && kb_plot(&r->rep, cfg->plot))
		rc = EXIT_FAIL;
	for (int i = 0; i < r->rep.n; i++) {
		bad += r->rep.rows[i].bad;
		free(r->rep.rows[i].lat);
	}
	free(r->rep.rows);
	if (bench_stopped())
		return bench_stop_status("kv bench", cfg->json || cfg->csv);
	if (bad)
		fprintf(stderr, "rdmx kv bench: %llu GETs returned a bad value (torn, or "
			"not the key's)\n", (unsigned long long)bad);
	return r->failures || bad ? EXIT_FAIL : rc;
}

/* The server (self-test), memcached, every test, then the outputs. */
static int run(rdmx_ctx *ctx, const void *arg)
{
	const struct kb_cfg *cfg = arg;
	struct run r = { .cfg = cfg, .tg = { .ctx = ctx } };
	int rc = EXIT_OK;

	if (cfg->addr) {
		r.tg = (struct kb_target){ .ctx = ctx, .addr = cfg->addr,
			.port = (uint16_t)cfg->port, .tcp_addr = cfg->addr,
			.door_port = (int)cfg->door_port };
	} else if (cli_local_addr("kv bench", cfg->fabric, cfg->device,
				  (int)cfg->ib_port, -1, r.local, sizeof(r.local)) ||
		   server_start(&r)) {
		rc = EXIT_FAIL;
	}
	if (!rc)
		rc = memcached_start(&r);
	if (!rc)
		rc = report_init(&r);
	if (!rc) {
		bench_catch_stop();
		run_lab(&r);
		run_mixed(&r);
		rc = finish(&r);
	}
	kb_mc_reap(r.mc_pid);
	server_stop(&r);
	return rc;
}

static char name[] = "kv bench";
static const struct bench_cmd kv_bench = { name, &page, check_cfg, run };

int cmd_kv_bench(int argc, char **argv)
{
	struct kb_cfg cfg = { .values_s = "32,4K", .dist_s = "uniform,zipf",
		.mix_s = "95/5,50/50", .get_s = "both", .fabric = "verbs",
		.transport = "msg", .protocol = "send_recv", .ops = LAB_OPS, .clients = 4,
		.keys = 10000, .port = RDMX_DEFAULT_PORT, .door_port = 11211,
		.timeout = 10000, .argc = argc, .argv = argv };
	const struct cli_conn_dest conn = {
		.protocol = &cfg.protocol, .protocols = rdmx_protocol_names(),
		.device = &cfg.device, .ib_port = &cfg.ib_port, .port = &cfg.port, .timeout = &cfg.timeout,
		.fabric = &cfg.fabric,
	};
	struct opt conn_rows[CLI_CONN_ROWS];
	const struct opt table[] = {
		OPTS_INCLUDE(conn_rows),
		{ "iters", 'n', OPT_INT, &cfg.ops, 1, 1000000000, NULL, "N",
		  "timed ops per test, shared by its clients (default: the lab's 100000)" },
		{ "ops", 0, OPT_INT, &cfg.ops, 1, 1000000000, NULL, "N", NULL },
		{ "conns", 'q', OPT_INT, &cfg.clients, 1, KB_MAX_CLIENTS, NULL, "N",
		  "clients of the mixed workloads and the torn test, a thread and "
		  "connection each" },
		{ "clients", 0, OPT_INT, &cfg.clients, 1, KB_MAX_CLIENTS, NULL, "N", NULL },
		{ "size", 's', OPT_STRING, &cfg.values_s, 0, 0, NULL, "LIST",
		  "value sizes: 32,4K and ranges 32..4K (powers of 2), 8 to 64K" },
		{ "values", 0, OPT_STRING, &cfg.values_s, 0, 0, NULL, "LIST", NULL },
		{ "keys", 0, OPT_INT, &cfg.keys, 1, 100000000, NULL, "N",
		  "keys, each stored before a size's first test" },
		{ "dist", 0, OPT_STRING, &cfg.dist_s, 0, 0, NULL, "LIST",
		  "key distributions of the mixed workloads: uniform, zipf (theta 0.99)" },
		{ "mix", 0, OPT_STRING, &cfg.mix_s, 0, 0, NULL, "LIST",
		  "mixed workloads as GET/PUT percentages (default 95/5,50/50)" },
		{ "get-path", 0, OPT_CHOICE, &cfg.get_s, 0, 0, get_paths, "PATH",
		  "rdmx KV's GET paths to run: rpc, read or both" },
		{ "get", 0, OPT_CHOICE, &cfg.get_s, 0, 0, get_paths, "PATH", NULL },
		{ "memcached", 0, OPT_INT, &cfg.mc_port, -1, 65535, NULL, "PORT",
		  "memcached's port on ADDR (0: spawn /usr/bin/memcached if installed; "
		  "-1: none)" },
		{ "memcached-spawn", 0, OPT_FLAG, &cfg.mc_spawn, 0, 0, NULL, NULL,
		  "spawn /usr/bin/memcached, and fail if it is not installed" },
		{ "door-port", 0, OPT_INT, &cfg.door_port, -1, 65535, NULL, "PORT",
		  "with ADDR: the front door's TCP port (default 11211; -1: none)" },
		{ "transport", 0, OPT_CHOICE, &cfg.transport, 0, 0, transports, "NAME",
		  "RPC transport of the RDMA door" },
		BENCH_OUTPUT_OPTS(&cfg.json, &cfg.csv, &cfg.plot),
		{ 0 },
	};

	const struct bench_cmd_cfg into = { &cfg, &cfg.addr, &cfg.fabric, &conn };

	cli_conn_rows(&conn, conn_rows);

	return bench_cmd_main(&kv_bench, table, argc, argv, &into);
}
