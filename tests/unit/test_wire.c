/* SPDX-License-Identifier: MIT */
/* Wire formats: hello and reject encoding, padding, malformed input,
 * the protocol ids. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/errors.h"
#include "core/protocol.h"
#include "core/wire.h"

static struct rdmx__hello sample(void)
{
	struct rdmx__hello h = {
		.version = RDMX__WIRE_VERSION,
		.protocol = 3,
		.flags = RDMX__HELLO_REPLY,
		.max_msg = 0x01020304,
		.recv_depth = 513,
		.block_len = 5,
		.block = { 9, 8, 7, 6, 5 },
	};
	return h;
}

static void test_hello_roundtrip_with_padding(void **state)
{
	struct rdmx__hello in = sample(), out;
	uint8_t buf[56];
	int len;

	(void)state;
	memset(buf, 0, sizeof(buf));
	len = rdmx__hello_encode(&in, buf, sizeof(buf));
	assert_int_equal(len, RDMX__HELLO_HDR + 5);
	/* IB CM pads connect private data to 56 bytes: decode the padded form. */
	assert_int_equal(rdmx__hello_decode(buf, sizeof(buf), &out), 0);
	assert_int_equal(out.protocol, 3);
	assert_int_equal(out.flags, RDMX__HELLO_REPLY);
	assert_int_equal(out.max_msg, 0x01020304);
	assert_int_equal(out.recv_depth, 513);
	assert_int_equal(out.block_len, 5);
	assert_memory_equal(out.block, in.block, 5);
}

static void test_hello_is_little_endian(void **state)
{
	struct rdmx__hello in = sample();
	uint8_t buf[64];

	(void)state;
	rdmx__hello_encode(&in, buf, sizeof(buf));
	assert_memory_equal(buf, "RDMX", 4);
	assert_int_equal(buf[8], 0x04);
	assert_int_equal(buf[11], 0x01);
	assert_int_equal(buf[12], 0x01);
	assert_int_equal(buf[13], 0x02);
}

static void test_hello_rejects_foreign_and_bad(void **state)
{
	struct rdmx__hello in = sample(), out;
	uint8_t buf[56], zero[56] = { 0 };

	(void)state;
	assert_int_equal(rdmx__hello_decode(zero, sizeof(zero), &out), -EPROTO);
	assert_non_null(strstr(rdmx__last(), "not an rdmx peer"));
	assert_int_equal(rdmx__hello_decode(zero, 0, &out), -EPROTO);

	rdmx__hello_encode(&in, buf, sizeof(buf));
	assert_int_equal(rdmx__hello_decode(buf, 10, &out), -EPROTO);
	assert_non_null(strstr(rdmx__last(), "truncated"));

	buf[4] = RDMX__WIRE_VERSION + 1;
	assert_int_equal(rdmx__hello_decode(buf, sizeof(buf), &out), -EPROTO);
	assert_non_null(strstr(rdmx__last(), "version"));

	rdmx__hello_encode(&in, buf, sizeof(buf));
	buf[14] = 50; /* block claims more than the data holds */
	assert_int_equal(rdmx__hello_decode(buf, sizeof(buf), &out), -EPROTO);
	assert_non_null(strstr(rdmx__last(), "malformed"));
}

static void test_hello_too_big_for_connect(void **state)
{
	struct rdmx__hello in = sample();
	uint8_t buf[56];

	(void)state;
	in.block_len = 41; /* 16 + 41 > 56 */
	assert_int_equal(rdmx__hello_encode(&in, buf, sizeof(buf)), -EMSGSIZE);
	in.block_len = 40;
	assert_int_equal(rdmx__hello_encode(&in, buf, sizeof(buf)), 56);
}

static void test_reject_roundtrip_and_truncation(void **state)
{
	uint8_t buf[148];
	char why[64];
	char longer[300];
	int len;

	(void)state;
	len = rdmx__reject_encode(RDMX__REJ_PROTOCOL, "protocol mismatch", buf, sizeof(buf));
	assert_int_equal(len, RDMX__REJECT_HDR + 18);
	assert_int_equal(rdmx__reject_decode(buf, sizeof(buf), why, sizeof(why)),
			 RDMX__REJ_PROTOCOL);
	assert_string_equal(why, "protocol mismatch");

	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = 0;
	len = rdmx__reject_encode(RDMX__REJ_PARAMS, longer, buf, sizeof(buf));
	assert_int_equal(len, (int)sizeof(buf));
	assert_int_equal(rdmx__reject_decode(buf, sizeof(buf), why, sizeof(why)),
			 RDMX__REJ_PARAMS);
	assert_int_equal(strlen(why), sizeof(why) - 1);
}

static void test_reject_from_plain_cm_is_not_ours(void **state)
{
	uint8_t zero[148] = { 0 };
	char why[16] = "stale";

	(void)state;
	assert_int_equal(rdmx__reject_decode(zero, sizeof(zero), why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_int_equal(rdmx__reject_decode(zero, 0, why, sizeof(why)), 0);
}

static void test_integer_helpers(void **state)
{
	uint8_t b[8];

	(void)state;
	rdmx__put_u64(b, 0x1122334455667788ull);
	assert_int_equal(b[0], 0x88);
	assert_int_equal(b[7], 0x11);
	assert_true(rdmx__get_u64(b) == 0x1122334455667788ull);
	rdmx__put_u32(b, 0xdeadbeef);
	assert_int_equal(rdmx__get_u32(b), 0xdeadbeef);
	rdmx__put_u16(b, 0xbeef);
	assert_int_equal(rdmx__get_u16(b), 0xbeef);
}

/* The protocol ids are on the wire: each table carries its old value. */
static void test_protocol_ids_unchanged(void **state)
{
	static const struct { const char *name; uint8_t id; } ids[] = {
		{ "send_recv", 1 }, { "srq", 2 }, { "read", 3 },
		{ "write_simplex", 4 }, { "write_magic", 5 },
		{ "write_duplex", 6 }, { "write_atomic", 7 },
		{ "direct_write", 8 }, { "buffered_read", 9 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		const struct rdmx_protocol_ops *p = rdmx__protocol_by_name(ids[i].name);

		assert_non_null(p);
		assert_int_equal(p->id, ids[i].id);
		assert_ptr_equal(rdmx__protocol_by_id(ids[i].id), p);
	}
	assert_null(rdmx__protocol_by_id(0));
	assert_null(rdmx__protocol_by_id(10));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_roundtrip_with_padding),
		cmocka_unit_test(test_hello_is_little_endian),
		cmocka_unit_test(test_hello_rejects_foreign_and_bad),
		cmocka_unit_test(test_hello_too_big_for_connect),
		cmocka_unit_test(test_reject_roundtrip_and_truncation),
		cmocka_unit_test(test_reject_from_plain_cm_is_not_ours),
		cmocka_unit_test(test_integer_helpers),
		cmocka_unit_test(test_protocol_ids_unchanged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
