/* SPDX-License-Identifier: MIT */
/*
 * Liveness across two hosts (tests/two-host-live runs it in the two-VM
 * sandbox): a peer that stops answering is declared dead within the
 * connection's bound (opts.liveness_ms), and a peer that is merely frozen
 * is not.
 *
 *   two_live --server [--port P]      one listener per protocol on ports
 *                                     P, P+1, ... (rdmx_protocol_names()
 *                                     order), one connection at a time,
 *                                     a fresh listener for each (a dead
 *                                     write_atomic member leaves a hole
 *                                     in the shared ring)
 *   two_live --client ADDR --cut CMD --heal CMD [--port P]
 *            [--bound MS]... [--protocol NAME]... [--stall S]
 *
 * The client runs, for each bound and protocol, two cases; CMD cuts (and
 * heals) the link on the client's host (netem loss 100%):
 *   busy  echo a stream (16 messages in flight); another thread cuts the
 *         link; the stream's blocking calls (rdmx_recv(-1),
 *         rdmx_msg_alloc(-1)) must fail with -ECONNRESET, "peer stopped
 *         answering", within the bound of the cut.
 *   idle  the server freezes its whole process (SIGSTOP, a helper process
 *         sends SIGCONT later); with the link up, rdmx_recv(2.5 bounds)
 *         must time out with the connection still up (the peer's NIC
 *         answers the keepalives); then, the peer still frozen, the link
 *         is cut and rdmx_recv(-1) must fail as above within the bound.
 * It prints one line per case with the detection time and "N passed, N
 * failed". --stall aborts a case that hangs (default 300 s).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmx/rdmx.h>

#include "harness.h"

#define WINDOW 16
#define MAX_MSG 4096
#define MAX_LIST 16
#define FREEZE "rdmx-two-live: freeze for ms "

extern char **environ;

static struct rdmx_conn_opts opts_for(const char *protocol, uint32_t bound_ms)
{
	struct rdmx_conn_opts o = th_opts(protocol, MAX_MSG, 0, 0);

	o.connect_timeout_ms = 10000;
	if (bound_ms)
		o.liveness_ms = bound_ms;
	return o;
}

static int send_bytes(rdmx_conn *c, const void *data, size_t len)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, len, &m, -1);

	if (rc)
		return rc;
	memcpy(m.data, data, len);
	m.len = len;
	return rdmx_send(c, &m);
}

/* ---- server ---- */

/* Stop this whole process for @ms: a helper process (posix_spawn, no
 * fork of this RDMA process) sends SIGCONT when the time is up. */
static void freeze(const char *protocol, long ms)
{
	char cmd[96];
	char *argv[] = { "sh", "-c", cmd, NULL };
	pid_t pid;

	snprintf(cmd, sizeof(cmd), "sleep %ld.%03ld; kill -CONT %ld", ms / 1000, ms % 1000,
		 (long)getpid());
	if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ)) {
		fprintf(stderr, "server %s: cannot spawn the waker: not freezing\n", protocol);
		return;
	}
	fprintf(stderr, "server %s: frozen for %ld ms\n", protocol, ms);
	raise(SIGSTOP);
	fprintf(stderr, "server %s: running again\n", protocol);
}

/* Echo @c's messages until it fails; a freeze request is answered, then
 * obeyed. */
static int serve_conn(const char *protocol, rdmx_conn *c)
{
	struct rdmx_msg m;
	long ms = -1;
	int rc;

	while (!(rc = rdmx_recv(c, &m, -1))) {
		if (m.len > strlen(FREEZE) && m.len < 64 &&
		    !memcmp(m.data, FREEZE, strlen(FREEZE)))
			ms = strtol((char *)m.data + strlen(FREEZE), NULL, 10);
		rc = send_bytes(c, m.data, m.len);
		rdmx_msg_release(c, &m);
		if (rc)
			break;
		if (ms > 0)
			freeze(protocol, ms);
		ms = -1;
	}
	return rc;
}

struct server {
	pthread_t thread;
	rdmx_ctx *ctx;
	const char *protocol;
	uint16_t port;
};

/* One connection at a time, each on a fresh listener, until killed. */
static void *serve_main(void *arg)
{
	struct server *s = arg;
	struct rdmx_conn_opts o = opts_for(s->protocol, 0);
	rdmx_listener *lis;
	rdmx_conn *c;
	int rc;

	for (;;) {
		if (rdmx_listen(s->ctx, NULL, s->port, &o, &lis)) {
			fprintf(stderr, "server %s: listen on %u: %s\n", s->protocol, s->port,
				rdmx_last_error());
			sleep(1);
			continue;
		}
		rc = rdmx_accept(lis, -1, &c);
		if (rc) {
			fprintf(stderr, "server %s: accept: %s\n", s->protocol,
				rdmx_listener_error(lis));
		} else {
			rc = serve_conn(s->protocol, c);
			fprintf(stderr, "server %s: connection ended: %s\n", s->protocol,
				rdmx_conn_error(c));
			rdmx_conn_close(c);
		}
		rdmx_listener_destroy(lis);
	}
	return NULL;
}

static int run_server(rdmx_ctx *ctx, uint16_t port)
{
	const char *const *names = rdmx_protocol_names();
	struct server s[MAX_LIST];
	int n = 0;

	signal(SIGCHLD, SIG_IGN); /* reap the wakers */
	for (; names[n] && n < MAX_LIST; n++) {
		s[n] = (struct server){ .ctx = ctx, .protocol = names[n],
					.port = (uint16_t)(port + n) };
		pthread_create(&s[n].thread, NULL, serve_main, &s[n]);
	}
	fprintf(stderr, "server: %d protocols on ports %u..%u\n", n, port, port + n - 1);
	for (int i = 0; i < n; i++)
		pthread_join(s[i].thread, NULL);
	return 1;
}

/* ---- client ---- */

struct client {
	rdmx_ctx *ctx;
	const char *addr;
	const char *cut, *heal;
	uint16_t port;
	unsigned stall_s;
	int passed, failed;
};

/* One echoed message on a new connection: the server really serves it
 * (a dial that lands on a listener about to be replaced goes through and
 * is then closed). */
static int ping(rdmx_conn *c)
{
	static const char hello[] = "rdmx-two-live: ping";
	struct rdmx_msg m;
	int rc = send_bytes(c, hello, sizeof(hello));

	if (!rc)
		rc = rdmx_recv(c, &m, 10000);
	if (rc)
		return rc;
	rc = m.len == sizeof(hello) && !memcmp(m.data, hello, m.len) ? 0 : -EBADMSG;
	rdmx_msg_release(c, &m);
	return rc;
}

/* Dial, retrying while the server sets up its next listener (or is
 * still frozen from the last case) for up to 60 s. */
static int dial(struct client *cl, const char *protocol, uint16_t port, uint32_t bound,
		rdmx_conn **c)
{
	struct rdmx_conn_opts o = opts_for(protocol, bound);
	double give_up = th_now_ms() + 60000;
	int rc;

	for (;;) {
		rc = rdmx_dial(cl->ctx, cl->addr, port, &o, c);
		if (!rc && (rc = ping(*c)))
			rdmx_conn_close(*c);
		if (!rc || th_now_ms() > give_up)
			break;
		usleep(300000);
	}
	if (rc)
		printf("FAIL %-14s dial %s:%u: %s\n", protocol, cl->addr, port,
		       rdmx_last_error());
	else
		fprintf(stderr, "client %s: connected, bound %u ms\n", protocol, bound);
	return rc;
}

static int run_cmd(const char *what, const char *cmd)
{
	int rc;

	fprintf(stderr, "client: %s the link\n", what);
	rc = system(cmd);
	fprintf(stderr, "client: %s: done (%d)\n", what, rc);

	if (rc)
		printf("FAIL %s the link: '%s' exited with %d\n", what, cmd, rc);
	return rc ? -EIO : 0;
}

/* The call that failed, the time from the cut, and whether that is the
 * verdict liveness promises. */
/* @since_cut: from the start of the cut command, which took @cut_ms (a
 * fork and exec that a loaded emulated host can stretch to seconds): the
 * link was cut somewhere in that span, so the bound is checked from its
 * end and both are printed. */
static int judge(const char *protocol, const char *kase, uint32_t bound, rdmx_conn *c,
		 int rc, const char *call, double since_cut, double cut_ms, const char *extra)
{
	int ok = rc == -ECONNRESET && strstr(rdmx_conn_error(c), "stopped answering") &&
		 since_cut >= 0 && since_cut - cut_ms <= bound;

	printf("%s %-14s bound %5u ms  %s: %s -> %d %.0f ms after the cut began (the cut "
	       "took %.0f ms)%s\n  (%s)\n",
	       ok ? "ok  " : "FAIL", protocol, bound, kase, call, rc, since_cut, cut_ms,
	       extra, rdmx_conn_error(c));
	fflush(stdout);
	return ok ? 0 : -1;
}

struct cutter {
	pthread_t thread;
	const char *cmd;
	unsigned delay_ms;
	double at; /* when the cut command started (ms) */
	double took; /* and how long it ran */
	int rc;
};

static void *cut_main(void *arg)
{
	struct cutter *k = arg;

	usleep(k->delay_ms * 1000u);
	k->at = th_now_ms(); /* read after the join */
	k->rc = run_cmd("cut", k->cmd);
	k->took = th_now_ms() - k->at;
	return NULL;
}

static int echo_check(rdmx_conn *c, uint64_t seq)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(c, &m, -1);

	if (rc)
		return rc;
	if (m.len != 64 + seq % 2000 || th_check(m.data, m.len, seq) >= 0) {
		printf("FAIL echo #%llu corrupt (%zu bytes)\n", (unsigned long long)seq, m.len);
		rc = -EBADMSG;
	}
	rdmx_msg_release(c, &m);
	return rc;
}

/* Stream until the connection fails; @call names the call that failed. */
static int stream(rdmx_conn *c, const char **call, uint64_t *echoed)
{
	uint64_t sent = 0, got = 0;
	struct rdmx_msg m;
	int rc = 0;

	for (;;) {
		while (sent - got < WINDOW) {
			*call = "rdmx_msg_alloc(-1)";
			rc = rdmx_msg_alloc(c, 64 + sent % 2000, &m, -1);
			if (rc)
				goto out;
			th_fill(m.data, 64 + sent % 2000, sent);
			m.len = 64 + sent % 2000;
			*call = "rdmx_send";
			rc = rdmx_send(c, &m);
			if (rc)
				goto out;
			sent++;
		}
		*call = "rdmx_recv(-1)";
		rc = echo_check(c, got);
		if (rc)
			goto out;
		got++;
	}
out:
	*echoed = got;
	return rc;
}

static int case_busy(struct client *cl, const char *protocol, uint16_t port, uint32_t bound)
{
	struct cutter k = { .cmd = cl->cut, .delay_ms = 1000 };
	const char *call = "";
	char extra[64];
	uint64_t echoed;
	rdmx_conn *c;
	double at;
	int rc;

	if (dial(cl, protocol, port, bound, &c))
		return -1;
	pthread_create(&k.thread, NULL, cut_main, &k);
	rc = stream(c, &call, &echoed);
	at = th_now_ms();
	pthread_join(k.thread, NULL);
	snprintf(extra, sizeof(extra), ", %llu echoes before", (unsigned long long)echoed);
	if (!k.rc && rc == -EBADMSG)
		rc = -1;
	else if (!k.rc)
		rc = judge(protocol, "busy", bound, c, rc, call, at - k.at, k.took, extra);
	rdmx_conn_close(c);
	return (run_cmd("heal", cl->heal) || k.rc) ? -1 : rc;
}

/* Ask the server to freeze for @ms; 0 once it answered. */
static int ask_freeze(rdmx_conn *c, long ms)
{
	char req[64];
	struct rdmx_msg m;
	int rc;

	snprintf(req, sizeof(req), FREEZE "%ld", ms);
	rc = send_bytes(c, req, strlen(req));
	if (!rc)
		rc = rdmx_recv(c, &m, 30000);
	if (rc) {
		printf("FAIL freeze request: %s\n", rdmx_conn_error(c));
		return rc;
	}
	rc = m.len == strlen(req) && !memcmp(m.data, req, m.len) ? 0 : -EBADMSG;
	rdmx_msg_release(c, &m);
	return rc;
}

static int case_idle(struct client *cl, const char *protocol, uint16_t port, uint32_t bound)
{
	int stopped_ms = (int)(bound * 5 / 2);
	long freeze_ms = stopped_ms + bound + 3000; /* frozen until after the verdict */
	double t0, up_ms, cut_at, cut_ms, resume_at;
	struct rdmx_msg m;
	char extra[96];
	rdmx_conn *c;
	int rc;

	if (dial(cl, protocol, port, bound, &c))
		return -1;
	resume_at = th_now_ms() + (double)freeze_ms;
	if (ask_freeze(c, freeze_ms)) {
		rdmx_conn_close(c);
		return -1;
	}
	t0 = th_now_ms();
	rc = rdmx_recv(c, &m, stopped_ms);
	up_ms = th_now_ms() - t0;
	if (rc != -ETIMEDOUT) {
		printf("FAIL %-14s bound %5u ms  idle: the frozen peer (link up) gave %s after "
		       "%.0f ms instead of a timeout after %d ms (%s)\n",
		       protocol, bound, rdmx_strerror(rc), up_ms, stopped_ms, rdmx_conn_error(c));
		rdmx_conn_close(c);
		usleep(freeze_ms * 1000u);
		return -1;
	}
	cut_at = th_now_ms();
	if (run_cmd("cut", cl->cut))
		return -1;
	cut_ms = th_now_ms() - cut_at;
	rc = rdmx_recv(c, &m, -1);
	snprintf(extra, sizeof(extra), "; peer frozen with the link up: up for %.0f ms",
		 up_ms);
	rc = judge(protocol, "idle", bound, c, rc, "rdmx_recv(-1)", th_now_ms() - cut_at, cut_ms,
		   extra);
	if (th_now_ms() > resume_at - 200)
		printf("note: the peer was resumed (at %.0f ms) before the verdict\n", resume_at);
	rdmx_conn_close(c);
	if (run_cmd("heal", cl->heal))
		return -1;
	while (th_now_ms() < resume_at + 500)
		usleep(100000);
	return rc;
}

static void one(struct client *cl, const char *protocol, uint16_t port, uint32_t bound,
		int (*fn)(struct client *, const char *, uint16_t, uint32_t))
{
	th_watchdog(cl->stall_s, "FAIL %-14s bound %u ms: a case hung for %u s\nrun aborted\n",
		    protocol, bound, cl->stall_s);
	if (fn(cl, protocol, port, bound))
		cl->failed++;
	else
		cl->passed++;
	th_watchdog(0, NULL);
}

static int port_of(const char *protocol, uint16_t base)
{
	const char *const *names = rdmx_protocol_names();

	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], protocol))
			return base + i;
	return -1;
}

static int run_client(struct client *cl, const char **protos, int np, const uint32_t *bounds,
		      int nb)
{
	for (int b = 0; b < nb; b++) {
		for (int i = 0; i < np; i++) {
			int port = port_of(protos[i], cl->port);

			if (port < 0) {
				printf("FAIL %s: no such protocol\n", protos[i]);
				cl->failed++;
				continue;
			}
			one(cl, protos[i], (uint16_t)port, bounds[b], case_busy);
			one(cl, protos[i], (uint16_t)port, bounds[b], case_idle);
		}
	}
	printf("%d passed, %d failed\n", cl->passed, cl->failed);
	return cl->failed || !cl->passed;
}

int main(int argc, char **argv)
{
	const char *protos[MAX_LIST];
	uint32_t bounds[MAX_LIST];
	struct client cl = { .stall_s = 300 };
	int server = 0, np = 0, np_given, nb = 0, rc;
	long port = 18615;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--server"))
			server = 1;
		else if (!strcmp(argv[i], "--client") && i + 1 < argc)
			cl.addr = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--cut") && i + 1 < argc)
			cl.cut = argv[++i];
		else if (!strcmp(argv[i], "--heal") && i + 1 < argc)
			cl.heal = argv[++i];
		else if (!strcmp(argv[i], "--protocol") && i + 1 < argc && np < MAX_LIST)
			protos[np++] = argv[++i];
		else if (!strcmp(argv[i], "--bound") && i + 1 < argc && nb < MAX_LIST)
			bounds[nb++] = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--stall") && i + 1 < argc)
			cl.stall_s = (unsigned)strtoul(argv[++i], NULL, 10);
		else
			goto usage;
	}
	np_given = np;
	if (server == !!cl.addr || port < 1 || port > 65000 || !cl.stall_s ||
	    (!server && (!cl.cut || !cl.heal)))
		goto usage;
	while (!np_given && rdmx_protocol_names()[np] && np < MAX_LIST) {
		protos[np] = rdmx_protocol_names()[np];
		np++;
	}
	if (!nb)
		bounds[nb++] = 10000;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = rdmx_ctx_create(&cl.ctx, NULL);
	if (rc) {
		fprintf(stderr, "two_live: %s\n", rdmx_last_error());
		return 1;
	}
	cl.port = (uint16_t)port;
	rc = server ? run_server(cl.ctx, (uint16_t)port) : run_client(&cl, protos, np, bounds, nb);
	rdmx_ctx_destroy(cl.ctx);
	return rc;
usage:
	fprintf(stderr, "usage: two_live --server [--port P] | --client ADDR --cut CMD --heal CMD "
			"[--port P] [--bound MS]... [--protocol NAME]... [--stall SECONDS]\n");
	return 2;
}
