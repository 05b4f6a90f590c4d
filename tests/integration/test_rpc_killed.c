/* SPDX-License-Identifier: MIT */
/*
 * rdmx RPC with a peer process killed (SIGKILL: no close, no goodbye) on a
 * real device (rxe in the sandbox; the fake fabric lives in one process,
 * where test_rpc's t_server_gone and t_client_gone stand in):
 *
 *   server killed: a client with calls held by the server and echoes in
 *   flight; every one of them ends (the held ones with -ECONNRESET) within
 *   a bound, none hangs, and the next call fails at once.
 *   client killed: a client process with calls held and echoes in flight;
 *   once the held calls are answered the server has closed its connection
 *   (its slots freed: no connection open) and serves a new client.
 *
 * Both peers are forked before this process touches RDMA (a child forked
 * after librdmacm was initialised inherits its state and its connections
 * break). RPC_TRANSPORT picks the transport.
 */
#include <errno.h>
#include <pthread.h>
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

#include <rdmx/rpc.h>

#include "harness.h"

#define M_ECHO 1
#define M_HOLD 2
#define HOLD_N 8
#define ECHO_N 8
#define WAIT_MS 20000
#define GONE_MS 60000 /* the bound on noticing a killed peer */

static const struct rdmx_rpc_method contract[] = {
	{ M_ECHO, "echo", 256, 256, 0 },
	{ M_HOLD, "hold", 8, 8, 0 },
};

/* Held requests (answered by the test, or never: the killed server's). */
static struct {
	pthread_mutex_t lock;
	rdmx_rpc_req *req[HOLD_N];
	int n;
} held = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void on_echo(rdmx_rpc_req *req, void *arg)
{
	size_t len;
	const void *in = rdmx_rpc_req_data(req, &len);

	(void)arg;
	memcpy(rdmx_rpc_req_resp(req, NULL), in, len);
	rdmx_rpc_respond(req, 0, len);
}

static void on_hold(rdmx_rpc_req *req, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&held.lock);
	if (held.n < HOLD_N)
		held.req[held.n++] = req;
	pthread_mutex_unlock(&held.lock);
}

static void opts(struct rdmx_rpc_opts *o)
{
	const char *t = getenv("RPC_TRANSPORT");

	rdmx_rpc_opts_init(o);
	o->timeout_ms = WAIT_MS;
	o->window = HOLD_N + ECHO_N;
	if (t && *t)
		o->transport = t;
}

static rdmx_rpc_server *serve(rdmx_ctx **ctx)
{
	struct rdmx_rpc_opts o;
	rdmx_rpc_server *s;

	opts(&o);
	o.workers = 2;
	if (rdmx_ctx_create(ctx, NULL) ||
	    rdmx_rpc_server_create(*ctx, th_addr(), 0, contract, 2, &o, &s) ||
	    rdmx_rpc_server_handle(s, M_ECHO, on_echo, NULL) ||
	    rdmx_rpc_server_handle(s, M_HOLD, on_hold, NULL))
		return NULL;
	return s;
}

static rdmx_rpc_client *dial(rdmx_ctx **ctx, uint16_t port)
{
	struct rdmx_rpc_opts o;
	rdmx_rpc_client *c;

	opts(&o);
	if (rdmx_ctx_create(ctx, NULL) ||
	    rdmx_rpc_client_create(*ctx, th_addr(), port, contract, 2, &o, &c)) {
		fprintf(stderr, "dial: %s\n", rdmx_last_error());
		return NULL;
	}
	return c;
}

/* @n held calls, then @n echoes in flight (their ids into @ids); 0 or the
 * first failure. One sync echo between: once it is answered the holds
 * were handed to their handler (a connection's requests run in order). */
static int calls_pending(rdmx_rpc_client *c, uint64_t *ids, unsigned char (*out)[256])
{
	static unsigned char in[ECHO_N][256];
	int status, rc = 0;

	for (int i = 0; !rc && i < HOLD_N; i++)
		rc = rdmx_rpc_call_async(c, M_HOLD, "h", 1, out[i], 8, &ids[i]);
	if (!rc)
		rc = rdmx_rpc_call(c, M_ECHO, "sync", 4, out[HOLD_N], 256, NULL, &status,
				   WAIT_MS);
	for (int i = 0; !rc && i < ECHO_N; i++) {
		th_fill(in[i], sizeof(in[i]), (uint64_t)i);
		rc = rdmx_rpc_call_async(c, M_ECHO, in[i], sizeof(in[i]), out[HOLD_N + i],
					 256, &ids[HOLD_N + i]);
	}
	return rc;
}

/* ---------------------------------------------------- the forked peers */

static pid_t srv_pid, cli_pid;
static int srv_fd[2], cli_port_fd[2], cli_ready_fd[2];

/* Child: serve, report the port, run until killed. */
static void srv_child(void)
{
	rdmx_rpc_server *s;
	rdmx_ctx *ctx;
	uint16_t port;

	s = serve(&ctx);
	if (!s)
		_exit(3);
	port = rdmx_rpc_server_port(s);
	if (write(srv_fd[1], &port, sizeof(port)) != sizeof(port))
		_exit(4);
	rdmx_rpc_server_run(s);
	_exit(5);
}

/* Child: wait for the port, dial, leave calls pending, report, wait to die. */
static void cli_child(void)
{
	static unsigned char out[HOLD_N + ECHO_N][256];
	uint64_t ids[HOLD_N + ECHO_N];
	rdmx_rpc_client *c;
	rdmx_ctx *ctx;
	uint16_t port;
	char ok = 1;

	if (read(cli_port_fd[0], &port, sizeof(port)) != sizeof(port))
		_exit(3);
	c = dial(&ctx, port);
	if (!c || calls_pending(c, ids, out))
		ok = 0;
	if (write(cli_ready_fd[1], &ok, 1) != 1)
		_exit(4);
	for (;;)
		pause();
}

static pid_t fork_child(void (*child)(void))
{
	pid_t pid = fork();

	if (pid == 0)
		child();
	return pid;
}

static void reap(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
		*pid = 0;
	}
}

/* ------------------------------------------------------------ the cases */

static void t_server_killed(void **state)
{
	static unsigned char out[HOLD_N + ECHO_N][256];
	uint64_t ids[HOLD_N + ECHO_N];
	int status, rc, gone = 0;
	rdmx_rpc_client *c;
	rdmx_ctx *ctx;
	uint16_t port;
	double t0;

	(void)state;
	assert_int_equal(read(srv_fd[0], &port, sizeof(port)), sizeof(port));
	c = dial(&ctx, port);
	assert_non_null(c);
	for (uint64_t i = 0; i < 100; i++) {
		size_t len = 0;

		th_fill(out[0], 200, i);
		assert_int_equal(rdmx_rpc_call(c, M_ECHO, out[0], 200, out[1], 256, &len,
					       &status, WAIT_MS), 0);
		assert_int_equal(th_check(out[1], len, i), -1);
	}
	assert_int_equal(calls_pending(c, ids, out), 0);
	assert_int_equal(kill(srv_pid, SIGKILL), 0);
	assert_int_equal(waitpid(srv_pid, NULL, 0), srv_pid);
	srv_pid = 0;
	t0 = th_now_ms();
	for (int i = 0; i < HOLD_N + ECHO_N; i++) {
		rc = rdmx_rpc_wait(c, ids[i], &status, NULL, GONE_MS);
		if (i < HOLD_N && rc != -ECONNRESET)
			fail_msg("held call %d after the server's SIGKILL: %s (%s)", i,
				 rdmx_strerror(rc), rdmx_rpc_client_error(c));
		assert_true(rc == 0 || rc == -ECONNRESET);
		gone += rc != 0;
	}
	print_message("%s: %d of %d pending calls failed -ECONNRESET %.0f ms after the "
		      "server's SIGKILL\n", getenv("RPC_TRANSPORT") ? getenv("RPC_TRANSPORT")
		      : "msg", gone, HOLD_N + ECHO_N, th_now_ms() - t0);
	assert_true(th_now_ms() - t0 < GONE_MS);
	t0 = th_now_ms();
	assert_int_equal(rdmx_rpc_call(c, M_ECHO, "x", 1, out[0], 256, NULL, &status,
				       WAIT_MS), -ECONNRESET);
	assert_true(th_now_ms() - t0 < 1000); /* failed at once, not waited for */
	rdmx_rpc_client_destroy(c);
	rdmx_ctx_destroy(ctx);
}

/* Wait (bounded) until the server has @open connections open; 0 or -ETIMEDOUT. */
static int open_wait(rdmx_rpc_server *s, uint64_t open)
{
	struct rdmx_rpc_server_stats st;
	double end = th_now_ms() + GONE_MS;

	do {
		rdmx_rpc_server_stats(s, &st);
		if (st.open == open)
			return 0;
		usleep(1000);
	} while (th_now_ms() < end);
	return -ETIMEDOUT;
}

static void *run_main(void *arg)
{
	rdmx_rpc_server_run(arg);
	return NULL;
}

static void t_client_killed(void **state)
{
	unsigned char out[256];
	rdmx_rpc_client *c;
	rdmx_rpc_server *s;
	rdmx_ctx *ctx, *cctx;
	pthread_t t;
	uint16_t port;
	double t0;
	size_t len;
	int status;
	char ok;

	(void)state;
	s = serve(&ctx);
	assert_non_null(s);
	assert_int_equal(pthread_create(&t, NULL, run_main, s), 0);
	port = rdmx_rpc_server_port(s);
	assert_int_equal(write(cli_port_fd[1], &port, sizeof(port)), sizeof(port));
	assert_int_equal(read(cli_ready_fd[0], &ok, 1), 1);
	assert_int_equal(ok, 1);
	assert_int_equal(open_wait(s, 1), 0);
	assert_int_equal(kill(cli_pid, SIGKILL), 0);
	assert_int_equal(waitpid(cli_pid, NULL, 0), cli_pid);
	cli_pid = 0;
	t0 = th_now_ms();
	usleep(100 * 1000);
	pthread_mutex_lock(&held.lock);
	assert_int_equal(held.n, HOLD_N);
	for (int i = 0; i < HOLD_N; i++)
		rdmx_rpc_respond(held.req[i], 0, 0); /* may fail: nobody there */
	held.n = 0;
	pthread_mutex_unlock(&held.lock);
	assert_int_equal(open_wait(s, 0), 0);
	print_message("%s: the killed client's connection closed %.0f ms after its "
		      "SIGKILL\n", getenv("RPC_TRANSPORT") ? getenv("RPC_TRANSPORT") : "msg",
		      th_now_ms() - t0);
	c = dial(&cctx, port);
	assert_non_null(c);
	th_fill(out, 100, 7);
	assert_int_equal(rdmx_rpc_call(c, M_ECHO, out, 100, out, sizeof(out), &len, &status,
				       WAIT_MS), 0);
	assert_int_equal(th_check(out, len, 7), -1);
	assert_int_equal(open_wait(s, 1), 0);
	rdmx_rpc_client_destroy(c);
	rdmx_ctx_destroy(cctx);
	assert_int_equal(open_wait(s, 0), 0);
	rdmx_rpc_server_stop(s);
	pthread_join(t, NULL);
	rdmx_rpc_server_destroy(s);
	rdmx_ctx_destroy(ctx);
}

static int reap_children(void **state)
{
	(void)state;
	reap(&srv_pid);
	reap(&cli_pid);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_server_killed),
		cmocka_unit_test(t_client_killed),
	};

	if (pipe(srv_fd) || pipe(cli_port_fd) || pipe(cli_ready_fd))
		return 1;
	srv_pid = fork_child(srv_child);
	cli_pid = fork_child(cli_child);
	if (srv_pid < 0 || cli_pid < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, reap_children);
}
