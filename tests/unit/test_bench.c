/* SPDX-License-Identifier: MIT */
/* rdmx bench: argument parsing, rate arithmetic, and the JSON/CSV writers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench.h"

static const char *const names[] = { "send_recv", "read", "write_simplex", NULL };

/* ------------------------------------------------------------- sizes */

static int sizes(const char *s, uint64_t *out, int *n, char *err)
{
	return bench_parse_sizes(s, out, BENCH_MAX_SIZES, n, err, 256);
}

static void test_sizes_list(void **state)
{
	uint64_t v[BENCH_MAX_SIZES];
	char err[256];
	int n;

	(void)state;
	assert_int_equal(sizes("8,64,4K,1M", v, &n, err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(v[0], 8);
	assert_int_equal(v[1], 64);
	assert_int_equal(v[2], 4096);
	assert_int_equal(v[3], 1048576);
	assert_int_equal(sizes("1", v, &n, err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0], 1);
	assert_int_equal(sizes("1G", v, &n, err), 0);
	assert_int_equal(v[0], 1ull << 30);
}

static void test_sizes_range(void **state)
{
	uint64_t v[BENCH_MAX_SIZES];
	char err[256];
	int n;

	(void)state;
	assert_int_equal(sizes("8..64", v, &n, err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(v[0], 8);
	assert_int_equal(v[1], 16);
	assert_int_equal(v[2], 32);
	assert_int_equal(v[3], 64);
	assert_int_equal(sizes("5..20,100", v, &n, err), 0); /* ends kept */
	assert_int_equal(n, 5);
	assert_int_equal(v[0], 5);
	assert_int_equal(v[1], 8);
	assert_int_equal(v[2], 16);
	assert_int_equal(v[3], 20);
	assert_int_equal(v[4], 100);
	assert_int_equal(sizes("4K..4K", v, &n, err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(sizes("1..1G", v, &n, err), 0);
	assert_int_equal(n, 31);
}

static void test_sizes_bad(void **state)
{
	static const char *const bad[] = {
		"", ",", "8,", ",8", "8,,64", "abc", "0", "2G", "64..8", "8..",
		"..8", "-1", "4X", "8..64..128",
	};
	uint64_t v[BENCH_MAX_SIZES];
	char err[256];
	size_t i;
	int n;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(sizes(bad[i], v, &n, err), -1);
		assert_non_null(strstr(err, "--size"));
	}
	assert_int_equal(bench_parse_sizes("1..1G", v, 4, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 4"));
	assert_int_equal(sizes("2G", v, &n, err), -1);
	assert_non_null(strstr(err, "out of range"));
}

/* --------------------------------------------------------- protocols */

static void test_protocols(void **state)
{
	const char *out[BENCH_MAX_PROTOS];
	char err[512];
	int n;

	(void)state;
	assert_int_equal(bench_parse_protocols("all", names, out, BENCH_MAX_PROTOS,
					       &n, err, sizeof(err)), 0);
	assert_int_equal(n, 4);
	assert_string_equal(out[0], "send_recv");
	assert_string_equal(out[2], "write_simplex");
	assert_string_equal(out[3], "tcp");
	assert_int_equal(bench_parse_protocols("tcp,read,tcp", names, out,
					       BENCH_MAX_PROTOS, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2); /* each once */
	assert_string_equal(out[0], "tcp");
	assert_string_equal(out[1], "read");
	assert_ptr_equal(out[1], names[1]); /* points into the table */
}

static void test_protocols_bad(void **state)
{
	const char *out[BENCH_MAX_PROTOS];
	char err[512];
	int n;

	(void)state;
	assert_int_equal(bench_parse_protocols("nope", names, out, BENCH_MAX_PROTOS,
					       &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown protocol 'nope'"));
	assert_non_null(strstr(err, "write_simplex"));
	assert_int_equal(bench_parse_protocols("", names, out, BENCH_MAX_PROTOS,
					       &n, err, sizeof(err)), -1);
	assert_int_equal(bench_parse_protocols("read,", names, out, BENCH_MAX_PROTOS,
					       &n, err, sizeof(err)), -1);
	assert_int_equal(bench_parse_protocols("all", names, out, 2, &n, err,
					       sizeof(err)), -1);
}

/* ------------------------------------------------- duration, mode, sweep */

static void test_duration_mode_sweep(void **state)
{
	int c[16], n;
	uint64_t ns;

	(void)state;
	assert_int_equal(bench_parse_duration("2", &ns), 0);
	assert_int_equal(ns, 2000000000ull);
	assert_int_equal(bench_parse_duration("0.5s", &ns), 0);
	assert_int_equal(ns, 500000000ull);
	assert_int_equal(bench_parse_duration("0", &ns), -1);
	assert_int_equal(bench_parse_duration("-1", &ns), -1);
	assert_int_equal(bench_parse_duration("2x", &ns), -1);
	assert_int_equal(bench_parse_duration("nan", &ns), -1);
	assert_int_equal(bench_parse_duration("100000", &ns), -1);
	assert_int_equal(bench_parse_mode("lat"), BENCH_LAT);
	assert_int_equal(bench_parse_mode("bw"), BENCH_BW);
	assert_int_equal(bench_parse_mode("both"), BENCH_LAT | BENCH_BW);
	assert_int_equal(bench_parse_mode("x"), -1);
	n = bench_conn_sweep(1, c, 16);
	assert_int_equal(n, 1);
	assert_int_equal(c[0], 1);
	n = bench_conn_sweep(6, c, 16);
	assert_int_equal(n, 4);
	assert_int_equal(c[2], 4);
	assert_int_equal(c[3], 6);
	n = bench_conn_sweep(8, c, 16);
	assert_int_equal(n, 4);
	assert_int_equal(c[3], 8);
}

static void test_rates(void **state)
{
	(void)state;
	assert_true(bench_msg_rate(1000, 1000000000ull) == 1000.0);
	assert_true(bench_msg_rate(5, 0) == 0.0);
	/* 1000 messages of 1250 bytes in 1 ms: 10 Gb/s */
	assert_true(bench_gbps(1000, 1250, 1000000) == 10.0);
	assert_true(bench_gbps(1, 1, 0) == 0.0);
	assert_true(bench_pct(250, 1000) == 25.0);
	assert_true(bench_pct(1, 0) == 0.0);
}

/* Jain's fairness index: 1 when even, 1/n when one value has it all. */
static void test_jain_range(void **state)
{
	const double even[] = { 5, 5, 5, 5 }, one[] = { 0, 8, 0, 0 };
	const double some[] = { 900, 1100, 700 };
	double lo, hi;

	(void)state;
	assert_true(fabs(bench_jain(even, 4) - 1.0) < 1e-12);
	assert_true(fabs(bench_jain(one, 4) - 0.25) < 1e-12);
	/* 2700^2 / (3 (810000 + 1210000 + 490000)) */
	assert_true(fabs(bench_jain(some, 3) - 2700.0 * 2700 / (3 * 2510000.0)) < 1e-12);
	assert_true(isnan(bench_jain(one, 0)));
	assert_true(isnan(bench_jain((const double[]){ 0, 0 }, 2)));
	bench_range(some, 3, &lo, &hi);
	assert_true(lo == 700 && hi == 1100);
	bench_range(even, 1, &lo, &hi);
	assert_true(lo == 5 && hi == 5);
}

/* ------------------------------------------------------------ writers */

/* A minimal JSON syntax checker: 0 if @s is exactly one valid value. */
static const char *jv(const char *s);

static const char *ws(const char *s)
{
	while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
		s++;
	return s;
}

static const char *jstr(const char *s)
{
	if (*s++ != '"')
		return NULL;
	for (; *s && *s != '"'; s++) {
		if ((unsigned char)*s < 0x20)
			return NULL;
		if (*s == '\\' && !*++s)
			return NULL;
	}
	return *s == '"' ? s + 1 : NULL;
}

static const char *jnum(const char *s)
{
	char *end;

	strtod(s, &end);
	if (end == s || !strchr("-0123456789", *s) || strstr(s, "inf") == s ||
	    strstr(s, "nan") == s)
		return NULL;
	return end;
}

static const char *jlist(const char *s, char close, bool obj)
{
	s = ws(s + 1);
	if (*s == close)
		return s + 1;
	for (;;) {
		if (obj) {
			s = jstr(ws(s));
			if (!s || *(s = ws(s)) != ':')
				return NULL;
			s++;
		}
		s = jv(s);
		if (!s)
			return NULL;
		s = ws(s);
		if (*s == close)
			return s + 1;
		if (*s++ != ',')
			return NULL;
	}
}

static const char *jv(const char *s)
{
	s = ws(s);
	if (*s == '{')
		return jlist(s, '}', true);
	if (*s == '[')
		return jlist(s, ']', false);
	if (*s == '"')
		return jstr(s);
	if (!strncmp(s, "true", 4) || !strncmp(s, "null", 4))
		return s + 4;
	if (!strncmp(s, "false", 5))
		return s + 5;
	return jnum(s);
}

static bool json_valid(const char *s)
{
	s = jv(s);
	return s && !*ws(s);
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)); s++)
		n++;
	return n;
}

static char *write_mem(const struct bench_report *r,
		       int (*fn)(const struct bench_report *, FILE *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(fn(r, f), 0);
	fclose(f);
	return buf;
}

struct fixture {
	struct bench_report rep;
	struct bench_result res[2];
	struct hist h;
};

static void make_report(struct fixture *fx)
{
	uint64_t i;

	memset(fx, 0, sizeof(*fx));
	hist_init(&fx->h);
	for (i = 1; i <= 1000; i++)
		hist_record(&fx->h, i * 1000); /* 1 .. 1000 us */
	fx->res[0] = (struct bench_result){ .protocol = "send_recv", .mode = BENCH_LAT,
		.size = 1ull << 30, .conns = 1, .msgs = 1000, .warmup = 10,
		.wall_ns = 500000000, .rtt = &fx->h };
	fx->res[1] = (struct bench_result){ .protocol = "tcp", .mode = BENCH_BW,
		.size = 4096, .conns = 2, .msgs = 2000, .wall_ns = 1000000000,
		.msg_rate = 2000, .gbps = bench_gbps(2000, 4096, 1000000000),
		.thread_rate = { 900, 1100 }, .conn_min = 900, .conn_max = 1100,
		.jain = 0.99, .single_receiver = true,
		.client = { 250000000, 250000000 }, .server = { 100000000, 0 } };
	fx->res[0].msg_rate = bench_msg_rate(1000, fx->res[0].wall_ns);
	fx->rep = (struct bench_report){ .timestamp = "2026-01-02T03:04:05Z",
		.device = "rxe\"0\\", .fabric = "verbs", .peer = "self-test",
		.outstanding = 16, .n_results = 2, .results = fx->res, .n_protos = 2,
		.protos = { "send_recv", "tcp" } };
	fx->rep.counters[0].n = 1;
	strcpy(fx->rep.counters[0].name[0], "rcvd_pkts");
	fx->rep.counters[0].value[0] = 1234;
}

static void test_json(void **state)
{
	struct fixture fx;
	char *s, *p;
	double p50;

	(void)state;
	make_report(&fx);
	s = write_mem(&fx.rep, bench_write_json);
	assert_true(json_valid(s));
	assert_int_equal(count(s, "\"protocol\": "), 2);
	assert_non_null(strstr(s, "\"device\": \"rxe\\\"0\\\\\"")); /* escaped */
	p = strstr(s, "\"p50\": ");
	assert_non_null(p);
	p50 = strtod(p + 7, NULL);
	assert_true(p50 > 498 && p50 < 502); /* 500 us within the hist's 0.4% */
	assert_non_null(strstr(s, "\"rcvd_pkts\": 1234"));
	assert_non_null(strstr(s, "\"size\": 1073741824,")); /* exact */
	assert_non_null(strstr(s, "\"per_conn_msg_rate\": [900, 1100], "
				  "\"per_conn_min\": 900, \"per_conn_max\": 1100, \"jain\": 0.99"));
	assert_int_equal(count(s, "\"single_receiver\": true"), 1);
	assert_int_equal(count(s, "\"single_receiver\": false"), 1);
	assert_non_null(strstr(s, "\"client_pct\": 50"));
	assert_int_equal(count(s, "\"one_way_us\""), 1); /* latency rows only */
	assert_non_null(strstr(s, "\"size\": 4096, \"conns\": 2"));
	/* the checker itself rejects broken documents */
	assert_false(json_valid("{\"a\": 1,}"));
	assert_false(json_valid("{\"a\": inf}"));
	assert_false(json_valid("[1 2]"));
	free(s);
}

/* No inf or nan in JSON: they are null, not a made-up 0; the provenance
 * fields and the config object are there when given. */
static void test_json_null_provenance(void **state)
{
	struct fixture fx;
	char *s;

	(void)state;
	make_report(&fx);
	fx.res[1].msg_rate = NAN;
	fx.res[1].gbps = INFINITY;
	fx.rep.version = "9.9";
	fx.rep.cmdline = "rdmx bench --json \"x\"";
	fx.rep.host = "h";
	fx.rep.kernel = "Linux 6";
	fx.rep.config_json = "{\"iters\": 5}";
	s = write_mem(&fx.rep, bench_write_json);
	assert_true(json_valid(s));
	assert_non_null(strstr(s, "\"msg_rate\": null, \"gbps\": null"));
	assert_non_null(strstr(s, "\"rdmx_version\": \"9.9\""));
	assert_non_null(strstr(s, "\"command_line\": \"rdmx bench --json \\\"x\\\"\""));
	assert_non_null(strstr(s, "\"kernel\": \"Linux 6\""));
	assert_non_null(strstr(s, "\"config\": {\"iters\": 5}"));
	free(s);
}

static int csv_fields(const char *line, size_t len)
{
	int n = 1;
	size_t i;

	for (i = 0; i < len; i++)
		n += line[i] == ',';
	return n;
}

static void test_csv(void **state)
{
	char *s, *line, *nl, proto[32], mode[8];
	unsigned long long size, msgs;
	struct fixture fx;
	int lines = 0, cols = 0;

	(void)state;
	make_report(&fx);
	fx.rep.device = "rxe0";
	s = write_mem(&fx.rep, bench_write_csv);
	for (line = s; (nl = strchr(line, '\n')); line = nl + 1, lines++) {
		if (!lines)
			cols = csv_fields(line, (size_t)(nl - line));
		else
			assert_int_equal(csv_fields(line, (size_t)(nl - line)), cols);
	}
	assert_int_equal(lines, 3);
	assert_int_equal(cols, 32); /* ... batch, coalesce, sendv */
	line = strchr(s, '\n') + 1;
	assert_int_equal(sscanf(line, "2026-01-02T03:04:05Z,rxe0,verbs,%31[^,],%7[^,],%llu,1,%llu,",
				proto, mode, &size, &msgs), 4);
	assert_string_equal(proto, "send_recv");
	assert_string_equal(mode, "lat");
	assert_int_equal(size, 1ull << 30);
	assert_int_equal(msgs, 1000);
	line = strchr(line, '\n') + 1;
	assert_non_null(strstr(line, ",tcp,bw,4096,2,2000,0,1.000000000,2000.000,0.065536,"
			       ",,,,,,,,,25.0,25.0,10.0,0.0,1,900.000,1100.000,0.9900,1,default,0\n"));
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_list),
		cmocka_unit_test(test_sizes_range),
		cmocka_unit_test(test_sizes_bad),
		cmocka_unit_test(test_protocols),
		cmocka_unit_test(test_protocols_bad),
		cmocka_unit_test(test_duration_mode_sweep),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_jain_range),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_json_null_provenance),
		cmocka_unit_test(test_csv),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
