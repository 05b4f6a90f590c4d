/* SPDX-License-Identifier: MIT */
/*
 * idle-recv: the CPU an idle rdmx_recv() costs in a wait mode, on the
 * public API only (so one source builds against any librdmx):
 *   idle-recv PROTOCOL [block|adaptive|spin [MS [notify ack]]]
 * A connection to itself over the address rdmx picks; the server side
 * waits MS ms (default 2000) for a message that never comes and prints
 * the share of a core its thread used. bench/doorbell-figures runs it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <rdmx/rdmx.h>

struct dialer {
	rdmx_ctx *ctx;
	const char *addr;
	uint16_t port;
	struct rdmx_conn_opts *o;
	rdmx_conn *c;
	int rc;
};

static void *dial_main(void *arg)
{
	struct dialer *d = arg;

	d->rc = rdmx_dial(d->ctx, d->addr, d->port, d->o, &d->c);
	return NULL;
}

static double ms_of(const struct timeval *t)
{
	return t->tv_sec * 1e3 + t->tv_usec / 1e3;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static uint8_t mode_of(const char *s)
{
	return !strcmp(s, "spin") ? RDMX_WAIT_SPIN :
	       !strcmp(s, "adaptive") ? RDMX_WAIT_ADAPTIVE : RDMX_WAIT_BLOCK;
}

int main(int argc, char **argv)
{
	struct rdmx_conn_opts o;
	struct dialer d = { .o = &o };
	rdmx_listener *lis;
	rdmx_conn *s;
	struct rusage r0, r1;
	struct rdmx_msg m;
	char addr[64];
	pthread_t t;
	double t0, cpu;
	int ms, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: idle-recv PROTOCOL [MODE [MS [NOTIFY ACK]]]\n");
		return 2;
	}
	rdmx_conn_opts_init(&o);
	o.protocol = argv[1];
	o.wait_mode = mode_of(argc > 2 ? argv[2] : "block");
	ms = argc > 3 ? atoi(argv[3]) : 2000;
	if (argc > 5) {
		o.notify = (uint8_t)atoi(argv[4]);
		o.ack = (uint8_t)atoi(argv[5]);
	}
	rc = rdmx_pick_address(NULL, -1, addr, sizeof(addr));
	if (!rc)
		rc = rdmx_ctx_create(&d.ctx, NULL);
	if (!rc)
		rc = rdmx_listen(d.ctx, addr, 0, &o, &lis);
	if (rc) {
		fprintf(stderr, "idle-recv: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
		return 1;
	}
	d.addr = addr;
	d.port = rdmx_listener_port(lis);
	pthread_create(&t, NULL, dial_main, &d);
	rc = rdmx_accept(lis, 10000, &s);
	pthread_join(t, NULL);
	if (rc || d.rc) {
		fprintf(stderr, "idle-recv: connect: %s (%s)\n", rdmx_strerror(rc ? rc : d.rc),
			rdmx_last_error());
		return 1;
	}
	getrusage(RUSAGE_THREAD, &r0);
	t0 = now_ms();
	rc = rdmx_recv(s, &m, ms);
	getrusage(RUSAGE_THREAD, &r1);
	cpu = ms_of(&r1.ru_utime) + ms_of(&r1.ru_stime) - ms_of(&r0.ru_utime) -
	      ms_of(&r0.ru_stime);
	printf("idle rdmx_recv(%d ms) %s on %s: %.2f%% of a core (%s)\n", ms,
	       argc > 2 ? argv[2] : "block", argv[1], 100.0 * cpu / (now_ms() - t0),
	       rc == -ETIMEDOUT ? "timed out" : rdmx_strerror(rc));
	rdmx_conn_close(d.c);
	rdmx_conn_close(s);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(d.ctx);
	return 0;
}
