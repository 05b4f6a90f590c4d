// SPDX-License-Identifier: MIT
/*
 * A small JSON reader for --baseline: it walks the document once and hands
 * every scalar to a callback with its path, which is all a flat table of
 * result rows needs (no tree, no allocation). Strings keep their escapes
 * except \" and \\ (the names rdmx bench writes are plain identifiers).
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gate.h"

#define JSON_MAX_DEPTH	32
#define JSON_MAX_PATH	256
#define JSON_MAX_STR	256

struct jr {
	const char *s, *p;
	bench_json_fn fn;
	void *arg;
	int depth;
	char path[JSON_MAX_PATH];
	char *err;
	size_t err_len;
};

static int __attribute__((format(printf, 2, 3))) jr_fail(struct jr *j,
							  const char *fmt, ...)
{
	char what[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(j->err, j->err_len, "offset %td: %s", j->p - j->s, what);
	return -1;
}

static void skip_ws(struct jr *j)
{
	while (isspace((unsigned char)*j->p))
		j->p++;
}

/* A string into @buf (truncated at JSON_MAX_STR - 1); *p after the quote. */
static int read_string(struct jr *j, char *buf)
{
	size_t n = 0;

	if (*j->p != '"')
		return jr_fail(j, "expected a string");
	for (j->p++; *j->p && *j->p != '"'; j->p++) {
		if (*j->p == '\\' && j->p[1])
			j->p++;
		if (n + 1 < JSON_MAX_STR)
			buf[n++] = *j->p;
	}
	if (*j->p != '"')
		return jr_fail(j, "unterminated string");
	j->p++;
	buf[n] = '\0';
	return 0;
}

static int read_value(struct jr *j);

/* Append ".key" to the path for one member; restored by the caller. */
static int push_path(struct jr *j, const char *key)
{
	size_t n = strlen(j->path);

	if (n + strlen(key) + 2 >= sizeof(j->path))
		return jr_fail(j, "path too long");
	snprintf(j->path + n, sizeof(j->path) - n, "%s%s", n ? "." : "", key);
	return 0;
}

static int read_member(struct jr *j, const char *key)
{
	size_t n = strlen(j->path);
	int rc;

	if (push_path(j, key))
		return -1;
	rc = read_value(j);
	j->path[n] = '\0';
	return rc;
}

/* The members of an object or the elements of an array, after its bracket. */
static int read_container(struct jr *j, bool object)
{
	char key[JSON_MAX_STR];
	int i;

	skip_ws(j);
	if (*j->p == (object ? '}' : ']')) {
		j->p++;
		return 0;
	}
	for (i = 0;; i++) {
		skip_ws(j);
		if (object && (read_string(j, key) || (skip_ws(j), *j->p != ':')))
			return jr_fail(j, "expected \"key\":");
		if (object)
			j->p++;
		if (!object)
			snprintf(key, sizeof(key), "%d", i);
		if (read_member(j, key))
			return -1;
		skip_ws(j);
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p == (object ? '}' : ']')) {
			j->p++;
			return 0;
		}
		return jr_fail(j, "expected ',' or '%c'", object ? '}' : ']');
	}
}

static int read_literal(struct jr *j)
{
	static const struct { const char *word; double v; } lit[] = {
		{ "true", 1 }, { "false", 0 }, { "null", NAN },
	};
	char *end;
	double v;
	size_t i;

	for (i = 0; i < sizeof(lit) / sizeof(lit[0]); i++) {
		if (!strncmp(j->p, lit[i].word, strlen(lit[i].word))) {
			j->p += strlen(lit[i].word);
			j->fn(j->arg, j->path, NULL, lit[i].v);
			return 0;
		}
	}
	v = strtod(j->p, &end);
	if (end == j->p || !(isdigit((unsigned char)*j->p) || *j->p == '-'))
		return jr_fail(j, "expected a value");
	j->p = end;
	j->fn(j->arg, j->path, NULL, v);
	return 0;
}

static int read_value(struct jr *j)
{
	char str[JSON_MAX_STR];
	int rc;

	skip_ws(j);
	if (*j->p == '{' || *j->p == '[') {
		if (++j->depth > JSON_MAX_DEPTH)
			return jr_fail(j, "nested too deeply");
		rc = read_container(j, *j->p++ == '{');
		j->depth--;
		return rc;
	}
	if (*j->p == '"') {
		if (read_string(j, str))
			return -1;
		j->fn(j->arg, j->path, str, 0);
		return 0;
	}
	return read_literal(j);
}

int bench_json_scan(const char *s, bench_json_fn fn, void *arg,
		    char *err, size_t len)
{
	struct jr j = { .s = s, .p = s, .fn = fn, .arg = arg, .err = err,
			.err_len = len };

	if (read_value(&j))
		return -1;
	skip_ws(&j);
	if (*j.p)
		return jr_fail(&j, "text after the document");
	return 0;
}
