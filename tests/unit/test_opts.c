/* SPDX-License-Identifier: MIT */
/* The tools' table-driven option parser and its --help generation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opts.h"

static const char *const protos[] = { "send_recv", "write_imm", NULL };

struct vals {
	bool verify;
	long long iters;
	uint64_t size;
	const char *device;
	const char *proto;
};

struct fixture {
	struct vals v;
	struct opt table[7];
	const char *pos[2];
	int n_pos;
	char err[256];
};

static void setup_table(struct fixture *f)
{
	struct opt t[] = {
		{ "verify", 0, OPT_FLAG, &f->v.verify, 0, 0, NULL, NULL, "check every byte" },
		{ "iters", 'n', OPT_INT, &f->v.iters, 1, 100000000, NULL, NULL, "round trips" },
		{ "size", 's', OPT_SIZE, &f->v.size, 1, 1 << 30, NULL, NULL, "message size" },
		{ "device", 'd', OPT_STRING, &f->v.device, 0, 0, NULL, "NAME", "RDMA device" },
		{ "protocol", 'p', OPT_CHOICE, &f->v.proto, 0, 0, protos, "PROTO", "protocol" },
		{ 0 },
	};

	memcpy(f->table, t, sizeof(t));
	f->v = (struct vals){ .iters = 1000, .size = 64, .proto = "send_recv" };
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	setup_table(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

static int parse_v(struct fixture *f, va_list ap)
{
	char *argv[32];
	int argc = 0;

	while ((argv[argc] = va_arg(ap, char *)))
		argc++;
	return opts_parse(f->table, argc, argv, f->pos, 2, &f->n_pos, f->err,
			  sizeof(f->err));
}

/* Parse a NULL-terminated argument list (argv[0] is the command). */
static int parse(struct fixture *f, ...)
{
	va_list ap;
	int rc;

	va_start(ap, f);
	rc = parse_v(f, ap);
	va_end(ap);
	return rc;
}

/* Parsing the NULL-terminated argument list after @err fails with @err. */
static void parse_fails(struct fixture *f, const char *err, ...)
{
	va_list ap;
	int rc;

	va_start(ap, err);
	rc = parse_v(f, ap);
	va_end(ap);
	assert_int_equal(rc, OPTS_ERROR);
	assert_string_equal(f->err, err);
}

/* Every string of the NULL-terminated @want is in @text. */
static void expect_in(const char *text, const char *const want[])
{
	for (; *want; want++)
		if (!strstr(text, *want))
			fail_msg("'%s' is not in:\n%s", *want, text);
}

static void expect_error(struct fixture *f, const char *msg)
{
	if (!strstr(f->err, msg))
		fail_msg("error '%s' does not contain '%s'", f->err, msg);
}

static void test_defaults_kept(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(parse(f, "cmd", NULL), OPTS_OK);
	assert_false(f->v.verify);
	assert_int_equal(f->v.iters, 1000);
	assert_int_equal(f->v.size, 64);
	assert_null(f->v.device);
	assert_string_equal(f->v.proto, "send_recv");
	assert_int_equal(f->n_pos, 0);
	assert_string_equal(f->err, "");
}

static void test_every_kind(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(parse(f, "cmd", "--verify", "--iters", "5", "--size=4K",
			       "--device", "rxe0", "--protocol=write_imm", NULL), OPTS_OK);
	assert_true(f->v.verify);
	assert_int_equal(f->v.iters, 5);
	assert_int_equal(f->v.size, 4096);
	assert_string_equal(f->v.device, "rxe0");
	assert_string_equal(f->v.proto, "write_imm");
}

static void test_short_forms(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(parse(f, "cmd", "-n", "7", "-s1M", "-d", "mlx5_0",
			       "-pwrite_imm", NULL), OPTS_OK);
	assert_int_equal(f->v.iters, 7);
	assert_int_equal(f->v.size, 1 << 20);
	assert_string_equal(f->v.device, "mlx5_0");
	assert_string_equal(f->v.proto, "write_imm");
}

static void test_sizes(void **state)
{
	uint64_t v;
	char buf[32];

	(void)state;
	assert_int_equal(opts_parse_size("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(opts_parse_size("64", &v), 0);
	assert_int_equal(v, 64);
	assert_int_equal(opts_parse_size("4k", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(opts_parse_size("2MiB", &v), 0);
	assert_int_equal(v, 2u << 20);
	assert_int_equal(opts_parse_size("3G", &v), 0);
	assert_int_equal(v, 3ull << 30);
	assert_int_equal(opts_parse_size("1T", &v), 0);
	assert_int_equal(v, 1ull << 40);
	assert_int_equal(opts_parse_size("12Q", &v), -1);
	assert_int_equal(opts_parse_size("", &v), -1);
	assert_int_equal(opts_parse_size("-1", &v), -1);
	assert_int_equal(opts_parse_size(" 1", &v), -1);
	assert_int_equal(opts_parse_size("1KK", &v), -1);
	assert_int_equal(opts_parse_size("K", &v), -1);
	assert_int_equal(opts_parse_size("99999999999999999999", &v), -1);
	assert_int_equal(opts_parse_size("17179869184G", &v), -1);
	assert_string_equal(opts_format_size(4096, buf, sizeof(buf)), "4K");
	assert_string_equal(opts_format_size(1 << 30, buf, sizeof(buf)), "1G");
	assert_string_equal(opts_format_size(1000, buf, sizeof(buf)), "1000");
	assert_string_equal(opts_format_size(0, buf, sizeof(buf)), "0");
}

static void test_size_errors(void **state)
{
	struct fixture *f = *state;

	parse_fails(f, "--size: '12Q' is not a size (examples: 64, 4K, 1M)",
		    "cmd", "--size", "12Q", NULL);
	parse_fails(f, "--size: must be between 1 and 1G", "cmd", "--size=2G", NULL);
	assert_int_equal(parse(f, "cmd", "-s", "0", NULL), OPTS_ERROR);
	expect_error(f, "must be between");
	assert_int_equal(f->v.size, 64); /* untouched on error */
}

static void test_int_errors(void **state)
{
	struct fixture *f = *state;

	parse_fails(f, "--iters: must be between 1 and 100000000", "cmd", "--iters", "0", NULL);
	assert_int_equal(parse(f, "cmd", "--iters=100000001", NULL), OPTS_ERROR);
	expect_error(f, "must be between 1 and 100000000");
	assert_int_equal(parse(f, "cmd", "--iters=99999999999999999999999", NULL), OPTS_ERROR);
	expect_error(f, "must be between");
	parse_fails(f, "--iters: '12x' is not an integer", "cmd", "--iters", "12x", NULL);
	assert_int_equal(parse(f, "cmd", "--iters=", NULL), OPTS_ERROR);
	expect_error(f, "is not an integer");
}

static void test_choice_errors(void **state)
{
	struct fixture *f = *state;

	parse_fails(f, "-p (--protocol): 'rdma' is not one of: send_recv, write_imm",
		    "cmd", "-p", "rdma", NULL);
	parse_fails(f, "--protocol: 'rdma' is not one of: send_recv, write_imm",
		    "cmd", "--protocol", "rdma", NULL);
}

static void test_unknown_and_missing(void **state)
{
	struct fixture *f = *state;

	parse_fails(f, "unknown option '--bogus'", "cmd", "--bogus", NULL);
	parse_fails(f, "unknown option '--bogus'", "cmd", "--bogus=1", NULL);
	parse_fails(f, "unknown option '-x'", "cmd", "-x", NULL);
	assert_int_equal(parse(f, "cmd", "--ver", NULL), OPTS_ERROR); /* no prefixes */
	expect_error(f, "unknown option");
	parse_fails(f, "--size: missing value", "cmd", "--size", NULL);
	parse_fails(f, "-s (--size): missing value", "cmd", "-s", NULL);
	parse_fails(f, "--device: the value is empty", "cmd", "--device", "", NULL);
	parse_fails(f, "-d (--device): the value is empty", "cmd", "-d", "", NULL);
	parse_fails(f, "--size: '' is not a size (examples: 64, 4K, 1M)", "cmd",
		    "--size=", NULL);
	parse_fails(f, "--verify: does not take a value", "cmd", "--verify=yes", NULL);
}

static void test_help(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(parse(f, "cmd", "--help", NULL), OPTS_HELP);
	assert_int_equal(parse(f, "cmd", "-s", "4K", "-h", NULL), OPTS_HELP);
	assert_int_equal(parse(f, "cmd", "--", "--help", NULL), OPTS_OK);
	assert_int_equal(f->n_pos, 1);
	assert_string_equal(f->pos[0], "--help");
}

static void test_positional(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(parse(f, "cmd", "10.0.0.1", "--iters", "3", "-", NULL), OPTS_OK);
	assert_int_equal(f->n_pos, 2);
	assert_string_equal(f->pos[0], "10.0.0.1");
	assert_string_equal(f->pos[1], "-");
	assert_int_equal(f->v.iters, 3);
	assert_int_equal(parse(f, "cmd", "--", "-n", "--x", NULL), OPTS_OK);
	assert_int_equal(f->n_pos, 2);
	assert_string_equal(f->pos[0], "-n");
	assert_string_equal(f->pos[1], "--x");
	assert_int_equal(f->v.iters, 3);
	parse_fails(f, "too many arguments: 'c' (at most 2 expected)", "cmd", "a", "b", "c", NULL);
}

static void test_no_positional(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "cmd", "extra", NULL };

	assert_int_equal(opts_parse(f->table, 2, argv, NULL, 0, &f->n_pos, f->err,
				    sizeof(f->err)), OPTS_ERROR);
	assert_string_equal(f->err, "unexpected argument 'extra'");
}

/* What opts prints for @t: its --help (@page NULL), or @page as --help
 * (@man false) or as a man page. */
static char *print_of(const struct opts_page *page, bool man, const struct opt *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	if (!page)
		opts_print_help(t, m);
	else if (man)
		opts_print_man(page, t, "9.9", m);
	else
		opts_print_page(page, t, m);
	fclose(m);
	return buf;
}

static char *help_of(const struct opt *t)
{
	return print_of(NULL, false, t);
}

/* The help text of every option starts in the same column. */
static void check_aligned(const char *text)
{
	int col = -1;

	while (*text) {
		const char *nl = strchr(text, '\n'), *h;
		size_t n = nl ? (size_t)(nl - text) : strlen(text);

		h = strstr(text, "  ");
		while (h && h < text + n && h[2] == ' ')
			h++;
		if (text[4] == '-' && h && h < text + n) {
			if (col < 0)
				col = (int)(h - text);
			assert_int_equal((int)(h - text), col);
		}
		text += n + (nl != NULL);
	}
	assert_true(col > 0);
}

static void test_help_generation(void **state)
{
	struct fixture *f = *state;
	char *h = help_of(f->table);

	expect_in(h, (const char *const[]){
		"    --verify",
		"-n, --iters=N",
		"-s, --size=BYTES",
		"-d, --device=NAME",
		"-p, --protocol=PROTO",
		"-h, --help",
		"check every byte",
		"(default: 1000)",
		"(default: 64)",
		"one of: send_recv, write_imm",
		NULL,
	});
	assert_null(strstr(h, "(default: (null))"));
	check_aligned(h);
	free(h);
}

static void test_help_page(void **state)
{
	struct fixture *f = *state;
	struct opts_page page = {
		.name = "rdmx-test - a test", .synopsis = "rdmx test [OPTIONS]",
		.description = "Line one.\n\nLine two.", .exit_status = "0 ok",
		.examples = "rdmx test",
	};
	char *buf = print_of(&page, false, f->table);

	expect_in(buf, (const char *const[]){
		"NAME\n    rdmx-test - a test\n",
		"SYNOPSIS\n",
		"    Line one.\n\n    Line two.\n",
		"OPTIONS\n",
		"--iters=N",
		"EXIT STATUS\n    0 ok\n",
		"EXAMPLES\n    rdmx test\n",
		NULL,
	});
	free(buf);
}

static void test_help_wraps_long_text(void **state)
{
	static long long v = 5;
	static const struct opt t[] = {
		{ "a-very-long-option-name-indeed", 0, OPT_INT, &v, 0, 10, NULL,
		  "SOMETHING", "this help text is long enough that it has to be "
		  "wrapped onto a second line to stay within eighty columns" },
		{ 0 },
	};
	char *h = help_of(t), *line;

	(void)state;
	for (line = strtok(h, "\n"); line; line = strtok(NULL, "\n"))
		assert_true(strlen(line) < 80);
	free(h);
}

/* A repeatable option keeps every value in order, and refuses one too many. */
static void test_list(void **state)
{
	struct fixture *f = *state;
	struct opts_list l = { 0 };
	const struct opt t[] = {
		{ "fail-if", 0, OPT_LIST, &l, 0, 0, NULL, "EXPR", "a limit" },
		{ 0 },
	};
	char *argv[OPTS_LIST_MAX + 3];
	int i;

	argv[0] = "cmd";
	argv[1] = "--fail-if=a";
	argv[2] = "--fail-if";
	argv[3] = "b";
	assert_int_equal(opts_parse(t, 4, argv, f->pos, 2, &f->n_pos, f->err,
				    sizeof(f->err)), OPTS_OK);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.v[0], "a");
	assert_string_equal(l.v[1], "b");
	for (i = 1; i <= OPTS_LIST_MAX + 1; i++)
		argv[i] = "--fail-if=x";
	l.n = 0;
	assert_int_equal(opts_parse(t, OPTS_LIST_MAX + 2, argv, f->pos, 2, &f->n_pos,
				    f->err, sizeof(f->err)), OPTS_ERROR);
	expect_error(f, "given more than");
}

/* The man page has every option of the table, with its placeholder and its
 * help as --help shows it, and escapes what roff would take as requests. */
static void test_man_page(void **state)
{
	struct fixture *f = *state;
	const struct opts_page page = {
		.name = "rdmx-x - a test", .synopsis = "rdmx x [OPTIONS]",
		.description = "first line\n.not a request\n\nback\\slash",
		.exit_status = "0   fine", .see_also = "rdmx(1)",
	};
	const struct opt *o;
	char *man = print_of(&page, true, f->table), want[256], help[640];

	expect_in(man, (const char *const[]){
		".TH RDMX-X 1 \"\" \"rdmx 9.9\"",
		"rdmx\\-x \\- a test",
		"\n\\&.not a request\n.PP\nback\\eslash\n",
		NULL,
	});
	for (o = f->table; o->name; o++) {
		snprintf(want, sizeof(want), "\\fB\\-\\-%s\\fR%s", o->name,
			 o->kind == OPT_FLAG ? "\n" : "=\\fI");
		if (!strstr(man, want))
			fail_msg("the man page lacks '%s':\n%s", want, man);
		opts_help_text(o, help, sizeof(help));
		if (!strstr(man, help))
			fail_msg("the man page lacks the help '%s'", help);
	}
	expect_in(man, (const char *const[]){
		"\\fB\\-h\\fR, \\fB\\-\\-help\\fR\n",
		".SH EXIT STATUS\n.nf\n0   fine\n.fi\n",
		".SH SEE ALSO\nrdmx(1)\n",
		NULL,
	});
	free(man);
}

/* An unknown long option names the closest known one, if it is close; a
 * hidden alias (no help) is accepted but neither suggested nor listed. */
static void test_did_you_mean_hidden(void **state)
{
	struct fixture *f = *state;
	char *help;

	assert_int_equal(parse(f, "cmd", "--iter", "5", NULL), OPTS_ERROR);
	expect_error(f, "unknown option '--iter'; did you mean '--iters'?");
	assert_int_equal(parse(f, "cmd", "--devcie=x", NULL), OPTS_ERROR);
	expect_error(f, "did you mean '--device'?");
	assert_int_equal(parse(f, "cmd", "--verfy", NULL), OPTS_ERROR);
	expect_error(f, "did you mean '--verify'?");
	assert_int_equal(parse(f, "cmd", "--zzzzzz", NULL), OPTS_ERROR);
	assert_null(strstr(f->err, "did you mean"));
	assert_int_equal(parse(f, "cmd", "--size_x", NULL), OPTS_ERROR);
	f->table[5] = (struct opt){ "count", 'c', OPT_INT, &f->v.iters, 1, 100,
				    NULL, NULL, NULL };
	assert_int_equal(parse(f, "cmd", "-c", "7", NULL), OPTS_OK);
	assert_int_equal(f->v.iters, 7);
	assert_int_equal(parse(f, "cmd", "--coutn", NULL), OPTS_ERROR);
	assert_null(strstr(f->err, "--count"));
	help = help_of(f->table);
	assert_null(strstr(help, "count"));
	free(help);
}

/* --help=man asks for the man page. */
static void test_help_man(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(parse(f, "cmd", "--help=man", NULL), OPTS_MAN);
	assert_int_equal(parse(f, "cmd", "--help", NULL), OPTS_HELP);
}

/* --help=markdown asks for the options table; --help=other is an error. */
static void test_help_markdown(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(parse(f, "cmd", "--help=markdown", NULL), OPTS_MARKDOWN);
	parse_fails(f, "--help: 'nroff' is not one of: man, markdown", "cmd",
		    "--help=nroff", NULL);
}

/* A block of rows included in a table parses, helps and lists as its own. */
static void test_include(void **state)
{
	struct fixture *f = *state;
	long long port = 7471, old = 0;
	const struct opt block[] = {
		{ "port", 'P', OPT_INT, &port, 0, 65535, NULL, "PORT", "server port" },
		{ "old-port", 0, OPT_INT, &port, 0, 65535, NULL, "PORT", NULL },
		{ 0 },
	};
	const struct opt table[] = {
		OPTS_INCLUDE(block), OPTS_INCLUDE(f->table), { 0 },
	};
	const struct opt twice[] = {
		OPTS_INCLUDE(block), { "other", 'P', OPT_INT, &old, 0, 1, NULL, NULL, "x" },
		{ 0 },
	};
	struct opt flat[OPTS_MAX_ROWS];
	char *argv[] = { "cmd", "-P", "9", "-n", "5", NULL }, *buf = NULL;
	size_t len = 0;
	FILE *mem;

	assert_int_equal(opts_parse(table, 5, argv, f->pos, 2, &f->n_pos, f->err,
				    sizeof(f->err)), OPTS_OK);
	assert_int_equal(port, 9);
	assert_int_equal(f->v.iters, 5);
	assert_int_equal(opts_flatten(table, flat, OPTS_MAX_ROWS, f->err,
				      sizeof(f->err)), 7);
	assert_ptr_equal(opts_alias_of(flat, &flat[1]), &flat[0]);
	assert_int_equal(opts_flatten(twice, flat, OPTS_MAX_ROWS, f->err,
				      sizeof(f->err)), -1);
	assert_non_null(strstr(f->err, "--port and --other share"));
	mem = open_memstream(&buf, &len);
	assert_non_null(mem);
	opts_print_markdown("x", table, mem);
	fclose(mem);
	assert_non_null(strstr(buf, "| rdmx x | -P | --port=PORT | --old-port | "
				    "server port (default: 9) |"));
	assert_non_null(strstr(buf, "| rdmx x | -n | --iters=N |"));
	free(buf);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_defaults_kept), T(test_every_kind), T(test_short_forms),
		T(test_sizes), T(test_size_errors), T(test_int_errors),
		T(test_choice_errors), T(test_unknown_and_missing), T(test_help),
		T(test_positional), T(test_no_positional), T(test_help_generation),
		T(test_help_page), T(test_help_wraps_long_text), T(test_list),
		T(test_man_page), T(test_help_man), T(test_did_you_mean_hidden),
		T(test_help_markdown), T(test_include),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
