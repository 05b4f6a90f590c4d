// SPDX-License-Identifier: MIT
/* Table-driven option parsing and --help generation for the rdmx tools. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "hint.h"

#define HELP_WIDTH	79	/* wrap help text before this column */
#define HELP_INDENT	4	/* options start in this column */
#define HELP_MAX_LEFT	30	/* longer option columns put help below */

static void __attribute__((format(printf, 3, 4)))
put(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Append to the string in @buf, truncating silently. */
static void __attribute__((format(printf, 3, 4)))
append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ sizes */

int opts_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	unsigned long long v;
	unsigned shift = 0;
	const char *u;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end) {
		u = strchr(units, tolower((unsigned char)*end));
		if (!u)
			return -1;
		shift = 10 * (unsigned)(u - units + 1);
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
		if (*end)
			return -1;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *opts_format_size(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "TGMK";
	int i;

	for (i = 0; v && i < 4; i++) {
		unsigned shift = 10 * (unsigned)(4 - i);

		if (v % ((uint64_t)1 << shift) == 0) {
			put(buf, len, "%" PRIu64 "%c", v >> shift, units[i]);
			return buf;
		}
	}
	put(buf, len, "%" PRIu64, v);
	return buf;
}

/* ---------------------------------------------------------------- parsing */

static const struct opt *find_long(const struct opt *t, const char *name,
				   size_t len)
{
	for (; t->name; t++)
		if (strlen(t->name) == len && !strncmp(t->name, name, len))
			return t;
	return NULL;
}

static const struct opt *find_short(const struct opt *t, char c)
{
	for (; t->name; t++)
		if (t->short_name && t->short_name == c)
			return t;
	return NULL;
}

static int set_int(const struct opt *o, const char *as, const char *val,
		char *err, size_t len)
{
	long long v;
	char *end;

	errno = 0;
	v = strtoll(val, &end, 10);
	if (!*val || *end || isspace((unsigned char)*val)) {
		put(err, len, "%s: '%.40s' is not an integer", as, val);
		return OPTS_ERROR;
	}
	if (errno || v < o->min || v > o->max) {
		put(err, len, "%s: must be between %lld and %lld", as,
		    o->min, o->max);
		return OPTS_ERROR;
	}
	*(long long *)o->dest = v;
	return OPTS_OK;
}

static int set_size(const struct opt *o, const char *as, const char *val,
		char *err, size_t len)
{
	char lo[32], hi[32];
	uint64_t v;

	if (opts_parse_size(val, &v)) {
		put(err, len, "%s: '%.40s' is not a size (examples: 64, 4K, 1M)",
		    as, val);
		return OPTS_ERROR;
	}
	if (v < (uint64_t)o->min || v > (uint64_t)o->max) {
		put(err, len, "%s: must be between %s and %s", as,
		    opts_format_size((uint64_t)o->min, lo, sizeof(lo)),
		    opts_format_size((uint64_t)o->max, hi, sizeof(hi)));
		return OPTS_ERROR;
	}
	*(uint64_t *)o->dest = v;
	return OPTS_OK;
}

static void list_choices(const char *const *c, char *buf, size_t len)
{
	buf[0] = '\0';
	for (; c && *c; c++)
		append(buf, len, "%s%s", buf[0] ? ", " : "", *c);
}

static int set_choice(const struct opt *o, const char *as, const char *val,
		char *err, size_t len)
{
	const char *const *c;
	char list[256];

	for (c = o->choices; c && *c; c++) {
		if (!strcmp(*c, val)) {
			*(const char **)o->dest = *c;
			return OPTS_OK;
		}
	}
	list_choices(o->choices, list, sizeof(list));
	put(err, len, "%s: '%.40s' is not one of: %s", as, val, list);
	return OPTS_ERROR;
}

static int add_to_list(const struct opt *o, const char *as, const char *val,
		char *err, size_t len)
{
	struct opts_list *l = o->dest;

	if (l->n >= OPTS_LIST_MAX) {
		put(err, len, "%s: given more than %d times", as,
		    OPTS_LIST_MAX);
		return OPTS_ERROR;
	}
	l->v[l->n++] = val;
	return OPTS_OK;
}

static int set_value(const struct opt *o, const char *as, const char *val,
		char *err, size_t len)
{
	if (!*val && o->kind != OPT_INT && o->kind != OPT_SIZE) {
		put(err, len, "%s: the value is empty", as);
		return OPTS_ERROR;
	}
	if (strlen(val) > OPTS_VALUE_MAX) {
		put(err, len, "%s: the value is longer than %d bytes", as, OPTS_VALUE_MAX);
		return OPTS_ERROR;
	}
	switch (o->kind) {
	case OPT_INT:
		return set_int(o, as, val, err, len);
	case OPT_SIZE:
		return set_size(o, as, val, err, len);
	case OPT_CHOICE:
		return set_choice(o, as, val, err, len);
	case OPT_STRING:
		*(const char **)o->dest = val;
		return OPTS_OK;
	case OPT_LIST:
		return add_to_list(o, as, val, err, len);
	case OPT_FLAG:
	case OPT_INCLUDE:
		break;
	}
	put(err, len, "%s: bad option table entry", as);
	return OPTS_ERROR;
}


/* Edit distance (insertions, deletions, substitutions) of two short names;
 * names longer than 63 characters are only compared in their first 63. */
static size_t edit_distance(const char *a, size_t na, const char *b)
{
	size_t nb = strlen(b), row[64], i, j, diag, up;

	na = na < 63 ? na : 63;
	nb = nb < 63 ? nb : 63;
	for (j = 0; j <= nb; j++)
		row[j] = j;
	for (i = 1; i <= na; i++) {
		diag = row[0];
		row[0] = i;
		for (j = 1; j <= nb; j++) {
			up = row[j];
			row[j] = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < row[j])
				row[j] = up + 1;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			diag = up;
		}
	}
	return row[nb];
}

/* "unknown option '--sizz'; did you mean '--size'?" (close names only; a
 * '_' is taken as '-', the perftest habit). */
static void unknown_long(const struct opt *t, const char *name, size_t n,
			 char *err, size_t len)
{
	const struct opt *best = NULL;
	size_t d, best_d = SIZE_MAX, i;
	char norm[64];

	for (i = 0; i < n && i < sizeof(norm) - 1; i++)
		norm[i] = name[i] == '_' ? '-' : name[i];
	for (; t->name; t++) {
		d = edit_distance(norm, i, t->name);
		if (t->help && d < best_d) {
			best = t;
			best_d = d;
		}
	}
	n = n < 60 ? n : 60; /* a 100 KB name is named by its start */
	if (best && best_d <= (n < 5 ? 1 : 2))
		put(err, len, "unknown option '--%.*s'; did you mean '--%s'?", (int)n,
		    name, best->name);
	else
		put(err, len, "unknown option '--%.*s'", (int)n, name);
}

/* --help, --help=man, --help=markdown. */
static int help_kind(const char *eq, char *err, size_t len)
{
	if (!eq)
		return OPTS_HELP;
	if (!strcmp(eq, "=man"))
		return OPTS_MAN;
	if (!strcmp(eq, "=markdown"))
		return OPTS_MARKDOWN;
	put(err, len, "--help: '%s' is not one of: man, markdown", eq + 1);
	return OPTS_ERROR;
}

/* --name, --name=value or --name value; advances *i past a separate value. */
static int parse_long(const struct opt *t, int argc, char **argv, int *i,
		      char *err, size_t len)
{
	const char *name = argv[*i] + 2, *eq = strchr(name, '=');
	size_t n = eq ? (size_t)(eq - name) : strlen(name);
	const struct opt *o = find_long(t, name, n);
	char as[80];

	if (!o && n == 4 && !strncmp(name, "help", 4))
		return help_kind(eq, err, len);
	if (!o) {
		unknown_long(t, name, n, err, len);
		return OPTS_ERROR;
	}
	snprintf(as, sizeof(as), "--%s", o->name);
	if (o->kind == OPT_FLAG) {
		if (eq) {
			put(err, len, "%s: does not take a value", as);
			return OPTS_ERROR;
		}
		*(bool *)o->dest = true;
		return OPTS_OK;
	}
	if (eq)
		return set_value(o, as, eq + 1, err, len);
	if (*i + 1 >= argc) {
		put(err, len, "%s: missing value", as);
		return OPTS_ERROR;
	}
	return set_value(o, as, argv[++*i], err, len);
}

/* -x, -x value or -xvalue; errors name "-x (--long)". */
static int parse_short(const struct opt *t, int argc, char **argv, int *i,
		       char *err, size_t len)
{
	const char *a = argv[*i];
	const struct opt *o = find_short(t, a[1]);
	char as[80];

	if (!o && a[1] == 'h' && !a[2])
		return OPTS_HELP;
	if (!o || (o->kind == OPT_FLAG && a[2])) {
		put(err, len, "unknown option '%.40s'", a);
		return OPTS_ERROR;
	}
	snprintf(as, sizeof(as), "-%c (--%s)", o->short_name, o->name);
	if (o->kind == OPT_FLAG) {
		*(bool *)o->dest = true;
		return OPTS_OK;
	}
	if (a[2])
		return set_value(o, as, a + 2, err, len);
	if (*i + 1 >= argc) {
		put(err, len, "%s: missing value", as);
		return OPTS_ERROR;
	}
	return set_value(o, as, argv[++*i], err, len);
}

static int add_positional(const char *a, const char **pos, int max_pos,
			  int *n_pos, char *err, size_t len)
{
	if (*n_pos >= max_pos) {
		if (max_pos == 0)
			put(err, len, "unexpected argument '%.60s'", a);
		else
			put(err, len, "too many arguments: '%.60s' (at most %d expected)",
			    a, max_pos);
		return OPTS_ERROR;
	}
	pos[(*n_pos)++] = a;
	return OPTS_OK;
}

/* Is the long name or the letter of @o already in @out[0..n)? */
static const struct opt *clash(const struct opt *out, int n, const struct opt *o)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(out[i].name, o->name) ||
		    (o->short_name && out[i].short_name == o->short_name))
			return &out[i];
	return NULL;
}

static int flatten_into(const struct opt *t, struct opt *out, int n, int max,
			int depth, char *err, size_t len)
{
	const struct opt *c;

	for (; t->name; t++) {
		if (t->kind == OPT_INCLUDE) {
			if (depth > 4)
				return -1;
			n = flatten_into(t->dest, out, n, max, depth + 1, err, len);
			if (n < 0)
				return -1;
			continue;
		}
		c = clash(out, n, t);
		if (c) {
			put(err, len, "option table: --%s and --%s share a name or "
			    "a letter", c->name, t->name);
			return -1;
		}
		if (n >= max) {
			put(err, len, "option table: more than %d rows", max);
			return -1;
		}
		out[n++] = *t;
	}
	return n;
}

int opts_flatten(const struct opt *table, struct opt *out, size_t max,
		 char *err, size_t err_len)
{
	int n;

	put(err, err_len, "%s", "");
	if (!max)
		return -1;
	n = flatten_into(table, out, 0, (int)max - 1, 0, err, err_len);
	if (n >= 0)
		memset(&out[n], 0, sizeof(out[n]));
	return n;
}

const struct opt *opts_alias_of(const struct opt *flat, const struct opt *o)
{
	for (; flat->name; flat++)
		if (flat->help && flat->dest == o->dest && flat != o)
			return flat;
	return NULL;
}

int opts_parse(const struct opt *t, int argc, char **argv,
	       const char **pos, int max_pos, int *n_pos,
	       char *err, size_t err_len)
{
	struct opt table[OPTS_MAX_ROWS];
	bool only_pos = false;
	int i, rc;

	*n_pos = 0;
	if (opts_flatten(t, table, OPTS_MAX_ROWS, err, err_len) < 0)
		return OPTS_ERROR;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!only_pos && !strcmp(a, "--")) {
			only_pos = true;
			continue;
		}
		if (only_pos || a[0] != '-' || a[1] == '\0')
			rc = add_positional(a, pos, max_pos, n_pos, err, err_len);
		else if (a[1] == '-')
			rc = parse_long(table, argc, argv, &i, err, err_len);
		else
			rc = parse_short(table, argc, argv, &i, err, err_len);
		if (rc != OPTS_OK)
			return rc;
	}
	return OPTS_OK;
}

/* ------------------------------------------------------------------- help */

static const char *metavar(const struct opt *o)
{
	static const char *const def[] = {
		[OPT_FLAG] = "", [OPT_INT] = "N", [OPT_SIZE] = "BYTES",
		[OPT_STRING] = "STR", [OPT_CHOICE] = "NAME", [OPT_LIST] = "STR",
		[OPT_INCLUDE] = "",
	};

	return o->metavar ? o->metavar : def[o->kind];
}

static void left_column(const struct opt *o, char *buf, size_t len)
{
	char sh[8] = "    ";

	if (o->short_name)
		snprintf(sh, sizeof(sh), "-%c, ", o->short_name);
	put(buf, len, "%*s%s--%s%s%s", HELP_INDENT, "", sh, o->name,
	    o->kind == OPT_FLAG ? "" : "=", metavar(o));
}

/* The default shown in help: the destination's value before parsing. */
static void default_text(const struct opt *o, char *buf, size_t len)
{
	long long v;
	uint64_t s;

	buf[0] = '\0';
	switch (o->kind) {
	case OPT_INT:
		v = *(const long long *)o->dest;
		if (v >= o->min && v <= o->max)
			put(buf, len, "%lld", v);
		break;
	case OPT_SIZE:
		s = *(const uint64_t *)o->dest;
		if (s >= (uint64_t)o->min && s <= (uint64_t)o->max)
			opts_format_size(s, buf, len);
		break;
	case OPT_STRING:
	case OPT_CHOICE:
		if (*(const char *const *)o->dest)
			put(buf, len, "%s", *(const char *const *)o->dest);
		break;
	case OPT_FLAG:
	case OPT_LIST:
	case OPT_INCLUDE:
		break;
	}
}

void opts_help_text(const struct opt *o, char *buf, size_t len)
{
	char tmp[256], def[64];

	put(buf, len, "%s", o->help ? o->help : "");
	default_text(o, def, sizeof(def));
	if (o->kind == OPT_CHOICE) {
		list_choices(o->choices, tmp, sizeof(tmp));
		append(buf, len, " (one of: %s%s%s)", tmp, def[0] ? "; default: " : "",
		       def);
	} else if (def[0]) {
		append(buf, len, " (default: %s)", def);
	}
}

/* Write @text word-wrapped, continuation lines starting at column @col. */
static void print_wrapped(FILE *f, const char *text, int col, int start)
{
	int at = start;

	while (*text) {
		int w = (int)strcspn(text, " ");

		if (at > col && at + 1 + w > HELP_WIDTH) {
			fprintf(f, "\n%*s", col, "");
			at = col;
		} else if (at > col) {
			fputc(' ', f);
			at++;
		}
		fprintf(f, "%.*s", w, text);
		at += w;
		text += w;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

static void print_entry(FILE *f, const char *left, const char *help, int col)
{
	int n = (int)strlen(left);

	fputs(left, f);
	if (n + 2 > col) {
		fprintf(f, "\n%*s", col, "");
		n = col;
	} else {
		fprintf(f, "%*s", col - n, "");
		n = col;
	}
	print_wrapped(f, help, col, n);
}

void opts_print_help(const struct opt *t, FILE *f)
{
	static const struct opt help = {
		"help", 'h', OPT_FLAG, NULL, 0, 0, NULL, NULL, "show this help and exit",
	};
	struct opt table[OPTS_MAX_ROWS];
	const struct opt *o;
	char left[96], text[640];
	int col = HELP_INDENT + (int)strlen("-h, --help") + 2;

	if (opts_flatten(t, table, OPTS_MAX_ROWS, text, sizeof(text)) < 0) {
		fprintf(f, "%s\n", text);
		return;
	}
	for (o = table; o->name; o++) {
		if (!o->help)
			continue;
		left_column(o, left, sizeof(left));
		if ((int)strlen(left) + 2 > col && (int)strlen(left) + 2 <= HELP_MAX_LEFT)
			col = (int)strlen(left) + 2;
	}
	for (o = table; o->name; o++) {
		if (!o->help)
			continue;
		left_column(o, left, sizeof(left));
		opts_help_text(o, text, sizeof(text));
		print_entry(f, left, text, col);
	}
	left_column(&help, left, sizeof(left));
	print_entry(f, left, help.help, col);
}

/* A section heading and its text, each line indented. */
static void print_section(FILE *f, const char *title, const char *text)
{
	if (!text)
		return;
	fprintf(f, "%s\n", title);
	while (*text) {
		size_t n = strcspn(text, "\n");

		if (n)
			fprintf(f, "%*s%.*s", HELP_INDENT, "", (int)n, text);
		fputc('\n', f);
		text += n;
		if (*text)
			text++;
	}
	fputc('\n', f);
}

void opts_print_page(const struct opts_page *page, const struct opt *table,
		     FILE *f)
{
	print_section(f, "NAME", page->name);
	print_section(f, "SYNOPSIS", page->synopsis);
	print_section(f, "DESCRIPTION", page->description);
	print_section(f, "COMMANDS", page->commands);
	fputs("OPTIONS\n", f);
	opts_print_help(table, f);
	fputc('\n', f);
	print_section(f, "EXIT STATUS", page->exit_status);
	print_section(f, "EXAMPLES", hint_examples(page->examples));
	print_section(f, "SEE ALSO", page->see_also);
}
