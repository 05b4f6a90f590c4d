// SPDX-License-Identifier: MIT
/*
 * rdmx bench over plain TCP: the kernel baseline. A message is a frame of
 * an 8-byte header (length, then BENCH_CTRL_IMM or 0, little-endian) and the
 * payload, written with one send() from a preallocated buffer; TCP_NODELAY
 * is on. Reads and writes time out after the endpoint's timeout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_ep.h"
#include "le.h"

#define FRAME_HDR 8

struct tcp_ep {
	struct bench_ep ep;
	int fd;
	size_t max_msg;
	uint8_t *buf;		/* FRAME_HDR + max_msg */
};

static struct tcp_ep *tep_of(struct bench_ep *ep)
{
	return (struct tcp_ep *)ep;
}

static int sys_fail(struct cli_err *e, const char *what, int err)
{
	cli_set_err(e, "%s: %s", what, strerror(err));
	return -err;
}

static int send_all(struct tcp_ep *t, const uint8_t *p, size_t len)
{
	ssize_t n;

	while (len) {
		n = send(t->fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return sys_fail(&t->ep.err, "tcp send", ETIMEDOUT);
		if (n < 0)
			return errno == EPIPE || errno == ECONNRESET ? -ECONNRESET :
			       sys_fail(&t->ep.err, "tcp send", errno);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read exactly @len bytes; -ECONNRESET on end of stream. */
static int recv_all(struct tcp_ep *t, uint8_t *p, size_t len)
{
	ssize_t n;

	while (len) {
		n = recv(t->fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return sys_fail(&t->ep.err, "tcp receive", ETIMEDOUT);
		if (n < 0)
			return errno == ECONNRESET ? -ECONNRESET :
			       sys_fail(&t->ep.err, "tcp receive", errno);
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int tep_send(struct bench_ep *ep, const void *head, size_t head_len,
		    size_t len, bool ctrl)
{
	struct tcp_ep *t = tep_of(ep);

	if (len > t->max_msg) {
		cli_set_err(&ep->err, "tcp: message of %zu bytes above the "
			    "largest (%zu)", len, t->max_msg);
		return -EMSGSIZE;
	}
	le_put32(t->buf, (uint32_t)len);
	le_put32(t->buf + 4, ctrl ? BENCH_CTRL_IMM : 0);
	memcpy(t->buf + FRAME_HDR, head, head_len < len ? head_len : len);
	return send_all(t, t->buf, FRAME_HDR + len);
}

static int tep_recv(struct bench_ep *ep, struct bench_rx *rx)
{
	struct tcp_ep *t = tep_of(ep);
	uint8_t hdr[FRAME_HDR];
	int rc;

	rc = recv_all(t, hdr, sizeof(hdr));
	if (rc)
		return rc;
	rx->len = le_get32(hdr);
	rx->ctrl = le_get32(hdr + 4) == BENCH_CTRL_IMM;
	if (rx->len > t->max_msg) {
		cli_set_err(&ep->err, "tcp: frame of %zu bytes above the largest "
			    "message (%zu)", rx->len, t->max_msg);
		return -EPROTO;
	}
	rc = recv_all(t, t->buf, rx->len);
	if (rc)
		return rc == -ECONNRESET ?
		       sys_fail(&ep->err, "tcp: stream ended inside a frame", EPROTO) : rc;
	memcpy(rx->head, t->buf, rx->len < BENCH_HEAD ? rx->len : BENCH_HEAD);
	return 0;
}

static int tep_flush(struct bench_ep *ep)
{
	(void)ep; /* send() returned: the kernel has every byte */
	return 0;
}

static void tep_close(struct bench_ep *ep)
{
	struct tcp_ep *t = tep_of(ep);

	close(t->fd);
	free(t->buf);
	free(t);
}

static const struct bench_ep_ops tcp_ep_ops = {
	.send = tep_send,
	.recv = tep_recv,
	.flush = tep_flush,
	.close = tep_close,
};

/* Wrap connected socket @fd (closed on failure too). */
static int tep_new(int fd, size_t max_msg, int io_timeout_ms,
		   struct bench_ep **out, struct cli_err *e)
{
	struct timeval tv = { io_timeout_ms / 1000, (io_timeout_ms % 1000) * 1000 };
	struct tcp_ep *t = calloc(1, sizeof(*t));
	int one = 1;

	if (t)
		t->buf = calloc(1, FRAME_HDR + max_msg);
	if (!t || !t->buf) {
		free(t);
		close(fd);
		return sys_fail(e, "tcp", ENOMEM);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (io_timeout_ms > 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	t->ep.ops = &tcp_ep_ops;
	t->ep.timeout_ms = io_timeout_ms;
	t->fd = fd;
	t->max_msg = max_msg;
	*out = &t->ep;
	return 0;
}

static int resolve(const char *addr, uint16_t port, struct addrinfo **ai,
		   bool passive, struct cli_err *e)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
	char ps[8];
	int rc;

	snprintf(ps, sizeof(ps), "%u", port);
	rc = getaddrinfo(addr && *addr ? addr : NULL, ps, &hints, ai);
	if (rc) {
		cli_set_err(e, "tcp: address %s: %s", addr ? addr : "(any)",
			    gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	return 0;
}

int bench_tcp_listen(const char *addr, uint16_t port, int *fd, uint16_t *bound,
		     struct cli_err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *ai;
	int one = 1, rc, s;

	rc = resolve(addr, port, &ai, true, e);
	if (rc)
		return rc;
	s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		freeaddrinfo(ai);
		return sys_fail(e, "tcp socket", errno);
	}
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	rc = bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 64) ||
	     getsockname(s, (struct sockaddr *)&ss, &sl) ? -errno : 0;
	freeaddrinfo(ai);
	if (rc) {
		close(s);
		return sys_fail(e, "tcp listen", -rc);
	}
	*bound = ntohs(ss.ss_family == AF_INET6 ?
		       ((struct sockaddr_in6 *)&ss)->sin6_port :
		       ((struct sockaddr_in *)&ss)->sin_port);
	*fd = s;
	return 0;
}

int bench_tcp_accept(int lfd, int timeout_ms, size_t max_msg, int io_timeout_ms,
		     struct bench_ep **out, struct cli_err *e)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int rc, s;

	rc = poll(&p, 1, timeout_ms);
	if (rc < 0 && errno != EINTR)
		return sys_fail(e, "tcp poll", errno);
	if (rc <= 0)
		return -ETIMEDOUT;
	s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (s < 0)
		return errno == EAGAIN || errno == EINTR ? -ETIMEDOUT :
		       sys_fail(e, "tcp accept", errno);
	return tep_new(s, max_msg, io_timeout_ms, out, e);
}

int bench_tcp_dial(const char *addr, uint16_t port, size_t max_msg,
		   int io_timeout_ms, struct bench_ep **out, struct cli_err *e)
{
	struct addrinfo *ai;
	char what[128];
	int rc, s;

	rc = resolve(addr, port, &ai, false, e);
	if (rc)
		return rc;
	s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	rc = s < 0 ? -errno : connect(s, ai->ai_addr, ai->ai_addrlen) ? -errno : 0;
	freeaddrinfo(ai);
	if (rc) {
		if (s >= 0)
			close(s);
		snprintf(what, sizeof(what), "tcp: connect to %s port %u", addr, port);
		return sys_fail(e, what, -rc);
	}
	return tep_new(s, max_msg, io_timeout_ms, out, e);
}
