// SPDX-License-Identifier: MIT
/*
 * rdmx kv bench: a plain memcached ASCII client (one request, then its
 * reply: no pipelining) for rdmx KV's front door and Debian's memcached,
 * and Debian's memcached spawned on a free port. Every read waits at most
 * the client's timeout (poll), and a reply that is not the protocol's
 * fails the client with the line it got.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kv_bench.h"

#define MC_BUF 16384

struct kb_mc {
	int fd, timeout_ms;
	size_t head, tail;		/* unread bytes of in[] */
	char in[MC_BUF];
	char out[MC_BUF];
	char err[512];
};

static int __attribute__((format(printf, 3, 4)))
mc_fail(struct kb_mc *m, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->err, sizeof(m->err), fmt, ap);
	va_end(ap);
	return rc;
}

const char *kb_mc_error(const struct kb_mc *m)
{
	return m->err;
}

/* 127.0.0.1-style @addr:@port into @sa. */
static int mc_sockaddr(const char *addr, int port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, addr, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

int kb_mc_dial(const char *addr, int port, int timeout_ms, struct kb_mc **out,
	       char *err, size_t len)
{
	struct sockaddr_in sa;
	struct kb_mc *m;
	int one = 1;

	if (mc_sockaddr(addr, port, &sa)) {
		snprintf(err, len, "memcached client: '%s' is not an IPv4 address", addr);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->timeout_ms = timeout_ms;
	m->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->fd < 0 || connect(m->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int rc = -errno;

		snprintf(err, len, "memcached client: connect to %s:%d: %s", addr, port,
			 strerror(errno));
		kb_mc_close(m);
		return rc;
	}
	setsockopt(m->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*out = m;
	return 0;
}

void kb_mc_close(struct kb_mc *m)
{
	if (!m)
		return;
	if (m->fd >= 0)
		close(m->fd);
	free(m);
}

/* Write all of @p. */
static int mc_write(struct kb_mc *m, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = send(m->fd, c, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return mc_fail(m, -errno, "memcached client: send: %s", strerror(errno));
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* More bytes into in[], waiting at most the timeout. */
static int mc_fill(struct kb_mc *m)
{
	struct pollfd p = { .fd = m->fd, .events = POLLIN };
	ssize_t r;
	int rc;

	if (m->head == m->tail)
		m->head = m->tail = 0;
	if (m->tail == sizeof(m->in)) {
		memmove(m->in, m->in + m->head, m->tail - m->head);
		m->tail -= m->head;
		m->head = 0;
	}
	if (m->tail == sizeof(m->in))
		return mc_fail(m, -EPROTO, "memcached client: a reply line longer than %d "
			       "bytes", MC_BUF);
	rc = poll(&p, 1, m->timeout_ms);
	if (rc == 0)
		return mc_fail(m, -ETIMEDOUT, "memcached client: no reply within %d ms",
			       m->timeout_ms);
	r = rc < 0 ? -1 : recv(m->fd, m->in + m->tail, sizeof(m->in) - m->tail, 0);
	if (r == 0)
		return mc_fail(m, -ECONNRESET, "memcached client: the server closed the "
			       "connection");
	if (r < 0)
		return errno == EINTR ? 0 : mc_fail(m, -errno, "memcached client: recv: %s",
						    strerror(errno));
	m->tail += (size_t)r;
	return 0;
}

/* The next line without its \r\n into @line (NUL-terminated). */
static int mc_line(struct kb_mc *m, char *line, size_t cap)
{
	for (;;) {
		char *s = m->in + m->head;
		char *nl = memchr(s, '\n', m->tail - m->head);
		int rc;

		if (nl) {
			size_t n = (size_t)(nl - s);

			if (n && s[n - 1] == '\r')
				n--;
			if (n >= cap)
				return mc_fail(m, -EPROTO, "memcached client: reply line too long");
			memcpy(line, s, n);
			line[n] = 0;
			m->head += (size_t)(nl - s) + 1;
			return 0;
		}
		rc = mc_fill(m);
		if (rc)
			return rc;
	}
}

/* @n bytes of data and its \r\n: into @buf (NULL: dropped). */
static int mc_data(struct kb_mc *m, char *buf, size_t n)
{
	size_t want = n + 2, got = 0;

	while (got < want) {
		size_t avail = m->tail - m->head, take;
		int rc;

		if (!avail) {
			rc = mc_fill(m);
			if (rc)
				return rc;
			continue;
		}
		take = avail < want - got ? avail : want - got;
		for (size_t i = 0; i < take; i++, got++)
			if (got < n && buf)
				buf[got] = m->in[m->head + i];
			else if (got >= n && m->in[m->head + i] != "\r\n"[got - n])
				return mc_fail(m, -EPROTO, "memcached client: a value's data "
					       "block does not end in \\r\\n");
		m->head += take;
	}
	return 0;
}

int kb_mc_set(struct kb_mc *m, const char *key, const void *val, size_t vlen)
{
	char line[256];
	int n = snprintf(m->out, sizeof(m->out), "set %s 0 0 %zu\r\n", key, vlen);
	int rc;

	if (n < 0 || (size_t)n + vlen + 2 > sizeof(m->out))
		return mc_fail(m, -E2BIG, "memcached client: value of %zu bytes too long", vlen);
	memcpy(m->out + n, val, vlen);
	memcpy(m->out + n + vlen, "\r\n", 2);
	rc = mc_write(m, m->out, (size_t)n + vlen + 2);
	if (!rc)
		rc = mc_line(m, line, sizeof(line));
	if (!rc && strcmp(line, "STORED"))
		rc = mc_fail(m, !strncmp(line, "SERVER_ERROR", 12) ? -ENOSPC : -EPROTO,
			     "memcached client: set %s: '%s'", key, line);
	return rc;
}

int kb_mc_get(struct kb_mc *m, const char *key, void *buf, size_t cap, size_t *vlen)
{
	char line[512], k[256];
	unsigned flags;
	size_t n;
	int rc = snprintf(m->out, sizeof(m->out), "get %s\r\n", key);

	rc = mc_write(m, m->out, (size_t)rc);
	if (!rc)
		rc = mc_line(m, line, sizeof(line));
	if (rc)
		return rc;
	if (!strcmp(line, "END"))
		return -ENOENT;
	if (sscanf(line, "VALUE %255s %u %zu", k, &flags, &n) != 3 || strcmp(k, key))
		return mc_fail(m, -EPROTO, "memcached client: get %s: '%s'", key, line);
	rc = mc_data(m, n <= cap ? buf : NULL, n);
	if (!rc)
		rc = mc_line(m, line, sizeof(line));
	if (!rc && strcmp(line, "END"))
		rc = mc_fail(m, -EPROTO, "memcached client: get %s: '%s' after the value, "
			     "not END", key, line);
	*vlen = n;
	return rc ? rc : n <= cap ? 0 : -EMSGSIZE;
}

/* ---------------------------------------------------------------- spawning */

/* A TCP port that was free a moment ago on 127.0.0.1. */
static int free_port(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	mc_sockaddr("127.0.0.1", 0, &sa);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &sl))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Exec @prog on @port (the child's side). */
static void exec_mc(const char *prog, int port, int mem_mb, int threads)
{
	char p[16], mb[16], t[16];
	int null = open("/dev/null", O_RDWR);

	snprintf(p, sizeof(p), "%d", port);
	snprintf(mb, sizeof(mb), "%d", mem_mb);
	snprintf(t, sizeof(t), "%d", threads);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
	}
	if (geteuid() == 0)
		execl(prog, prog, "-u", "nobody", "-l", "127.0.0.1", "-p", p, "-U", "0",
		      "-m", mb, "-t", t, (char *)NULL);
	else
		execl(prog, prog, "-l", "127.0.0.1", "-p", p, "-U", "0", "-m", mb, "-t", t,
		      (char *)NULL);
	_exit(127);
}

/* Wait until @port accepts (0) or @pid exits (-ECHILD), at most @ms. */
static int await_port(int port, int pid, int ms)
{
	struct timespec nap = { 0, 20 * 1000 * 1000 };
	struct sockaddr_in sa;

	mc_sockaddr("127.0.0.1", port, &sa);
	for (int waited = 0; waited < ms; waited += 20) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

		ok = fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -ECHILD;
		nanosleep(&nap, NULL);
	}
	return -ETIMEDOUT;
}

int kb_mc_spawn(const char *prog, int mem_mb, int threads, int timeout_ms,
		int *port, int *pid, char *err, size_t len)
{
	int rc = -ENOENT;

	if (access(prog, X_OK)) {
		snprintf(err, len, "%s is not installed (scripts/install-deps installs "
			 "Debian's memcached)", prog);
		return -ENOENT;
	}
	for (int attempt = 0; attempt < 5; attempt++) { /* the port may be taken */
		int p = free_port();
		pid_t child = p > 0 ? fork() : -1;

		if (child == 0)
			exec_mc(prog, p, mem_mb, threads);
		if (child < 0) {
			snprintf(err, len, "%s: no free port or fork failed: %s", prog,
				 strerror(errno));
			return -EIO;
		}
		rc = await_port(p, child, timeout_ms);
		if (!rc) {
			*port = p;
			*pid = child;
			return 0;
		}
		if (rc != -ECHILD) /* else waited for already */
			kb_mc_reap(child);
		if (rc == -ETIMEDOUT)
			break;
	}
	snprintf(err, len, "%s did not accept connections on 127.0.0.1 within %d ms "
		 "(%s)", prog, timeout_ms, rc == -ECHILD ? "it exited" : "timed out");
	return rc;
}

void kb_mc_reap(int pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}
