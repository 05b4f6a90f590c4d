/* SPDX-License-Identifier: MIT */
/*
 * rdmx bench --pcap (tools/bench_pcap.c): the netdev of an RDMA device from a
 * made-up sysfs tree, and tcpdump's start, stop and failures played by a
 * script standing in for it.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_pcap.h"

static char root[PATH_MAX];

static void put(const char *rel, const char *content)
{
	char path[PATH_MAX * 2], cmd[PATH_MAX * 3];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/rdmx-test-pcap.XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd);
}

/* ------------------------------------------------------------- the netdev */

static void test_netdev_roce(void **state)
{
	char nd[64], err[512] = "";

	(void)state;
	put("class/infiniband/rxe0/ports/1/link_layer", "Ethernet\n");
	/* unused GID slots read as EINVAL; here: absent, then the used one */
	put("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1", "eth7\n");
	assert_int_equal(bench_pcap_netdev(root, "rxe0", nd, sizeof(nd), err,
					   sizeof(err)), 0);
	assert_string_equal(nd, "eth7");
}

static void test_netdev_infiniband(void **state)
{
	char nd[64], err[512] = "";

	(void)state;
	put("class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
	assert_int_equal(bench_pcap_netdev(root, "mlx5_0", nd, sizeof(nd), err,
					   sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "InfiniBand"));
	assert_non_null(strstr(err, "ibdump"));
}

static void test_netdev_none(void **state)
{
	char nd[64], err[512] = "";

	(void)state;
	put("class/infiniband/odd0/ports/1/link_layer", "Ethernet\n");
	assert_int_equal(bench_pcap_netdev(root, "odd0", nd, sizeof(nd), err,
					   sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "no network interface"));
	/* device/net (a PCI NIC's own netdev) is the fallback */
	put("class/infiniband/odd0/device/net/enp1s0/ifindex", "3\n");
	assert_int_equal(bench_pcap_netdev(root, "odd0", nd, sizeof(nd), err,
					   sizeof(err)), 0);
	assert_string_equal(nd, "enp1s0");
}

/* ------------------------------------------------------------- tcpdump */

/* A stand-in for tcpdump running @body (sh); returns its path. */
static const char *fake_tcpdump(const char *name, const char *body)
{
	static char path[PATH_MAX * 2];
	char text[1024];

	snprintf(text, sizeof(text), "#!/bin/sh\n%.900s\n", body);
	put(name, text);
	snprintf(path, sizeof(path), "%s/%s", root, name);
	assert_int_equal(chmod(path, 0755), 0);
	return path;
}

static void test_tcpdump_missing(void **state)
{
	char path[PATH_MAX], err[512] = "", *old = getenv("PATH");
	char *saved = old ? strdup(old) : NULL;

	int missing, found;

	(void)state;
	err[256] = '\0';
	setenv("PATH", root, 1); /* a directory without tcpdump */
	missing = bench_pcap_find_tcpdump(path, sizeof(path), err, sizeof(err));
	setenv("PATH", saved ? saved : "/usr/bin:/bin", 1);
	fake_tcpdump("tcpdump", "exit 0");
	setenv("PATH", root, 1); /* now with one */
	found = bench_pcap_find_tcpdump(path, sizeof(path), err + 256, 256);
	setenv("PATH", saved ? saved : "/usr/bin:/bin", 1);
	free(saved);
	assert_int_equal(missing, -ENOENT);
	assert_non_null(strstr(err, "apt install tcpdump"));
	assert_int_equal(found, 0);
	assert_non_null(strstr(path, "/tcpdump"));
}

static void test_tcpdump_no_permission(void **state)
{
	const char *t = fake_tcpdump("td-perm", "echo \"tcpdump: eth0: You don't "
				     "have permission to perform this capture on "
				     "that device\" >&2; exit 1");
	struct bench_pcap p;
	char err[1024] = "";

	(void)state;
	assert_int_equal(bench_pcap_start(&p, t, "eth0", "/dev/null", err,
					  sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "CAP_NET_RAW"));
	assert_non_null(strstr(err, "eth0"));
	assert_int_equal(p.pid, 0); /* reaped */
}

static void test_tcpdump_other_failure(void **state)
{
	const char *t = fake_tcpdump("td-bad", "echo 'tcpdump: nope0: No such "
				     "device exists' >&2; exit 1");
	struct bench_pcap p;
	char err[1024] = "";

	(void)state;
	assert_int_equal(bench_pcap_start(&p, t, "nope0", "/dev/null", err,
					  sizeof(err)), -EIO);
	assert_non_null(strstr(err, "No such device exists"));
}

/* Started, then stopped: SIGTERM makes it print its count, as tcpdump does;
 * its arguments name the interface, the file and the RoCEv2 filter. */
static void test_tcpdump_start_stop(void **state)
{
	char args[PATH_MAX + 8], line[PATH_MAX * 2] = "", err[1024] = "";
	const char *t;
	struct bench_pcap p;
	FILE *f;

	(void)state;
	snprintf(args, sizeof(args), "%s/args", root);
	snprintf(line, sizeof(line), "echo \"$@\" > '%s'\n"
		 "trap 'echo \"42 packets captured\" >&2; exit 0' TERM\n"
		 "echo 'tcpdump: listening on eth7, link-type EN10MB' >&2\n"
		 "while :; do sleep 0.05; done", args);
	t = fake_tcpdump("td-ok", line);
	assert_int_equal(bench_pcap_start(&p, t, "eth7", "/tmp/x.pcap", err,
					  sizeof(err)), 0);
	assert_true(p.pid > 0);
	assert_int_equal(bench_pcap_stop(&p, err, sizeof(err)), 42);
	assert_int_equal(p.pid, 0);
	f = fopen(args, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_non_null(strstr(line, "-i eth7"));
	assert_non_null(strstr(line, "-w /tmp/x.pcap"));
	assert_non_null(strstr(line, "--immediate-mode"));
	assert_non_null(strstr(line, "udp port 4791"));
}

/* Gone already (a Ctrl-C reached the whole process group): still reaped,
 * its count still read. */
static void test_tcpdump_gone_before_stop(void **state)
{
	const char *t = fake_tcpdump("td-gone", "echo 'listening on eth7' >&2; "
				     "sleep 0.2; echo '1 packet captured' >&2");
	struct bench_pcap p;
	char err[1024] = "";

	(void)state;
	assert_int_equal(bench_pcap_start(&p, t, "eth7", "/dev/null", err,
					  sizeof(err)), 0);
	usleep(500000);
	assert_int_equal(bench_pcap_stop(&p, err, sizeof(err)), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_netdev_roce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_netdev_infiniband, setup, teardown),
		cmocka_unit_test_setup_teardown(test_netdev_none, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcpdump_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcpdump_no_permission, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcpdump_other_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcpdump_start_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcpdump_gone_before_stop, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
