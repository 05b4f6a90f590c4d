/* SPDX-License-Identifier: MIT */
/*
 * fastpath: the library's own cost per message, for profiling.
 *
 * One thread, one connection pair on the in-process fake fabric, in
 * lockstep: the client allocates, fills and sends a message; the server
 * receives it (it is already there: the fake fabric places a SEND, WRITE
 * or READ when it is posted), allocates the echo, copies, sends and
 * releases; the client receives the echo and releases it. Nothing ever
 * waits for another thread (at most a call polls twice, to reap a
 * completion the fake fabric already made, e.g. write_duplex's READ of
 * the head), so under `valgrind --tool=callgrind` the instructions counted
 * are work done for the messages, none spent spinning on an empty queue.
 * bench/profile runs it twice with different counts and divides the
 * difference by the message count difference.
 *
 * Usage: fastpath PROTOCOL SIZE COUNT   (exit 0 when every echo checked)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmx/rdmx.h>

#include "harness.h"   /* th_pair_open(): a connected pair */

static int die(const char *what, int rc)
{
	fprintf(stderr, "fastpath: %s: %s (%s)\n", what, rdmx_strerror(rc),
		rdmx_last_error());
	return 1;
}

/* Send @len bytes from @src (or a pattern of @seq when NULL) on @c. */
static int send_one(rdmx_conn *c, const void *src, size_t len, uint64_t seq)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, len, &m, 1000);

	if (rc)
		return rc;
	if (src)
		memcpy(m.data, src, len);
	else
		memset(m.data, (int)(seq & 0xff), len);
	m.len = len;
	return rdmx_send(c, &m);
}

/* Server half: echo one message. */
static int echo_one(rdmx_conn *s)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(s, &m, 1000);

	if (rc)
		return rc;
	rc = send_one(s, m.data, m.len, 0);
	rdmx_msg_release(s, &m);
	return rc;
}

/* Client half: take the echo of #@seq and check it. */
static int check_one(rdmx_conn *c, size_t len, uint64_t seq)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(c, &m, 1000);

	if (rc)
		return rc;
	if (m.len != len || (len && ((uint8_t *)m.data)[len - 1] != (seq & 0xff)))
		rc = -EBADMSG;
	rdmx_msg_release(c, &m);
	return rc;
}

static int run(rdmx_conn *c, rdmx_conn *s, size_t len, long count)
{
	int rc = 0;

	for (long i = 0; i < count && !rc; i++) {
		rc = send_one(c, NULL, len, (uint64_t)i);
		if (!rc)
			rc = echo_one(s);
		if (!rc)
			rc = check_one(c, len, (uint64_t)i);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct rdmx_conn_opts o;
	struct th_pair p;
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: fastpath PROTOCOL SIZE COUNT\n");
		return 2;
	}
	rdmx_conn_opts_init(&o);
	o.protocol = argv[1];
	if ((rc = th_pair_open(&p, &o, &o)))
		return die("connect", rc);
	rc = run(p.client, p.server, strtoul(argv[2], NULL, 0), strtol(argv[3], NULL, 0));
	th_pair_close(&p);
	return rc ? die("echo", rc) : 0;
}
