/* SPDX-License-Identifier: MIT */
/*
 * The memcached front door survives what memcached survives (issue 24 §4,
 * src/kv/mc_server.c): out of file descriptors it refuses newcomers in
 * words and pauses instead of spinning on accept4 (a server in a forked
 * child with a lowered RLIMIT_NOFILE, the accept calls counted by its
 * stats); an idle client is closed; a request past the per-connection or
 * the all-connections buffer cap is refused with memcached's error text.
 * The figures (CPU time of the server, how long until a close) are
 * printed, not asserted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmx/kv.h>

#include "unit/mc_sock.h"

#define NEWCOMERS 12
#define FULL "ERROR Too many open connections\r\n"

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void pause_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

/* --------------------------------------------------- out of descriptors */

/* The highest descriptor open in this process. */
static int fd_max(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int max = 2;

	while (d && (e = readdir(d)))
		if (atoi(e->d_name) > max)
			max = atoi(e->d_name);
	if (d)
		closedir(d);
	return max;
}

/*
 * Lower RLIMIT_NOFILE a little above what is open and take every free
 * descriptor below it, then give @keep back: the process has exactly
 * @keep descriptors left. Returns one still taken, to give back later.
 */
static int fds_fill(int keep)
{
	struct rlimit rl;
	int fd, last = -1, lim = fd_max() + 24;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = (rlim_t)lim;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		_exit(3);
	while ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		last = fd;
	for (int i = 0; i < keep; i++)
		close(last - i);
	return last - keep; /* still open: the next to give back */
}

/*
 * The child: a server whose process has run out of descriptors. @spare:
 * the server is made while a few are free (it keeps its spare); else
 * made with exactly its own three (listener, stop pipe), no spare. Then
 * one descriptor is left free for the test's stats client. The port goes
 * to @out. Never returns.
 */
static void child_serve(bool spare, int out)
{
	struct rdmx_kv_server_opts o;
	rdmx_kv_server *srv;
	int port, next;

	rdmx_kv_server_opts_init(&o);
	o.capacity = 64;
	o.memory = 1 << 20;
	o.memcached_port = 0;
	if (spare) {
		if (rdmx_kv_server_create(&o, &srv))
			_exit(4);
		fds_fill(1);
	} else {
		next = fds_fill(3);
		if (rdmx_kv_server_create(&o, &srv))
			_exit(4);
		close(next);
	}
	port = rdmx_kv_server_port(srv);
	if (write(out, &port, sizeof(port)) != sizeof(port))
		_exit(5);
	_exit(rdmx_kv_server_run(srv) ? 6 : 0);
}

/* CPU milliseconds the process @pid has used (user and system). */
static double cpu_ms(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static pid_t child_start(bool spare, int *port)
{
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(p[0]);
		child_serve(spare, p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], port, sizeof(*port)), sizeof(*port));
	close(p[0]);
	return pid;
}

static void child_end(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
}

/*
 * Under valgrind the descriptor table is valgrind's (it keeps its own
 * descriptors above a lowered limit and answers setrlimit itself), so
 * running out of descriptors is not what the door would meet: the two
 * EMFILE cases run natively, under ASan/UBSan and TSan, and say so here.
 */
static bool under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "vgpreload");
}

/*
 * With its spare descriptor, a server out of descriptors refuses every
 * newcomer with memcached's "ERROR Too many open connections": one
 * failed accept4 each, no loop (today: 24,495 failed accept4 a second).
 */
static void test_emfile_spare(void **state)
{
	char buf[256];
	int port, stats, fds[NEWCOMERS];
	uint64_t failed, refused;
	double cpu0, cpu1;
	pid_t pid;

	(void)state;
	if (under_valgrind()) {
		fprintf(stderr, "test_emfile_spare: not under valgrind (its own descriptor table)\n");
		skip();
	}
	pid = child_start(true, &port);
	stats = mc_dial(port);
	assert_int_equal(mc_stat(stats, "curr_connections"), 1);
	cpu0 = cpu_ms(pid);
	for (int i = 0; i < NEWCOMERS; i++) {
		fds[i] = mc_dial(port);
		assert_string_equal(mc_await(fds[i], "\r\n", buf, sizeof(buf)), FULL);
	}
	pause_ms(300); /* a spinning server would spin now */
	failed = mc_stat(stats, "rdmx_accept_failed");
	refused = mc_stat(stats, "rejected_connections");
	cpu1 = cpu_ms(pid);
	fprintf(stderr, "EMFILE with a spare: %d newcomers, %llu refused, %llu failed "
		"accept4, server CPU %.0f ms over %d newcomers and 300 ms\n", NEWCOMERS,
		(unsigned long long)refused, (unsigned long long)failed, cpu1 - cpu0,
		NEWCOMERS);
	assert_int_equal(refused, NEWCOMERS);
	assert_int_equal(failed, NEWCOMERS);
	assert_int_equal(mc_stat(stats, "listen_disabled_num"), 0);
	for (int i = 0; i < NEWCOMERS; i++)
		close(fds[i]);
	close(stats);
	child_end(pid);
}

/*
 * With no spare (every descriptor taken when the server was made), the
 * door stops polling its listener for a back-off (10 ms doubling to 1 s):
 * over an interval the failed accept4 calls are a handful, bounded by the
 * pauses. Once a descriptor is free again the waiting newcomer is told.
 */
static void test_emfile_backoff(void **state)
{
	enum { INTERVAL_MS = 1200 };
	char buf[256];
	int port, stats, fd;
	uint64_t failed, pauses;
	double cpu0, cpu1;
	pid_t pid;

	(void)state;
	if (under_valgrind()) {
		fprintf(stderr, "test_emfile_backoff: not under valgrind (its own descriptor table)\n");
		skip();
	}
	pid = child_start(false, &port);
	stats = mc_dial(port);
	assert_int_equal(mc_stat(stats, "curr_connections"), 1);
	cpu0 = cpu_ms(pid);
	fd = mc_dial(port); /* waits in the backlog: no descriptor for it */
	pause_ms(INTERVAL_MS);
	failed = mc_stat(stats, "rdmx_accept_failed");
	pauses = mc_stat(stats, "listen_disabled_num");
	cpu1 = cpu_ms(pid);
	fprintf(stderr, "EMFILE without a spare: %llu failed accept4, %llu pauses, "
		"server CPU %.0f ms over %d ms\n", (unsigned long long)failed,
		(unsigned long long)pauses, cpu1 - cpu0, INTERVAL_MS);
	/* 10+20+...+640 ms (7 pauses) then 1 s pauses: 9 within 1.2 s */
	assert_true(failed >= 1 && failed <= 12);
	assert_int_equal(pauses, failed);
	close(stats); /* a descriptor free: the spare is taken, the newcomer told */
	assert_string_equal(mc_await(fd, "\r\n", buf, sizeof(buf)), FULL);
	close(fd);
	child_end(pid);
}

/* ------------------------------------------------------------ idleness */

static rdmx_kv_server *server_start(struct rdmx_kv_server_opts *o, pthread_t *t)
{
	rdmx_kv_server *srv = NULL;

	o->capacity = 64;
	o->memory = 1 << 20;
	o->memcached_port = 0;
	assert_int_equal(rdmx_kv_server_create(o, &srv), 0);
	assert_int_equal(pthread_create(t, NULL, mc_serve, srv), 0);
	return srv;
}

static void server_end(rdmx_kv_server *srv, pthread_t t)
{
	void *rc;

	rdmx_kv_server_stop(srv);
	pthread_join(t, &rc);
	assert_int_equal((intptr_t)rc, 0);
	rdmx_kv_server_destroy(srv);
}

/*
 * --idle-timeout: a client that sends and takes nothing is closed (EOF,
 * counted as idle_kicks, as memcached's); one that keeps talking stays.
 */
static void test_idle_timeout(void **state)
{
	enum { IDLE_MS = 200 };
	struct rdmx_kv_server_opts o;
	rdmx_kv_server *srv;
	char buf[256];
	pthread_t t;
	int idle, busy;
	double t0, closed = -1;

	(void)state;
	rdmx_kv_server_opts_init(&o);
	o.idle_timeout_ms = IDLE_MS;
	srv = server_start(&o, &t);
	idle = mc_dial(rdmx_kv_server_port(srv));
	busy = mc_dial(rdmx_kv_server_port(srv));
	t0 = now_ms();
	for (int i = 0; i < 6; i++) { /* busy talks every IDLE_MS / 2 */
		struct pollfd p = { .fd = idle, .events = POLLIN };

		mc_say(busy, "version\r\n");
		assert_non_null(strstr(mc_await(busy, "\r\n", buf, sizeof(buf)), "VERSION"));
		if (closed < 0 && poll(&p, 1, IDLE_MS / 2) == 1 && read(idle, buf, 1) == 0)
			closed = now_ms() - t0;
		else if (closed >= 0)
			pause_ms(IDLE_MS / 2);
	}
	if (closed < 0)
		assert_string_equal(mc_await(idle, "never", buf, sizeof(buf)), ""); /* EOF */
	fprintf(stderr, "idle timeout %d ms: the idle client closed after %.0f ms, the "
		"busy one served for %.0f ms\n", IDLE_MS, closed, now_ms() - t0);
	assert_int_equal(mc_stat(busy, "idle_kicks"), 1);
	assert_int_equal(mc_stat(busy, "curr_connections"), 1);
	close(idle);
	close(busy);
	server_end(srv, t);
}

/* ------------------------------------------------------------ buffer caps */

/* @n bytes of a get line that never ends ("get k k k ..."). */
static void say_endless_get(int fd, size_t n)
{
	char *line = malloc(n + 1);

	memset(line, 'k', n);
	for (size_t i = 4; i < n; i += 2)
		line[i] = ' ';
	memcpy(line, "get ", 4);
	line[n] = 0;
	mc_say(fd, line);
	free(line);
}

/*
 * --conn-buffer: a request that would need more than one connection may
 * hold is refused with "SERVER_ERROR out of memory reading request" and
 * closed, a data block larger than the cap with "... storing object";
 * the other clients are served.
 */
static void test_conn_cap(void **state)
{
	struct rdmx_kv_server_opts o;
	rdmx_kv_server *srv;
	char buf[256], *set = malloc(200100);
	pthread_t t;
	int greedy, big, good, n;

	(void)state;
	rdmx_kv_server_opts_init(&o);
	o.conn_buffer_max = 160 << 10;
	o.item_max = 1 << 20;
	srv = server_start(&o, &t);
	greedy = mc_dial(rdmx_kv_server_port(srv));
	say_endless_get(greedy, 300 << 10);
	assert_string_equal(mc_await(greedy, "never", buf, sizeof(buf)),
			    "SERVER_ERROR out of memory reading request\r\n"); /* then EOF */
	big = mc_dial(rdmx_kv_server_port(srv));
	n = snprintf(set, 200100, "set b 0 0 200000\r\n");
	memset(set + n, 'v', 200000);
	strcpy(set + n + 200000, "\r\nget b\r\n");
	mc_say(big, set);
	assert_string_equal(mc_await(big, "END\r\n", buf, sizeof(buf)),
			    "SERVER_ERROR out of memory storing object\r\nEND\r\n");
	good = mc_dial(rdmx_kv_server_port(srv));
	mc_say(good, "set k 0 0 2\r\nok\r\nget k\r\n");
	assert_string_equal(mc_await(good, "END\r\n", buf, sizeof(buf)),
			    "STORED\r\nVALUE k 0 2\r\nok\r\nEND\r\n");
	assert_true(mc_stat(good, "rdmx_buffer_refused") >= 2);
	close(greedy);
	close(big);
	close(good);
	server_end(srv, t);
	free(set);
}

/*
 * --buffer-max: the connections together hold no more; the one whose
 * growth would pass it is refused ("out of memory reading request"),
 * the one already holding its share finishes its request.
 */
static void test_total_cap(void **state)
{
	struct rdmx_kv_server_opts o;
	rdmx_kv_server *srv;
	char buf[256];
	pthread_t t;
	int a, b, watch, port;

	(void)state;
	rdmx_kv_server_opts_init(&o);
	o.conn_buffer_max = 192 << 10;
	o.buffer_max = 240 << 10;
	srv = server_start(&o, &t);
	port = rdmx_kv_server_port(srv);
	watch = mc_dial(port);
	a = mc_dial(port);
	say_endless_get(a, 100 << 10); /* a's input buffer grows to 128 KiB */
	while (mc_stat(watch, "rdmx_buffer_bytes") < (160 << 10))
		pause_ms(5);
	b = mc_dial(port);
	say_endless_get(b, 100 << 10); /* passes 240 KiB at its growth to 128 KiB */
	assert_string_equal(mc_await(b, "never", buf, sizeof(buf)),
			    "SERVER_ERROR out of memory reading request\r\n");
	mc_say(a, "\r\n");
	assert_string_equal(mc_await(a, "END\r\n", buf, sizeof(buf)), "END\r\n");
	fprintf(stderr, "all connections' cap 240 KiB: %llu bytes held now, %llu "
		"growths refused\n", (unsigned long long)mc_stat(watch, "rdmx_buffer_bytes"),
		(unsigned long long)mc_stat(watch, "rdmx_buffer_refused"));
	close(a);
	close(b);
	close(watch);
	server_end(srv, t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_emfile_spare),
		cmocka_unit_test(test_emfile_backoff),
		cmocka_unit_test(test_idle_timeout),
		cmocka_unit_test(test_conn_cap),
		cmocka_unit_test(test_total_cap),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
