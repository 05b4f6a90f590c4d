/* SPDX-License-Identifier: MIT */
/* rdmx bench: the command's settings and the client side (bench_client.c). */
#ifndef RDMX_TOOLS_BENCH_CLIENT_H
#define RDMX_TOOLS_BENCH_CLIENT_H

#include "bench_ep.h"
#include "bench_gate.h"
#include "opts.h"

struct bench_cfg {
	/* as given */
	const char *protocol, *mode, *sizes_s, *duration_s, *fabric, *device;
	const char *json, *csv, *plot, *addr;
	long long iters, warmup, outstanding, threads, port, timeout, gid_index, ib_port;
	bool server;
	bool single_receiver;			/* --single-receiver */
	struct opts_list fail_if;		/* --fail-if, repeatable */
	const char *baseline;
	long long max_regress;
	const char *pcap;			/* --pcap FILE */
	char tcpdump[4096];			/* --pcap: its path */
	const char *progress;			/* never, auto, always */
	const char *latency, *rate;		/* the table's headline columns */
	const char *wait;			/* --wait: a cli_wait_modes name */
	const char *batch_s;			/* --batch LIST */
	const char *coalesce;			/* --coalesce */
	bool sendv;				/* --sendv */
	long long signal_every;			/* --signal-every */
	const char *notify, *ack;		/* --notify, --ack (ring protocols) */
	bool all_sizes;				/* -a */
	bool perftest_f, report_gbits, out_json; /* perftest spellings */
	int argc;				/* the command line, for the JSON */
	char **argv;
	/* derived */
	int modes;				/* BENCH_LAT | BENCH_BW */
	int n_sizes, n_protos;
	uint64_t sizes[BENCH_MAX_SIZES];
	int n_batches;				/* --batch: bw rows per size */
	uint64_t batches[BENCH_MAX_SIZES];
	const char *protos[BENCH_MAX_PROTOS];
	uint64_t max_size, duration_ns;
	uint64_t ring_size;			/* --ring-size, 0: derived */
	struct rdmx_conn_opts copts;
	int n_gates;
	struct bench_gate gates[OPTS_LIST_MAX];
	struct bench_baseline base;		/* --baseline's rows */
	enum bench_progress_mode progress_mode;
};

/* Where a group dials. */
struct bench_target {
	const char *addr;	/* rdmx address */
	const char *tcp_addr;	/* tcp address */
	uint16_t port;
};

/**
 * bench_run_group - run every size and mode of @cfg for protocol @proto on
 * @conns connections at once (one thread each) and append one result row
 * per size and mode to @rep. Returns 0, or -errno with the first error in @e
 * (-EINTR: stopped by a signal); the rows finished before a failure are
 * appended too.
 */
int bench_run_group(rdmx_ctx *ctx, const struct bench_cfg *cfg,
		    const char *proto, const struct bench_target *t, int conns,
		    struct bench_report *rep, struct cli_err *e);

/** bench_dial - one connection to @t speaking @proto. */
int bench_dial(rdmx_ctx *ctx, const struct bench_cfg *cfg, const char *proto,
	       const struct bench_target *t, struct bench_ep **out,
	       struct cli_err *e);

/** bench_report_free - free the rows of @rep. */
void bench_report_free(struct bench_report *rep);

#endif /* RDMX_TOOLS_BENCH_CLIENT_H */
