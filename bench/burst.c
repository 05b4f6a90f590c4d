/* SPDX-License-Identifier: MIT */
/*
 * burst: small-message rate with bursts (rdmx_send_flags, RDMX_SEND_MORE;
 * issue 10), through the public API.
 *
 *   burst rate PROTOCOL SIZE COUNT BURST SIGNAL_EVERY
 *     a receiver thread takes COUNT messages of SIZE bytes while the
 *     sender sends them in bursts of BURST (all but a burst's last with
 *     RDMX_SEND_MORE; 1: plain sends); prints messages per second, from
 *     the first send to the last message taken.
 *   burst step PROTOCOL SIZE COUNT BURST SIGNAL_EVERY
 *     one thread in lockstep: a burst is sent, then taken. For callgrind
 *     on the fake fabric (bench/profile-burst): no instruction waits.
 *
 * The receiver takes with rdmx_recv_many when BURST > 1 (up to BURST, at
 * most BURST_MAX, per call), with rdmx_recv for 1.
 * SIGNAL_EVERY is the connection option (0: the protocol's default);
 * BURST_COALESCE in the environment sets coalesce (1: OFF, 2: ON);
 * BURST_SENDV=1 sends each burst with one rdmx_sendv (copies of a
 * buffer the sender fills) instead of alloc/send per message. The
 * fabric is the build's: burst (verbs, run it in the sandbox) or
 * burst_fake.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmx/rdmx.h>

#include "harness.h"

#define BURST_MAX 64 /* messages per rdmx_recv_many */

struct run {
	rdmx_conn *c, *s;
	size_t size;
	long count;
	unsigned burst;
	int sendv;               /* BURST_SENDV: one rdmx_sendv a burst */
	uint8_t *vbuf;           /* its messages' bytes, BURST_MAX x size */
	int rc;
};

static int die(const char *what, int rc)
{
	fprintf(stderr, "burst: %s: %s (%s)\n", what, rdmx_strerror(rc),
		rdmx_last_error());
	return 1;
}

/* Messages #@from..@to-1 as one rdmx_sendv (or more, if it sends a
 * part), each filled as send_burst fills it. */
static int send_vec(struct run *r, long from, long to)
{
	struct iovec iov[BURST_MAX];
	int n = (int)(to - from), rc;

	for (int i = 0; i < n; i++) {
		iov[i].iov_base = r->vbuf + (size_t)i * r->size;
		iov[i].iov_len = r->size;
		memset(iov[i].iov_base, (int)((from + i) & 0xff), r->size);
	}
	for (int i = 0; i < n; i += rc) {
		rc = rdmx_sendv(r->c, iov + i, n - i, 10000, NULL);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Messages #@from..@to-1 as one burst. */
static int send_burst(struct run *r, long from, long to)
{
	if (r->sendv)
		return send_vec(r, from, to);
	for (long i = from; i < to; i++) {
		struct rdmx_msg m;
		int rc = rdmx_msg_alloc(r->c, r->size, &m, 10000);

		if (rc)
			return rc;
		memset(m.data, (int)(i & 0xff), r->size);
		m.len = r->size;
		rc = rdmx_send_flags(r->c, &m, i + 1 < to ? RDMX_SEND_MORE : 0, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

/* Message #@i checked: 0 or -EBADMSG. */
static int check(const struct run *r, const struct rdmx_msg *m, long i)
{
	if (m->len != r->size ||
	    (r->size && ((uint8_t *)m->data)[r->size - 1] != (i & 0xff)))
		return -EBADMSG;
	return 0;
}

/* Take messages #@from..@to-1, each checked: one rdmx_recv each for
 * bursts of 1, else as many per rdmx_recv_many as are in (up to a
 * burst), given back with one rdmx_msg_release_many. */
static int take(struct run *r, long from, long to)
{
	struct rdmx_msg m[BURST_MAX];

	while (from < to) {
		long want = to - from < r->burst ? to - from : r->burst;
		int n = 1, rc = 0;

		if (want > 1)
			n = rdmx_recv_many(r->s, m, want < BURST_MAX ? (int)want : BURST_MAX,
					   10000);
		else if ((rc = rdmx_recv(r->s, m, 10000)))
			return rc;
		if (n < 0)
			return n;
		for (int k = 0; k < n && !rc; k++)
			rc = check(r, &m[k], from + k);
		from += n;
		if (want > 1)
			rdmx_msg_release_many(r->s, m, n);
		else
			rdmx_msg_release(r->s, m);
		if (rc)
			return rc;
	}
	return 0;
}

static void *taker(void *arg)
{
	struct run *r = arg;

	r->rc = take(r, 0, r->count);
	return NULL;
}

static int rate(struct run *r)
{
	pthread_t t;
	double t0, t1;
	int rc = 0;

	pthread_create(&t, NULL, taker, r);
	t0 = th_now_ms();
	for (long i = 0; i < r->count && !rc; i += r->burst)
		rc = send_burst(r, i, i + r->burst < r->count ? i + r->burst : r->count);
	pthread_join(t, NULL);
	t1 = th_now_ms();
	if (rc || r->rc)
		return rc ? rc : r->rc;
	printf("%ld msgs of %zu B, bursts of %u: %.0f msgs/s\n", r->count, r->size,
	       r->burst, r->count / ((t1 - t0) / 1000.0));
	return 0;
}

static int step(struct run *r)
{
	int rc = 0;

	for (long i = 0; i < r->count && !rc; i += r->burst) {
		long to = i + r->burst < r->count ? i + r->burst : r->count;

		rc = send_burst(r, i, to);
		if (!rc)
			rc = take(r, i, to);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct rdmx_conn_opts o;
	struct run r = { 0 };
	struct th_pair p;
	int rc;

	if (argc != 7 || (strcmp(argv[1], "rate") && strcmp(argv[1], "step"))) {
		fprintf(stderr, "usage: burst rate|step PROTOCOL SIZE COUNT BURST SIGNAL_EVERY\n");
		return 2;
	}
	rdmx_conn_opts_init(&o);
	o.protocol = argv[2];
	o.max_msg_size = 4096;
	o.signal_every = (uint32_t)strtoul(argv[6], NULL, 0);
	if (getenv("BURST_COALESCE"))
		o.coalesce = (uint8_t)strtoul(getenv("BURST_COALESCE"), NULL, 0);
	r.size = strtoul(argv[3], NULL, 0);
	r.count = strtol(argv[4], NULL, 0);
	r.burst = (unsigned)strtoul(argv[5], NULL, 0);
	if (!r.burst || r.count < 1 || r.size > 4096 || r.burst > BURST_MAX) {
		fprintf(stderr, "burst: 1 <= BURST <= %d, COUNT >= 1, SIZE <= 4096\n", BURST_MAX);
		return 2;
	}
	r.sendv = getenv("BURST_SENDV") && atoi(getenv("BURST_SENDV"));
	r.vbuf = malloc((size_t)BURST_MAX * (r.size ? r.size : 1));
	if (!r.vbuf)
		return die("malloc", -ENOMEM);
	if ((rc = th_pair_open(&p, &o, &o)))
		return die("connect", rc);
	r.c = p.client;
	r.s = p.server;
	rc = argv[1][0] == 'r' ? rate(&r) : step(&r);
	th_pair_close(&p);
	free(r.vbuf);
	return rc ? die(argv[1], rc) : 0;
}
