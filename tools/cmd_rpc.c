// SPDX-License-Identifier: MIT
/*
 * rdmx rpc: try rdmx RPC by hand (public API only: rdmx/rpc.h).
 *   serve [ADDR]   an echo server until SIGINT/SIGTERM
 *   call ADDR      --iters echo calls, checked, with their mean time
 *   neither        self-test: server on a thread, client on this one
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmx/rpc.h>

#include "cli.h"
#include "cmds.h"
#include "rpc_bench.h"

#define M_ECHO 1

static const struct opts_page rpc_page = {
	.name = "rdmx-rpc - serve and call rdmx RPC's echo method",
	.synopsis =
		"rdmx rpc [OPTIONS] serve [ADDR]\n"
		"rdmx rpc [OPTIONS] call ADDR\n"
		"rdmx rpc [OPTIONS]\n"
		"rdmx rpc bench [BENCH OPTIONS] [ADDR]",
	.description =
		"The contract of both sides is one method, 1 'echo' (idempotent),\n"
		"whose largest request and response are --max-size bytes: a client\n"
		"with another --max-size is refused before its first call, and the\n"
		"refusal names the difference.\n"
		"\n"
		"serve listens on ADDR (default: every address) and --port and\n"
		"answers echo calls with --workers threads until SIGINT or SIGTERM,\n"
		"then prints the server's counts.\n"
		"\n"
		"call connects to ADDR and --port and makes --iters calls of --size\n"
		"bytes, up to --tx-depth in flight; every response is checked byte for\n"
		"byte. It prints the calls, the mean time per call and calls/s.\n"
		"\n"
		"With neither, runs a self-test: serve on the address rdmx would use\n"
		"(--device, --ib-port, --gid-index; 'fake' with --fabric fake) on an\n"
		"ephemeral port on a thread, call on this one. A server on the fake\n"
		"fabric is refused: no other process could reach it.\n"
		"\n"
		"rdmx rpc bench measures the echo's latency and calls/s per\n"
		"transport, size and number of clients, and a TCP baseline; it has\n"
		"its own options: see rdmx rpc bench --help (rdmx-rpc-bench(1)).\n"
		"\n"
		"Every failure is one line on stderr, 'rdmx rpc: WHAT: ERROR\n"
		"(DETAIL)'.",
	.exit_status =
		"0   the calls completed and checked (serve: stopped by a signal)\n"
		"1   an rdmx call failed or a response did not match\n"
		"2   usage error",
	.examples =
		"rdmx rpc --fabric fake --iters 10000 --tx-depth 16  # no RDMA device\n"
		"rdmx rpc serve                                      # on host A\n"
		"rdmx rpc call HOST_A --size 4K --iters 100000       # on host B\n"
		"sandbox/run -- rdmx rpc --protocol write_atomic",
	.see_also = "rdmx(1), rdmx-rpc-bench(1), rdmx-pingpong(1), rdmx-bench(1)",
};

static const struct opts_page serve_page = {
	.name = "rdmx-rpc-serve - serve rdmx RPC's echo method",
	.synopsis = "rdmx rpc serve [ADDR] [OPTIONS]",
	.description =
		"Listens on ADDR (default: every address; --device, --ib-port and\n"
		"--gid-index pick the address of a device) and --port, answers echo\n"
		"calls with --workers threads until SIGINT or SIGTERM, then prints\n"
		"the server's counts. Not on the fake fabric: no other process could\n"
		"reach it.",
	.exit_status = "0   stopped by a signal\n1   the server failed\n2   usage error",
	.examples = "rdmx rpc serve\nrdmx rpc serve 10.0.0.1 --transport rfp --port 7500",
	.see_also = "rdmx-rpc(1), rdmx-rpc-call(1)",
};

static const struct opts_page call_page = {
	.name = "rdmx-rpc-call - call rdmx RPC's echo method",
	.synopsis = "rdmx rpc call ADDR [OPTIONS]",
	.description =
		"Connects to ADDR and --port and makes --iters echo calls of --size\n"
		"bytes, up to --tx-depth in flight; every response is checked byte\n"
		"for byte. Prints the calls, the mean time per call and calls/s.",
	.exit_status = "0   the calls completed and checked\n"
		       "1   an rdmx call failed or a response did not match\n2   usage error",
	.examples = "rdmx rpc call HOST_A --size 4K --iters 100000 --tx-depth 16",
	.see_also = "rdmx-rpc(1), rdmx-rpc-serve(1)",
};

static const char *const transports[] = { "msg", "rfp", "herd", NULL };

struct rpc_cfg {
	const char *fabric, *transport, *protocol, *device;
	uint64_t size, max_size;
	long long count, window, workers, port, timeout, gid_index, ib_port;
	long long hello_ms, drop_ms, queue_max;  /* serve: 0, the defaults */
	uint64_t queue_bytes;
	long long peer_conns; /* the server's max_conns_per_peer */
};

static rdmx_rpc_server *volatile serving;

static void on_signal(int sig)
{
	(void)sig;
	if (serving)
		rdmx_rpc_server_stop(serving);
}

static void on_echo(rdmx_rpc_req *req, void *arg)
{
	size_t len, cap;
	const void *in = rdmx_rpc_req_data(req, &len);
	void *out = rdmx_rpc_req_resp(req, &cap);

	(void)arg;
	memcpy(out, in, len);
	rdmx_rpc_respond(req, 0, len);
}

static void contract(const struct rpc_cfg *cfg, struct rdmx_rpc_method *m)
{
	*m = (struct rdmx_rpc_method){ M_ECHO, "echo", (uint32_t)cfg->max_size,
		(uint32_t)cfg->max_size, RDMX_RPC_IDEMPOTENT };
}

static void rpc_opts(const struct rpc_cfg *cfg, struct rdmx_rpc_opts *o)
{
	rdmx_rpc_opts_init(o);
	o->transport = cfg->transport;
	o->protocol = cfg->protocol;
	o->window = (uint32_t)cfg->window;
	o->workers = (uint32_t)cfg->workers;
	o->timeout_ms = (int)cfg->timeout;
	o->hello_ms = (int)cfg->hello_ms;
	o->drop_ms = (int)cfg->drop_ms;
	o->queue_max = (uint32_t)cfg->queue_max;
	o->queue_bytes = (uint32_t)cfg->queue_bytes;
}

static int fail(const char *what, int rc, const char *detail)
{
	fprintf(stderr, "rdmx rpc: %s: %s (%s)\n", what, rdmx_strerror(rc), detail);
	return EXIT_FAIL;
}

/* The server's listener: the default caps, per peer as --max-conns-per-peer. */
static int peer_cap(rdmx_rpc_server *s, const struct rpc_cfg *cfg)
{
	struct rdmx_listener_opts lo;

	rdmx_listener_opts_init(&lo);
	lo.max_conns_per_peer = (uint32_t)cfg->peer_conns;
	return rdmx_rpc_server_set_listener_opts(s, &lo);
}

static int server_open(const struct rpc_cfg *cfg, rdmx_ctx *ctx, const char *addr,
		       uint16_t port, rdmx_rpc_server **out)
{
	struct rdmx_rpc_method m;
	struct rdmx_rpc_opts o;
	int rc;

	contract(cfg, &m);
	rpc_opts(cfg, &o);
	rc = rdmx_rpc_server_create(ctx, addr, port, &m, 1, &o, out);
	if (rc)
		return fail("serve", rc, rdmx_last_error());
	rc = rdmx_rpc_server_handle(*out, M_ECHO, on_echo, NULL);
	if (!rc)
		rc = peer_cap(*out, cfg);
	if (rc) {
		rdmx_rpc_server_destroy(*out);
		return fail("serve", rc, rdmx_last_error());
	}
	return EXIT_OK;
}

static void print_server(rdmx_rpc_server *s)
{
	struct rdmx_rpc_server_stats st;

	rdmx_rpc_server_stats(s, &st);
	printf("rdmx rpc: served %llu calls for %llu clients (%llu refused, %llu "
	       "dropped for malformed frames)\n", (unsigned long long)st.calls,
	       (unsigned long long)st.conns, (unsigned long long)st.rejected,
	       (unsigned long long)st.bad_frames);
	if (st.dropped || st.hello_late) /* the last reason names its connection */
		printf("rdmx rpc: %llu clients dropped for taking no responses, %llu "
		       "connections closed for no hello; last: %s\n",
		       (unsigned long long)st.dropped, (unsigned long long)st.hello_late,
		       rdmx_rpc_server_error(s));
}

/* Which isolation the device of @addr gives memory exported to one
 * client (herd's request slots; docs/isolation.md). */
static void print_isolation(const char *addr)
{
	char dev[64];
	int iso = addr && *addr && !rdmx_route(addr, 1000, dev, sizeof(dev), NULL) ?
		  rdmx_device_isolation(dev) : 0;

	if (iso > 0)
		printf("rdmx rpc: memory exported to one client (herd, rfp slots) on %s: %s\n", dev,
		       iso == RDMX_ISOLATION_WINDOWS ?
		       "memory windows bound to each client's queue pair" :
		       "exact rights only (the device has no memory windows)");
}

static int serve(const struct rpc_cfg *cfg, rdmx_ctx *ctx, const char *addr)
{
	rdmx_rpc_server *s;
	int rc = server_open(cfg, ctx, addr, (uint16_t)cfg->port, &s);

	if (rc)
		return rc;
	serving = s;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("rdmx rpc: serving echo on %s port %u (transport %s, protocol %s)\n",
	       addr && *addr ? addr : "*", rdmx_rpc_server_port(s), cfg->transport,
	       cfg->protocol);
	print_isolation(addr);
	fflush(stdout);
	rc = rdmx_rpc_server_run(s);
	serving = NULL;
	if (rc)
		fail("serve", rc, rdmx_rpc_server_error(s));
	print_server(s);
	rdmx_rpc_server_destroy(s);
	return rc ? EXIT_FAIL : EXIT_OK;
}

/* serve on ADDR, or on the address of --device, --ib-port, --gid-index, or everywhere. */
static int serve_at(const struct rpc_cfg *cfg, rdmx_ctx *ctx, const char *addr)
{
	char buf[64];

	if (!addr && (cfg->device || cfg->ib_port || cfg->gid_index >= 0)) {
		if (cli_local_addr("rpc", cfg->fabric, cfg->device, (int)cfg->ib_port,
				   (int)cfg->gid_index, buf, sizeof(buf)))
			return EXIT_FAIL;
		addr = buf;
	}
	return serve(cfg, ctx, addr);
}

/* ------------------------------------------------------------------ calls */

struct slot {
	uint64_t id, seq;
	unsigned char *in, *out;
	int busy;
};

static void fill(unsigned char *p, size_t n, uint64_t seq)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seq * 131 + i * 7 + 1);
}

/* Collect one call; 0, or EXIT_FAIL with the reason printed. */
static int collect(rdmx_rpc_client *c, struct slot *sl, long long w, size_t size,
		   int timeout_ms)
{
	uint64_t id;
	size_t len;
	int status, rc = rdmx_rpc_poll(c, &id, &status, &len, timeout_ms);
	long long i;

	if (rc)
		return fail("call", rc, rdmx_rpc_client_error(c));
	for (i = 0; i < w && !(sl[i].busy && sl[i].id == id); i++)
		;
	if (i == w || status || len != size)
		return fail("call", status ? status : -EPROTO, "unexpected response");
	sl[i].busy = 0;
	fill(sl[i].in, size, sl[i].seq);
	if (memcmp(sl[i].in, sl[i].out, size))
		return fail("call", -EPROTO, "the echo differs from the request");
	return 0;
}

static int call_all(const struct rpc_cfg *cfg, rdmx_rpc_client *c, struct slot *sl)
{
	long long w = cfg->window, sent = 0, done = 0;
	size_t size = cfg->size;

	while (done < cfg->count) {
		for (long long i = 0; i < w && sent < cfg->count; i++) {
			int rc;

			if (sl[i].busy)
				continue;
			sl[i].seq = (uint64_t)sent;
			fill(sl[i].in, size, sl[i].seq);
			rc = rdmx_rpc_call_async(c, M_ECHO, sl[i].in, size, sl[i].out, size,
						 &sl[i].id);
			if (rc)
				return fail("call", rc, rdmx_rpc_client_error(c));
			sl[i].busy = 1;
			sent++;
		}
		if (collect(c, sl, w, size, (int)cfg->timeout))
			return EXIT_FAIL;
		done++;
	}
	return EXIT_OK;
}

static struct slot *slots_new(long long w, size_t size)
{
	struct slot *sl = calloc((size_t)w, sizeof(*sl));

	for (long long i = 0; sl && i < w; i++) {
		sl[i].in = malloc(size ? size : 1);
		sl[i].out = malloc(size ? size : 1);
		if (!sl[i].in || !sl[i].out)
			return NULL; /* the process ends soon: a CLI run */
	}
	return sl;
}

static void slots_free(struct slot *sl, long long w)
{
	for (long long i = 0; sl && i < w; i++) {
		free(sl[i].in);
		free(sl[i].out);
	}
	free(sl);
}

static int call(const struct rpc_cfg *cfg, rdmx_ctx *ctx, const char *addr, uint16_t port)
{
	struct rdmx_rpc_method m;
	struct rdmx_rpc_opts o;
	struct timespec a, b;
	rdmx_rpc_client *c;
	struct slot *sl;
	double us;
	int rc;

	contract(cfg, &m);
	rpc_opts(cfg, &o);
	rc = rdmx_rpc_client_create(ctx, addr, port, &m, 1, &o, &c);
	if (rc)
		return fail("connect", rc, rdmx_last_error());
	sl = slots_new(cfg->window, cfg->size);
	if (!sl) {
		rdmx_rpc_client_destroy(c);
		return fail("call", -ENOMEM, "buffers");
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	rc = call_all(cfg, c, sl);
	clock_gettime(CLOCK_MONOTONIC, &b);
	us = (double)cli_elapsed_ns(&a, &b) / 1e3;
	if (!rc)
		printf("rdmx rpc: %lld calls of %llu bytes checked, window %lld: %.2f us "
		       "per call, %.0f calls/s\n", cfg->count, (unsigned long long)cfg->size,
		       cfg->window, us / (double)cfg->count, (double)cfg->count * 1e6 / us);
	slots_free(sl, cfg->window);
	rdmx_rpc_client_destroy(c);
	return rc;
}

/* --------------------------------------------------------------- self-test */

static void *serve_main(void *arg)
{
	rdmx_rpc_server *s = arg;

	rdmx_rpc_server_run(s);
	return NULL;
}

static int self_test(const struct rpc_cfg *cfg, rdmx_ctx *ctx)
{
	char addr[64];
	rdmx_rpc_server *s;
	pthread_t t;
	int rc = cli_local_addr("rpc", cfg->fabric, cfg->device, (int)cfg->ib_port,
				(int)cfg->gid_index, addr, sizeof(addr));

	if (rc)
		return rc;
	rc = server_open(cfg, ctx, addr, 0, &s);
	if (rc)
		return rc;
	if (pthread_create(&t, NULL, serve_main, s)) {
		rdmx_rpc_server_destroy(s);
		return fail("self-test", -EAGAIN, "no server thread");
	}
	rc = call(cfg, ctx, addr, rdmx_rpc_server_port(s));
	rdmx_rpc_server_stop(s);
	pthread_join(t, NULL);
	print_server(s);
	rdmx_rpc_server_destroy(s);
	return rc;
}

static int run(const struct rpc_cfg *cfg, const char **pos, int npos)
{
	struct rdmx_ctx_opts co;
	rdmx_ctx *ctx;
	int rc;

	rdmx_ctx_opts_init(&co);
	co.fabric = cfg->fabric;
	rc = rdmx_ctx_create(&ctx, &co);
	if (rc)
		return fail("context", rc, rdmx_last_error());
	if (!npos)
		rc = self_test(cfg, ctx);
	else if (!strcmp(pos[0], "serve"))
		rc = serve_at(cfg, ctx, npos > 1 ? pos[1] : NULL);
	else
		rc = call(cfg, ctx, pos[1], (uint16_t)cfg->port);
	rdmx_ctx_destroy(ctx);
	return rc;
}

/* What the arguments may not say together; CMD_CONTINUE or EXIT_USAGE. */
static int check_args(const struct rpc_cfg *cfg, const struct cmd_sub *sub, int npos)
{
	bool is_serve = sub && !strcmp(sub->name, "serve");

	if (sub && !strcmp(sub->name, "call") && npos != 2)
		return cmd_usage_err("rpc call", "%s", npos < 2 ? "needs ADDR" :
				     "takes one ADDR");
	if (is_serve && npos > 2)
		return cmd_usage_err("rpc serve", "takes one ADDR at most");
	if (cfg->size > cfg->max_size)
		return cmd_usage_err("rpc", "--size %llu: more than --max-size %llu",
				     (unsigned long long)cfg->size,
				     (unsigned long long)cfg->max_size);
	if (sub && !is_serve && (cfg->device || cfg->ib_port || cfg->gid_index >= 0))
		return cmd_usage_err("rpc call", "%s", "--device, --ib-port and --gid-index choose "
				     "a local address: for serve and the self-test");
	if (is_serve && npos > 1 && (cfg->device || cfg->ib_port || cfg->gid_index >= 0))
		return cmd_usage_err("rpc serve", "%s", "ADDR, or --device and "
				     "--gid-index: one way to choose the address");
	if (sub && !strcmp(cfg->fabric, "fake"))
		return cli_fake_server_refused(is_serve ? "rpc serve" : "rpc call",
					       cfg->fabric);
	return CMD_CONTINUE;
}

int cmd_rpc(int argc, char **argv)
{
	struct rpc_cfg cfg = { .fabric = "verbs", .transport = "msg",
		.protocol = "send_recv", .size = 64, .max_size = 65536, .count = 1000,
		.window = 1, .workers = 1, .port = RDMX_DEFAULT_PORT, .timeout = 5000,
		.gid_index = -1, .peer_conns = 64 };
	const struct cli_conn_dest conn = {
		.protocol = &cfg.protocol, .protocols = rdmx_protocol_names(),
		.device = &cfg.device, .ib_port = &cfg.ib_port, .gid_index = &cfg.gid_index, .port = &cfg.port,
		.timeout = &cfg.timeout, .fabric = &cfg.fabric,
	};
	struct cli_conn_dest client_conn = conn;	/* no local address */
	struct opt conn_rows[CLI_CONN_ROWS], client_conn_rows[CLI_CONN_ROWS];
	const struct opt rpc_rows[] = {
		{ "transport", 0, OPT_CHOICE, &cfg.transport, 0, 0, transports, "NAME",
		  "RPC transport" },
		{ "max-size", 0, OPT_SIZE, &cfg.max_size, 1, 1 << 30, NULL, "BYTES",
		  "the echo method's largest request and response: the contract" },
		{ "tx-depth", 't', OPT_INT, &cfg.window, 1, 4096, NULL, "N",
		  "calls in flight per client (the RPC window; serve: rfp's and herd's "
		  "slots per client, the most a client may use)" },
		{ "window", 0, OPT_INT, &cfg.window, 1, 4096, NULL, "N", NULL },
		{ 0 },
	};
	const struct opt server_rows[] = {
		{ "workers", 0, OPT_INT, &cfg.workers, 0, 256, NULL, "N",
		  "server worker threads (0: handlers on the receiving thread)" },
		{ "max-conns-per-peer", 0, OPT_INT, &cfg.peer_conns, 0, 65536, NULL, "N",
		  "serve: connections from one address (0: no cap)" },
		{ "hello-timeout", 0, OPT_INT, &cfg.hello_ms, 0, 3600000, NULL, "MS",
		  "serve: close a connection with no valid hello by then (0: --timeout)" },
		{ "drop-timeout", 0, OPT_INT, &cfg.drop_ms, 0, 3600000, NULL, "MS",
		  "serve: drop a client whose queued responses do not move for this long "
		  "(0: half of --timeout)" },
		{ "queue-max", 0, OPT_INT, &cfg.queue_max, 0, 1 << 20, NULL, "N",
		  "serve: responses queued per client at most (0: 4096)" },
		{ "queue-bytes", 0, OPT_SIZE, &cfg.queue_bytes, 0, 0xffffffffLL, NULL, "BYTES",
		  "serve: bytes queued per client at most (0: 16M)" },
		{ 0 },
	};
	const struct opt client_rows[] = {
		{ "size", 's', OPT_SIZE, &cfg.size, 0, 1 << 30, NULL, "BYTES",
		  "request (and response) bytes of each call" },
		{ "iters", 'n', OPT_INT, &cfg.count, 1, 1000000000, NULL, "N",
		  "calls to make" },
		{ "count", 0, OPT_INT, &cfg.count, 1, 1000000000, NULL, "N", NULL },
		{ 0 },
	};
	const struct opt table[] = {
		OPTS_INCLUDE(conn_rows), OPTS_INCLUDE(rpc_rows), OPTS_INCLUDE(server_rows),
		OPTS_INCLUDE(client_rows), { 0 },
	};
	const struct opt serve_table[] = {
		OPTS_INCLUDE(conn_rows), OPTS_INCLUDE(rpc_rows), OPTS_INCLUDE(server_rows),
		{ 0 },
	};
	const struct opt call_table[] = {
		OPTS_INCLUDE(client_conn_rows), OPTS_INCLUDE(rpc_rows),
		OPTS_INCLUDE(client_rows), { 0 },
	};
	const struct cmd_sub subs[] = {
		{ "serve", &serve_page, serve_table },
		{ "call", &call_page, call_table },
		{ NULL, NULL, NULL },
	};
	const struct cmd_sub *sub;
	const char *pos[3];
	int rc, npos = 0;

	if (argc > 1 && !strcmp(argv[1], "bench")) /* its own options and page */
		return cmd_rpc_bench(argc - 1, argv + 1);
	client_conn.device = NULL;
	client_conn.ib_port = NULL;
	client_conn.gid_index = NULL;
	cli_conn_rows(&conn, conn_rows);
	cli_conn_rows(&client_conn, client_conn_rows);
	rc = cmd_parse_subs(&rpc_page, table, subs, argc, argv, pos, 3, &npos, &sub);
	if (rc != CMD_CONTINUE)
		return rc;
	rc = cli_conn_check("rpc", &conn);
	if (rc == CMD_CONTINUE)
		rc = check_args(&cfg, sub, npos);
	return rc == CMD_CONTINUE ? run(&cfg, pos, npos) : rc;
}
