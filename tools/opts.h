/* SPDX-License-Identifier: MIT */
/*
 * A small table-driven command-line option parser for the rdmx tools.
 *
 * Each subcommand describes its options in a table ending with an all-zero
 * entry; opts_parse() fills the destinations, collects positional arguments
 * and reports the first problem as one line in a caller-provided buffer.
 * opts_print_help() writes the OPTIONS section of --help from the same table.
 * No globals: everything is reentrant and unit-testable.
 */
#ifndef RDMX_TOOLS_OPTS_H
#define RDMX_TOOLS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_kind {
	OPT_FLAG,	/* bool *: set to true, takes no value */
	OPT_INT,	/* long long *: decimal integer in [min, max] */
	OPT_SIZE,	/* uint64_t *: bytes, K/M/G binary suffixes, in [min, max] */
	OPT_STRING,	/* const char **: any string (points into argv) */
	OPT_CHOICE,	/* const char **: one of choices[] (points into choices) */
	OPT_LIST,	/* struct opts_list *: repeatable, each value appended */
	OPT_INCLUDE,	/* const struct opt *: another table's rows, in place
			 * (a block shared by several commands: OPTS_INCLUDE) */
};

/* A row that includes the rows of @rows (an all-zero-terminated table). */
#define OPTS_INCLUDE(rows) \
	{ "", 0, OPT_INCLUDE, (void *)(rows), 0, 0, NULL, NULL, NULL }

/* The longest value an option takes (a path: PATH_MAX). */
#define OPTS_VALUE_MAX 4096

/* The most rows of a table with its included rows. */
#define OPTS_MAX_ROWS 160

/* The values of a repeatable option (OPT_LIST), in the order given. */
#define OPTS_LIST_MAX 32
struct opts_list {
	int n;
	const char *v[OPTS_LIST_MAX];	/* point into argv */
};

struct opt {
	const char *name;		/* long name, without the leading "--" */
	char short_name;		/* single-letter alias, 0 if none */
	enum opt_kind kind;
	void *dest;			/* see enum opt_kind; its value is the default */
	long long min, max;		/* OPT_INT and OPT_SIZE (size: both >= 0) */
	const char *const *choices;	/* OPT_CHOICE: NULL-terminated list */
	const char *metavar;		/* value placeholder in help, e.g. "BYTES" */
	const char *help;		/* one sentence, no trailing period needed;
					 * NULL: a hidden alias (e.g. a perftest
					 * spelling), left out of help and man */
};

/* opts_parse() results. */
enum {
	OPTS_ERROR = -1,	/* problem described in @err */
	OPTS_OK = 0,
	OPTS_HELP = 1,		/* -h or --help was given */
	OPTS_MAN = 2,		/* --help=man: the page as roff (rdmx help --man) */
	OPTS_MARKDOWN = 3,	/* --help=markdown: the options as a markdown
				 * table (rdmx help --markdown, docs/options.md) */
};

/**
 * opts_parse - parse @argc/@argv against @table.
 * @argv[0] is skipped (the command name). Options and positional arguments
 * may be mixed; "--" ends the options. Positional arguments are stored in
 * @pos (at most @max_pos of them) and counted in *@n_pos.
 * Returns OPTS_OK, OPTS_HELP or OPTS_ERROR with a one-line message in @err;
 * an unknown long option gets the closest known name ("did you mean").
 */
int opts_parse(const struct opt *table, int argc, char **argv,
	       const char **pos, int max_pos, int *n_pos,
	       char *err, size_t err_len);

/**
 * opts_flatten - @table with its OPT_INCLUDE rows replaced by the rows they
 * include, into @out (at most @max rows and the terminator). Returns the
 * number of rows, or -1 when they do not fit or a long name or a letter is
 * there twice (a table's bug, named in @err).
 */
int opts_flatten(const struct opt *table, struct opt *out, size_t max,
		 char *err, size_t err_len);

/**
 * opts_alias_of - the visible row that the hidden row @o of @flat is an
 * alias of (the same destination), or NULL.
 */
const struct opt *opts_alias_of(const struct opt *flat, const struct opt *o);

/**
 * opts_print_markdown - the rows of @table (and their hidden aliases) as
 * markdown table rows "| rdmx CMD | -x | --long=VALUE | help |", @cmd
 * naming the command.
 */
void opts_print_markdown(const char *cmd, const struct opt *table, FILE *f);

/**
 * opts_parse_size - parse "64", "4K", "1M", "2G" (binary multiples) into
 * *@out. Returns 0, or -1 if @s is not a size or does not fit in 64 bits.
 */
int opts_parse_size(const char *s, uint64_t *out);

/** opts_format_size - "4K" for 4096, "1000" for 1000, into @buf. */
const char *opts_format_size(uint64_t v, char *buf, size_t len);

/**
 * opts_print_help - write the aligned option list (the body of OPTIONS),
 * including -h/--help, with each option's current value as its default.
 */
void opts_print_help(const struct opt *table, FILE *f);

/*
 * The sections of a man-page style --help; NULL sections are omitted.
 *
 * This is the ONE source of each command's documentation: opts_print_page()
 * writes it as `rdmx CMD --help`, opts_print_man() as the roff man page the
 * build installs (share/man/man1/rdmx-CMD.1, written by `rdmx help --man
 * CMD`). It lives in C rather than in a markdown file because the options
 * table, with its live defaults and choices, is already C and must be in
 * the binary for --help; generating roff from it needs no converter at build
 * time (no pandoc), and the two outputs cannot drift.
 * Text conventions: paragraphs separated by an empty line; synopsis,
 * commands, exit status, examples and see-also are kept line by line.
 */
struct opts_page {
	const char *name;		/* "rdmx-devices - list RDMA devices" */
	const char *synopsis;		/* one usage line per line */
	const char *description;
	const char *commands;		/* the top-level page's command list */
	const char *exit_status;
	const char *examples;
	const char *see_also;
};

/** opts_print_page - write a full --help page, OPTIONS generated from @table. */
void opts_print_page(const struct opts_page *page, const struct opt *table,
		     FILE *f);

/**
 * opts_help_text - an option's help sentence with its choices and default,
 * as --help shows it, into @buf.
 */
void opts_help_text(const struct opt *o, char *buf, size_t len);

/**
 * opts_print_man - write @page and @table as a roff man page (section 1)
 * of rdmx @version (opts_man.c).
 */
void opts_print_man(const struct opts_page *page, const struct opt *table,
		    const char *version, FILE *f);

#endif /* RDMX_TOOLS_OPTS_H */
