/* SPDX-License-Identifier: MIT */
/*
 * rdmx bench as a CI gate (bench_gate.c): --fail-if expressions checked
 * against the result rows, and --baseline OLD.json --max-regress PCT
 * comparing each row with the same row of an earlier run (bench_json.c
 * reads that file). Both are parsed before the first test runs, so a typo
 * is a usage error, not a wasted run.
 */
#ifndef RDMX_TOOLS_BENCH_GATE_H
#define RDMX_TOOLS_BENCH_GATE_H

#include "bench.h"

#define BENCH_GATE_EXIT 3	/* exit status when a gate is violated */

enum gate_kind {
	GATE_TIME,	/* a latency statistic, microseconds, lat rows */
	GATE_RATE,	/* msg_rate, messages per second, bw rows */
	GATE_GBPS,	/* gbps, bw rows */
};

/* One metric: a JSON column name of a result row. */
struct gate_metric {
	enum gate_kind kind;
	int stat;		/* GATE_TIME: min, p50, p90, p99, p99_9, max, mean, stdev */
	bool one_way;		/* GATE_TIME: one_way_us (rtt / 2) instead of rtt_us */
};

/* One --fail-if PROTO:SIZE:METRIC OP VALUE. */
struct bench_gate {
	const char *text;	/* as given */
	char protocol[32];	/* "" matches every protocol */
	uint64_t size;		/* 0 matches every size */
	struct gate_metric metric;
	bool greater;		/* fails if the value is > (or >=) the limit */
	bool or_equal;
	double limit;		/* in the metric's JSON unit */
};

/**
 * bench_gate_parse - parse @s into @g. A protocol other than '*' must be in
 * @protos (the run's protocols). Returns 0, or -1 with a message naming the
 * bad part in @err.
 */
int bench_gate_parse(const char *s, const char *const *protos, int n_protos,
		     struct bench_gate *g, char *err, size_t len);

/** bench_gate_mode - the mode (BENCH_LAT or BENCH_BW) @g's metric needs. */
enum bench_mode bench_gate_mode(const struct bench_gate *g);

/** bench_metric_name - "rtt_us.p99", "msg_rate", ... for messages. */
const char *bench_metric_name(const struct gate_metric *m, char *buf, size_t len);

/**
 * bench_gate_check - check every gate against every row of @r it matches;
 * prints one line per violation (and per gate matching no row) on @f.
 * Returns the number of violations.
 */
int bench_gate_check(const struct bench_gate *g, int n, const struct bench_report *r,
		     FILE *f);

/* One row of a baseline file: what identifies it and what is compared. */
struct bench_base_row {
	char protocol[32];
	enum bench_mode mode;
	uint64_t size;
	int conns;
	double p50_us;		/* lat rows: rtt_us.p50 */
	double msg_rate;	/* bw rows */
};

struct bench_baseline {
	int n;
	struct bench_base_row *rows;
};

/**
 * bench_baseline_load - read the result rows of an earlier --json file.
 * Returns 0, or -1 with the reason in @err (@b is then empty).
 */
int bench_baseline_load(const char *path, struct bench_baseline *b,
			char *err, size_t len);

/** bench_baseline_free - free the rows of @b. */
void bench_baseline_free(struct bench_baseline *b);

/**
 * bench_baseline_check - compare each row of @r with the baseline row of the
 * same protocol, mode, size and connections: a latency (rtt p50) more than
 * @pct percent higher, or a bw message rate more than @pct percent lower, is
 * a violation, printed on @f. Returns the number of violations.
 */
int bench_baseline_check(const struct bench_baseline *b, double pct,
			 const struct bench_report *r, FILE *f);

/* ------------------------------------------------------------ bench_json.c */

/*
 * bench_json_scan - call @fn for each scalar of the JSON document @s with
 * its path ("results.3.rtt_us.p50"; array elements by index): @str for
 * strings (else NULL), @num for numbers, NAN for null, 1/0 for true/false.
 * Returns 0, or -1 with "offset N: what was expected" in @err.
 */
typedef void (*bench_json_fn)(void *arg, const char *path, const char *str,
			      double num);
int bench_json_scan(const char *s, bench_json_fn fn, void *arg,
		    char *err, size_t len);

#endif /* RDMX_TOOLS_BENCH_GATE_H */
