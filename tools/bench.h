/* SPDX-License-Identifier: MIT */
/*
 * rdmx bench: what its files share.
 *   bench_util.c  parsing (sizes, protocols, durations) and rate arithmetic
 *   bench_ep.c    the endpoint seam: one message interface over an rdmx
 *                 connection or a TCP socket, and the bench wire protocol
 *   bench_tcp.c   the TCP endpoint (kernel baseline)
 *   bench_run.c   the server loop and the client's latency and bandwidth loops
 *   bench_sys.c   CPU time, RDMA hw_counters, the progress line
 *   bench_out.c   table, JSON and CSV;  bench_plot.c  gnuplot
 *   cmd_bench.c   options and orchestration
 */
#ifndef RDMX_TOOLS_BENCH_H
#define RDMX_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"

#define BENCH_MAX_SIZES		64
#define BENCH_MAX_PROTOS	32
#define BENCH_MAX_THREADS	64
#define BENCH_MAX_SIZE		(1ull << 30)
#define BENCH_TCP		"tcp"

enum bench_mode {
	BENCH_LAT = 1,
	BENCH_BW = 2,
};

/* ------------------------------------------------------------ bench_util.c */

/**
 * bench_parse_sizes - parse "8,64,4K" and ranges "8..1M" (every power of two
 * from the first to the last, both included) into @out (at most @max).
 * Sizes are 1 B .. 1 GiB. Returns 0, or -1 with a message in @err.
 */
int bench_parse_sizes(const char *s, uint64_t *out, int max, int *n,
		      char *err, size_t err_len);

/**
 * bench_parse_protocols - "all" (every name in @names, then tcp), "tcp", a
 * name from @names, or a comma-separated list of those, into @out.
 * Returns 0, or -1 with a message in @err.
 */
int bench_parse_protocols(const char *s, const char *const *names,
			  const char **out, int max, int *n,
			  char *err, size_t err_len);

/** bench_parse_duration - "2", "0.5", "1.5s" seconds (> 0, <= 1 day) in ns. */
int bench_parse_duration(const char *s, uint64_t *ns);

/** bench_parse_mode - "lat", "bw", "both" into BENCH_* bits; -1 if bad. */
int bench_parse_mode(const char *s);

/** bench_conn_sweep - 1, 2, 4, ... below @threads, then @threads. */
int bench_conn_sweep(int threads, int *out, int max);

/** bench_msg_rate - messages per second; 0 when @ns is 0. */
double bench_msg_rate(uint64_t msgs, uint64_t ns);

/** bench_gbps - payload gigabits (1e9 bits) per second; 0 when @ns is 0. */
double bench_gbps(uint64_t msgs, uint64_t size, uint64_t ns);

/** bench_jain - Jain's fairness index of @n values: (sum x)^2 / (n sum x^2),
 * in (0, 1] (1: all equal); NAN when @n is 0 or every value is 0. */
double bench_jain(const double *x, int n);

/** bench_range - the least and the greatest of @n (>= 1) values. */
void bench_range(const double *x, int n, double *lo, double *hi);

/** bench_pct - @cpu_ns of CPU time as a percentage of @wall_ns. */
double bench_pct(uint64_t cpu_ns, uint64_t wall_ns);

/** bench_now_ns - CLOCK_MONOTONIC in ns. */
uint64_t bench_now_ns(void);

/** bench_timestamp - the current UTC time as "2026-01-02T03:04:05Z". */
const char *bench_timestamp(char *buf, size_t len);

/* ---------------------------------------------------------- the results */

struct bench_cpu {
	uint64_t user_ns, sys_ns;
};

/* One row: a protocol at one size, one mode and one number of connections. */
struct bench_result {
	const char *protocol;
	const char *notify, *ack;	/* ring protocols: --notify, --ack; else NULL */
	enum bench_mode mode;
	uint64_t size;
	int conns;
	bool single_receiver;	/* one server thread served every conn */
	int batch;		/* bw: sends per burst (RDMX_SEND_MORE), 1: none */
	const char *coalesce;	/* --coalesce: default, on or off */
	bool sendv;		/* bw: a burst was one rdmx_sendv (--sendv; not tcp) */
	uint64_t msgs;		/* timed messages (lat: round trips), all conns */
	uint64_t warmup;	/* per connection */
	uint64_t wall_ns;	/* first start to last end over the connections */
	double msg_rate;	/* msgs / wall */
	double gbps;		/* payload Gb/s (lat: one direction) */
	double thread_rate[BENCH_MAX_THREADS]; /* per connection, msgs/s */
	double conn_min, conn_max, jain; /* of thread_rate */
	struct bench_cpu client, server; /* summed over the threads of a side */
	struct hist *rtt;	/* BENCH_LAT: round trips of every connection */
};

/* Deltas of one device's hw_counters over one protocol's run. */
#define BENCH_MAX_COUNTERS 128
struct bench_counters {
	int n;
	char name[BENCH_MAX_COUNTERS][48];
	uint64_t value[BENCH_MAX_COUNTERS];
};

/* Everything a run produced, for the writers. */
struct bench_report {
	const char *timestamp, *device, *fabric, *peer;
	const char *wait;		/* --wait */
	const char *notify, *ack;	/* --notify, --ack */
	const char *version, *cmdline, *host, *kernel;	/* provenance */
	const char *config_json;	/* the effective settings, a JSON object */
	const char *pcap;		/* --pcap's file, or NULL */
	bool one_way;			/* table: one-way latency (rtt / 2) */
	bool mbs;			/* table: MB/s (1e6 bytes) instead of Gb/s */
	int outstanding;
	int n_results;
	struct bench_result *results;
	int n_protos;
	const char *protos[BENCH_MAX_PROTOS];
	struct bench_counters counters[BENCH_MAX_PROTOS]; /* per protos[] */
};

/* ------------------------------------------------------------- bench_out.c */

/** bench_print_table - the readable tables (latency, then bandwidth). */
void bench_print_table(const struct bench_report *r, FILE *f);

/** bench_print_counters - non-zero hw_counters deltas per protocol. */
void bench_print_counters(const struct bench_report *r, FILE *f);

/** bench_write_json - every figure as one JSON document. 0 or -errno. */
int bench_write_json(const struct bench_report *r, FILE *f);

/** bench_write_csv - every figure, one line per result row. 0 or -errno. */
int bench_write_csv(const struct bench_report *r, FILE *f);

/** bench_json_writer, bench_csv_writer - the two writers for jw_save() (json_out.h). */
int bench_json_writer(const void *r, FILE *f);
int bench_csv_writer(const void *r, FILE *f);

/* ------------------------------------------------------------ bench_plot.c */

/**
 * bench_plot - write the gnuplot data and script into @dir and run gnuplot:
 * latency CDF, throughput vs size, message rate vs connections (PNG + SVG).
 * Returns 0 or -errno (message on stderr).
 */
int bench_plot(const struct bench_report *r, const char *dir);

/* The pieces of bench_plot.c other charts use (rdmx rpc bench --plot). */
struct plot_series {
	int n;
	const char *name[BENCH_MAX_PROTOS];	/* one data block each, in order */
};

/** plot_mkdir - create @dir if it is not there; 0 or -errno (said). */
int plot_mkdir(const char *dir);

/** plot_open - @dir/@name for writing; NULL (said on stderr) if it fails. */
FILE *plot_open(const char *dir, const char *name);

/** plot_head - plots.gp's first lines: the PNG terminal and the subtitle. */
void plot_head(FILE *f, const char *tool, const char *timestamp, const char *device);

/**
 * plot_chart - chart @name (PNG and SVG) of @data's blocks, one line per
 * series, columns @cols, after the gnuplot @settings.
 */
void plot_chart(FILE *f, const char *name, const char *settings, const char *data,
		const struct plot_series *s, const char *cols);

/** plot_cdf - @h's CDF as "microseconds fraction" lines (denser in the tail). */
void plot_cdf(FILE *f, const struct hist *h);

/** plot_run - run gnuplot on plots.gp inside @dir; 0 or -errno (said). */
int plot_run(const char *dir);

#endif /* RDMX_TOOLS_BENCH_H */
