/* SPDX-License-Identifier: MIT */
/*
 * What rdmx kv bench and rdmx rpc bench share around their own tests
 * (bench_cmd.c): the output options' rows, the report's header, the
 * context, and the exit status of a run that a signal stopped.
 */
#ifndef RDMX_TOOLS_BENCH_CMD_H
#define RDMX_TOOLS_BENCH_CMD_H

#include <stdbool.h>

#include <rdmx/rdmx.h>

#include "cli.h"
#include "json_out.h"
#include "opts.h"

/* --json, --csv and --plot: their rows of an options table. */
#define BENCH_OUTPUT_OPTS(json, csv, plot) \
	{ "json", 0, OPT_STRING, (json), 0, 0, NULL, "FILE", \
	  "write every figure as JSON ('-': stdout, the table then on stderr)" }, \
	{ "csv", 0, OPT_STRING, (csv), 0, 0, NULL, "FILE", \
	  "write every figure as CSV ('-': stdout)" }, \
	{ "plot", 0, OPT_STRING, (plot), 0, 0, NULL, "DIR", \
	  "write PNG and SVG charts (gnuplot) into DIR" }

/* What a report's jw_head points into; the caller writes config. */
struct bench_head_buf {
	char device[64], stamp[32], config[2048];
	struct jw_prov prov;
};

/**
 * bench_head_init - @h of a run now, on this host, with @argv, on @fabric:
 * against @addr, or the self-test on @local (@addr NULL). Its device is
 * the one of the local address, the fabric's name on the fake fabric;
 * its config_json is @b->config.
 */
void bench_head_init(struct jw_head *h, struct bench_head_buf *b, const char *fabric,
		     const char *addr, const char *local, int argc, char **argv);

/* A bench command: what bench_cmd_main needs besides its options. */
struct bench_cmd {
	char *name;			/* "kv bench": argv[0], messages' prefix */
	const struct opts_page *page;
	/* derive the settings of cfg; usage errors print and return
	 * EXIT_USAGE, else CMD_CONTINUE */
	int (*check)(void *cfg);
	int (*run)(rdmx_ctx *ctx, const void *cfg);	/* the exit status */
};

/* Where bench_cmd_main puts what it parses into the command's settings. */
struct bench_cmd_cfg {
	void *cfg;
	const char **addr;		/* the optional ADDR (NULL: none) */
	const char *const *fabric;	/* --fabric, for the context */
	const struct cli_conn_dest *conn;	/* the shared connection rows */
};

/**
 * bench_cmd_main - a bench command after its options table: argv[0]
 * becomes @c's name, the arguments are parsed, @c->check derives the
 * settings, then @c->run runs them on a context on --fabric. Returns the
 * exit status.
 */
int bench_cmd_main(const struct bench_cmd *c, const struct opt *table, int argc,
		   char **argv, const struct bench_cmd_cfg *into);

/**
 * bench_stop_status - after a signal stopped the run: says so on stderr
 * (and that the finished rows are in the files, when @files) and returns
 * the exit status, 128 + the signal's number.
 */
int bench_stop_status(const char *cmd, bool files);

#endif /* RDMX_TOOLS_BENCH_CMD_H */
