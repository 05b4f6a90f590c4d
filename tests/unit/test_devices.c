/* SPDX-License-Identifier: MIT */
/* GID formatting and the choice of GID/address, on made-up tables. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "core/devices.h"

static struct rdmx_gid_info gid(int index, enum rdmx_gid_type type, const char *addr)
{
	struct rdmx_gid_info g = { .index = index, .type = type };

	strcpy(g.addr, addr);
	return g;
}

static void test_format_v4_mapped(void **state)
{
	uint8_t raw[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1 };
	struct rdmx_gid_info g;

	(void)state;
	rdmx__gid_format(raw, RDMX_GID_ROCE_V2, &g);
	assert_string_equal(g.addr, "10.77.0.1");
	assert_string_equal(g.gid, "0000:0000:0000:0000:0000:ffff:0a4d:0001");
	assert_int_equal(g.type, RDMX_GID_ROCE_V2);
}

static void test_format_v6_and_ib(void **state)
{
	uint8_t raw[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55 };
	struct rdmx_gid_info g;

	(void)state;
	rdmx__gid_format(raw, RDMX_GID_ROCE_V1, &g);
	assert_string_equal(g.addr, "fe80::211:22ff:fe33:4455");
	rdmx__gid_format(raw, RDMX_GID_IB, &g);
	assert_string_equal(g.addr, "");
}

static void test_pick_prefers_rocev2_ipv4(void **state)
{
	struct rdmx_gid_info t[] = {
		gid(0, RDMX_GID_ROCE_V1, "fe80::1"),
		gid(1, RDMX_GID_ROCE_V2, "fe80::1"),
		gid(2, RDMX_GID_ROCE_V1, "10.0.0.1"),
		gid(3, RDMX_GID_ROCE_V2, "10.0.0.1"),
		gid(4, RDMX_GID_ROCE_V2, "2001:db8::1"),
	};

	(void)state;
	assert_int_equal(rdmx__gid_pick(t, 5), 3);
	assert_int_equal(rdmx__gid_pick(t, 3), 2); /* no v2 IPv4: v1 IPv4 */
	assert_int_equal(rdmx__gid_pick(t, 2), 1); /* link-local only: v2 */
	assert_int_equal(rdmx__gid_pick(t, 0), -1);
	t[0] = gid(0, RDMX_GID_ROCE_V2, "2001:db8::1");
	assert_int_equal(rdmx__gid_pick(t, 2), 0); /* global v6 over link-local */
}

static struct rdmx_port_info port(int state, struct rdmx_gid_info *g, int n)
{
	struct rdmx_port_info p = { .port = 1, .state = state, .gids = g, .n_gids = n };

	p.picked_gid = rdmx__gid_pick(g, n);
	return p;
}

static void test_address_choose(void **state)
{
	struct rdmx_gid_info g0[] = { gid(0, RDMX_GID_ROCE_V2, "10.1.0.1") };
	struct rdmx_gid_info g1[] = { gid(0, RDMX_GID_ROCE_V1, "fe80::2"),
				      gid(1, RDMX_GID_ROCE_V2, "10.2.0.1"),
				      gid(7, RDMX_GID_ROCE_V2, "fe80::2") };
	struct rdmx_port_info p0 = port(IBV_PORT_DOWN, g0, 1), p1 = port(IBV_PORT_ACTIVE, g1, 3);
	struct rdmx_device_info devs[] = { { .name = "mlx5_0", .n_ports = 1, .ports = &p0 },
					   { .name = "rxe0", .n_ports = 1, .ports = &p1 } };
	char buf[64];

	(void)state;
	assert_int_equal(rdmx__address_choose(devs, 2, NULL, -1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "10.2.0.1"); /* first ACTIVE port */
	assert_int_equal(rdmx__address_choose(devs, 2, "rxe0", 7, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "fe80::2");
	assert_int_equal(rdmx__address_choose(devs, 2, "rxe0", 5, buf, sizeof(buf)), -EADDRNOTAVAIL);
	assert_int_equal(rdmx__address_choose(devs, 2, "mlx5_0", -1, buf, sizeof(buf)), -ENODEV);
	assert_int_equal(rdmx__address_choose(devs, 2, "nope", -1, buf, sizeof(buf)), -ENODEV);
	assert_int_equal(rdmx__address_choose(devs, 0, NULL, -1, buf, sizeof(buf)), -ENODEV);
}

/* rdmx_device_isolation: a name no device has is -ENODEV with the name
 * in the message (also where the machine has no RDMA device at all), and
 * NULL is -EINVAL. Which mechanism a real device allows: doctor_rxe.sh. */
static void test_isolation_query(void **state)
{
	(void)state;
	assert_int_equal(rdmx_device_isolation(NULL), -EINVAL);
	assert_int_equal(rdmx_device_isolation("rdmx-no-such-dev"), -ENODEV);
	assert_true(strstr(rdmx_last_error(), "rdmx-no-such-dev") ||
		    strstr(rdmx_last_error(), "no RDMA devices"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_v4_mapped),
		cmocka_unit_test(test_format_v6_and_ib),
		cmocka_unit_test(test_pick_prefers_rocev2_ipv4),
		cmocka_unit_test(test_address_choose),
		cmocka_unit_test(test_isolation_query),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
