/* SPDX-License-Identifier: MIT */
/*
 * echo_server_epoll: the many-client echo server of echo_server.c, driven
 * by epoll instead of rdmx_listener_next(): the listener's fd
 * (rdmx_listener_fd) and every connection's fd (rdmx_conn_fd) sit in one
 * epoll set next to whatever else an event loop watches (here nothing),
 * and the thread sleeps in epoll_wait() while nothing happens. The
 * pattern for each fd: call the library with timeout 0 until it says
 * -EAGAIN (that re-arms the fd), then wait for the fd again.
 *
 * Every protocol has an fd: the ring protocols', direct_write's and
 * buffered_read's receivers poll memory, and their fd turns readable by
 * the peer's doorbell. As
 * echo_server.c it starts
 * CLIENTS client threads in the same process (echo_clients.c), each
 * sending ROUNDS numbered messages and checking the echoes; it ends when
 * all have left.
 *
 *   sandbox/run -- build/bin/example_echo_server_epoll            # 3 clients
 *   build/bin/example_echo_server_epoll 10.0.0.1 [protocol [clients]]
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/epoll.h>

#include <rdmx/rdmx.h>

#include "echo_clients.h"

#define MAX_EVENTS 16

struct server {
	int ep;           /* the epoll set */
	rdmx_listener *lis;
	int left, echoed;
};

/* Add @fd to the epoll set with @ptr (NULL: the listener). */
static int watch(struct server *s, int fd, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = ptr };

	if (fd < 0)
		return fd;
	return epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* Echo every message that is there; a connection whose peer left is
 * taken out of the set and closed. */
static int on_conn(struct server *s, rdmx_conn *c)
{
	struct rdmx_msg in;
	int rc;

	while (!(rc = rdmx_recv(c, &in, 0))) {
		rc = echo_reply(c, &in);
		rdmx_msg_release(c, &in);
		if (rc)
			break;
		s->echoed++;
	}
	if (rc == -EAGAIN)
		return 0;
	epoll_ctl(s->ep, EPOLL_CTL_DEL, rdmx_conn_fd(c), NULL);
	rdmx_conn_close(c);
	s->left++;
	return rc == -ECONNRESET ? 0 : rc;
}

/* Accept every connection that is ready; each joins the epoll set. */
static int on_listener(struct server *s)
{
	rdmx_conn *c;
	int rc;

	while (!(rc = rdmx_accept(s->lis, 0, &c))) {
		printf("server: a client connected (%s)\n", rdmx_conn_protocol(c));
		rc = watch(s, rdmx_conn_fd(c), c);
		if (!rc) /* what came before the fd was armed; arms it */
			rc = on_conn(s, c);
		if (rc)
			return rc;
	}
	return rc == -EAGAIN ? 0 : rc;
}

static int serve(struct server *s, int clients)
{
	struct epoll_event ev[MAX_EVENTS];
	int n, rc = watch(s, rdmx_listener_fd(s->lis), NULL);

	while (!rc && s->left < clients) {
		n = epoll_wait(s->ep, ev, MAX_EVENTS, WAIT_MS);
		if (n <= 0) {
			rc = n ? -errno : -ETIMEDOUT;
			break;
		}
		for (int i = 0; i < n && !rc; i++)
			rc = ev[i].data.ptr ? on_conn(s, ev[i].data.ptr) : on_listener(s);
	}
	if (rc)
		fprintf(stderr, "server: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
	else
		printf("server: echoed %d messages for %d clients\n", s->echoed, clients);
	return rc;
}

int main(int argc, char **argv)
{
	struct echo_run r;
	struct server s;
	int rc;

	if (echo_run_open(&r, "echo_server_epoll", argc, argv))
		return 1;
	s = (struct server){ .ep = epoll_create1(EPOLL_CLOEXEC), .lis = r.lis };
	if (s.ep < 0) {
		perror("echo_server_epoll: epoll_create1");
		return echo_run_close(&r, -1);
	}
	echo_clients_start(&r);
	rc = serve(&s, r.n);
	close(s.ep);
	return echo_run_close(&r, rc);
}
