// SPDX-License-Identifier: MIT
/*
 * rdmx pingpong: round-trip latency of one message at a time.
 *   --server          echo every message back until the peer disconnects
 *   ADDR              the client: time --iters round trips to ADDR
 *   neither           self-test: echo server on a thread, client on this one
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmx/rdmx.h>

#include "cli.h"
#include "cmds.h"
#include "hist.h"

#define MAX_SIZE	(1ll << 30)

static const struct opts_page pingpong_page = {
	.name = "rdmx-pingpong - measure rdmx message round-trip latency",
	.synopsis =
		"rdmx pingpong [OPTIONS] --server [ADDR]\n"
		"rdmx pingpong [OPTIONS] ADDR\n"
		"rdmx pingpong [OPTIONS]",
	.description =
		"Sends one message of --size bytes, waits for the peer to echo it\n"
		"back, and repeats --iters times after --warmup untimed round trips.\n"
		"Each round trip is timed from rdmx_send() until rdmx_recv() returns\n"
		"the echo (CLOCK_MONOTONIC); the report gives the round-trip time\n"
		"(RTT) min, p50, p90, p99, p99.9, max, mean and standard deviation in\n"
		"microseconds, and the one-way latency estimate (half the RTT p50).\n"
		"\n"
		"With --server, listens on ADDR (default: every address) and --port,\n"
		"accepts one connection and echoes every message back with the same\n"
		"length and content until the peer disconnects.\n"
		"\n"
		"With ADDR and no --server, connects to a server at ADDR and --port.\n"
		"\n"
		"With neither, runs a self-test: listens on the address rdmx would\n"
		"use (see rdmx devices; --device, --ib-port, --gid-index choose\n"
		"another) on an ephemeral port, runs the echo server on a second\n"
		"thread and the client on the first.\n"
		"\n"
		"--verify fills every message with a pattern derived from its\n"
		"sequence number and checks every byte of the echo; the first\n"
		"mismatch is reported with its offset. Without it, the length and\n"
		"(for --size 8 and more) the sequence number are checked.\n"
		"\n"
		"A --size above 64K needs the server to allow it: start the server\n"
		"with at least the same --size.\n"
		"\n"
		"Every failure is one line on stderr, 'rdmx pingpong: WHAT: ERROR\n"
		"(DETAIL)', ERROR being rdmx_strerror() of the code and DETAIL the\n"
		"library's detail message.",
	.exit_status =
		"0   the run completed (server: the peer disconnected)\n"
		"1   an rdmx call failed, timed out, or --verify found a mismatch\n"
		"2   usage error",
	.examples =
		"rdmx pingpong                                 # self-test\n"
		"rdmx pingpong --server                        # on host A\n"
		"rdmx pingpong --size 4K --iters 100000 HOST_A # on host B\n"
		"rdmx pingpong --verify --size 1M --iters 100\n"
		"rdmx pingpong --fabric fake --verify           # no RDMA device needed\n"
		"sandbox/run -- rdmx pingpong --verify",
	.see_also = "rdmx(1), rdmx-devices(1), rdmx-bench(1)",
};


struct pp_cfg {
	const char *protocol, *device, *fabric, *addr, *wait, *notify, *ack;
	uint64_t size, ring_size;
	long long iters, warmup, port, timeout, depth, gid_index, ib_port;
	bool verify, server;
	struct rdmx_conn_opts copts;
};

/* --------------------------------------------------------------- patterns */

static uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The next 8 pattern bytes at @off of message @seq (the first 8: @seq). */
static uint64_t pattern_word(uint64_t *s, uint64_t seq, size_t off, size_t len)
{
	if (off == 0 && len >= 8)
		return seq;
	return xorshift64(s);
}

static uint64_t pattern_seed(uint64_t seq)
{
	return (seq + 1) * 0x9e3779b97f4a7c15ull;
}

static void pattern_fill(uint8_t *p, size_t len, uint64_t seq)
{
	uint64_t s = pattern_seed(seq), w;
	size_t off;

	for (off = 0; off < len; off += 8) {
		w = pattern_word(&s, seq, off, len);
		memcpy(p + off, &w, len - off < 8 ? len - off : 8);
	}
}

/* The first offset where @p differs from the pattern of @seq, or -1. */
static long long pattern_check(const uint8_t *p, size_t len, uint64_t seq,
			       uint8_t *want)
{
	uint64_t s = pattern_seed(seq), w;
	size_t off, i, n;
	uint8_t b[8];

	for (off = 0; off < len; off += 8) {
		w = pattern_word(&s, seq, off, len);
		memcpy(b, &w, sizeof(b));
		n = len - off < 8 ? len - off : 8;
		for (i = 0; i < n; i++) {
			if (p[off + i] != b[i]) {
				*want = b[i];
				return (long long)(off + i);
			}
		}
	}
	return -1;
}

/* ------------------------------------------------------------ echo server */

static int echo_one(rdmx_conn *c, const struct rdmx_msg *in, int timeout_ms,
		    struct cli_err *e)
{
	struct rdmx_msg out;
	int rc;

	rc = rdmx_msg_alloc(c, in->len, &out, timeout_ms);
	if (rc)
		return cli_fail(e, "allocate the echo", rc, c);
	memcpy(out.data, in->data, in->len);
	out.len = in->len;
	out.imm = in->imm;
	out.flags = in->flags & RDMX_MSG_IMM;
	rc = rdmx_send(c, &out);
	if (rc)
		return cli_fail(e, "send the echo", rc, c);
	return EXIT_OK;
}

/* Echo until the peer goes away; -ECONNRESET is the normal end. */
static int echo_loop(rdmx_conn *c, int recv_timeout_ms, int timeout_ms,
		     uint64_t *n, struct cli_err *e)
{
	struct rdmx_msg in;
	int rc;

	for (;;) {
		rc = rdmx_recv(c, &in, recv_timeout_ms);
		if (rc == -ECONNRESET)
			return EXIT_OK;
		if (rc)
			return cli_fail(e, "receive", rc, c);
		rc = echo_one(c, &in, timeout_ms, e);
		rdmx_msg_release(c, &in);
		if (rc)
			return rc;
		(*n)++;
	}
}

struct server {
	const struct pp_cfg *cfg;
	rdmx_listener *lis;
	int accept_timeout_ms, recv_timeout_ms;
	bool verbose;
	int rc;
	struct cli_err err;
};

static int serve_one(struct server *s)
{
	rdmx_conn *c;
	uint64_t n = 0;
	int rc;

	rc = rdmx_accept(s->lis, s->accept_timeout_ms, &c);
	if (rc)
		return cli_fail(&s->err, "accept", rc, NULL);
	if (s->verbose)
		printf("connected (protocol %s, max message %zu bytes)\n",
		       rdmx_conn_protocol(c), rdmx_conn_max_msg(c));
	fflush(stdout);
	rc = echo_loop(c, s->recv_timeout_ms, (int)s->cfg->timeout, &n, &s->err);
	rdmx_conn_close(c);
	if (s->verbose && rc == EXIT_OK)
		printf("peer disconnected after %" PRIu64 " messages\n", n);
	return rc;
}

static void *server_thread(void *arg)
{
	struct server *s = arg;

	s->rc = serve_one(s);
	return NULL;
}

/* ----------------------------------------------------------------- client */

struct client {
	const struct pp_cfg *cfg;
	rdmx_conn *conn;
	bool connected;
	size_t size;
	struct hist hist;
	struct cli_err err;
};

/* The echo of message @seq: length, sequence number, with --verify all. */
static int check_echo(struct client *cl, const struct rdmx_msg *m, uint64_t seq)
{
	uint64_t got;
	long long off;
	uint8_t want;

	if (m->len != cl->size) {
		cli_set_err(&cl->err, "verify: message %" PRIu64 " came back with %zu "
			"bytes, sent %zu", seq, m->len, cl->size);
		return EXIT_FAIL;
	}
	if (!cl->cfg->verify) {
		if (cl->size < 8)
			return EXIT_OK;
		memcpy(&got, m->data, sizeof(got));
		if (got == seq)
			return EXIT_OK;
		cli_set_err(&cl->err, "verify: expected the echo of message %" PRIu64
			", got message %" PRIu64, seq, got);
		return EXIT_FAIL;
	}
	off = pattern_check(m->data, m->len, seq, &want);
	if (off >= 0) {
		cli_set_err(&cl->err, "verify: message %" PRIu64 " differs at offset "
			"%lld of %zu: expected 0x%02x, got 0x%02x", seq, off,
			m->len, want, ((const uint8_t *)m->data)[off]);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static void fill(struct client *cl, struct rdmx_msg *m, uint64_t seq)
{
	m->len = cl->size;
	m->flags = 0;
	if (cl->cfg->verify)
		pattern_fill(m->data, cl->size, seq);
	else if (cl->size >= 8)
		memcpy(m->data, &seq, sizeof(seq));
}

static int round_trip(struct client *cl, uint64_t seq, uint64_t *ns)
{
	int tmo = (int)cl->cfg->timeout, rc;
	struct timespec t0, t1;
	struct rdmx_msg m;

	rc = rdmx_msg_alloc(cl->conn, cl->size, &m, tmo);
	if (rc)
		return cli_fail(&cl->err, "allocate a message", rc, cl->conn);
	fill(cl, &m, seq);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = rdmx_send(cl->conn, &m);
	if (rc)
		return cli_fail(&cl->err, "send", rc, cl->conn);
	rc = rdmx_recv(cl->conn, &m, tmo);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc)
		return cli_fail(&cl->err, "receive the echo", rc, cl->conn);
	*ns = cli_elapsed_ns(&t0, &t1);
	rc = check_echo(cl, &m, seq);
	rdmx_msg_release(cl->conn, &m);
	return rc;
}

static int check_size(struct client *cl)
{
	size_t max = rdmx_conn_max_msg(cl->conn);
	char a[32], b[32];

	if (cl->size <= max)
		return EXIT_OK;
	cli_set_err(&cl->err, "--size: %s is more than the connection's largest "
		"message (%s); start the server with --size %s too",
		opts_format_size(cl->size, a, sizeof(a)),
		opts_format_size(max, b, sizeof(b)), a);
	return EXIT_FAIL;
}

static int client_run(struct client *cl)
{
	uint64_t i, total, ns = 0;
	int rc;

	hist_init(&cl->hist);
	rc = check_size(cl);
	total = (uint64_t)cl->cfg->warmup + (uint64_t)cl->cfg->iters;
	for (i = 0; rc == EXIT_OK && i < total; i++) {
		rc = round_trip(cl, i, &ns);
		if (rc == EXIT_OK && i >= (uint64_t)cl->cfg->warmup)
			hist_record(&cl->hist, ns);
	}
	if (rc == EXIT_OK) {
		rc = rdmx_flush(cl->conn, (int)cl->cfg->timeout);
		if (rc)
			rc = cli_fail(&cl->err, "flush", rc, cl->conn);
	}
	return rc;
}

static void print_report(const struct client *cl, const char *peer)
{
	static const double pct[] = { 50, 90, 99, 99.9 };
	const struct hist *h = &cl->hist;
	size_t i;

	printf("protocol    %s\n", rdmx_conn_protocol(cl->conn));
	printf("size        %zu bytes\n", cl->size);
	printf("wait        %s\n", cl->cfg->wait);
	printf("iterations  %lld (+%lld warmup)\n", cl->cfg->iters, cl->cfg->warmup);
	printf("peer        %s\n", peer);
	printf("verify      %s\n\n", cl->cfg->verify ? "every byte" : "length, sequence");
	printf("latency in microseconds (one-way: half the round trip)\n");
	printf("%-7s %8s %8s %8s %8s %8s %8s %8s %8s\n", "", "min", "p50", "p90",
	       "p99", "p99.9", "max", "mean", "stdev");
	printf("%-7s %8.3f", "RTT", (double)hist_min(h) / 1e3);
	for (i = 0; i < sizeof(pct) / sizeof(pct[0]); i++)
		printf(" %8.3f", (double)hist_percentile(h, pct[i]) / 1e3);
	printf(" %8.3f %8.3f %8.3f\n", (double)hist_max(h) / 1e3,
	       hist_mean(h) / 1e3, hist_stdev(h) / 1e3);
	printf("%-7s %8s %8.3f\n", "one-way", "",
	       (double)hist_percentile(h, 50) / 2e3);
}

/* ------------------------------------------------------------------ modes */

static int dial(rdmx_ctx *ctx, struct client *cl, const char *addr,
		uint16_t port)
{
	char what[128];
	int rc;

	rc = rdmx_dial(ctx, addr, port, &cl->cfg->copts, &cl->conn);
	if (rc) {
		snprintf(what, sizeof(what), "connect to %s port %u", addr, port);
		return cli_fail(&cl->err, what, rc, NULL);
	}
	cl->connected = true;
	return EXIT_OK;
}

/* A client of @cfg's size, or NULL (said on stderr). */
static struct client *client_new(const struct pp_cfg *cfg)
{
	struct client *cl = calloc(1, sizeof(*cl));

	if (!cl) {
		fprintf(stderr, "rdmx pingpong: out of memory\n");
		return NULL;
	}
	cl->cfg = cfg;
	cl->size = (size_t)cfg->size;
	return cl;
}

static int run_client(rdmx_ctx *ctx, const struct pp_cfg *cfg)
{
	struct client *cl = client_new(cfg);
	char peer[96];
	int rc;

	if (!cl)
		return EXIT_FAIL;
	rc = dial(ctx, cl, cfg->addr, (uint16_t)cfg->port);
	if (rc == EXIT_OK) {
		rc = client_run(cl);
		snprintf(peer, sizeof(peer), "%s port %lld", cfg->addr, cfg->port);
		if (rc == EXIT_OK)
			print_report(cl, peer);
		rdmx_conn_close(cl->conn);
	}
	cli_print_err("pingpong", &cl->err);
	free(cl);
	return rc;
}

static int listen_on(rdmx_ctx *ctx, const struct pp_cfg *cfg, const char *addr,
		     uint16_t port, rdmx_listener **lis)
{
	struct cli_err e = { "" };
	char what[128];
	int rc;

	rc = rdmx_listen(ctx, addr, port, &cfg->copts, lis);
	if (!rc) {
		struct rdmx_listener_opts lo;

		cli_lab_caps(&lo); /* memory and per-peer caps lifted */
		rc = rdmx_listener_set_opts(*lis, &lo);
	}
	if (rc) {
		snprintf(what, sizeof(what), "listen on %s port %u",
			 addr ? addr : "any address", port);
		cli_fail(&e, what, rc, NULL);
		cli_print_err("pingpong", &e);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int run_server(rdmx_ctx *ctx, const struct pp_cfg *cfg)
{
	struct server s = { .cfg = cfg, .accept_timeout_ms = -1,
			    .recv_timeout_ms = -1, .verbose = true };
	const char *addr = cfg->addr;
	char buf[64];
	int rc;

	if (!addr && (cfg->device || cfg->ib_port || cfg->gid_index >= 0)) {
		if (cli_local_addr("pingpong", cfg->fabric, cfg->device, (int)cfg->ib_port,
				   (int)cfg->gid_index, buf, sizeof(buf)))
			return EXIT_FAIL;
		addr = buf;
	}
	if (listen_on(ctx, cfg, addr, (uint16_t)cfg->port, &s.lis))
		return EXIT_FAIL;
	printf("listening on %s port %u (protocol %s, wait %s)\n",
	       addr ? addr : "any address", rdmx_listener_port(s.lis),
	       cfg->copts.protocol ? cfg->copts.protocol : "default", cfg->wait);
	fflush(stdout);
	rc = serve_one(&s);
	cli_print_err("pingpong", &s.err);
	rdmx_listener_destroy(s.lis);
	return rc;
}

static int self_test_client(rdmx_ctx *ctx, struct client *cl, const char *addr,
			    uint16_t port)
{
	char peer[96];
	int rc;

	rc = dial(ctx, cl, addr, port);
	if (rc)
		return rc;
	rc = client_run(cl);
	snprintf(peer, sizeof(peer), "%s port %u (self-test)", addr, port);
	if (rc == EXIT_OK)
		print_report(cl, peer);
	rdmx_conn_close(cl->conn); /* the server sees the disconnect and ends */
	return rc;
}

static int run_self_test(rdmx_ctx *ctx, const struct pp_cfg *cfg)
{
	struct server s = { .cfg = cfg, .accept_timeout_ms = (int)cfg->timeout,
			    .recv_timeout_ms = (int)cfg->timeout };
	struct client *cl = client_new(cfg);
	char addr[64];
	pthread_t t;
	int rc;

	if (!cl)
		return EXIT_FAIL;
	rc = cli_local_addr("pingpong", cfg->fabric, cfg->device, (int)cfg->ib_port,
			    (int)cfg->gid_index, addr, sizeof(addr));
	if (rc == EXIT_OK)
		rc = listen_on(ctx, cfg, addr, 0, &s.lis);
	if (rc) {
		free(cl);
		return rc;
	}
	rc = pthread_create(&t, NULL, server_thread, &s);
	if (rc) {
		fprintf(stderr, "rdmx pingpong: cannot start the server thread: %s\n",
			strerror(rc));
	} else {
		rc = self_test_client(ctx, cl, addr, rdmx_listener_port(s.lis));
		pthread_join(t, NULL);
		cli_print_err("pingpong", &cl->err);
		if (cl->connected) /* the server's error matters once it had a peer */
			cli_print_err("pingpong", &s.err);
		rc = rc ? rc : s.rc;
	}
	rdmx_listener_destroy(s.lis);
	free(cl);
	return rc ? EXIT_FAIL : EXIT_OK;
}

/* ----------------------------------------------------------- command line */

static int check_cfg(const struct pp_cfg *cfg)
{
	const char *why = NULL;

	if (cli_ring_size("pingpong", cfg->ring_size, cfg->size) < 0)
		return EXIT_USAGE;
	if (strcmp(cfg->fabric, "verbs") && (cfg->server || cfg->addr))
		why = "--fabric fake (or RDMX_FABRIC=fake) runs only the self-test "
		      "(no --server, no ADDR)";
	else if (!cfg->server && cfg->addr && (cfg->device || cfg->ib_port || cfg->gid_index >= 0))
		why = "--device, --ib-port and --gid-index choose a local address: they apply "
		      "to --server and the self-test, not to a client";
	else if (!cfg->server && cfg->addr && cfg->port == 0)
		why = "--port: a client needs the server's port (1-65535)";
	if (!why)
		return CMD_CONTINUE;
	fprintf(stderr, "rdmx pingpong: %s\n", why);
	return EXIT_USAGE;
}

static void conn_opts(struct pp_cfg *cfg)
{
	cfg->copts.protocol = cfg->protocol;
	if (cfg->size > cfg->copts.max_msg_size)
		cfg->copts.max_msg_size = (uint32_t)cfg->size;
	/* a ring given smaller than the default largest message: messages up
	 * to a quarter of it (two records always fit), or --size if larger */
	if (cfg->ring_size && cfg->ring_size / 4 < cfg->copts.max_msg_size)
		cfg->copts.max_msg_size = (uint32_t)(cfg->size > cfg->ring_size / 4 ?
						     cfg->size : cfg->ring_size / 4);
	cfg->copts.ring_size = (uint32_t)cli_ring_size("pingpong", cfg->ring_size,
						       cfg->copts.max_msg_size);
	cfg->copts.send_depth = (uint32_t)cfg->depth;
	cfg->copts.recv_depth = (uint32_t)cfg->depth;
	cfg->copts.connect_timeout_ms = (int)cfg->timeout;
	cfg->copts.wait_mode = cli_wait_mode(cfg->wait);
	cfg->copts.notify = cli_choice_index(cli_notify_modes, cfg->notify);
	cfg->copts.ack = cli_choice_index(cli_ack_modes, cfg->ack);
}

static int run(struct pp_cfg *cfg)
{
	struct rdmx_ctx_opts o = { .fabric = cfg->fabric };
	rdmx_ctx *ctx;
	struct cli_err e = { "" };
	int rc;

	conn_opts(cfg);
	rc = rdmx_ctx_create(&ctx, &o);
	if (rc) {
		cli_fail(&e, "create a context", rc, NULL);
		cli_print_err("pingpong", &e);
		return EXIT_FAIL;
	}
	if (cfg->server)
		rc = run_server(ctx, cfg);
	else if (cfg->addr)
		rc = run_client(ctx, cfg);
	else
		rc = run_self_test(ctx, cfg);
	rdmx_ctx_destroy(ctx);
	return rc;
}

int cmd_pingpong(int argc, char **argv)
{
	struct pp_cfg cfg = { .size = 64, .iters = 1000, .warmup = 100,
			      .port = RDMX_DEFAULT_PORT, .gid_index = -1,
			      .fabric = "verbs", .wait = "adaptive",
			      .notify = "default", .ack = "default" };
	const struct cli_conn_dest conn = {
		.protocol = &cfg.protocol, .protocols = rdmx_protocol_names(),
		.device = &cfg.device, .ib_port = &cfg.ib_port, .gid_index = &cfg.gid_index, .port = &cfg.port,
		.timeout = &cfg.timeout, .wait = &cfg.wait, .notify = &cfg.notify,
		.ack = &cfg.ack, .ring_size = &cfg.ring_size, .fabric = &cfg.fabric,
	};
	struct opt conn_rows[CLI_CONN_ROWS];
	const struct opt table[] = {
		OPTS_INCLUDE(conn_rows),
		{ "size", 's', OPT_SIZE, &cfg.size, 1, MAX_SIZE, NULL, "BYTES",
		  "message size, with K, M or G suffixes (powers of 2)" },
		{ "iters", 'n', OPT_INT, &cfg.iters, 1, 100000000, NULL, "N",
		  "timed round trips" },
		{ "warmup", 0, OPT_INT, &cfg.warmup, 0, 100000000, NULL, "N",
		  "untimed round trips before the timed ones" },
		{ "verify", 0, OPT_FLAG, &cfg.verify, 0, 0, NULL, NULL,
		  "fill messages with a per-message pattern and check every byte" },
		{ "tx-depth", 't', OPT_INT, &cfg.depth, 1, 65536, NULL, "N",
		  "send (and receive) queue depth" },
		{ "depth", 0, OPT_INT, &cfg.depth, 1, 65536, NULL, "N", NULL },
		{ "server", 0, OPT_FLAG, &cfg.server, 0, 0, NULL, NULL,
		  "echo server: accept one connection and echo until it ends" },
		{ 0 },
	};
	const char *pos[1];
	int n_pos, rc;

	rdmx_conn_opts_init(&cfg.copts);
	cfg.protocol = cfg.copts.protocol;
	cfg.depth = cfg.copts.send_depth;
	cfg.timeout = cfg.copts.connect_timeout_ms;
	cli_conn_rows(&conn, conn_rows);
	rc = cmd_parse(&pingpong_page, table, argc, argv, pos, 1, &n_pos);
	if (rc != CMD_CONTINUE)
		return rc;
	cfg.addr = n_pos ? pos[0] : NULL;
	rc = cli_conn_check("pingpong", &conn);
	if (rc == CMD_CONTINUE)
		rc = check_cfg(&cfg);
	if (rc != CMD_CONTINUE)
		return rc;
	return run(&cfg);
}
