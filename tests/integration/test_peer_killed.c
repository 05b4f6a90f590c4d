/* SPDX-License-Identifier: MIT */
/*
 * A server process killed mid-stream (SIGKILL: no close, no goodbye): the
 * client must get an error within a bound, never hang.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

/* Child: listen, report the port on @fd, echo forever. */
static void serve(int fd, const char *protocol)
{
	struct rdmx_conn_opts o;
	rdmx_listener *lis;
	struct th_echo e;
	rdmx_conn *c;
	rdmx_ctx *ctx;
	uint16_t port;

	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	if (rdmx_ctx_create(&ctx, NULL) || rdmx_listen(ctx, th_addr(), 0, &o, &lis))
		_exit(3);
	port = rdmx_listener_port(lis);
	if (write(fd, &port, sizeof(port)) != sizeof(port))
		_exit(4);
	if (rdmx_accept(lis, 120000, &c))
		_exit(5);
	th_echo_start(&e, c);
	th_echo_join(&e);
	_exit(0);
}

static int roundtrip(rdmx_conn *c, uint64_t seq, int timeout_ms)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, 256, &m, timeout_ms);

	if (rc)
		return rc;
	th_fill(m.data, 256, seq);
	m.len = 256;
	rc = rdmx_send(c, &m);
	if (!rc)
		rc = rdmx_recv(c, &m, timeout_ms);
	if (rc)
		return rc;
	assert_int_equal(th_check(m.data, m.len, seq), -1);
	return rdmx_msg_release(c, &m);
}

#define MAX_SERVERS 32
static pid_t servers[MAX_SERVERS];

/*
 * Fork an echo server per protocol before this process touches RDMA: a
 * child forked after librdmacm was initialised in the parent inherits its
 * state (open device contexts) and its connection breaks (seen on rxe with
 * a second protocol).
 */
static void start_servers(const char *const *names, uint16_t *ports)
{
	for (int i = 0; names[i]; i++) {
		int fds[2];

		assert_true(i < MAX_SERVERS);
		assert_int_equal(pipe(fds), 0);
		servers[i] = fork();
		assert_true(servers[i] >= 0);
		if (servers[i] == 0)
			serve(fds[1], names[i]);
		assert_int_equal(read(fds[0], &ports[i], sizeof(ports[i])), sizeof(ports[i]));
		close(fds[0]);
		close(fds[1]);
	}
}

/* Servers a failed test left behind. */
static int kill_servers(void **state)
{
	(void)state;
	for (int i = 0; i < MAX_SERVERS; i++)
		if (servers[i] > 0) {
			kill(servers[i], SIGKILL);
			waitpid(servers[i], NULL, 0);
			servers[i] = 0;
		}
	return 0;
}

static void test_server_killed_midstream(void **state)
{
	const char *const *names = rdmx_protocol_names();
	uint16_t ports[MAX_SERVERS];

	(void)state;
	start_servers(names, ports);
	for (int i = 0; names[i]; i++) {
		int status, rc = 0;
		struct rdmx_conn_opts o;
		uint16_t port = ports[i];
		pid_t pid = servers[i];
		rdmx_ctx *ctx;
		rdmx_conn *c;
		double t0;

		rdmx_conn_opts_init(&o);
		o.protocol = names[i];
		assert_int_equal(rdmx_ctx_create(&ctx, NULL), 0);
		assert_int_equal(rdmx_dial(ctx, th_addr(), port, &o, &c), 0);
		for (uint64_t k = 0; k < 200; k++)
			assert_int_equal(roundtrip(c, k, 10000), 0);
		assert_int_equal(kill(pid, SIGKILL), 0);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		servers[i] = 0;
		t0 = th_now_ms();
		for (uint64_t k = 200; (!rc || rc == -ETIMEDOUT) && th_now_ms() - t0 < 60000; k++)
			rc = roundtrip(c, k, 5000);
		print_message("%s: after SIGKILL of the server: %s (%s) after %.0f ms\n",
			      names[i], rdmx_strerror(rc), rdmx_conn_error(c), th_now_ms() - t0);
		assert_true(rc == -ECONNRESET || rc == -EIO);
		rdmx_conn_close(c);
		rdmx_ctx_destroy(ctx);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_killed_midstream),
	};
	return cmocka_run_group_tests(tests, NULL, kill_servers);
}
