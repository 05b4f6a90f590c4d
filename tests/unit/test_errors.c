/* SPDX-License-Identifier: MIT */
/*
 * rdmx_strerror() and rdmx_err_name() read one table (src/core/errors.c).
 * Every -E literal in src/ (collected at configure time into
 * rdmx_test_errcodes.h) must be in it, so a new error path cannot return a
 * code the table does not name.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include <rdmx/rdmx.h>

#include "rdmx_test_errcodes.h" /* RDMX_TEST_ERRCODES(XX): XX(EINVAL) ... */

/* Every code src/ returns has its own name: the name's errno is the code
 * (ENOTSUP may answer EOPNOTSUPP, the same number on Linux). */
static void test_every_code_named(void **state)
{
	(void)state;
#define CHECK_CODE(e)                                                         \
	do {                                                                  \
		const char *n = rdmx_err_name(-(e));                          \
		if (!strcmp(n, "EUNKNOWN"))                                   \
			fail_msg("%s (%d) is returned in src/ but is not in "  \
				 "errors.c's table", #e, e);                   \
		assert_true(!strcmp(n, #e) || (e) == EOPNOTSUPP);             \
		assert_string_not_equal(rdmx_strerror(-(e)), "");             \
	} while (0);
	RDMX_TEST_ERRCODES(CHECK_CODE)
#undef CHECK_CODE
}

/* The names and rdmx's own descriptions, unchanged by the table. */
static void test_names_and_texts(void **state)
{
	(void)state;
	assert_string_equal(rdmx_err_name(-ETIMEDOUT), "ETIMEDOUT");
	assert_string_equal(rdmx_err_name(-ECONNRESET), "ECONNRESET");
	assert_string_equal(rdmx_err_name(-EMFILE), "EMFILE");
	assert_string_equal(rdmx_strerror(-ETIMEDOUT), "timed out");
	assert_string_equal(rdmx_strerror(-ECONNRESET), "connection closed by peer");
	assert_string_equal(rdmx_strerror(-EMSGSIZE), "message too long for the connection");
	assert_string_equal(rdmx_strerror(-ENODEV), "no RDMA device");
	assert_string_equal(rdmx_strerror(-EINVAL), strerror(EINVAL));
}

/* 0, positive values, INT_MIN and codes outside the table. */
static void test_edges(void **state)
{
	(void)state;
	assert_string_equal(rdmx_err_name(0), "OK");
	assert_string_equal(rdmx_strerror(0), "success");
	assert_string_equal(rdmx_err_name(5), "EUNKNOWN");
	assert_string_equal(rdmx_strerror(5), "not an error code");
	assert_string_equal(rdmx_err_name(INT_MIN), "EUNKNOWN");
	assert_string_equal(rdmx_strerror(INT_MIN), "not an error code");
	assert_string_equal(rdmx_err_name(-4000), "EUNKNOWN");
	assert_non_null(rdmx_strerror(-4000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_code_named),
		cmocka_unit_test(test_names_and_texts),
		cmocka_unit_test(test_edges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
