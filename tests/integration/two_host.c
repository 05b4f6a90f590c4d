/* SPDX-License-Identifier: MIT */
/*
 * Integrity across two hosts (tests/two-host-loss runs it in the two-VM
 * sandbox with netem loss on the link): RC retransmission must hide the
 * loss from every protocol.
 *
 *   two_host --server [--port P]          one echo listener per protocol,
 *                                         on ports P, P+1, ... (in the
 *                                         order of rdmx_protocol_names())
 *   two_host --client ADDR [--port P] [--count N] [--protocol NAME]
 *            [--skip NAME]                 leave one protocol out, said so
 *            [--stall S]                   fail a protocol not done in S s
 *                                          (default 600) instead of hanging
 *
 * The client streams N messages per protocol (sizes 1 B..max, seeded
 * random, up to WINDOW in flight), each carrying its sequence number and a
 * pattern; the server echoes them; the client checks every echoed byte and
 * the order. It prints one line per protocol and "N passed, N failed".
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmx/rdmx.h>

#include "harness.h"

#define WINDOW 16
#define MAX_MSG 16384

struct server {
	pthread_t thread;
	rdmx_ctx *ctx;
	const char *protocol;
	uint16_t port;
};

static struct rdmx_conn_opts opts_for(const char *protocol)
{
	struct rdmx_conn_opts o = th_opts(protocol, MAX_MSG, 0, 0);

	o.connect_timeout_ms = 30000;
	return o;
}

/* Serve one client after another until the process is killed. */
static void *serve_main(void *arg)
{
	struct server *s = arg;
	struct rdmx_conn_opts o = opts_for(s->protocol);
	rdmx_listener *lis;
	struct th_echo e;
	rdmx_conn *c;
	int rc = rdmx_listen(s->ctx, NULL, s->port, &o, &lis);

	if (rc) {
		fprintf(stderr, "server %s: listen on %u: %s\n", s->protocol, s->port,
			rdmx_last_error());
		return NULL;
	}
	for (;;) {
		rc = rdmx_accept(lis, -1, &c);
		if (rc) {
			fprintf(stderr, "server %s: accept: %s\n", s->protocol,
				rdmx_listener_error(lis));
			continue;
		}
		th_echo_start(&e, c);
		rc = th_echo_join(&e);
		fprintf(stderr, "server %s: echoed %ld (%s)\n", s->protocol, e.echoed,
			rdmx_strerror(rc));
		rdmx_conn_close(c);
	}
	return NULL;
}

static int run_server(rdmx_ctx *ctx, uint16_t port)
{
	const char *const *names = rdmx_protocol_names();
	struct server s[16];
	int n = 0;

	for (; names[n] && n < 16; n++) {
		s[n] = (struct server){ .ctx = ctx, .protocol = names[n],
					.port = (uint16_t)(port + n) };
		pthread_create(&s[n].thread, NULL, serve_main, &s[n]);
	}
	fprintf(stderr, "server: %d protocols on ports %u..%u\n", n, port, port + n - 1);
	for (int i = 0; i < n; i++)
		pthread_join(s[i].thread, NULL);
	return 1;
}

static size_t size_of(uint64_t seq)
{
	uint64_t r = seq ^ 0x5eed;
	unsigned bits = 1 + (unsigned)(th_rand(&r) % 14);
	size_t size = 1 + (size_t)(th_rand(&r) & ((1ull << bits) - 1));

	return size > MAX_MSG ? MAX_MSG : size;
}

static int send_one(rdmx_conn *c, uint64_t seq)
{
	size_t size = size_of(seq);
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, size, &m, 60000);

	if (rc)
		return rc;
	th_fill(m.data, size, seq);
	m.len = size;
	return rdmx_send(c, &m);
}

static int check_one(rdmx_conn *c, uint64_t seq, char *why, size_t wlen)
{
	struct rdmx_msg m;
	long bad;
	int rc = rdmx_recv(c, &m, 60000);

	if (rc) {
		snprintf(why, wlen, "recv #%llu: %s", (unsigned long long)seq,
			 rdmx_conn_error(c));
		return rc;
	}
	bad = m.len == size_of(seq) ? th_check(m.data, m.len, seq) : 0;
	if (bad >= 0)
		snprintf(why, wlen, "echo #%llu: %zu bytes (sent %zu), first bad byte %ld",
			 (unsigned long long)seq, m.len, size_of(seq), bad);
	rdmx_msg_release(c, &m);
	return bad >= 0 ? -EBADMSG : 0;
}

/* Stream @n messages with WINDOW in flight and check every echo. */
static int stream(rdmx_conn *c, uint64_t n, char *why, size_t wlen)
{
	uint64_t sent = 0, got = 0;
	int rc = 0;

	while (!rc && got < n) {
		while (!rc && sent < n && sent - got < WINDOW)
			rc = send_one(c, sent++);
		if (rc)
			snprintf(why, wlen, "send #%llu: %s", (unsigned long long)sent,
				 rdmx_conn_error(c));
		else
			rc = check_one(c, got++, why, wlen);
	}
	return rc;
}

static unsigned stall_s = 600;

static int client_one(rdmx_ctx *ctx, const char *addr, uint16_t port,
		      const char *protocol, uint64_t n)
{
	struct rdmx_conn_opts o = opts_for(protocol);
	double t0 = th_now_ms();
	char why[512] = "";
	rdmx_conn *c;
	int rc;

	th_watchdog(stall_s, "FAIL %-14s stalled: not done within %u s\nrun aborted\n",
		    protocol, stall_s);
	rc = rdmx_dial(ctx, addr, port, &o, &c);

	if (rc) {
		printf("FAIL %-14s dial %s:%u: %s\n", protocol, addr, port, rdmx_last_error());
		return rc;
	}
	rc = stream(c, n, why, sizeof(why));
	rdmx_conn_close(c);
	th_watchdog(0, NULL);
	if (rc)
		printf("FAIL %-14s %s\n", protocol, why);
	else
		printf("ok   %-14s %llu messages 1..%d B echoed intact and in order in %.1f s\n",
		       protocol, (unsigned long long)n, MAX_MSG, (th_now_ms() - t0) / 1e3);
	fflush(stdout);
	return rc;
}

static int run_client(rdmx_ctx *ctx, const char *addr, uint16_t port,
		      const char *only, const char *skip, uint64_t n)
{
	const char *const *names = rdmx_protocol_names();
	int passed = 0, failed = 0, skipped = 0;

	for (int i = 0; names[i]; i++) {
		if (only && strcmp(only, names[i]))
			continue;
		if (skip && !strcmp(skip, names[i])) {
			printf("SKIP %-14s excluded with --skip\n", names[i]);
			skipped++;
			continue;
		}
		if (client_one(ctx, addr, (uint16_t)(port + i), names[i], n))
			failed++;
		else
			passed++;
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed || !passed;
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *only = NULL, *skip = NULL;
	uint64_t n = 100000;
	long port = 18515;
	int server = 0, rc;
	rdmx_ctx *ctx;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--server"))
			server = 1;
		else if (!strcmp(argv[i], "--client") && i + 1 < argc)
			addr = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--protocol") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--skip") && i + 1 < argc)
			skip = argv[++i];
		else if (!strcmp(argv[i], "--stall") && i + 1 < argc)
			stall_s = (unsigned)strtoul(argv[++i], NULL, 10);
		else
			goto usage;
	}
	if (server == !!addr || port < 1 || port > 65000 || !n || !stall_s)
		goto usage;
	rc = rdmx_ctx_create(&ctx, NULL);
	if (rc) {
		fprintf(stderr, "two_host: %s\n", rdmx_last_error());
		return 1;
	}
	rc = server ? run_server(ctx, (uint16_t)port) :
		      run_client(ctx, addr, (uint16_t)port, only, skip, n);
	rdmx_ctx_destroy(ctx);
	return rc;
usage:
	fprintf(stderr, "usage: two_host --server [--port P] | --client ADDR [--port P] "
			"[--count N] [--protocol NAME] [--skip NAME] [--stall SECONDS]\n");
	return 2;
}
