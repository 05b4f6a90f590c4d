/* SPDX-License-Identifier: MIT */
/*
 * rdmx rpc bench: an echo method's latency and calls/s per transport,
 * request size and number of clients, against one server.
 *   cmd_rpc_bench.c   options and orchestration
 *   rpc_bench_srv.c   the servers: rdmx RPC (msg, rfp, herd) and TCP
 *   rpc_bench_run.c   the clients: one thread each, and a group's figures
 *   rpc_bench_tcp.c   the TCP RPC baseline's calls (length-prefixed frames)
 *   rpc_bench_out.c   table, JSON and CSV;  rpc_bench_plot.c  gnuplot
 *
 * The contract: method 1 'echo' (request and response up to max_size
 * bytes) and method 2 'stats' (the server's process CPU time, calls
 * answered and outbound work requests), which the harness calls before
 * and after each timed run; the TCP server answers a control frame with
 * the same figures.
 */
#ifndef RDMX_TOOLS_RPC_BENCH_H
#define RDMX_TOOLS_RPC_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rdmx/rpc.h>

#include "bench.h"
#include "hist.h"
#include "json_out.h"

#define RB_ECHO 1
#define RB_STATS 2
#define RB_MAX_TRANSPORTS 4
#define RB_MAX_CLIENTS 64
#define RB_TCP "tcp"
#define RB_STATS_LEN 40		/* five u64: user, sys ns, calls, wrs, 0 */

/* The settings of a run. */
struct rb_cfg {
	const char *transports_s, *sizes_s, *protocol, *fabric, *device;
	const char *json, *csv, *plot, *duration_s, *addr;
	long long clients, window, workers, iters, warmup, port, timeout, ib_port;
	uint64_t max_size;
	bool server;
	int argc;
	char **argv;
	/* derived */
	int n_transports, n_sizes;
	const char *transports[RB_MAX_TRANSPORTS];
	uint64_t sizes[BENCH_MAX_SIZES];
	uint64_t duration_ns;
};

/* The server's figures at one moment (the stats method). */
struct rb_snap {
	uint64_t user_ns, sys_ns, calls, wrs;
};

/* One row: a transport at one size with a number of clients. */
struct rb_result {
	const char *transport, *protocol;	/* protocol: msg's, else NULL */
	uint64_t size;
	int clients;
	uint64_t calls, warmup, wall_ns;
	double rate;				/* calls / wall */
	uint64_t client_calls[RB_MAX_CLIENTS];
	double client_rate[RB_MAX_CLIENTS];	/* calls/s of each client */
	double jain;				/* fairness of client_rate */
	double srv_cpu_us;			/* server CPU per call (us) */
	double srv_cpu_pct;			/* of one core over the wall */
	double srv_wrs;				/* outbound WRs per call; NAN: tcp */
	double cli_cpu_pct;			/* the clients' threads, summed */
	struct hist *rtt;
};

/* Everything a run produced, for the writers. */
struct rb_report {
	struct jw_head head;
	int window, workers;
	int n;
	struct rb_result *rows;
};

/* ---------------------------------------------------------- rpc_bench_srv.c */

struct rb_server;

/** rb_contract - the bench's methods for echo requests of up to @max. */
void rb_contract(uint64_t max, struct rdmx_rpc_method m[2]);

/** rb_rpc_opts - RPC options of @transport from @cfg. */
void rb_rpc_opts(const struct rb_cfg *cfg, const char *transport,
		 struct rdmx_rpc_opts *o);

/**
 * rb_server_start - serve @transport (an RPC transport or "tcp") on
 * @addr:@port (0: ephemeral) on threads of this process. 0 or EXIT_FAIL
 * (reason on stderr).
 */
int rb_server_start(rdmx_ctx *ctx, const struct rb_cfg *cfg, const char *transport,
		    const char *addr, uint16_t port, struct rb_server **out);

/** rb_server_port - the port it listens on. */
uint16_t rb_server_port(const struct rb_server *s);

/** rb_server_stop - stop serving and free @s (NULL is fine). */
void rb_server_stop(struct rb_server *s);

/** rb_snap_put/rb_snap_get - the stats method's RB_STATS_LEN bytes. */
void rb_snap_put(unsigned char *p, const struct rb_snap *s);
void rb_snap_get(const unsigned char *p, struct rb_snap *s);

/** rb_proc_cpu - this process's user and system CPU time. */
void rb_proc_cpu(struct rb_snap *s);

/* ---------------------------------------------------------- rpc_bench_run.c */

/* Where a group's clients dial. */
struct rb_target {
	rdmx_ctx *ctx;
	const char *addr;	/* RPC transports */
	const char *tcp_addr;
	uint16_t port;
	bool self;		/* the server runs in this process */
};

/**
 * rb_run_group - @clients clients of @transport at @size: connect, warm
 * up, then the timed calls; fills @row (its rtt allocated). 0, or -errno
 * with the first error in @err.
 */
int rb_run_group(const struct rb_cfg *cfg, const char *transport,
		 const struct rb_target *t, uint64_t size, int clients,
		 struct rb_result *row, char *err, size_t err_len);


/* ---------------------------------------------------------- rpc_bench_tcp.c */

struct rb_tcp;

/** rb_tcp_dial - a TCP RPC client of @max-byte requests. 0 or -errno. */
int rb_tcp_dial(const char *addr, uint16_t port, uint64_t max, int timeout_ms,
		struct rb_tcp **out, char *err, size_t err_len);

/** rb_tcp_send - send request @slot of @size bytes. */
int rb_tcp_send(struct rb_tcp *t, uint32_t slot, uint64_t size);

/** rb_tcp_recv - the next response: its slot and length. */
int rb_tcp_recv(struct rb_tcp *t, uint32_t *slot, uint64_t *len);

/** rb_tcp_stats - the server's figures. */
int rb_tcp_stats(struct rb_tcp *t, struct rb_snap *s);

/** rb_tcp_error - the last failure's message. */
const char *rb_tcp_error(const struct rb_tcp *t);

void rb_tcp_close(struct rb_tcp *t);

/**
 * rb_tcp_srv_start - the TCP RPC server on @addr:@port (0: ephemeral):
 * an accepting thread and a thread per connection echoing each request
 * of up to @max bytes. 0 or -errno (reason in @err).
 */
struct rb_tcp_srv;
int rb_tcp_srv_start(const char *addr, uint16_t port, uint64_t max,
		     int timeout_ms, struct rb_tcp_srv **out, char *err, size_t len);
uint16_t rb_tcp_srv_port(const struct rb_tcp_srv *s);
/** rb_tcp_srv_stop - stop accepting, wait for the connections, free @s. */
void rb_tcp_srv_stop(struct rb_tcp_srv *s);

/* ---------------------------------------------------------- rpc_bench_out.c */

void rb_print_table(const struct rb_report *r, FILE *f);
int rb_write_json(const void *report, FILE *f);
int rb_write_csv(const void *report, FILE *f);

/** rb_plot - calls/s vs clients and the latency CDF into @dir (gnuplot;
 * rpc_bench_plot.c). 0 or -errno (said on stderr). */
int rb_plot(const struct rb_report *r, const char *dir);

int cmd_rpc_bench(int argc, char **argv);

#endif /* RDMX_TOOLS_RPC_BENCH_H */
