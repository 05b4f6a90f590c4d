/* SPDX-License-Identifier: MIT */
/* The latency histogram against exact statistics of sorted samples. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hist.h"

#define N 200000

static const double pcts[] = { 0, 1, 10, 50, 90, 99, 99.9, 99.99, 100 };

static uint64_t rng_state = 88172645463325252ull;

static uint64_t xorshift(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static double unit_rand(void)
{
	return (double)(xorshift() >> 11) / 9007199254740992.0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct hist *new_hist(void)
{
	struct hist *h = malloc(sizeof(*h));

	assert_non_null(h);
	hist_init(h);
	return h;
}

/* Every reported statistic of @h against the @n samples in @v. */
static void check_against(const struct hist *h, uint64_t *v, size_t n)
{
	long double sum = 0, sq = 0, mean;
	size_t i, k;

	for (i = 0; i < n; i++)
		sum += v[i];
	mean = sum / n;
	for (i = 0; i < n; i++)
		sq += ((long double)v[i] - mean) * ((long double)v[i] - mean);
	qsort(v, n, sizeof(*v), cmp_u64);
	assert_int_equal(hist_count(h), n);
	assert_int_equal(hist_min(h), v[0]);
	assert_int_equal(hist_max(h), v[n - 1]);
	assert_true(fabs(hist_mean(h) - (double)mean) <= 1e-9 * (double)mean + 1e-9);
	assert_true(fabs(hist_stdev(h) - sqrt((double)(sq / n))) <=
		    1e-6 * sqrt((double)(sq / n)) + 1e-6);
	for (k = 0; k < sizeof(pcts) / sizeof(pcts[0]); k++) {
		uint64_t exact = v[hist_rank(pcts[k], n) - 1];
		uint64_t got = hist_percentile(h, pcts[k]);
		double err = fabs((double)got - (double)exact);

		if (err > 0.01 * (double)exact)
			fail_msg("p%g: got %llu, exact %llu", pcts[k],
				 (unsigned long long)got, (unsigned long long)exact);
		if (exact < HIST_LINEAR)
			assert_int_equal(got, exact);
	}
}

static void fill_and_check(uint64_t (*gen)(void))
{
	uint64_t *v = malloc(N * sizeof(*v));
	struct hist *h = new_hist();
	size_t i;

	assert_non_null(v);
	for (i = 0; i < N; i++) {
		v[i] = gen();
		hist_record(h, v[i]);
	}
	check_against(h, v, N);
	free(v);
	free(h);
}

static uint64_t gen_uniform(void)
{
	return 1 + xorshift() % 1000000;
}

static uint64_t gen_small(void)
{
	return xorshift() % 3000; /* spans the linear/log boundary */
}

/* Log-uniform over 1 ns .. 100 s: every bucket range gets exercised. */
static uint64_t gen_log(void)
{
	return (uint64_t)exp(unit_rand() * log(1e11));
}

/* A tight mode around 5 us and a 0.5% tail around 1-2 ms. */
static uint64_t gen_skewed(void)
{
	if (xorshift() % 1000 < 5)
		return 1000000 + xorshift() % 1000000;
	return 4900 + xorshift() % 200;
}

static void test_uniform(void **state)
{
	(void)state;
	fill_and_check(gen_uniform);
}

static void test_small_values(void **state)
{
	(void)state;
	fill_and_check(gen_small);
}

static void test_log_uniform(void **state)
{
	(void)state;
	fill_and_check(gen_log);
}

static void test_skewed(void **state)
{
	(void)state;
	fill_and_check(gen_skewed);
}

static void test_empty(void **state)
{
	struct hist *h = new_hist();

	(void)state;
	assert_int_equal(hist_count(h), 0);
	assert_int_equal(hist_min(h), 0);
	assert_int_equal(hist_max(h), 0);
	assert_true(hist_mean(h) == 0);
	assert_true(hist_stdev(h) == 0);
	assert_int_equal(hist_percentile(h, 50), 0);
	assert_int_equal(hist_percentile(h, 99.9), 0);
	free(h);
}

static void test_single_and_huge(void **state)
{
	struct hist *h = new_hist();

	(void)state;
	hist_record(h, 123456789);
	assert_int_equal(hist_percentile(h, 0), 123456789);
	assert_int_equal(hist_percentile(h, 50), 123456789);
	assert_int_equal(hist_percentile(h, 100), 123456789);
	assert_true(hist_stdev(h) == 0);
	hist_record(h, UINT64_MAX / 2); /* beyond the top: clamped, max exact */
	assert_int_equal(hist_max(h), UINT64_MAX / 2);
	assert_int_equal(hist_percentile(h, 100), UINT64_MAX / 2);
	assert_int_equal(hist_percentile(h, 50), 123456789);
	free(h);
}

static void test_merge(void **state)
{
	uint64_t *v = malloc(N * sizeof(*v));
	struct hist *a = new_hist(), *b = new_hist(), *all = new_hist();
	struct hist *empty = new_hist();
	size_t i;

	(void)state;
	assert_non_null(v);
	for (i = 0; i < N; i++) {
		v[i] = i < N / 4 ? gen_skewed() : gen_log();
		hist_record(i % 3 ? a : b, v[i]);
		hist_record(all, v[i]);
	}
	hist_merge(a, empty); /* no-op */
	hist_merge(empty, a); /* into an empty one: a copy */
	assert_int_equal(hist_min(empty), hist_min(a));
	assert_int_equal(hist_count(empty), hist_count(a));
	hist_merge(a, b);
	assert_memory_equal(a->bucket, all->bucket, sizeof(a->bucket));
	check_against(a, v, N);
	free(v);
	free(a);
	free(b);
	free(all);
	free(empty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uniform),
		cmocka_unit_test(test_small_values),
		cmocka_unit_test(test_log_uniform),
		cmocka_unit_test(test_skewed),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_single_and_huge),
		cmocka_unit_test(test_merge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
