/* SPDX-License-Identifier: MIT */
/* The read protocol's wire formats: descriptor and hello block. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/errors.h"
#include "protocols/read.h"

static struct rdmx__read_desc sample_desc(void)
{
	struct rdmx__read_desc d = {
		.type = RDMX__READ_DESC_READ,
		.flags = RDMX__READ_DESC_IMM,
		.slot = 0x0102,
		.gen = 0x03040506,
		.addr = 0x0708090a0b0c0d0eull,
		.rkey = 0x11121314,
		.len = 0x15161718,
		.imm = 0x191a1b1c,
	};
	return d;
}

static void test_desc_roundtrip(void **state)
{
	struct rdmx__read_desc in = sample_desc(), out;
	uint8_t buf[RDMX__READ_DESC_SIZE];

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	rdmx__read_desc_encode(&in, buf);
	assert_int_equal(rdmx__read_desc_decode(buf, &out), 0);
	assert_int_equal(out.type, in.type);
	assert_int_equal(out.flags, in.flags);
	assert_int_equal(out.slot, in.slot);
	assert_int_equal(out.gen, in.gen);
	assert_true(out.addr == in.addr);
	assert_int_equal(out.rkey, in.rkey);
	assert_int_equal(out.len, in.len);
	assert_int_equal(out.imm, in.imm);
}

/* The layout documented at the top of read.c, byte by byte. */
static void test_desc_is_little_endian(void **state)
{
	struct rdmx__read_desc in = sample_desc();
	static const uint8_t want[RDMX__READ_DESC_SIZE] = {
		1, 1, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03,
		0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07,
		0x14, 0x13, 0x12, 0x11, 0x18, 0x17, 0x16, 0x15,
		0x1c, 0x1b, 0x1a, 0x19, 0, 0, 0, 0,
	};
	uint8_t buf[RDMX__READ_DESC_SIZE];

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	rdmx__read_desc_encode(&in, buf);
	assert_memory_equal(buf, want, sizeof(want));
}

static void expect_desc_error(const uint8_t *buf, const char *what)
{
	struct rdmx__read_desc out;

	assert_int_equal(rdmx__read_desc_decode(buf, &out), -EPROTO);
	assert_non_null(strstr(rdmx__last(), what));
}

static void test_desc_rejects_garbage(void **state)
{
	struct rdmx__read_desc in = sample_desc();
	uint8_t buf[RDMX__READ_DESC_SIZE];

	(void)state;
	rdmx__read_desc_encode(&in, buf);
	buf[0] = 3;
	expect_desc_error(buf, "unknown type 3");
	buf[0] = 0;
	expect_desc_error(buf, "unknown type 0");
	rdmx__read_desc_encode(&in, buf);
	buf[1] = 0x81;
	expect_desc_error(buf, "unknown flags 0x81");
	rdmx__read_desc_encode(&in, buf);
	buf[30] = 1;
	expect_desc_error(buf, "reserved");
	in.gen = 0;
	rdmx__read_desc_encode(&in, buf);
	expect_desc_error(buf, "generation 0");
	/* An eager descriptor without imm is fine. */
	in = sample_desc();
	in.type = RDMX__READ_DESC_EAGER;
	in.flags = 0;
	rdmx__read_desc_encode(&in, buf);
	assert_int_equal(rdmx__read_desc_decode(buf, &in), 0);
	assert_int_equal(in.type, RDMX__READ_DESC_EAGER);
	assert_int_equal(in.flags, 0);
}

static struct rdmx__read_hello sample_hello(void)
{
	struct rdmx__read_hello h = {
		.version = RDMX__READ_HELLO_VERSION,
		.rd_atomic = 16,
		.desc_depth = 0x0203,
		.send_depth = 0x0405,
		.eager_max = 1024,
		.ack_rkey = 0x0a0b0c0d,
		.ack_addr = 0x1122334455667788ull,
	};
	return h;
}

static void test_hello_roundtrip_and_layout(void **state)
{
	struct rdmx__read_hello in = sample_hello(), out;
	uint8_t buf[RDMX__READ_HELLO_SIZE];

	(void)state;
	assert_true(RDMX__READ_HELLO_SIZE <= 40); /* fits a connect request */
	memset(buf, 0xee, sizeof(buf));
	rdmx__read_hello_encode(&in, buf);
	assert_int_equal(buf[0], RDMX__READ_HELLO_VERSION);
	assert_int_equal(buf[1], 16);
	assert_int_equal(buf[2], 0x03);
	assert_int_equal(buf[3], 0x02);
	assert_int_equal(buf[8], 0x0d);
	assert_int_equal(buf[12], 0);
	assert_int_equal(buf[16], 0x88);
	assert_int_equal(buf[23], 0x11);
	assert_int_equal(rdmx__read_hello_decode(buf, sizeof(buf), &out), 0);
	assert_int_equal(out.rd_atomic, 16);
	assert_int_equal(out.desc_depth, 0x0203);
	assert_int_equal(out.send_depth, 0x0405);
	assert_int_equal(out.eager_max, 1024);
	assert_int_equal(out.ack_rkey, 0x0a0b0c0d);
	assert_true(out.ack_addr == in.ack_addr);
}

static void expect_hello_error(const struct rdmx__read_hello *h, size_t len,
			       const char *what)
{
	uint8_t buf[RDMX__READ_HELLO_SIZE + 8] = { 0 };
	struct rdmx__read_hello out;

	rdmx__read_hello_encode(h, buf);
	assert_int_equal(rdmx__read_hello_decode(buf, len, &out), -EPROTO);
	if (!strstr(rdmx__last(), what))
		fail_msg("expected '%s' in '%s'", what, rdmx__last());
}

/* sample_hello() with @field set to @v is rejected, naming @what. */
#define EXPECT_FIELD_ERROR(field, v, what) do {				\
		struct rdmx__read_hello bad_ = sample_hello();		\
									\
		bad_.field = (v);					\
		expect_hello_error(&bad_, RDMX__READ_HELLO_SIZE, (what)); \
	} while (0)

/* Every mismatch is rejected with a message that names it. */
static void test_hello_mismatches_named(void **state)
{
	struct rdmx__read_hello h = sample_hello();

	(void)state;
	expect_hello_error(&h, 0, "hello block is 0 bytes, this side expects 24");
	expect_hello_error(&h, 30, "hello block is 30 bytes");
	EXPECT_FIELD_ERROR(version, 2, "version mismatch: peer 2, this side 1");
	EXPECT_FIELD_ERROR(desc_depth, 0, "can hold 0 descriptors");
	EXPECT_FIELD_ERROR(send_depth, 0, "0 send buffers");
	EXPECT_FIELD_ERROR(send_depth, 20000, "20000 send buffers");
	EXPECT_FIELD_ERROR(rd_atomic, 0, "rd_atomic 0");
	EXPECT_FIELD_ERROR(ack_addr, 0, "no ack array");
}

static void test_hello_reserved_must_be_zero(void **state)
{
	struct rdmx__read_hello h = sample_hello(), out;
	uint8_t buf[RDMX__READ_HELLO_SIZE];

	(void)state;
	rdmx__read_hello_encode(&h, buf);
	buf[13] = 1;
	assert_int_equal(rdmx__read_hello_decode(buf, sizeof(buf), &out), -EPROTO);
	assert_non_null(strstr(rdmx__last(), "reserved"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_desc_roundtrip),
		cmocka_unit_test(test_desc_is_little_endian),
		cmocka_unit_test(test_desc_rejects_garbage),
		cmocka_unit_test(test_hello_roundtrip_and_layout),
		cmocka_unit_test(test_hello_mismatches_named),
		cmocka_unit_test(test_hello_reserved_must_be_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
