// SPDX-License-Identifier: MIT
/* rdmx bench: argument parsing and rate arithmetic (no I/O; unit-tested). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "opts.h"

static int __attribute__((format(printf, 3, 4)))
perr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* One size of a list: "4K"; @item is NUL-terminated. */
static int parse_one(const char *item, uint64_t *v, char *err, size_t len)
{
	if (!*item)
		return perr(err, len, "empty entry");
	if (opts_parse_size(item, v))
		return perr(err, len, "'%s' is not a size (e.g. 64, 4K, 1M)", item);
	if (*v < 1 || *v > BENCH_MAX_SIZE)
		return perr(err, len, "'%s' is out of range (1 to 1G)", item);
	return 0;
}

static int push(uint64_t v, uint64_t *out, int max, int *n, char *err, size_t len)
{
	if (*n >= max)
		return perr(err, len, "more than %d sizes", max);
	out[(*n)++] = v;
	return 0;
}

/* "A..B": A, then every power of two above A up to B, then B. */
static int parse_range(char *item, char *dots, uint64_t *out, int max, int *n,
		       char *err, size_t len)
{
	uint64_t a, b, p;

	*dots = '\0';
	if (parse_one(item, &a, err, len) || parse_one(dots + 2, &b, err, len))
		return -1;
	if (a > b)
		return perr(err, len, "range %s..%s goes down", item, dots + 2);
	if (push(a, out, max, n, err, len))
		return -1;
	for (p = 1; p <= b; p <<= 1)
		if (p > a && p < b && push(p, out, max, n, err, len))
			return -1;
	return b > a ? push(b, out, max, n, err, len) : 0;
}

int bench_parse_sizes(const char *s, uint64_t *out, int max, int *n,
		      char *err, size_t err_len)
{
	char buf[512], *item, *save = NULL, *dots;
	char why[200];
	uint64_t v;

	*n = 0;
	if (!s || !*s || strlen(s) >= sizeof(buf))
		return perr(err, err_len, "--size: expected a list like 8,64,4K or 8..1M");
	if (s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
		return perr(err, err_len, "--size '%s': empty entry", s);
	strcpy(buf, s);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		dots = strstr(item, "..");
		if (dots ? parse_range(item, dots, out, max, n, why, sizeof(why)) :
		    parse_one(item, &v, why, sizeof(why)) ||
		    push(v, out, max, n, why, sizeof(why)))
			return perr(err, err_len, "--size '%s': %s", s, why);
	}
	return 0;
}

static bool known(const char *name, const char *const *names)
{
	for (; names && *names; names++)
		if (!strcmp(*names, name))
			return true;
	return !strcmp(name, BENCH_TCP);
}

static int add_proto(const char *name, const char *const *names,
		     const char **out, int max, int *n)
{
	const char *const *p;
	int i;

	for (i = 0; i < *n; i++)
		if (!strcmp(out[i], name))
			return 0; /* listed twice: run once */
	if (*n >= max)
		return -1;
	for (p = names; p && *p; p++)
		if (!strcmp(*p, name)) {
			out[(*n)++] = *p;
			return 0;
		}
	out[(*n)++] = BENCH_TCP;
	return 0;
}

static void list_names(const char *const *names, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (; names && *names && off < len; names++)
		off += (size_t)snprintf(buf + off, len - off, "%s, ", *names);
	if (off < len)
		snprintf(buf + off, len - off, "tcp, all");
}

int bench_parse_protocols(const char *s, const char *const *names,
			  const char **out, int max, int *n,
			  char *err, size_t err_len)
{
	char buf[512], list[400], *item, *save = NULL;
	const char *const *p;

	*n = 0;
	list_names(names, list, sizeof(list));
	if (!s || !*s || strlen(s) >= sizeof(buf) || s[strlen(s) - 1] == ',')
		return perr(err, err_len, "--protocol: expected one of %s", list);
	strcpy(buf, s);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (!strcmp(item, "all")) {
			for (p = names; p && *p; p++)
				if (add_proto(*p, names, out, max, n))
					return perr(err, err_len, "--protocol: too many");
			if (add_proto(BENCH_TCP, names, out, max, n))
				return perr(err, err_len, "--protocol: too many");
			continue;
		}
		if (!known(item, names))
			return perr(err, err_len, "--protocol: unknown protocol '%s' "
				    "(known: %s)", item, list);
		if (add_proto(item, names, out, max, n))
			return perr(err, err_len, "--protocol: too many");
	}
	return *n ? 0 : perr(err, err_len, "--protocol: expected one of %s", list);
}

int bench_parse_duration(const char *s, uint64_t *ns)
{
	char *end;
	double v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || (*end && strcmp(end, "s")))
		return -1;
	if (!(v > 0) || v > 86400)
		return -1;
	*ns = (uint64_t)(v * 1e9);
	return *ns ? 0 : -1;
}

int bench_parse_mode(const char *s)
{
	if (!s)
		return -1;
	if (!strcmp(s, "lat"))
		return BENCH_LAT;
	if (!strcmp(s, "bw"))
		return BENCH_BW;
	if (!strcmp(s, "both"))
		return BENCH_LAT | BENCH_BW;
	return -1;
}

int bench_conn_sweep(int threads, int *out, int max)
{
	int n = 0, c;

	for (c = 1; c < threads && n < max - 1; c <<= 1)
		out[n++] = c;
	if (n < max)
		out[n++] = threads;
	return n;
}

double bench_jain(const double *x, int n)
{
	double s = 0, s2 = 0;
	int i;

	for (i = 0; i < n; i++) {
		s += x[i];
		s2 += x[i] * x[i];
	}
	return n && s2 > 0 ? s * s / ((double)n * s2) : NAN;
}

void bench_range(const double *x, int n, double *lo, double *hi)
{
	int i;

	*lo = *hi = x[0];
	for (i = 1; i < n; i++) {
		*lo = fmin(*lo, x[i]);
		*hi = fmax(*hi, x[i]);
	}
}

double bench_msg_rate(uint64_t msgs, uint64_t ns)
{
	return ns ? (double)msgs * 1e9 / (double)ns : 0;
}

double bench_gbps(uint64_t msgs, uint64_t size, uint64_t ns)
{
	return ns ? (double)msgs * (double)size * 8.0 / (double)ns : 0;
}

double bench_pct(uint64_t cpu_ns, uint64_t wall_ns)
{
	return wall_ns ? 100.0 * (double)cpu_ns / (double)wall_ns : 0;
}

uint64_t bench_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

const char *bench_timestamp(char *buf, size_t len)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}
