/* SPDX-License-Identifier: MIT */
/* Sockets to the memcached front door for its tests (cmocka asserts). */
#include <arpa/inet.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmx/kv.h>

#include "unit/mc_sock.h"

/* A TCP connection to 127.0.0.1:@port. */
int mc_dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

void mc_say(int fd, const char *s)
{
	assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Read until @want has arrived (or EOF, or 10 s); what came, NUL-terminated. */
const char *mc_await(int fd, const char *want, char *buf, size_t cap)
{
	size_t n = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	buf[0] = 0;
	while (!strstr(buf, want) && n + 1 < cap && poll(&p, 1, 10000) > 0) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);

		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = 0;
	}
	return buf;
}

/* The front door's "stats" value @name, asked on @fd. */
uint64_t mc_stat(int fd, const char *name)
{
	char buf[8192], key[96];
	const char *at;

	mc_say(fd, "stats\r\n");
	mc_await(fd, "END\r\n", buf, sizeof(buf));
	snprintf(key, sizeof(key), "STAT %s ", name);
	at = strstr(buf, key);
	assert_non_null(at);
	return strtoull(at + strlen(key), NULL, 10);
}

void *mc_serve(void *srv)
{
	return (void *)(intptr_t)rdmx_kv_server_run(srv);
}
