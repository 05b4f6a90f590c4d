// SPDX-License-Identifier: MIT
/*
 * rdmx - the command-line tool of the rdmx library: a table of subcommands,
 * each with its own table of options (see opts.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <rdmx/rdmx.h>

#include "cmds.h"

#ifndef RDMX_VERSION_STRING
#define STR_(x) #x
#define STR(x) STR_(x)
#define RDMX_VERSION_STRING STR(RDMX_VERSION_MAJOR) "." STR(RDMX_VERSION_MINOR)
#endif

/* The summaries are in rdmx_page.commands (the one source of the docs). */
struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
};

static int cmd_help(int argc, char **argv);

static const struct command commands[] = {
	{ "devices", cmd_devices },
	{ "pingpong", cmd_pingpong },
	{ "bench", cmd_bench },
	{ "doctor", cmd_doctor },
	{ "kv", cmd_kv },
	{ "rpc", cmd_rpc },
	{ "help", cmd_help },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct opts_page rdmx_page = {
	.name = "rdmx - RDMA messaging tool",
	.synopsis =
		"rdmx COMMAND [OPTIONS] [ARGS]\n"
		"rdmx help [COMMAND [SUBCOMMAND]]\n"
		"rdmx help --man COMMAND [SUBCOMMAND]\n"
		"rdmx --version",
	.description =
		"rdmx inspects the RDMA devices of this host and exercises rdmx\n"
		"connections. Each command has its own options: rdmx COMMAND --help.\n"
		"'rdmx help --man COMMAND' writes the command's man page as roff\n"
		"(COMMAND rdmx: this page); the installed rdmx-COMMAND(1) pages are\n"
		"made that way, from the same text as --help.",
	.commands =
		"devices    list RDMA devices, ports, GIDs and the address rdmx uses\n"
		"pingpong   measure message round-trip latency\n"
		"bench      latency and bandwidth of every protocol and TCP, with reports\n"
		"doctor     check the RDMA set-up of this host and the way to a peer\n"
		"kv         the rdmx key-value server and client, kv bench against memcached\n"
		"rpc        serve and call rdmx RPC's echo method (rdmx/rpc.h)\n"
		"help       show this help, the help of COMMAND or its man page",
	.exit_status =
		"0   success\n"
		"1   the command failed\n"
		"2   usage error (unknown command or option, bad value, no command)\n"
		"3   rdmx bench: a --fail-if or --baseline limit was exceeded",
	.examples =
		"rdmx devices\n"
		"rdmx pingpong --server\n"
		"rdmx pingpong --size 4K --iters 100000 10.0.0.1\n"
		"rdmx bench -p all --sizes 64,4K,64K\n"
		"rdmx doctor 10.0.0.1\n"
		"rdmx help --man bench | man -l -",
	.see_also = "rdmx-devices(1), rdmx-pingpong(1), rdmx-bench(1), rdmx-doctor(1), rdmx-kv(1), "
		    "rdmx-rpc(1)",
};

static bool version_flag;

static const struct opt rdmx_table[] = {
	{ "version", 0, OPT_FLAG, &version_flag, 0, 0, NULL, NULL,
	  "show the version and the built-in protocols and exit" },
	{ 0 },
};

static void usage(FILE *f)
{
	opts_print_page(&rdmx_page, rdmx_table, f);
}

static const struct command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static int unknown_command(const char *name)
{
	fprintf(stderr, "rdmx: '%s' is not an rdmx command; see 'rdmx --help'\n",
		name);
	return EXIT_USAGE;
}

/* rdmx help --man COMMAND [SUBCOMMAND]: the man page of COMMAND (or of
 * rdmx; rpc bench: of the subcommand) as roff. */
static int man_page(int argc, char **argv)
{
	const struct command *c;
	char help[] = "--help=man";
	char *args[4];

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "rdmx help: usage: rdmx help --man COMMAND [SUBCOMMAND]\n");
		return EXIT_USAGE;
	}
	if (!strcmp(argv[2], "rdmx") || !strcmp(argv[2], "help")) {
		opts_print_man(&rdmx_page, rdmx_table, RDMX_VERSION_STRING, stdout);
		return EXIT_OK;
	}
	c = find_command(argv[2]);
	if (!c)
		return unknown_command(argv[2]);
	args[0] = argv[2];
	args[argc - 2] = help; /* after the subcommand (rpc bench), if any */
	if (argc == 4)
		args[1] = argv[3];
	args[argc - 1] = NULL;
	return c->fn(argc - 1, args);
}

/* rdmx help [COMMAND [SUBCOMMAND]]: COMMAND [SUBCOMMAND] --help. */
static int cmd_help(int argc, char **argv)
{
	const struct command *c;
	char help[] = "--help";
	char *args[4];

	if (argc >= 2 && !strcmp(argv[1], "--man"))
		return man_page(argc, argv);
	if (argc < 2) {
		usage(stdout);
		return EXIT_OK;
	}
	if (argc > 3) {
		fprintf(stderr, "rdmx help: too many arguments; usage: rdmx help "
			"[COMMAND [SUBCOMMAND]]\n");
		return EXIT_USAGE;
	}
	c = find_command(argv[1]);
	if (!c)
		return unknown_command(argv[1]);
	if (c->fn == cmd_help)
		return cmd_help(1, argv);
	args[0] = argv[1];
	args[argc - 1] = help; /* after the subcommand (rpc bench), if any */
	if (argc == 3)
		args[1] = argv[2];
	args[argc] = NULL;
	return c->fn(argc, args);
}

static void version(void)
{
	const char *const *p = rdmx_protocol_names();

	printf("rdmx %s (protocols:", RDMX_VERSION_STRING);
	for (; p && *p; p++)
		printf(" %s", *p);
	printf(")\n");
}

int cmd_parse(const struct opts_page *page, const struct opt *table,
	      int argc, char **argv, const char **pos, int max_pos, int *n_pos)
{
	char err[256];
	int rc;

	rc = opts_parse(table, argc, argv, pos, max_pos, n_pos, err, sizeof(err));
	if (rc == OPTS_HELP) {
		opts_print_page(page, table, stdout);
		return EXIT_OK;
	}
	if (rc == OPTS_MAN) {
		opts_print_man(page, table, RDMX_VERSION_STRING, stdout);
		return EXIT_OK;
	}
	if (rc != OPTS_OK) {
		fprintf(stderr, "rdmx %s: %s\n", argv[0], err);
		fprintf(stderr, "Try 'rdmx %s --help' for more information.\n", argv[0]);
		return EXIT_USAGE;
	}
	return CMD_CONTINUE;
}

int cmd_usage_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rdmx %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'rdmx %s --help' for more information.\n", cmd);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	const struct command *c;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		version();
		return EXIT_OK;
	}
	c = find_command(argv[1]);
	if (!c)
		return unknown_command(argv[1]);
	return c->fn(argc - 1, argv + 1);
}
