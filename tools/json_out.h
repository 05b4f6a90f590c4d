/* SPDX-License-Identifier: MIT */
/*
 * What the result writers of rdmx bench and rdmx rpc bench share: JSON
 * values, a latency object from a histogram, the run's provenance and a
 * file replaced whole (json_out.c).
 */
#ifndef RDMX_TOOLS_JSON_OUT_H
#define RDMX_TOOLS_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"

/* The latency percentiles every table and file reports. */
extern const double jw_pcts[];
extern const char *const jw_pct_names[];	/* "p50", "p90", "p99", "p99_9" */
#define JW_N_PCTS 4

/** jw_str - @s as a JSON string (quotes and control characters escaped). */
void jw_str(FILE *f, const char *s);

/** jw_num - a number; inf and nan are null (JSON has neither). */
void jw_num(FILE *f, double v);

/** jw_key - '"k": ', preceded by ", " unless @first. */
void jw_key(FILE *f, const char *k, bool first);

void jw_kv_num(FILE *f, const char *k, double v, bool first);
void jw_kv_u64(FILE *f, const char *k, uint64_t v, bool first);
void jw_kv_str(FILE *f, const char *k, const char *v, bool first);

/** jw_lat - "k": {min, p50, p90, p99, p99_9, max, mean, stdev} in us / @div. */
void jw_lat(FILE *f, const char *k, const struct hist *h, double div);

/** jw_csv_lat - min, the percentiles, max, mean, stdev in us, each + ','. */
void jw_csv_lat(FILE *f, const struct hist *h);

/**
 * jw_config_head - the start of a configuration object into @buf:
 * {"@key": [@names...], "sizes": [@sizes...] - the caller appends the
 * rest and the closing brace.
 */
void jw_config_head(char *buf, size_t len, const char *key, const char *const *names,
		    int n, const uint64_t *sizes, int n_sizes);

/**
 * jw_save - write @arg with @json_fn to @json and with @csv_fn to @csv
 * (each NULL: not asked); stdout ("-") only when @final. 0, or -1 if
 * one failed (said on stderr).
 */
int jw_save(const char *cmd, const char *json, const char *csv, bool final,
	    const void *arg, int (*json_fn)(const void *, FILE *),
	    int (*csv_fn)(const void *, FILE *));

/* Where a run's figures came from. */
struct jw_prov {
	char cmdline[2048], host[128], kernel[256];
};

/** jw_provenance - the command line ("rdmx" + @argv), host and kernel. */
void jw_provenance(struct jw_prov *p, int argc, char **argv);

/* A report's header: when, where and how it ran (rdmx kv bench, rpc bench). */
struct jw_head {
	const char *timestamp, *device, *fabric, *peer, *version;
	const char *cmdline, *host, *kernel, *config_json;
};

/**
 * jw_write_head - a report's opening: '{', "tool": "@tool" and @h's fields;
 * the caller goes on with ", ..." and closes it. Its three parts, for a
 * report with fields of its own between them: jw_head_where (the opening
 * to "peer"), jw_head_prov (",\n  " "rdmx_version" to "kernel") and
 * jw_head_config ("config", when there is one).
 */
void jw_write_head(FILE *f, const char *tool, const struct jw_head *h);
void jw_head_where(FILE *f, const char *tool, const struct jw_head *h);
void jw_head_prov(FILE *f, const struct jw_head *h);
void jw_head_config(FILE *f, const struct jw_head *h);

/**
 * jw_write_results - a report's end: "results", @row(@report, i, f) for
 * each of its @n rows, and the closing brace. 0, or -EIO.
 */
int jw_write_results(FILE *f, const void *report, int n,
		     void (*row)(const void *report, int i, FILE *f));

/** jw_table_file - where the table goes: stderr when --json or --csv is "-". */
FILE *jw_table_file(const char *json, const char *csv);

/**
 * jw_write_file - call @fn(@arg, f) on @path opened for writing (a
 * temporary file renamed over it), or on stdout for "-"; 0 or -errno
 * (the reason on stderr, prefixed "rdmx @cmd: ").
 */
int jw_write_file(const char *cmd, const char *path, const void *arg,
		  int (*fn)(const void *arg, FILE *f));

#endif /* RDMX_TOOLS_JSON_OUT_H */
