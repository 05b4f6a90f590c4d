// SPDX-License-Identifier: MIT
/*
 * rdmx bench: latency and bandwidth of every protocol (and of plain TCP)
 * over a size sweep.
 *   --server          answer benchmark clients until one sends SHUTDOWN
 *   ADDR              the client: run the tests against a server at ADDR
 *   neither           self-test: the server on threads of this process
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_client.h"
#include "bench_cmd.h"
#include "bench_pcap.h"
#include "bench_pre.h"
#include "bench_server.h"
#include "cmds.h"
#include "json_out.h"

#define DEFAULT_SIZES	"8,64,512,4K,32K,256K,1M"
#define DEFAULT_ITERS	1000
#define RECV_HEADROOM	4	/* receive depth = RECV_HEADROOM x --tx-depth */
#define DEFAULT_MAX_REGRESS 10	/* --baseline without --max-regress: percent */

static const struct opts_page bench_page = {
	.name = "rdmx-bench - latency and bandwidth of the rdmx protocols and TCP",
	.synopsis =
		"rdmx bench [OPTIONS] --server [ADDR]\n"
		"rdmx bench [OPTIONS] ADDR\n"
		"rdmx bench [OPTIONS]",
	.description =
		"Measures each protocol of --protocol at each size of --size.\n"
		"Latency (--mode lat): one message at a time, echoed by the server;\n"
		"round-trip and one-way (half) min, p50, p90, p99, p99.9, max, mean\n"
		"and stdev (CLOCK_MONOTONIC, warmup excluded). Bandwidth (--mode bw):\n"
		"the client keeps --tx-depth messages in flight; the clock stops\n"
		"when the server confirms it received every message, so messages/s\n"
		"and Gb/s count delivered messages only. CPU time (user and system)\n"
		"of each side's threads is reported as a percentage of one core.\n"
		"\n"
		"-c all runs every built-in protocol and tcp: the same tests over a\n"
		"plain TCP socket (TCP_NODELAY, length-prefixed frames) on the same\n"
		"address, the kernel baseline. --conns N runs the tests on 1, 2,\n"
		"4, ... and N connections at once, one thread each, and reports the\n"
		"aggregate and per-connection rates.\n"
		"\n"
		"--single-receiver (N:1): the server answers all N connections of a\n"
		"protocol from one thread, which takes every message of its listener\n"
		"with rdmx_listener_next(), instead of one thread per connection\n"
		"(tcp, which has no listener call, keeps a thread per connection).\n"
		"Every row also gives the slowest and the fastest connection's\n"
		"messages/s and Jain's fairness index of them ((sum x)^2 / (N sum\n"
		"x^2): 1 when every connection got the same rate). A remote server\n"
		"must run with --single-receiver too: each test tells the server\n"
		"which kind the client expects, and a server of the other kind\n"
		"refuses it.\n"
		"\n"
		"With --server, listens on ADDR (default: every address) for every\n"
		"protocol of --protocol (default all): rdmx protocol i of 'rdmx\n"
		"--version' on --port + i, tcp on the next port; serves clients until\n"
		"one finishes its run. Start it with --size covering the client's\n"
		"and the same --tx-depth. With ADDR, runs the tests against such a\n"
		"server. With neither, runs both ends in this process on the address\n"
		"rdmx would use (see rdmx devices).\n"
		"\n"
		"Prints one table row per protocol, size and connection count, the\n"
		"non-zero changes of the RDMA device's hw_counters per protocol, and\n"
		"a progress line on stderr (a terminal only) for tests over a second.\n"
		"--json and --csv write every figure, rewritten whole as each group\n"
		"of tests finishes; --plot writes PNG and SVG charts with gnuplot.\n"
		"SIGINT or SIGTERM ends the test under way (its row is dropped) and\n"
		"writes the rows finished before it.\n"
		"\n"
		"As a CI gate: --fail-if PROTO:SIZE:METRIC<VALUE (or >, <=, >=) fails\n"
		"the run when a row of that protocol and size ('*': any) passes the\n"
		"limit. METRIC is a JSON column: p50, p90, p99, p99_9, min, max, mean,\n"
		"stdev (round trip; rtt_us.STAT or one_way_us.STAT), in us unless\n"
		"given ns, ms or s, from the latency rows; msg_rate (or msg_s, with K,\n"
		"M, G for 1e3, 1e6, 1e9) and gbps from the bandwidth rows. E.g.\n"
		"send_recv:64:p99>20us or write_simplex:4K:msg_s<50K. --baseline\n"
		"OLD.json compares each row with the same row (protocol, mode, size,\n"
		"conns) of an earlier --json file: a round-trip p50 higher, or a\n"
		"bandwidth message rate lower, by more than --max-regress percent\n"
		"fails the run. The violations are listed at the end, on stderr. Both\n"
		"are checked before the first test: a bad expression is a usage error.\n"
		"\n"
		"Many small messages: --batch N (-l) sends bandwidth tests'\n"
		"messages in bursts of N, every send of a burst but its last with\n"
		"RDMX_SEND_MORE (rdmx_send_flags), so a protocol may post them\n"
		"together; a list (1,16 or 1..64) gives one bandwidth row per value.\n"
		"--coalesce on|off sets the connections' coalescing (rdmx_coalesce:\n"
		"the ring protocols write a burst's records with one RDMA WRITE) and\n"
		"--signal-every N their selective signaling; both are in the JSON\n"
		"config, batch and coalesce in every row (table, JSON, CSV). With\n"
		"--sendv a burst's messages are staged in the bench's memory and\n"
		"sent with one rdmx_sendv call, the vector send (send_recv and srq\n"
		"pack them straight from it); rows say sendv in JSON and CSV. tcp\n"
		"sends every message at once whatever --batch says. --plot adds a\n"
		"chart of the message rate against the batch size per protocol.\n"
		"The rdmx receivers take whatever is there, up to 16 a call, and\n"
		"give it back in one call (rdmx_recv_many, rdmx_msg_release_many).\n"
		"\n"
		"--pcap FILE runs tcpdump on the RDMA device's network interface\n"
		"(its gid_attrs/ndevs) with the filter 'udp port 4791' from before\n"
		"the first test until after the last (or SIGINT/SIGTERM), writing\n"
		"RoCEv2 packets to FILE for tshark or wireshark (see docs/benchmarks.md,\n"
		"\"Reading RoCEv2 on the wire\"); the JSON names FILE. It needs\n"
		"tcpdump (Debian: tcpdump) and root or CAP_NET_RAW; InfiniBand has\n"
		"no such interface (use ibdump). Traffic between two addresses of\n"
		"one host (the self-test) stays inside the device and is not on the\n"
		"interface: capture a client talking to a --server on another host.\n"
		"\n"
		"perftest's letters mean what they mean in perftest: -p port, -d\n"
		"device, -x GID index, -s size, -n iterations, -D duration, -a all\n"
		"sizes (2 to 8M), -q connections (rdmx runs 1, 2, 4, ... N of them),\n"
		"-l post list (--batch), -Q CQ moderation (--signal-every), -t TX\n"
		"depth; -c is the protocol (perftest's connection type). Also\n"
		"understood: --report_gbits (--rate gbps, the default), --out_json\n"
		"(--json -), --out_json_file FILE (--json FILE) and -F (ignored, with\n"
		"a note: rdmx times with CLOCK_MONOTONIC, not CPU cycles).",
	.exit_status =
		"0   every test ran (and every --fail-if and --baseline limit held)\n"
		"1   a test or an rdmx call failed (the other protocols still run)\n"
		"2   usage error\n"
		"3   a --fail-if or --baseline limit was exceeded\n"
		"130, 143  stopped by SIGINT, SIGTERM (the finished rows are written)",
	.examples =
		"rdmx bench                                   # self-test, send_recv\n"
		"rdmx bench -c all --size 64,4K,64K --iters 2000 --json out.json\n"
		"rdmx bench --server                          # on host A\n"
		"rdmx bench -c all --mode bw --conns 4 HOST_A     # on host B\n"
		"rdmx bench -c tcp,send_recv --duration 2 --plot plots/\n"
		"rdmx bench --fail-if 'send_recv:64:p99>20us' --baseline main.json\n"
		"sandbox/run -- rdmx bench -c all --size 8..64K",
	.see_also = "rdmx(1), rdmx-devices(1), rdmx-pingpong(1)",
};

static const char *const modes[] = { "lat", "bw", "both", NULL };
static const char *const progress_modes[] = { "auto", "always", "never", NULL };
static const char *const lat_columns[] = { "rtt", "one-way", NULL };
static const char *const rate_columns[] = { "gbps", "mbs", NULL };
static const char *const coalesce_modes[] = { "default", "on", "off", NULL };
#define BATCH_MAX 4096
#define ALL_SIZES	"2..8M"	/* -a, as perftest's */

#define usage_err(...) cmd_usage_err("bench", __VA_ARGS__)

static int check_roles(const struct bench_cfg *cfg)
{
	int n;

	if (strcmp(cfg->fabric, "verbs") && (cfg->server || cfg->addr))
		return usage_err("%s", "--fabric fake (or RDMX_FABRIC=fake) runs only "
				 "the self-test (no --server, no ADDR)");
	if (cfg->server && (cfg->json || cfg->csv || cfg->plot || cfg->pcap))
		return usage_err("%s", "--json, --csv, --plot and --pcap are for the "
				 "client or the self-test, not --server");
	if (cfg->pcap && strcmp(cfg->fabric, "verbs"))
		return usage_err("%s", "--pcap captures an RDMA device's packets: "
				 "not with --fabric fake");
	if (!cfg->server && cfg->addr && (cfg->device || cfg->ib_port || cfg->gid_index >= 0))
		return usage_err("%s", "--device, --ib-port and --gid-index choose a local "
				 "address: they apply to --server and the self-test");
	if (!cfg->server && cfg->addr && cfg->port == 0)
		return usage_err("%s", "--port: a client needs the server's port "
				 "(1-65535)");
	for (n = 0; rdmx_protocol_names()[n]; n++)
		;
	if (cfg->port + n > 65535) /* protocol i on port + i, tcp after them */
		return usage_err("%s", "--port: too high for one port per protocol");
	return CMD_CONTINUE;
}

static bool has_size(const struct bench_cfg *cfg, uint64_t size)
{
	int i;

	for (i = 0; i < cfg->n_sizes; i++)
		if (cfg->sizes[i] == size)
			return true;
	return false;
}

/* --fail-if and --baseline, before any test: a typo must not cost a run. */
static int check_gates(struct bench_cfg *cfg)
{
	struct bench_gate *g;
	char err[512];
	int i;

	for (i = 0; i < cfg->fail_if.n; i++) {
		g = &cfg->gates[cfg->n_gates++];
		if (bench_gate_parse(cfg->fail_if.v[i], cfg->protos, cfg->n_protos, g,
				     err, sizeof(err)))
			return usage_err("--fail-if '%s': %s", cfg->fail_if.v[i], err);
		if (g->size && !has_size(cfg, g->size))
			return usage_err("--fail-if '%s': that size is not in --size",
					 g->text);
		if (!(cfg->modes & (int)bench_gate_mode(g)))
			return usage_err("--fail-if '%s': the metric comes from the %s "
					 "tests, not run with --mode %s", g->text,
					 bench_gate_mode(g) == BENCH_LAT ? "latency" :
					 "bandwidth", cfg->mode);
	}
	if (cfg->max_regress >= 0 && !cfg->baseline)
		return usage_err("%s", "--max-regress needs --baseline");
	if (cfg->baseline && cfg->max_regress < 0)
		cfg->max_regress = DEFAULT_MAX_REGRESS;
	if (cfg->baseline &&
	    bench_baseline_load(cfg->baseline, &cfg->base, err, sizeof(err)))
		return usage_err("--baseline %s: %s", cfg->baseline, err);
	return CMD_CONTINUE;
}

static const char *human(uint64_t v, char *buf, size_t len)
{
	snprintf(buf, len, "%.1f GiB", (double)v / (1ull << 30));
	return buf;
}

/* Outputs, gnuplot and memory, before any test (a long run must not fail
 * at its end on something knowable at its start). */
static int check_preflight(struct bench_cfg *cfg)
{
	struct bench_mem m = {
		.max_msg = cfg->max_size,
		.ring_size = (uint64_t)cli_ring_size("bench", cfg->ring_size, cfg->max_size),
		.send_depth = (uint64_t)cfg->outstanding,
		.recv_depth = (uint64_t)cfg->outstanding * RECV_HEADROOM,
		.conns = (uint64_t)cfg->threads, .self_test = !cfg->server && !cfg->addr,
	};
	uint64_t need = bench_mem_estimate(&m), avail = bench_mem_available();
	char err[PATH_MAX + 128], a[32], b[32];

	if (bench_check_outputs(cfg->json, cfg->csv, cfg->plot, err, sizeof(err)))
		return usage_err("%s", err);
	if (cfg->pcap && !strcmp(cfg->pcap, "-"))
		return usage_err("%s", "--pcap -: the packets go to a file, not stdout");
	if (cfg->pcap && bench_check_file("--pcap", cfg->pcap, err, sizeof(err)))
		return usage_err("%s", err);
	if (cfg->pcap && ((cfg->json && !strcmp(cfg->json, cfg->pcap)) ||
			  (cfg->csv && !strcmp(cfg->csv, cfg->pcap))))
		return usage_err("--pcap %s: also the --json or --csv file", cfg->pcap);
	if (cfg->pcap && bench_pcap_find_tcpdump(cfg->tcpdump, sizeof(cfg->tcpdump),
						 err, sizeof(err)))
		return usage_err("%s", err);
	if (avail && need > avail)
		return usage_err("the message buffers need about %s (%s side%s x %llu "
				 "connection%s x (%llu slots x %s + the ring)), more than "
				 "the %s available: lower --size, --tx-depth or "
				 "--conns", human(need, a, sizeof(a)),
				 m.self_test ? "2" : "1", m.self_test ? "s" : "",
				 cfg->threads, cfg->threads > 1 ? "s" : "",
				 (unsigned long long)(m.send_depth + m.recv_depth),
				 opts_format_size(m.max_msg, b, sizeof(b)),
				 human(avail, err, sizeof(err)));
	if (need >= (256ull << 20))
		fprintf(stderr, "rdmx bench: the message buffers need about %s "
			"(%s available)\n", human(need, a, sizeof(a)),
			avail ? human(avail, b, sizeof(b)) : "unknown");
	return CMD_CONTINUE;
}

/* perftest spellings: map them, refuse or note where rdmx means otherwise. */
static int check_perftest(struct bench_cfg *cfg)
{
	if (cfg->all_sizes && cfg->sizes_s)
		return usage_err("%s", "-a (--all-sizes) and --size exclude each other");
	if (cfg->all_sizes)
		cfg->sizes_s = ALL_SIZES;
	if (!cfg->sizes_s)
		cfg->sizes_s = DEFAULT_SIZES;
	if (cfg->perftest_f)
		fprintf(stderr, "rdmx bench: note: -F ignored: rdmx times with "
			"CLOCK_MONOTONIC, not CPU cycles, so the CPU frequency "
			"does not matter\n");
	if (cfg->report_gbits)
		cfg->rate = "gbps";
	if (cfg->out_json && !cfg->json)
		cfg->json = "-";
	return CMD_CONTINUE;
}

/* --batch, --coalesce, --signal-every: usage errors here. */
static int check_batch(struct bench_cfg *cfg)
{
	char err[600];
	int i;

	if (!cfg->batch_s)
		return CMD_CONTINUE;
	if (bench_parse_sizes(cfg->batch_s, cfg->batches, BENCH_MAX_SIZES,
			      &cfg->n_batches, err, sizeof(err)))
		return usage_err("--batch '%s': expected a list like 1,16 or 1..64",
				 cfg->batch_s);
	for (i = 0; i < cfg->n_batches; i++)
		if (cfg->batches[i] > BATCH_MAX)
			return usage_err("--batch '%s': at most %d sends a burst",
					 cfg->batch_s, BATCH_MAX);
	if (!(cfg->modes & BENCH_BW))
		return usage_err("%s", "--batch: bursts are for the bandwidth tests "
				 "(--mode bw or both)");
	return CMD_CONTINUE;
}

/* Derive the parsed settings; usage errors print and return EXIT_USAGE. */
static int check_cfg(struct bench_cfg *cfg)
{
	char err[600];
	int i, rc;

	rc = check_perftest(cfg);
	if (rc != CMD_CONTINUE)
		return rc;
	if (cfg->duration_s && cfg->iters)
		return usage_err("%s", "--iters and --duration exclude each other");
	if (cfg->duration_s && bench_parse_duration(cfg->duration_s, &cfg->duration_ns))
		return usage_err("--duration '%s': expected seconds, more than 0 "
				 "and at most 86400 (e.g. 2 or 0.5)", cfg->duration_s);
	if (!cfg->duration_s && !cfg->iters)
		cfg->iters = DEFAULT_ITERS;
	if (bench_parse_sizes(cfg->sizes_s, cfg->sizes, BENCH_MAX_SIZES,
			      &cfg->n_sizes, err, sizeof(err)))
		return usage_err("%s", err);
	if (!cfg->protocol)
		cfg->protocol = cfg->server ? "all" : "send_recv";
	if (bench_parse_protocols(cfg->protocol, rdmx_protocol_names(), cfg->protos,
				  BENCH_MAX_PROTOS, &cfg->n_protos, err, sizeof(err)))
		return usage_err("%s", err);
	cfg->modes = bench_parse_mode(cfg->mode);
	cfg->max_size = BENCH_MIN_MSG;
	for (i = 0; i < cfg->n_sizes; i++)
		if (cfg->sizes[i] > cfg->max_size)
			cfg->max_size = cfg->sizes[i];
	if (cli_ring_size("bench", cfg->ring_size, cfg->max_size) < 0)
		return EXIT_USAGE;
	rc = check_roles(cfg);
	if (rc == CMD_CONTINUE)
		rc = check_batch(cfg);
	if (rc != CMD_CONTINUE)
		return rc;
	if (cfg->single_receiver && !strcmp(cfg->protos[cfg->n_protos - 1], BENCH_TCP) &&
	    cfg->n_protos == 1)
		return usage_err("%s", "--single-receiver: tcp has no listener call "
				 "to serve its connections from one thread; add an "
				 "rdmx protocol (-c all)");
	if (cfg->server && (cfg->fail_if.n || cfg->baseline))
		return usage_err("%s", "--fail-if and --baseline are for the client "
				 "or the self-test, not --server");
	cfg->progress_mode = !strcmp(cfg->progress, "never") ? BENCH_PROGRESS_NEVER :
			     !strcmp(cfg->progress, "always") ? BENCH_PROGRESS_ALWAYS :
			     BENCH_PROGRESS_AUTO;
	rc = check_gates(cfg);
	if (rc != CMD_CONTINUE)
		return rc;
	return check_preflight(cfg);
}

static void conn_opts(struct bench_cfg *cfg)
{
	cfg->copts.max_msg_size = (uint32_t)cfg->max_size;
	cfg->copts.ring_size = (uint32_t)cli_ring_size("bench", cfg->ring_size,
						       cfg->max_size);
	cfg->copts.send_depth = (uint32_t)cfg->outstanding;
	/* receive headroom: a send completes once it landed, not once it was
	 * consumed, so a receiver with only K buffers would RNR-stall a sender
	 * keeping K in flight whenever it falls a little behind */
	cfg->copts.recv_depth = (uint32_t)(cfg->outstanding * RECV_HEADROOM);
	cfg->copts.connect_timeout_ms = (int)cfg->timeout;
	cfg->copts.wait_mode = cli_wait_mode(cfg->wait);
	cfg->copts.coalesce = !strcmp(cfg->coalesce, "on") ? RDMX_COALESCE_ON :
			      !strcmp(cfg->coalesce, "off") ? RDMX_COALESCE_OFF :
			      RDMX_COALESCE_DEFAULT;
	cfg->copts.signal_every = (uint32_t)cfg->signal_every;
	cfg->copts.notify = cli_choice_index(cli_notify_modes, cfg->notify);
	cfg->copts.ack = cli_choice_index(cli_ack_modes, cfg->ack);
}

/* ------------------------------------------------------------ the server */

static void server_cfg(const struct bench_cfg *cfg, const char *addr,
		       const char *tcp_addr, struct bench_server_cfg *sc)
{
	*sc = (struct bench_server_cfg){
		.addr = addr, .tcp_addr = tcp_addr, .n_protos = cfg->n_protos,
		.protos = cfg->protos, .copts = cfg->copts,
		.max_msg = cfg->max_size, .single_receiver = cfg->single_receiver,
	};
}

static int run_server(rdmx_ctx *ctx, const struct bench_cfg *cfg)
{
	const char *addr = cfg->addr;
	struct bench_server_cfg sc;
	struct bench_server *s;
	char buf[64];
	int rc;

	if (!addr && (cfg->device || cfg->ib_port || cfg->gid_index >= 0)) {
		if (cli_local_addr("bench", cfg->fabric, cfg->device, (int)cfg->ib_port,
				   (int)cfg->gid_index, buf, sizeof(buf)))
			return EXIT_FAIL;
		addr = buf;
	}
	server_cfg(cfg, addr, addr, &sc);
	sc.port = (uint16_t)cfg->port;
	sc.until_shutdown = sc.verbose = true;
	rc = bench_server_start(ctx, &sc, &s);
	if (rc)
		return EXIT_FAIL;
	bench_server_print(s, stdout);
	rc = bench_server_stop(s);
	printf("the client finished its run; exiting\n");
	return rc ? EXIT_FAIL : EXIT_OK;
}

/* ------------------------------------------------------------ the client */

struct run {
	const struct bench_cfg *cfg;
	rdmx_ctx *ctx;
	struct bench_server *self;	/* the self-test's server */
	struct bench_target target;
	char local[64], device[64], stamp[32];
	char config[4096];
	struct jw_prov prov;
	struct bench_report rep;
	struct bench_pcap pcap;		/* --pcap's tcpdump */
	bool pcap_failed;		/* it did not start: no test runs */
	int failures;
};

static void target_for(struct run *r, const char *proto, struct bench_target *t)
{
	*t = r->target;
	t->port = r->self ? bench_server_port(r->self, proto) :
			    bench_proto_port((uint16_t)r->cfg->port, proto);
}

/* --json and --csv with the rows so far (each file replaced whole); stdout
 * ("-") only once, when @final. */
static int save_files(struct run *r, bool final)
{
	return jw_save("bench", r->cfg->json, r->cfg->csv, final, &r->rep,
		       bench_json_writer, bench_csv_writer) ? EXIT_FAIL : 0;
}

static void run_protocol(struct run *r, int pi)
{
	const char *proto = r->cfg->protos[pi];
	struct bench_counters before = { 0 }, after = { 0 };
	int sweep[16], n, i, rc;
	struct bench_target t;
	struct cli_err e;
	bool hw;

	target_for(r, proto, &t);
	r->rep.protos[pi] = proto;
	if (!t.port) { /* the self-test's listener failed (reported) */
		fprintf(stderr, "rdmx bench: %s: skipped, no listener\n", proto);
		r->failures++;
		return;
	}
	hw = r->device[0] && !bench_counters_read(r->device, &before);
	n = bench_conn_sweep((int)r->cfg->threads, sweep, 16);
	for (i = 0; i < n; i++) {
		e.msg[0] = '\0';
		rc = bench_run_group(r->ctx, r->cfg, proto, &t, sweep[i], &r->rep, &e);
		save_files(r, false); /* what is measured survives a crash or a signal */
		if (!rc)
			continue;
		if (bench_stopped())
			break;
		fprintf(stderr, "rdmx bench: %s on %d connection%s: %s\n", proto,
			sweep[i], sweep[i] > 1 ? "s" : "", e.msg);
		r->failures++;
		break;
	}
	if (hw && !bench_counters_read(r->device, &after))
		bench_counters_delta(&before, &after, &r->rep.counters[pi]);
}

/* Tell a remote server that the run is over. */
static void send_shutdown(struct run *r)
{
	struct bench_ctrl c = { .op = BENCH_OP_SHUTDOWN };
	struct cli_err e = { "" };
	struct bench_target t;
	struct bench_ep *ep;

	target_for(r, r->cfg->protos[0], &t);
	if (bench_dial(r->ctx, r->cfg, r->cfg->protos[0], &t, &ep, &e)) {
		fprintf(stderr, "rdmx bench: cannot tell the server to stop: %s\n", e.msg);
		return;
	}
	if (bench_send_ctrl(ep, &c) || ep->ops->flush(ep))
		fprintf(stderr, "rdmx bench: cannot tell the server to stop: %s\n",
			ep->err.msg);
	bench_ep_close(ep);
}

static int write_outputs(struct run *r)
{
	const struct bench_cfg *cfg = r->cfg;
	int rc;

	/* the table goes to stderr when stdout carries --json - or --csv - */
	FILE *out = (cfg->json && !strcmp(cfg->json, "-")) ||
		    (cfg->csv && !strcmp(cfg->csv, "-")) ? stderr : stdout;

	bench_print_table(&r->rep, out);
	bench_print_counters(&r->rep, out);
	rc = save_files(r, true);
	if (cfg->plot && bench_plot(&r->rep, cfg->plot))
		rc = EXIT_FAIL;
	fflush(stdout);
	return rc;
}

/* --fail-if and --baseline over the finished rows; true if one failed. */
static bool check_limits(const struct bench_cfg *cfg, const struct bench_report *rep)
{
	int bad = 0;

	if (!cfg->n_gates && !cfg->baseline)
		return false;
	fflush(stdout);
	bad += bench_gate_check(cfg->gates, cfg->n_gates, rep, stderr);
	if (cfg->baseline)
		bad += bench_baseline_check(&cfg->base, (double)cfg->max_regress,
					    rep, stderr);
	if (bad)
		fprintf(stderr, "rdmx bench: %d limit%s exceeded (exit status %d)\n",
			bad, bad > 1 ? "s" : "", BENCH_GATE_EXIT);
	return bad > 0;
}

/* The addresses the self-test listens on, and the device for counters. */
static int self_test_start(struct run *r)
{
	const struct bench_cfg *cfg = r->cfg;
	bool fake = !strcmp(cfg->fabric, "fake");
	struct bench_server_cfg sc;

	if (cli_local_addr("bench", cfg->fabric, cfg->device, (int)cfg->ib_port,
			   (int)cfg->gid_index, r->local, sizeof(r->local)))
		return EXIT_FAIL;
	r->target.addr = r->local;
	r->target.tcp_addr = fake ? "127.0.0.1" : r->local;
	server_cfg(cfg, r->local, r->target.tcp_addr, &sc);
	if (bench_server_start(r->ctx, &sc, &r->self))
		return EXIT_FAIL;
	if (!fake)
		bench_device_of(r->local, r->device, sizeof(r->device));
	return EXIT_OK;
}

/* The effective settings as a JSON object (names are identifiers). */
static void config_json(const struct bench_cfg *cfg, char *buf, size_t len)
{
	size_t n;

	jw_config_head(buf, len, "protocols", cfg->protos, cfg->n_protos, cfg->sizes,
		       cfg->n_sizes);
	n = strlen(buf);
	snprintf(buf + n, len - n, ", \"mode\": \"%s\", \"wait\": \"%s\", \"notify\": \"%s\", "
		 "\"ack\": \"%s\", \"iters\": %lld, "
		 "\"duration_s\": %.3f, \"warmup\": %lld, \"outstanding\": %lld, "
		 "\"threads\": %lld, \"max_msg_size\": %u, \"ring_size\": %u, "
		 "\"send_depth\": %u, \"recv_depth\": %u, \"timeout_ms\": %lld, "
		 "\"port\": %lld, \"single_receiver\": %s, \"coalesce\": \"%s\", "
		 "\"sendv\": %s, \"signal_every\": %lld}", cfg->mode, cfg->wait, cfg->notify,
		 cfg->ack, cfg->iters,
		 (double)cfg->duration_ns / 1e9, cfg->warmup, cfg->outstanding,
		 cfg->threads, cfg->copts.max_msg_size, cfg->copts.ring_size,
		 cfg->copts.send_depth, cfg->copts.recv_depth, cfg->timeout, cfg->port,
		 cfg->single_receiver ? "true" : "false", cfg->coalesce,
		 cfg->sendv ? "true" : "false", cfg->signal_every);
}

static void provenance(struct run *r)
{
	jw_provenance(&r->prov, r->cfg->argc, r->cfg->argv);
	config_json(r->cfg, r->config, sizeof(r->config));
	r->rep.version = RDMX_VERSION_STRING;
	r->rep.cmdline = r->prov.cmdline;
	r->rep.config_json = r->config;
	r->rep.host = r->prov.host;
	r->rep.kernel = r->prov.kernel;
}

/* --pcap: tcpdump on the device's interface before the first test. */
static int pcap_start(struct run *r)
{
	const char *dev = r->cfg->device ? r->cfg->device : r->device;
	char netdev[64], err[PATH_MAX + 256];

	if (!r->cfg->pcap)
		return EXIT_OK;
	if (!dev[0]) {
		fprintf(stderr, "rdmx bench: --pcap: no RDMA device to capture on\n");
		r->pcap_failed = true;
		return EXIT_FAIL;
	}
	if (bench_pcap_netdev("/sys", dev, netdev, sizeof(netdev), err, sizeof(err)) ||
	    bench_pcap_start(&r->pcap, r->cfg->tcpdump, netdev, r->cfg->pcap, err,
			     sizeof(err))) {
		fprintf(stderr, "rdmx bench: %s\n", err);
		r->pcap_failed = true;
		return EXIT_FAIL;
	}
	fprintf(stderr, "rdmx bench: capturing RoCEv2 (%s) on %s (%s) into %s\n",
		BENCH_PCAP_FILTER, netdev, dev, r->cfg->pcap);
	r->rep.pcap = r->cfg->pcap;
	return EXIT_OK;
}

/* --pcap: stop tcpdump (it flushes) and say what it caught. */
static void pcap_stop(struct run *r)
{
	char err[PATH_MAX + 256];
	long n;

	if (!r->rep.pcap)
		return;
	n = bench_pcap_stop(&r->pcap, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "rdmx bench: %s\n", err);
		r->failures++;
		return;
	}
	fprintf(stderr, "rdmx bench: --pcap: %ld packet%s captured on %s into %s\n",
		n, n == 1 ? "" : "s", r->pcap.netdev, r->rep.pcap);
	if (!n && r->self)
		fprintf(stderr, "rdmx bench: --pcap: note: the self-test talks to an "
			"address of this host, which the RDMA device delivers "
			"internally, never on %s; run the client against a --server "
			"on another host to capture the wire\n", r->pcap.netdev);
}

static int run_client(rdmx_ctx *ctx, const struct bench_cfg *cfg)
{
	struct run r = { .cfg = cfg, .ctx = ctx };
	int i, rc = EXIT_OK;

	if (cfg->addr) {
		r.target.addr = r.target.tcp_addr = cfg->addr;
		bench_device_of(NULL, r.device, sizeof(r.device));
	} else if (self_test_start(&r)) {
		return EXIT_FAIL;
	}
	r.rep = (struct bench_report){
		.timestamp = bench_timestamp(r.stamp, sizeof(r.stamp)),
		.device = r.device[0] ? r.device : cfg->fabric, .fabric = cfg->fabric,
		.peer = cfg->addr ? cfg->addr : "self-test", .wait = cfg->wait,
		.notify = cfg->notify, .ack = cfg->ack,
		.outstanding = (int)cfg->outstanding, .n_protos = cfg->n_protos,
	};
	r.rep.one_way = !strcmp(cfg->latency, "one-way");
	r.rep.mbs = !strcmp(cfg->rate, "mbs");
	provenance(&r);
	bench_catch_stop();
	if (pcap_start(&r))
		r.failures++;
	for (i = 0; i < cfg->n_protos && !bench_stopped() && !r.pcap_failed; i++)
		run_protocol(&r, i);
	pcap_stop(&r);
	if (r.self && bench_server_stop(r.self))
		r.failures++;
	else if (!r.self)
		send_shutdown(&r);
	rc = write_outputs(&r);
	if (!bench_stopped() && check_limits(cfg, &r.rep) && rc == EXIT_OK)
		rc = BENCH_GATE_EXIT;
	bench_report_free(&r.rep);
	if (bench_stopped()) {
		fprintf(stderr, "rdmx bench: stopped by signal %d; the tests finished "
			"before it are above%s\n", bench_stopped(),
			cfg->json || cfg->csv ? " and in the files" : "");
		return 128 + bench_stopped();
	}
	return r.failures ? EXIT_FAIL : rc;
}

static int run(struct bench_cfg *cfg)
{
	struct rdmx_ctx_opts o = { .fabric = cfg->fabric };
	struct cli_err e = { "" };
	rdmx_ctx *ctx;
	int rc;

	conn_opts(cfg);
	rc = rdmx_ctx_create(&ctx, &o);
	if (rc) {
		cli_fail(&e, "create a context", rc, NULL);
		cli_print_err("bench", &e);
		return EXIT_FAIL;
	}
	rc = cfg->server ? run_server(ctx, cfg) : run_client(ctx, cfg);
	rdmx_ctx_destroy(ctx);
	return rc;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_cfg cfg = { .mode = "both", .latency = "rtt", .rate = "gbps",
				 .warmup = 100, .outstanding = 16, .threads = 1,
				 .port = RDMX_DEFAULT_PORT, .gid_index = -1,
				 .fabric = "verbs", .progress = "auto",
				 .wait = "adaptive", .coalesce = "default", .notify = "default",
				 .ack = "default" };
	const struct cli_conn_dest conn = {
		.protocol = &cfg.protocol, .device = &cfg.device, .ib_port = &cfg.ib_port,
		.gid_index = &cfg.gid_index, .port = &cfg.port, .timeout = &cfg.timeout,
		.wait = &cfg.wait, .notify = &cfg.notify, .ack = &cfg.ack,
		.ring_size = &cfg.ring_size, .fabric = &cfg.fabric,
	};
	struct opt conn_rows[CLI_CONN_ROWS];
	const struct opt table[] = {
		OPTS_INCLUDE(conn_rows),
		{ "mode", 0, OPT_CHOICE, &cfg.mode, 0, 0, modes, "MODE",
		  "latency, bandwidth or both" },
		{ "size", 's', OPT_STRING, &cfg.sizes_s, 0, 0, NULL, "LIST",
		  "message sizes: 64,4K,1M and ranges 8..1M (powers of 2; default: "
		  DEFAULT_SIZES ")" },
		{ "sizes", 0, OPT_STRING, &cfg.sizes_s, 0, 0, NULL, "LIST", NULL },
		{ "all-sizes", 'a', OPT_FLAG, &cfg.all_sizes, 0, 0, NULL, NULL,
		  "every power of 2 from 2 to 8M, as perftest's -a" },
		{ "iters", 'n', OPT_INT, &cfg.iters, 1, 1000000000, NULL, "N",
		  "timed messages per test and connection (default: 1000)" },
		{ "duration", 'D', OPT_STRING, &cfg.duration_s, 0, 0, NULL, "SEC",
		  "run each test for SEC seconds instead of --iters" },
		{ "warmup", 0, OPT_INT, &cfg.warmup, 0, 1000000000, NULL, "N",
		  "untimed messages before each test" },
		{ "tx-depth", 't', OPT_INT, &cfg.outstanding, 1, 4096, NULL, "N",
		  "messages in flight in bandwidth tests (send depth; receive depth: 4 x N)" },
		{ "outstanding", 0, OPT_INT, &cfg.outstanding, 1, 4096, NULL, "N", NULL },
		{ "batch", 'l', OPT_STRING, &cfg.batch_s, 0, 0, NULL, "LIST",
		  "bandwidth: post lists (bursts) of N sends (RDMX_SEND_MORE but the "
		  "last); a list 1,16 or 1..64 runs each (default: 1)" },
		{ "coalesce", 0, OPT_CHOICE, &cfg.coalesce, 0, 0, coalesce_modes,
		  "WHEN", "a burst's messages in one work request: the protocol's "
		  "default, on or off" },
		{ "sendv", 0, OPT_FLAG, &cfg.sendv, 0, 0, NULL, NULL,
		  "bandwidth: send each burst with one rdmx_sendv call (copies "
		  "from the bench's buffer) instead of --batch rdmx_send_flags" },
		{ "signal-every", 'Q', OPT_INT, &cfg.signal_every, 0, 2048, NULL, "N",
		  "CQ moderation: one signaled send completion per N sends (0: the "
		  "protocol's default)" },
		{ "conns", 'q', OPT_INT, &cfg.threads, 1, BENCH_MAX_THREADS, NULL, "N",
		  "connections (queue pairs), one thread each: runs 1, 2, 4, ... N" },
		{ "threads", 0, OPT_INT, &cfg.threads, 1, BENCH_MAX_THREADS, NULL, "N", NULL },
		{ "single-receiver", 0, OPT_FLAG, &cfg.single_receiver, 0, 0, NULL, NULL,
		  "N:1: one server thread serves all connections of a protocol" },
		BENCH_OUTPUT_OPTS(&cfg.json, &cfg.csv, &cfg.plot),
		{ "latency", 0, OPT_CHOICE, &cfg.latency, 0, 0, lat_columns, "WHICH",
		  "the latency table's columns: round trip, or one-way (half of it)" },
		{ "rate", 0, OPT_CHOICE, &cfg.rate, 0, 0, rate_columns, "UNIT",
		  "the bandwidth table's throughput: Gb/s (1e9 bits) or MB/s (1e6 bytes)" },
		{ "progress", 0, OPT_CHOICE, &cfg.progress, 0, 0, progress_modes, "WHEN",
		  "the progress line on stderr for tests over a second (auto: on a "
		  "terminal)" },
		{ "pcap", 0, OPT_STRING, &cfg.pcap, 0, 0, NULL, "FILE",
		  "capture the RoCEv2 packets (tcpdump, udp port 4791) on the "
		  "device's network interface into FILE" },
		{ "server", 0, OPT_FLAG, &cfg.server, 0, 0, NULL, NULL,
		  "serve benchmark clients until one finishes its run" },
		/* perftest spellings (hidden; see the description) */
		{ "all", 0, OPT_FLAG, &cfg.all_sizes, 0, 0, NULL, NULL, NULL },
		{ "qp", 0, OPT_INT, &cfg.threads, 1, BENCH_MAX_THREADS, NULL, "N", NULL },
		{ "cq-mod", 0, OPT_INT, &cfg.signal_every, 0, 2048, NULL, "N", NULL },
		{ "post_list", 0, OPT_STRING, &cfg.batch_s, 0, 0, NULL, "LIST", NULL },
		{ "CPU-freq", 'F', OPT_FLAG, &cfg.perftest_f, 0, 0, NULL, NULL, NULL },
		{ "report_gbits", 0, OPT_FLAG, &cfg.report_gbits, 0, 0, NULL, NULL, NULL },
		{ "out_json", 0, OPT_FLAG, &cfg.out_json, 0, 0, NULL, NULL, NULL },
		{ "out_json_file", 0, OPT_STRING, &cfg.json, 0, 0, NULL, "FILE", NULL },
		{ "fail-if", 0, OPT_LIST, &cfg.fail_if, 0, 0, NULL, "EXPR",
		  "exit 3 if a row passes a limit: PROTO:SIZE:METRIC<VALUE or >VALUE "
		  "(repeatable)" },
		{ "baseline", 0, OPT_STRING, &cfg.baseline, 0, 0, NULL, "FILE",
		  "exit 3 if a row regressed against the same row of an earlier --json" },
		{ "max-regress", 0, OPT_INT, &cfg.max_regress, 0, 1000, NULL, "PCT",
		  "--baseline's tolerance in percent (default: 10)" },
		{ 0 },
	};
	const char *pos[1];
	int n_pos, rc;

	rdmx_conn_opts_init(&cfg.copts);
	cfg.timeout = 10000;
	cfg.max_regress = -1;
	cfg.argc = argc;
	cfg.argv = argv;
	cli_conn_rows(&conn, conn_rows);
	rc = cmd_parse(&bench_page, table, argc, argv, pos, 1, &n_pos);
	if (rc != CMD_CONTINUE)
		return rc;
	cfg.addr = n_pos ? pos[0] : NULL;
	rc = check_cfg(&cfg); /* first: it names the default protocols */
	if (rc == CMD_CONTINUE)
		rc = cli_conn_check("bench", &conn);
	if (rc == CMD_CONTINUE)
		rc = run(&cfg);
	bench_baseline_free(&cfg.base);
	return rc;
}
