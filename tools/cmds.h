/* SPDX-License-Identifier: MIT */
/* The rdmx subcommands and what they share. */
#ifndef RDMX_TOOLS_CMDS_H
#define RDMX_TOOLS_CMDS_H

#include "opts.h"

/* Exit statuses of every subcommand. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,		/* the operation failed */
	EXIT_USAGE = 2,		/* bad command line */
};

#define CMD_CONTINUE (-1)

/*
 * Each subcommand gets argv[0] == its own name. Returns the exit status.
 */
int cmd_devices(int argc, char **argv);
int cmd_pingpong(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_kv(int argc, char **argv);
int cmd_rpc(int argc, char **argv);

/**
 * cmd_parse - parse a subcommand's arguments; on --help print @page and
 * return EXIT_OK, on a usage error print it and return EXIT_USAGE, else
 * return CMD_CONTINUE.
 */
int cmd_parse(const struct opts_page *page, const struct opt *table,
	      int argc, char **argv, const char **pos, int max_pos, int *n_pos);

/* A subcommand with its own page and options (rdmx kv get, rdmx rpc call). */
struct cmd_sub {
	const char *name;		/* "get" */
	const struct opts_page *page;
	const struct opt *table;	/* its options (OPTS_INCLUDE the shared rows) */
};

/**
 * cmd_parse_subs - cmd_parse for a command whose first positional
 * argument names one of @subs (NULL-name terminated): the arguments are
 * parsed against @table (every option of the command), then, when the
 * first positional is a subcommand, again against its own table, so an
 * option of another subcommand is refused; --help after the subcommand
 * prints its page. *@sub is the subcommand (NULL: none given).
 */
int cmd_parse_subs(const struct opts_page *page, const struct opt *table,
		   const struct cmd_sub *subs, int argc, char **argv,
		   const char **pos, int max_pos, int *n_pos,
		   const struct cmd_sub **sub);

/**
 * cmd_usage_err - "rdmx @cmd: MESSAGE" and the --help hint on stderr;
 * returns EXIT_USAGE.
 */
int cmd_usage_err(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* RDMX_TOOLS_CMDS_H */
