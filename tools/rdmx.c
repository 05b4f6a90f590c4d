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
	const char *const *subs;	/* subcommands with their own page */
};

static int cmd_help(int argc, char **argv);

static const char *const kv_subs[] = { "serve", "get", "put", "del", "bench", NULL };
static const char *const rpc_subs[] = { "serve", "call", "bench", NULL };

static const struct command commands[] = {
	{ "devices", cmd_devices, NULL },
	{ "pingpong", cmd_pingpong, NULL },
	{ "bench", cmd_bench, NULL },
	{ "doctor", cmd_doctor, NULL },
	{ "kv", cmd_kv, kv_subs },
	{ "rpc", cmd_rpc, rpc_subs },
	{ "help", cmd_help, NULL },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct opts_page rdmx_page = {
	.name = "rdmx - RDMA messaging tool",
	.synopsis =
		"rdmx COMMAND [OPTIONS] [ARGS]\n"
		"rdmx help [COMMAND [SUBCOMMAND]]\n"
		"rdmx help --man COMMAND [SUBCOMMAND]\n"
		"rdmx help --markdown\n"
		"rdmx --version",
	.description =
		"rdmx inspects the RDMA devices of this host and exercises rdmx\n"
		"connections. Each command has its own options: rdmx COMMAND --help.\n"
		"'rdmx help --man COMMAND' writes the command's man page as roff\n"
		"(COMMAND rdmx: this page); the installed rdmx-COMMAND(1) pages are\n"
		"made that way, from the same text as --help. 'rdmx help --markdown'\n"
		"writes the table of every option of every command (docs/options.md).\n"
		"\n"
		"Where perftest (ib_send_bw, ...) has a letter, it means the same here,\n"
		"in every command: -p port, -d device, -i IB port, -x GID index, -s size,\n"
		"-n iterations, -D duration, -a all sizes, -q connections, -l post\n"
		"list (batch), -Q CQ moderation, -t TX depth; -c is the protocol\n"
		"(perftest's connection type). RDMX_FABRIC=fake in the environment\n"
		"selects the fake fabric, as --fabric fake does.",
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
		"rdmx bench -c all --size 64,4K,64K\n"
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
	fprintf(stderr, "rdmx: '%.60s' is not an rdmx command; see 'rdmx --help'\n",
		name);
	return EXIT_USAGE;
}

/* help COMMAND SUBCOMMAND: is SUBCOMMAND one of COMMAND's? */
static int check_sub(const struct command *c, const char *sub)
{
	for (const char *const *s = c->subs; s && *s; s++)
		if (!strcmp(*s, sub))
			return EXIT_OK;
	fprintf(stderr, "rdmx help: '%.60s' is not a subcommand of rdmx %s%s\n", sub,
		c->name, c->subs ? "" : " (it has none)");
	return EXIT_USAGE;
}

/* rdmx help --markdown: every command's options as one markdown table. */
static int markdown(int argc)
{
	char help[] = "--help=markdown";
	char *args[4];

	if (argc != 2) {
		fprintf(stderr, "rdmx help: usage: rdmx help --markdown\n");
		return EXIT_USAGE;
	}
	printf("| command | letter | option | old spellings (hidden) | meaning |\n"
	       "|---|---|---|---|---|\n");
	opts_print_markdown("", rdmx_table, stdout);
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (commands[i].fn == cmd_help)
			continue;
		args[0] = (char *)commands[i].name;
		args[1] = help;
		args[2] = NULL;
		commands[i].fn(2, args);
		for (const char *const *s = commands[i].subs; s && *s; s++) {
			args[1] = (char *)*s;
			args[2] = help;
			args[3] = NULL;
			commands[i].fn(3, args);
		}
	}
	return EXIT_OK;
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
	if (argc == 4 && check_sub(c, argv[3]))
		return EXIT_USAGE;
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
	if (argc >= 2 && !strcmp(argv[1], "--markdown"))
		return markdown(argc);
	if (argc >= 2 && argv[1][0] == '-') {
		fprintf(stderr, "rdmx help: unknown option '%.60s'; usage: rdmx help "
			"[--man|--markdown] [COMMAND [SUBCOMMAND]]\n", argv[1]);
		return EXIT_USAGE;
	}
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
		return argc == 2 ? cmd_help(1, argv) : check_sub(c, argv[2]);
	if (argc == 3 && check_sub(c, argv[2]))
		return EXIT_USAGE;
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

/* What opts_parse's @rc asks for, printed; CMD_CONTINUE when nothing. */
static int parse_outcome(int rc, const char *cmd, const struct opts_page *page,
			 const struct opt *table, const char *err)
{
	if (rc == OPTS_HELP) {
		opts_print_page(page, table, stdout);
		return EXIT_OK;
	}
	if (rc == OPTS_MAN) {
		opts_print_man(page, table, RDMX_VERSION_STRING, stdout);
		return EXIT_OK;
	}
	if (rc == OPTS_MARKDOWN) {
		opts_print_markdown(cmd, table, stdout);
		return EXIT_OK;
	}
	if (rc != OPTS_OK) {
		fprintf(stderr, "rdmx %s: %s\n", cmd, err);
		fprintf(stderr, "Try 'rdmx %s --help' for more information.\n", cmd);
		return EXIT_USAGE;
	}
	return CMD_CONTINUE;
}

int cmd_parse(const struct opts_page *page, const struct opt *table,
	      int argc, char **argv, const char **pos, int max_pos, int *n_pos)
{
	char err[256];
	int rc;

	rc = opts_parse(table, argc, argv, pos, max_pos, n_pos, err, sizeof(err));
	return parse_outcome(rc, argv[0], page, table, err);
}

static const struct cmd_sub *find_sub(const struct cmd_sub *subs, const char *name)
{
	for (; subs->name; subs++)
		if (!strcmp(subs->name, name))
			return subs;
	return NULL;
}

int cmd_parse_subs(const struct opts_page *page, const struct opt *table,
		   const struct cmd_sub *subs, int argc, char **argv,
		   const char **pos, int max_pos, int *n_pos,
		   const struct cmd_sub **sub)
{
	char err[256], cmd[64];
	int rc;

	*sub = NULL;
	rc = opts_parse(table, argc, argv, pos, max_pos, n_pos, err, sizeof(err));
	if (*n_pos && (rc == OPTS_OK || rc == OPTS_HELP || rc == OPTS_MAN ||
		       rc == OPTS_MARKDOWN)) {
		*sub = find_sub(subs, pos[0]);
		if (!*sub)
			return cmd_usage_err(argv[0], "'%.60s' is not a subcommand "
					     "of rdmx %s", pos[0], argv[0]);
		snprintf(cmd, sizeof(cmd), "%s %s", argv[0], (*sub)->name);
		if (rc == OPTS_OK) /* again, refusing another subcommand's options */
			rc = opts_parse((*sub)->table, argc, argv, pos, max_pos, n_pos,
					err, sizeof(err));
		return parse_outcome(rc, cmd, (*sub)->page, (*sub)->table, err);
	}
	return parse_outcome(rc, argv[0], page, table, err);
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
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "--version")) {
		if (argc > 2) {
			fprintf(stderr, "rdmx: %s takes no arguments ('%.60s')\n",
				argv[1], argv[2]);
			return EXIT_USAGE;
		}
		if (argv[1][2] == 'v')
			version();
		else
			usage(stdout);
		return EXIT_OK;
	}
	c = find_command(argv[1]);
	if (!c)
		return unknown_command(argv[1]);
	return c->fn(argc - 1, argv + 1);
}
