/* SPDX-License-Identifier: MIT */
/*
 * Options a protocol reads alone are that protocol's to check (its
 * check_opts hook): the core refuses none of them for the others, the
 * ring protocols refuse a bad ring_size or notify when the options are
 * loaded, and the fit of a record in the ring once a connection knows its
 * message size. Same codes and messages as when the core checked them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static rdmx_ctx *ctx_new(void)
{
	struct rdmx_ctx_opts co = { .fabric = "fake" };
	rdmx_ctx *ctx;

	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	return ctx;
}

static struct rdmx_conn_opts opts(const char *proto)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	return o;
}

/* rdmx_listen with @o: -EINVAL naming @what, or 0 when @what is NULL. */
static void listen_expect(rdmx_ctx *ctx, const struct rdmx_conn_opts *o,
			  const char *what)
{
	rdmx_listener *lis = NULL;
	int rc = rdmx_listen(ctx, "fake", 0, o, &lis);

	if (!what) {
		if (rc)
			fail_msg("%s: listen: %s", o->protocol, rdmx_last_error());
		rdmx_listener_destroy(lis);
		return;
	}
	assert_int_equal(rc, -EINVAL);
	if (!strstr(rdmx_last_error(), what))
		fail_msg("%s: '%s' does not name '%s'", o->protocol,
			 rdmx_last_error(), what);
}

/* send_recv, srq and read read no ring_size or notify. */
static void test_ring_options_ignored(void **state)
{
	static const char *const protos[] = { "send_recv", "srq", "read" };
	rdmx_ctx *ctx = ctx_new();

	(void)state;
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++) {
		struct rdmx_conn_opts o = opts(protos[i]);

		o.ring_size = 3;
		o.notify = 9;
		listen_expect(ctx, &o, NULL);
	}
	rdmx_ctx_destroy(ctx);
}

/* The ring protocols refuse them when the options are loaded. */
static void test_ring_options_checked(void **state)
{
	static const char *const protos[] = { "write_simplex", "write_magic",
					      "write_duplex", "write_atomic" };
	rdmx_ctx *ctx = ctx_new();

	(void)state;
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++) {
		struct rdmx_conn_opts o = opts(protos[i]);

		o.ring_size = 3;
		listen_expect(ctx, &o, "ring_size 3 is not a power of two in 4096..1073741824");
		o = opts(protos[i]);
		o.notify = 9;
		listen_expect(ctx, &o, "notify 9 is not an enum rdmx_notify value");
		o = opts(protos[i]);
		o.ack = 3;
		listen_expect(ctx, &o, "ack 3 is not an enum rdmx_ack value");
	}
	rdmx_ctx_destroy(ctx);
}

/* The ring variants that cannot work are refused with the reason; the
 * others are taken. */
static void test_ring_variants_checked(void **state)
{
	rdmx_ctx *ctx = ctx_new();
	struct rdmx_conn_opts o = opts("write_simplex");

	(void)state;
	o.notify = RDMX_NOTIFY_IMM;
	o.ack = RDMX_ACK_READ;
	listen_expect(ctx, &o, "write_simplex: notify IMM needs posted receives on the receiver, which ack read avoids");
	o.ack = RDMX_ACK_SEND;
	listen_expect(ctx, &o, NULL);
	o.protocol = "write_duplex"; /* its ack READ spelled out by the user */
	listen_expect(ctx, &o, NULL);
	o = opts("write_magic");
	o.notify = RDMX_NOTIFY_REV;
	listen_expect(ctx, &o, "write_magic: notify rev lays records downward");
	o.notify = RDMX_NOTIFY_OFF;
	o.ack = RDMX_ACK_READ;
	listen_expect(ctx, &o, NULL);
	o = opts("write_duplex");
	o.notify = RDMX_NOTIFY_REV;
	o.ack = RDMX_ACK_SEND;
	listen_expect(ctx, &o, NULL);
	rdmx_ctx_destroy(ctx);
}

/* notify IMM (and the ring variants) where a protocol cannot use it:
 * refused at once. */
static void test_notify_imm_refused(void **state)
{
	rdmx_ctx *ctx = ctx_new();
	struct rdmx_conn_opts o = opts("write_duplex");

	(void)state;
	o.notify = RDMX_NOTIFY_IMM;
	listen_expect(ctx, &o, "write_duplex: notify IMM");
	o.protocol = "write_atomic";
	listen_expect(ctx, &o, "write_atomic: notify 2 / ack 0 are not supported");
	o.protocol = "write_simplex";
	listen_expect(ctx, &o, NULL);
	/* the write ring's variants are refused where they do not apply */
	o.protocol = "write_atomic";
	o.notify = RDMX_NOTIFY_OFF;
	listen_expect(ctx, &o, "write_atomic: notify 3 / ack 0 are not supported");
	o.notify = RDMX_NOTIFY_POLL;
	o.ack = RDMX_ACK_READ;
	listen_expect(ctx, &o, "write_atomic: notify 1 / ack 2 are not supported");
	o.protocol = "buffered_read";
	listen_expect(ctx, &o, "buffered_read: the receiver pulls whole sections by READ: notify 1 / ack 2");
	o.ack = RDMX_ACK_DEFAULT;
	o.notify = RDMX_NOTIFY_REV;
	listen_expect(ctx, &o, "buffered_read: the receiver pulls whole sections by READ: notify 4 / ack 0");
	rdmx_ctx_destroy(ctx);
}

/* A record's fit is the connection's: the listener takes a small ring,
 * a dial whose max_msg does not fit is refused. */
static void test_record_fit_per_connection(void **state)
{
	rdmx_ctx *ctx = ctx_new();
	struct rdmx_conn_opts o = opts("write_simplex");
	rdmx_conn *c = NULL;

	(void)state;
	o.ring_size = 4096;
	o.max_msg_size = 3000;
	listen_expect(ctx, &o, NULL);
	assert_int_equal(rdmx_dial(ctx, "fake", 1, &o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "write_simplex: ring_size 4096 cannot hold two records"));
	o.protocol = "write_atomic";
	assert_int_equal(rdmx_dial(ctx, "fake", 1, &o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "fewer than 2 records"));
	assert_null(c);
	rdmx_ctx_destroy(ctx);
}

/* read's eager_max travels in 16 bits. */
static void test_eager_max_checked(void **state)
{
	rdmx_ctx *ctx = ctx_new();
	struct rdmx_conn_opts o = opts("read");

	(void)state;
	o.eager_max = 65536;
	listen_expect(ctx, &o, "eager_max 65536 out of range 0..65535");
	o.protocol = "send_recv";
	listen_expect(ctx, &o, NULL);
	rdmx_ctx_destroy(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_options_ignored),
		cmocka_unit_test(test_ring_options_checked),
		cmocka_unit_test(test_notify_imm_refused),
		cmocka_unit_test(test_ring_variants_checked),
		cmocka_unit_test(test_record_fit_per_connection),
		cmocka_unit_test(test_eager_max_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
