/* SPDX-License-Identifier: MIT */
/* rdmx bench as a CI gate: --fail-if parsing and checking, --baseline. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_gate.h"
#include "bench_pre.h"

static const char *const protos[] = { "send_recv", "write_simplex", "tcp" };

static int parse(const char *s, struct bench_gate *g, char *err)
{
	return bench_gate_parse(s, protos, 3, g, err, 256);
}

static void expect_bad(const char *s, const char *msg)
{
	struct bench_gate g;
	char err[256] = "";

	assert_int_equal(parse(s, &g, err), -1);
	if (!strstr(err, msg))
		fail_msg("'%s': error '%s' does not contain '%s'", s, err, msg);
}

static void test_parse_good(void **state)
{
	struct bench_gate g;
	char err[256], name[32];

	(void)state;
	assert_int_equal(parse("send_recv:64:p99>20us", &g, err), 0);
	assert_string_equal(g.protocol, "send_recv");
	assert_int_equal(g.size, 64);
	assert_true(g.greater);
	assert_false(g.or_equal);
	assert_true(fabs(g.limit - 20) < 1e-9);
	assert_string_equal(bench_metric_name(&g.metric, name, sizeof(name)), "rtt_us.p99");
	assert_int_equal(bench_gate_mode(&g), BENCH_LAT);

	assert_int_equal(parse("write_simplex:4K:msg_s<50K", &g, err), 0);
	assert_int_equal(g.size, 4096);
	assert_false(g.greater);
	assert_true(fabs(g.limit - 50000) < 1e-9);
	assert_int_equal(bench_gate_mode(&g), BENCH_BW);

	assert_int_equal(parse("*:*:one_way_us.p50>=1.5ms", &g, err), 0);
	assert_string_equal(g.protocol, "");
	assert_int_equal(g.size, 0);
	assert_true(g.or_equal);
	assert_true(g.metric.one_way);
	assert_true(fabs(g.limit - 1500) < 1e-9);

	assert_int_equal(parse("tcp:1M:rtt_us.p99_9>800ns", &g, err), 0);
	assert_true(fabs(g.limit - 0.8) < 1e-9);
	assert_int_equal(parse("tcp:8:gbps<2.5", &g, err), 0);
	assert_int_equal(g.metric.kind, GATE_GBPS);
	assert_int_equal(parse("tcp:8:msg_rate<1.5M", &g, err), 0);
	assert_true(fabs(g.limit - 1.5e6) < 1e-3);
}

static void test_parse_bad(void **state)
{
	(void)state;
	expect_bad("send_recv:64", "expected PROTO:SIZE:METRIC");
	expect_bad("nope:64:p99>1", "protocol 'nope'");
	expect_bad("send_recv:4Q:p99>1", "size '4Q'");
	expect_bad("send_recv:0:p99>1", "size '0'");
	expect_bad("send_recv:64:p98>1", "'p98' is not a metric");
	expect_bad("send_recv:64:p99=1", "no comparison");
	expect_bad("send_recv:64:p99>20xs", "'20xs' is not a limit");
	expect_bad("send_recv:64:p99>", "'' is not a limit");
	expect_bad("send_recv:64:p99>-1", "'-1' is not a limit");
	expect_bad("send_recv:64:msg_s<5us", "'5us' is not a limit: a rate");
	expect_bad("send_recv:64:gbps<5K", "'5K' is not a limit: Gb/s");
}

/* A report of one lat row (every rtt 10 us) and one bw row (1000 msg/s). */
struct two_rows {
	struct hist h;
	struct bench_result rows[2];
	struct bench_report rep;
};

static void two_rows(struct two_rows *t)
{
	int i;

	memset(t, 0, sizeof(*t));
	hist_init(&t->h);
	for (i = 0; i < 100; i++)
		hist_record(&t->h, 10000);
	t->rows[0] = (struct bench_result){ .protocol = "send_recv", .mode = BENCH_LAT,
					    .size = 64, .conns = 1, .rtt = &t->h };
	t->rows[1] = (struct bench_result){ .protocol = "send_recv", .mode = BENCH_BW,
					    .size = 64, .conns = 1, .msg_rate = 1000 };
	t->rep = (struct bench_report){ .n_results = 2, .results = t->rows };
}

static int check(const char *expr, const struct bench_report *r, char *out,
		 size_t len)
{
	struct bench_gate g;
	char err[256];
	FILE *f = fmemopen(out, len, "w");
	int bad;

	assert_non_null(f);
	assert_int_equal(parse(expr, &g, err), 0);
	bad = bench_gate_check(&g, 1, r, f);
	fclose(f);
	return bad;
}

static void test_check(void **state)
{
	struct two_rows *t = malloc(sizeof(*t));
	char out[512];

	(void)state;
	assert_non_null(t);
	two_rows(t);
	assert_int_equal(check("send_recv:64:p99>20us", &t->rep, out, sizeof(out)), 0);
	assert_int_equal(check("send_recv:64:p99>5us", &t->rep, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "send_recv 64 lat conns 1"));
	assert_int_equal(check("*:*:one_way_us.p50>4us", &t->rep, out, sizeof(out)), 1);
	assert_int_equal(check("*:*:one_way_us.p50>6us", &t->rep, out, sizeof(out)), 0);
	assert_int_equal(check("*:64:msg_s<1K", &t->rep, out, sizeof(out)), 0);
	assert_int_equal(check("*:64:msg_s<=1K", &t->rep, out, sizeof(out)), 1);
	assert_int_equal(check("*:64:msg_s<2K", &t->rep, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "bw conns 1: msg_rate = 1000"));
	/* a gate matching no row fails: it would pass vacuously otherwise */
	assert_int_equal(check("tcp:64:p99>1s", &t->rep, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "no result row"));
	free(t);
}

static void collect(void *arg, const char *path, const char *str, double num)
{
	char *buf = arg;
	size_t n = strlen(buf);

	if (str)
		snprintf(buf + n, 512 - n, "%s=%s;", path, str);
	else if (isnan(num))
		snprintf(buf + n, 512 - n, "%s=null;", path);
	else
		snprintf(buf + n, 512 - n, "%s=%g;", path, num);
}

static void test_json_scan(void **state)
{
	char out[512] = "", err[128];

	(void)state;
	assert_int_equal(bench_json_scan("{\"a\": [1, {\"b\": \"x\\\"y\"}], \"c\": null,"
					 " \"d\": true, \"e\": -2.5e3}",
					 collect, out, err, sizeof(err)), 0);
	assert_string_equal(out, "a.0=1;a.1.b=x\"y;c=null;d=1;e=-2500;");
	assert_int_equal(bench_json_scan("{\"a\": [1,}", collect, out, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "offset 9"));
	assert_int_equal(bench_json_scan("{\"a\" 1}", collect, out, err, sizeof(err)), -1);
	assert_int_equal(bench_json_scan("{\"a\": \"open", collect, out, err, sizeof(err)), -1);
	assert_int_equal(bench_json_scan("{} x", collect, out, err, sizeof(err)), -1);
	assert_int_equal(bench_json_scan("{\"a\":", collect, out, err, sizeof(err)), -1);
	assert_int_equal(bench_json_scan("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
					 collect, out, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nested"));
}

static void ignore(void *arg, const char *path, const char *str, double num)
{
	(void)arg;
	(void)path;
	(void)str;
	(void)num;
}

/* Every truncation of a document is refused, read within its bytes (each
 * prefix is its own allocation, so ASan sees a read past it). */
static void test_json_truncated(void **state)
{
	static const char doc[] = "{\"results\": [{\"protocol\": \"a\\\"b\", "
		"\"size\": 64, \"x\": [true, false, null, -1.5e3]}], \"k\": {}}";
	char err[128], *p;
	size_t n;

	(void)state;
	assert_int_equal(bench_json_scan(doc, ignore, NULL, err, sizeof(err)), 0);
	for (n = 0; n < sizeof(doc) - 1; n++) {
		p = strndup(doc, n);
		assert_non_null(p);
		if (bench_json_scan(p, ignore, NULL, err, sizeof(err)) != -1)
			fail_msg("the prefix of %zu bytes was accepted", n);
		free(p);
	}
}

static const char *write_tmp(const char *text)
{
	static char path[] = "/tmp/test_bench_gate.XXXXXX";
	int fd;

	strcpy(path, "/tmp/test_bench_gate.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static int baseline(const char *json, double pct, const struct bench_report *r,
		    char *out, size_t len)
{
	const char *path = write_tmp(json);
	struct bench_baseline b;
	char err[256];
	FILE *f;
	int bad;

	assert_int_equal(bench_baseline_load(path, &b, err, sizeof(err)), 0);
	unlink(path);
	f = fmemopen(out, len, "w");
	assert_non_null(f);
	bad = bench_baseline_check(&b, pct, r, f);
	fclose(f);
	bench_baseline_free(&b);
	return bad;
}

#define ROW(mode, extra) "{\"protocol\": \"send_recv\", \"mode\": \"" mode \
	"\", \"size\": 64, \"conns\": 1, " extra "}"

static void test_baseline(void **state)
{
	struct two_rows *t = malloc(sizeof(*t));
	struct bench_baseline b;
	char out[512], err[256];
	const char *path;

	(void)state;
	assert_non_null(t);
	two_rows(t);
	/* the same figures: no regression */
	assert_int_equal(baseline("{\"results\": [" ROW("lat", "\"rtt_us\": {\"p50\": 10}")
				  ", " ROW("bw", "\"msg_rate\": 1000") "]}", 10, &t->rep,
				  out, sizeof(out)), 0);
	/* latency was 8 us (now +25%), rate was 1200 (now -17%) */
	assert_int_equal(baseline("{\"results\": [" ROW("lat", "\"rtt_us\": {\"p50\": 8}")
				  ", " ROW("bw", "\"msg_rate\": 1200") "]}", 10, &t->rep,
				  out, sizeof(out)), 2);
	assert_non_null(strstr(out, "lat conns 1: rtt_us.p50 10, was 8"));
	/* within a 30% tolerance */
	assert_int_equal(baseline("{\"results\": [" ROW("lat", "\"rtt_us\": {\"p50\": 8}")
				  ", " ROW("bw", "\"msg_rate\": 1200") "]}", 30, &t->rep,
				  out, sizeof(out)), 0);
	/* nothing in common: a gate that compares nothing fails */
	assert_int_equal(baseline("{\"results\": [{\"protocol\": \"tcp\", \"mode\": \"bw\","
				  " \"size\": 64, \"conns\": 1, \"msg_rate\": 5}]}", 10,
				  &t->rep, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "no row of this run"));
	/* not a results file */
	path = write_tmp("{\"tool\": \"x\"}");
	assert_int_equal(bench_baseline_load(path, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no result rows"));
	unlink(path);
	path = write_tmp("{\"results\": [{\"size\": 64}]}");
	assert_int_equal(bench_baseline_load(path, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lacks protocol"));
	unlink(path);
	free(t);
}

/* The memory estimate: slots x largest message + ring, per side and
 * connection; saturates instead of wrapping. */
static void test_mem_estimate(void **state)
{
	struct bench_mem m = { .max_msg = 1ull << 30, .ring_size = 4ull << 30,
			       .send_depth = 16, .recv_depth = 64, .conns = 1,
			       .self_test = true };

	(void)state;
	assert_int_equal(bench_mem_estimate(&m), 2 * (80ull * (1ull << 30) + (4ull << 30)));
	m.self_test = false;
	m.conns = 4;
	assert_int_equal(bench_mem_estimate(&m), 4 * (80ull * (1ull << 30) + (4ull << 30)));
	m.send_depth = UINT64_MAX / 2;
	assert_int_equal(bench_mem_estimate(&m), UINT64_MAX);
	m = (struct bench_mem){ .max_msg = 1ull << 40, .send_depth = 1ull << 20,
				.conns = 1ull << 10 };
	assert_int_equal(bench_mem_estimate(&m), UINT64_MAX);
}

/* Outputs refused before the run: one file twice, a directory, a missing
 * directory; stdout ("-") is fine. */
static void test_check_outputs(void **state)
{
	char err[512];

	(void)state;
	assert_int_equal(bench_check_outputs("-", NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(bench_check_outputs("/tmp/a.json", "/tmp/b.csv", NULL, err,
					     sizeof(err)), 0);
	assert_int_equal(bench_check_outputs("/tmp/a", "/tmp/a", NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "same file"));
	assert_int_equal(bench_check_outputs("/tmp", NULL, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is a directory"));
	assert_int_equal(bench_check_outputs(NULL, "/nonexistent/dir/x.csv", NULL, err,
					     sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot write in /nonexistent/dir"));
	assert_int_equal(bench_check_outputs("/tmp/p", NULL, "/tmp/p", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "also an output"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_json_scan),
		cmocka_unit_test(test_json_truncated),
		cmocka_unit_test(test_baseline),
		cmocka_unit_test(test_mem_estimate),
		cmocka_unit_test(test_check_outputs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
