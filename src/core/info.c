/* SPDX-License-Identifier: MIT */
/*
 * Connection information (protocol, sizes, addresses, the user pointer,
 * counters) and the library version.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "protocol.h"

const char *rdmx_conn_error(const rdmx_conn *c)
{
	return c ? c->err.msg : "no connection";
}

const char *rdmx_conn_protocol(const rdmx_conn *c)
{
	return c ? c->proto->name : "";
}

size_t rdmx_conn_max_msg(const rdmx_conn *c)
{
	return c ? c->max_msg : 0;
}

static int addr_of(const rdmx_conn *c, int peer, char *buf, size_t len)
{
	if (!c || !buf || !len)
		return rdmx__fail(-EINVAL, "a connection and a buffer are required");
	if (c->f->addr_str(c->ep, peer, buf, len))
		return rdmx__fail(-ENOSPC, "%zu bytes are too few for the address", len);
	return 0;
}

int rdmx_conn_local_addr(const rdmx_conn *conn, char *buf, size_t len)
{
	return addr_of(conn, 0, buf, len);
}

int rdmx_conn_peer_addr(const rdmx_conn *conn, char *buf, size_t len)
{
	return addr_of(conn, 1, buf, len);
}

void rdmx_conn_set_user(rdmx_conn *conn, void *user)
{
	if (conn)
		__atomic_store_n(&conn->user, user, __ATOMIC_RELEASE);
}

void *rdmx_conn_get_user(const rdmx_conn *conn)
{
	return conn ? __atomic_load_n(&conn->user, __ATOMIC_ACQUIRE) : NULL;
}

int rdmx_conn_stats(const rdmx_conn *conn, struct rdmx_conn_stats *st)
{
	size_t n = sizeof(struct rdmx_conn_stats) -
		   offsetof(struct rdmx_conn_stats, msgs_sent);
	struct rdmx_conn_stats s;
	const uint64_t *from;
	uint64_t *to = &s.msgs_sent;

	if (!conn || !st || st->size < offsetof(struct rdmx_conn_stats, bytes_sent))
		return rdmx__fail(-EINVAL, "rdmx_conn_stats: a connection and stats "
				  "with their size set are required");
	from = &conn->stats.msgs_sent;
	for (size_t i = 0; i < n / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
	s.size = st->size < sizeof(s) ? st->size : (uint32_t)sizeof(s);
	memcpy(st, &s, s.size);
	return 0;
}

uint32_t rdmx_version(void)
{
	return RDMX_VERSION;
}
