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
 * The fds are for protocols whose messages arrive as completions
 * (send_recv, srq, read); the ring protocols' receivers poll memory and
 * have none (rdmx_conn_fd says -EOPNOTSUPP). As echo_server.c it starts
 * CLIENTS client threads in the same process, each sending ROUNDS
 * numbered messages and checking the echoes; it ends when all have left.
 *
 *   sandbox/run -- build/bin/example_echo_server_epoll            # 3 clients
 *   build/bin/example_echo_server_epoll 10.0.0.1 [protocol [clients]]
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>

#include <rdmx/rdmx.h>

#define ROUNDS 100
#define WAIT_MS 10000
#define MAX_EVENTS 16

struct client {
	pthread_t t;
	rdmx_ctx *ctx;
	const char *addr;
	uint16_t port;
	const struct rdmx_conn_opts *o;
	int id, rc;
};

/* The client: ROUNDS numbered messages, each echo checked. */
static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct rdmx_msg m;
	char want[64];
	rdmx_conn *c = NULL;

	cl->rc = rdmx_dial(cl->ctx, cl->addr, cl->port, cl->o, &c);
	for (int i = 0; i < ROUNDS && !cl->rc; i++) {
		cl->rc = rdmx_msg_alloc(c, sizeof(want), &m, WAIT_MS);
		if (cl->rc)
			break;
		m.len = (size_t)snprintf(m.data, m.cap, "client %d says %d", cl->id, i) + 1;
		memcpy(want, m.data, m.len);
		cl->rc = rdmx_send(c, &m);
		if (!cl->rc && !(cl->rc = rdmx_recv(c, &m, WAIT_MS))) {
			cl->rc = strcmp(m.data, want) ? -EBADMSG : 0;
			rdmx_msg_release(c, &m);
		}
	}
	if (cl->rc)
		fprintf(stderr, "client %d: %s\n", cl->id, rdmx_last_error());
	rdmx_conn_close(c);
	return NULL;
}

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
	struct rdmx_msg in, out;
	int rc;

	while (!(rc = rdmx_recv(c, &in, 0))) {
		rc = rdmx_msg_alloc(c, in.len, &out, WAIT_MS);
		if (!rc) {
			memcpy(out.data, in.data, in.len);
			out.len = in.len;
			rc = rdmx_send(c, &out);
		}
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
	struct server s = { .ep = epoll_create1(EPOLL_CLOEXEC) };
	struct rdmx_conn_opts o;
	struct client *cl;
	int n = argc > 3 ? atoi(argv[3]) : 3, rc, bad = 0;
	char addr[64];
	rdmx_ctx *ctx;

	rdmx_conn_opts_init(&o);
	if (argc > 2)
		o.protocol = argv[2];
	rc = argc > 1 && argv[1][0] ? (snprintf(addr, sizeof(addr), "%s", argv[1]), 0)
		      : rdmx_pick_address(NULL, -1, addr, sizeof(addr));
	if (!rc)
		rc = rdmx_ctx_create(&ctx, NULL);
	if (!rc && (rc = rdmx_listen(ctx, addr, 0, &o, &s.lis)))
		rdmx_ctx_destroy(ctx);
	if (rc || s.ep < 0 || n < 1 || !(cl = calloc((size_t)n, sizeof(*cl)))) {
		fprintf(stderr, "echo_server_epoll: %s (%s)\n", rdmx_strerror(rc),
			rdmx_last_error());
		return 1;
	}
	for (int i = 0; i < n; i++) {
		cl[i] = (struct client){ .ctx = ctx, .addr = addr, .o = &o, .id = i,
					 .port = rdmx_listener_port(s.lis) };
		pthread_create(&cl[i].t, NULL, client_main, &cl[i]);
	}
	rc = serve(&s, n);
	if (rc)
		rdmx_listener_shutdown(s.lis);
	for (int i = 0; i < n; i++) {
		pthread_join(cl[i].t, NULL);
		bad += cl[i].rc != 0;
	}
	free(cl);
	close(s.ep);
	rdmx_listener_destroy(s.lis);
	rdmx_ctx_destroy(ctx);
	return rc || bad ? 1 : 0;
}
