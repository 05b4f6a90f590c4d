// SPDX-License-Identifier: MIT
/*
 * rdmx rpc bench: latency and calls/s of rdmx RPC's echo per transport,
 * size and number of clients, and of the same echo over TCP.
 *   --server          serve every transport until SIGINT or SIGTERM
 *   ADDR              the clients, against such a server at ADDR
 *   neither           self-test: each transport's server on threads of
 *                     this process, started before its tests, stopped after
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cmd.h"
#include "bench_ep.h"
#include "bench_pre.h"
#include "cmds.h"
#include "json_out.h"
#include "rpc_bench.h"

#define DEFAULT_SIZES "32,4K"
#define DEFAULT_ITERS 2000

static const struct opts_page page = {
	.name = "rdmx-rpc-bench - latency and calls/s of rdmx RPC per transport, and TCP",
	.synopsis =
		"rdmx rpc bench [OPTIONS] --server [ADDR]\n"
		"rdmx rpc bench [OPTIONS] ADDR\n"
		"rdmx rpc bench [OPTIONS]",
	.description =
		"Measures rdmx RPC's echo method (the request back, byte for byte) over\n"
		"each transport of --transport at each size of --size with 1, 2, 4,\n"
		"... --conns clients, one thread and one connection each, into one\n"
		"server. Each client keeps --tx-depth calls in flight; each call is timed\n"
		"from before its send to its completion (CLOCK_MONOTONIC, warmup\n"
		"excluded) and its echo checked. A row reports the calls, calls/s of\n"
		"all clients, the round trip's p50, p90, p99 and p99.9, the slowest\n"
		"and fastest client's calls/s and Jain's fairness index of them (1:\n"
		"even), the server's CPU time per call and its outbound work requests\n"
		"per call (rdmx_rpc_server_stats: messages and one-sided operations on\n"
		"its connections, herd's UD SENDs), and the clients' CPU.\n"
		"\n"
		"Transports: msg (one rdmx message each way over --protocol), rfp\n"
		"(requests RDMA-WRITten into server memory, responses RDMA-READ), herd\n"
		"(requests WRITten over UC, responses UD SENDs), and tcp: the baseline,\n"
		"the same echo as length-prefixed frames over a TCP socket (TCP_NODELAY;\n"
		"rdmx bench's TCP endpoint) to a server with a thread per connection.\n"
		"\n"
		"The server's figures come from the contract's second method, 'stats'\n"
		"(TCP: a control frame), called before and after each timed run: its\n"
		"process CPU time, calls answered and work requests. In the self-test\n"
		"the server shares this process: the clients' and the harness's thread\n"
		"CPU time is taken off.\n"
		"\n"
		"With --server, listens on ADDR (default: every address) for each\n"
		"transport: msg on --port, rfp on --port + 1, herd on --port + 2, tcp\n"
		"on --port + 3, until SIGINT or SIGTERM; start it with the client's\n"
		"--max-size, --protocol and --tx-depth. With ADDR, runs the tests against\n"
		"such a server. With neither, runs both ends in this process on the\n"
		"address rdmx would use (see rdmx devices), or on the fake fabric.\n"
		"\n"
		"--json and --csv write every figure, rewritten whole as each test\n"
		"finishes; --plot writes PNG and SVG charts with gnuplot: calls/s vs\n"
		"clients per transport and size, and the round-trip CDF of one client\n"
		"at the smallest size. SIGINT or SIGTERM ends the test under way (its row is\n"
		"dropped) and writes the rows finished before it.",
	.exit_status =
		"0   every test ran\n"
		"1   a test or an rdmx call failed (the other transports still run)\n"
		"2   usage error\n"
		"130, 143  stopped by SIGINT, SIGTERM (the finished rows are written)",
	.examples =
		"rdmx rpc bench --fabric fake --transport all --conns 4   # no RDMA device\n"
		"rdmx rpc bench --transport msg,rfp,herd,tcp --size 32,4K --conns 4 --json r.json\n"
		"rdmx rpc bench --server                                  # on host A\n"
		"rdmx rpc bench --transport rfp -t 8 -q 8 HOST_A          # on host B\n"
		"sandbox/run -- rdmx rpc bench --transport all --duration 1",
	.see_also = "rdmx(1), rdmx-rpc(1), rdmx-bench(1), rdmx-pingpong(1)",
};

/* Every transport in port order (--server: --port + index). */
static const char *const all_transports[] = { "msg", "rfp", "herd", RB_TCP, NULL };

#define usage_err(...) cmd_usage_err("rpc bench", __VA_ARGS__)

/* A transport's index in all_transports, or -1. */
static int transport_index(const char *name)
{
	for (int i = 0; all_transports[i]; i++)
		if (!strcmp(all_transports[i], name))
			return i;
	return -1;
}

/* "all" or a comma list of transports, each once, in port order. */
static int parse_transports(struct rb_cfg *cfg)
{
	char buf[128], *item, *save = NULL;
	bool on[RB_MAX_TRANSPORTS] = { false };
	int i;

	if (strlen(cfg->transports_s) >= sizeof(buf) || !*cfg->transports_s)
		return usage_err("--transport: expected msg, rfp, herd, tcp or all");
	strcpy(buf, cfg->transports_s);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		i = transport_index(item);
		if (!strcmp(item, "all"))
			memset(on, 1, sizeof(on));
		else if (i < 0)
			return usage_err("--transport: unknown transport '%s' (known: msg, "
					 "rfp, herd, tcp, all)", item);
		else
			on[i] = true;
	}
	for (i = 0; i < RB_MAX_TRANSPORTS; i++)
		if (on[i])
			cfg->transports[cfg->n_transports++] = all_transports[i];
	return cfg->n_transports ? CMD_CONTINUE :
	       usage_err("--transport: expected msg, rfp, herd, tcp or all");
}

/* Derive the settings; usage errors print and return EXIT_USAGE. */
static int check_cfg(void *arg)
{
	struct rb_cfg *cfg = arg;
	char err[600], a[32], b[32];
	int rc = parse_transports(cfg);

	if (rc != CMD_CONTINUE)
		return rc;
	if (bench_parse_sizes(cfg->sizes_s, cfg->sizes, BENCH_MAX_SIZES, &cfg->n_sizes,
			      err, sizeof(err)))
		return usage_err("%s", err);
	for (int i = 0; i < cfg->n_sizes; i++)
		if (cfg->sizes[i] > cfg->max_size)
			return usage_err("--size: %s is above the echo method's largest "
					 "request, --max-size %s (the contract)",
					 opts_format_size(cfg->sizes[i], a, sizeof(a)),
					 opts_format_size(cfg->max_size, b, sizeof(b)));
	if (cfg->duration_s && cfg->iters)
		return usage_err("--iters and --duration exclude each other");
	if (cfg->duration_s && bench_parse_duration(cfg->duration_s, &cfg->duration_ns))
		return usage_err("--duration '%s': expected seconds, more than 0 and at "
				 "most 86400 (e.g. 2 or 0.5)", cfg->duration_s);
	if (!cfg->duration_s && !cfg->iters)
		cfg->iters = DEFAULT_ITERS;
	if (strcmp(cfg->fabric, "verbs") && (cfg->server || cfg->addr))
		return usage_err("--fabric fake (or RDMX_FABRIC=fake) runs only the self-test "
				 "(no --server, no ADDR)");
	if (cfg->server && (cfg->json || cfg->csv || cfg->plot))
		return usage_err("--json, --csv and --plot are for the client or the "
				 "self-test, not --server");
	if (cfg->addr && !cfg->server && cfg->port == 0)
		return usage_err("--port: a client needs the server's port (1-65532)");
	if (cfg->port + RB_MAX_TRANSPORTS - 1 > 65535)
		return usage_err("--port: too high for one port per transport");
	if (bench_check_outputs(cfg->json, cfg->csv, cfg->plot, err, sizeof(err)))
		return usage_err("%s", err);
	return CMD_CONTINUE;
}

/* ------------------------------------------------------------ the server */

static int run_server(rdmx_ctx *ctx, const struct rb_cfg *cfg)
{
	struct rb_server *s[RB_MAX_TRANSPORTS] = { NULL };
	struct timespec nap = { 0, 100 * 1000 * 1000 };
	int i, rc = EXIT_OK;

	bench_catch_stop();
	for (i = 0; i < cfg->n_transports && !rc; i++) {
		int port = (int)cfg->port + transport_index(cfg->transports[i]);

		rc = rb_server_start(ctx, cfg, cfg->transports[i], cfg->addr,
				     cfg->port ? (uint16_t)port : 0, &s[i]);
		if (!rc)
			printf("rdmx rpc bench: serving %s on port %u\n", cfg->transports[i],
			       rb_server_port(s[i]));
	}
	fflush(stdout);
	while (!rc && !bench_stopped())
		nanosleep(&nap, NULL);
	for (i = 0; i < cfg->n_transports; i++)
		rb_server_stop(s[i]);
	return rc;
}

/* ------------------------------------------------------------ the client */

struct run {
	const struct rb_cfg *cfg;
	rdmx_ctx *ctx;
	char local[64];
	struct bench_head_buf head;
	struct rb_report rep;
	int cap, failures;
};

/* --json and --csv with the rows so far; stdout ("-") only when @final. */
static int save_files(struct run *r, bool final)
{
	return jw_save("rpc bench", r->cfg->json, r->cfg->csv, final, &r->rep,
		       rb_write_json, rb_write_csv) ? EXIT_FAIL : 0;
}

/* The effective settings as a JSON object (names are identifiers). */
static void config_json(const struct rb_cfg *cfg, char *buf, size_t len)
{
	size_t n;

	jw_config_head(buf, len, "transports", cfg->transports, cfg->n_transports,
		       cfg->sizes, cfg->n_sizes);
	n = strlen(buf);
	snprintf(buf + n, len - n, ", \"protocol\": \"%s\", \"clients\": %lld, "
		 "\"window\": %lld, \"workers\": %lld, \"iters\": %lld, \"duration_s\": "
		 "%.3f, \"warmup\": %lld, \"max_size\": %llu, \"timeout_ms\": %lld, "
		 "\"port\": %lld}", cfg->protocol, cfg->clients, cfg->window, cfg->workers,
		 cfg->iters, (double)cfg->duration_ns / 1e9, cfg->warmup,
		 (unsigned long long)cfg->max_size, cfg->timeout, cfg->port);
}

/* One transport: its server (self-test), then every size and client count. */
static void run_transport(struct run *r, const char *transport)
{
	const struct rb_cfg *cfg = r->cfg;
	struct rb_target t = { .ctx = r->ctx, .addr = cfg->addr, .tcp_addr = cfg->addr,
		.port = (uint16_t)(cfg->port + transport_index(transport)) };
	struct rb_server *s = NULL;
	int sweep[16], n = bench_conn_sweep((int)cfg->clients, sweep, 16);
	char err[1024];

	if (!cfg->addr) {
		t.self = true;
		t.addr = r->local;
		t.tcp_addr = strcmp(cfg->fabric, "fake") ? r->local : "127.0.0.1";
		if (rb_server_start(r->ctx, cfg, transport, strcmp(transport, RB_TCP) ?
				    t.addr : t.tcp_addr, 0, &s)) {
			r->failures++;
			return;
		}
		t.port = rb_server_port(s);
	}
	for (int si = 0; si < cfg->n_sizes && !bench_stopped(); si++)
		for (int ci = 0; ci < n && !bench_stopped(); ci++) {
			struct rb_result *row = &r->rep.rows[r->rep.n];

			if (rb_run_group(cfg, transport, &t, cfg->sizes[si], sweep[ci], row,
					 err, sizeof(err))) {
				free(row->rtt);
				if (bench_stopped())
					break;
				fprintf(stderr, "rdmx rpc bench: %s, %llu bytes, %d client%s: %s\n",
					transport, (unsigned long long)cfg->sizes[si], sweep[ci],
					sweep[ci] > 1 ? "s" : "", err);
				r->failures++;
				si = cfg->n_sizes; /* the next transport */
				break;
			}
			r->rep.n++;
			save_files(r, false);
		}
	rb_server_stop(s);
}

/* The report's header fields and room for every row. */
static int report_init(struct run *r)
{
	const struct rb_cfg *cfg = r->cfg;
	int sweep[16], n = bench_conn_sweep((int)cfg->clients, sweep, 16);

	r->cap = cfg->n_transports * cfg->n_sizes * n;
	r->rep = (struct rb_report){
		.window = (int)cfg->window, .workers = (int)cfg->workers,
		.rows = calloc((size_t)r->cap, sizeof(struct rb_result)),
	};
	if (!r->rep.rows) {
		fprintf(stderr, "rdmx rpc bench: out of memory\n");
		return EXIT_FAIL;
	}
	bench_head_init(&r->rep.head, &r->head, cfg->fabric, cfg->addr, r->local,
			cfg->argc, cfg->argv);
	config_json(cfg, r->head.config, sizeof(r->head.config));
	return EXIT_OK;
}

/* The self-test or the client: every transport, then the outputs. */
static int run_client(rdmx_ctx *ctx, const struct rb_cfg *cfg)
{
	struct run r = { .cfg = cfg, .ctx = ctx };
	int i, rc;

	if (!cfg->addr && cli_local_addr("rpc bench", cfg->fabric, cfg->device,
					 (int)cfg->ib_port, -1, r.local, sizeof(r.local)))
		return EXIT_FAIL;
	if (report_init(&r))
		return EXIT_FAIL;
	bench_catch_stop();
	for (i = 0; i < cfg->n_transports && !bench_stopped(); i++)
		run_transport(&r, cfg->transports[i]);
	rb_print_table(&r.rep, jw_table_file(cfg->json, cfg->csv));
	rc = save_files(&r, true);
	if (cfg->plot && r.rep.n && rb_plot(&r.rep, cfg->plot))
		rc = EXIT_FAIL;
	for (i = 0; i < r.rep.n; i++)
		free(r.rep.rows[i].rtt);
	free(r.rep.rows);
	if (bench_stopped())
		return bench_stop_status("rpc bench", cfg->json || cfg->csv);
	return r.failures ? EXIT_FAIL : rc;
}

static char name[] = "rpc bench";

/* The server or the client. */
static int run(rdmx_ctx *ctx, const void *arg)
{
	const struct rb_cfg *cfg = arg;

	return cfg->server ? run_server(ctx, cfg) : run_client(ctx, cfg);
}

static const struct bench_cmd rpc_bench = { name, &page, check_cfg, run };

int cmd_rpc_bench(int argc, char **argv)
{
	struct rb_cfg cfg = { .transports_s = "all", .sizes_s = DEFAULT_SIZES,
		.protocol = "send_recv", .fabric = "verbs", .clients = 1, .window = 1,
		.workers = 1, .warmup = 100, .port = RDMX_DEFAULT_PORT, .timeout = 10000,
		.max_size = 65536, .argc = argc, .argv = argv };
	const struct cli_conn_dest conn = {
		.protocol = &cfg.protocol, .protocols = rdmx_protocol_names(),
		.device = &cfg.device, .ib_port = &cfg.ib_port, .port = &cfg.port, .timeout = &cfg.timeout,
		.fabric = &cfg.fabric,
	};
	struct opt conn_rows[CLI_CONN_ROWS];
	const struct opt table[] = {
		OPTS_INCLUDE(conn_rows),
		{ "transport", 0, OPT_STRING, &cfg.transports_s, 0, 0, NULL, "LIST",
		  "msg, rfp, herd, tcp (the baseline), a comma list of them, or all" },
		{ "size", 's', OPT_STRING, &cfg.sizes_s, 0, 0, NULL, "LIST",
		  "request (and response) sizes: 32,4K and ranges 8..1K (powers of 2)" },
		{ "sizes", 0, OPT_STRING, &cfg.sizes_s, 0, 0, NULL, "LIST", NULL },
		{ "max-size", 0, OPT_SIZE, &cfg.max_size, 1, 1 << 24, NULL, "BYTES",
		  "the echo method's largest request and response (the contract)" },
		{ "conns", 'q', OPT_INT, &cfg.clients, 1, RB_MAX_CLIENTS, NULL, "N",
		  "clients, one thread and connection each: runs 1, 2, 4, ... N" },
		{ "clients", 0, OPT_INT, &cfg.clients, 1, RB_MAX_CLIENTS, NULL, "N", NULL },
		{ "tx-depth", 't', OPT_INT, &cfg.window, 1, 4096, NULL, "N",
		  "calls in flight per client (the RPC window)" },
		{ "window", 0, OPT_INT, &cfg.window, 1, 4096, NULL, "N", NULL },
		{ "workers", 0, OPT_INT, &cfg.workers, 0, 64, NULL, "N",
		  "server worker threads (0: handlers on the receiving thread)" },
		{ "iters", 'n', OPT_INT, &cfg.iters, 1, 1000000000, NULL, "N",
		  "timed calls per client and test (default: 2000)" },
		{ "duration", 'D', OPT_STRING, &cfg.duration_s, 0, 0, NULL, "SEC",
		  "run each test for SEC seconds instead of --iters" },
		{ "warmup", 0, OPT_INT, &cfg.warmup, 0, 1000000000, NULL, "N",
		  "untimed calls per client before each test" },
		BENCH_OUTPUT_OPTS(&cfg.json, &cfg.csv, &cfg.plot),
		{ "server", 0, OPT_FLAG, &cfg.server, 0, 0, NULL, NULL,
		  "serve every transport of --transport until SIGINT or SIGTERM" },
		{ 0 },
	};

	const struct bench_cmd_cfg into = { &cfg, &cfg.addr, &cfg.fabric, &conn };

	cli_conn_rows(&conn, conn_rows);

	return bench_cmd_main(&rpc_bench, table, argc, argv, &into);
}
