/* SPDX-License-Identifier: MIT */
/*
 * Connection information (addresses, the user pointer, counters), the
 * library version, and the sizes of the option structs (issue 9 s6).
 *
 * Option structs grow at their end. The caller's @size says how much of
 * the struct its binary knows: the library starts from its defaults and
 * copies only those bytes, so a binary built against an older header gets
 * defaults for the fields added since. Version 0 of each struct is what
 * existed when @size was introduced; struct rdmx_ctx_opts had no init
 * function before, so a @size of 0 there means version 0 (hand-filled
 * structs keep working), while struct rdmx_conn_opts was always filled by
 * rdmx_conn_opts_init() and so requires its @size.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

#define CONN_OPTS_V0 (offsetof(struct rdmx_conn_opts, src_addr) + sizeof(char *))
#define CTX_OPTS_V0 (offsetof(struct rdmx_ctx_opts, fabric) + sizeof(char *))

/* Only IP address text: the source picks the device, names do not. */
static int src_check(const char *src)
{
	unsigned char a[16];

	if (!src || !*src || inet_pton(AF_INET, src, a) == 1 ||
	    inet_pton(AF_INET6, src, a) == 1)
		return 0;
	return rdmx__fail(-EINVAL, "src_addr '%s' is not an IPv4 or IPv6 address", src);
}

int rdmx__conn_opts_copy(const struct rdmx_conn_opts *in,
			 struct rdmx_conn_opts *out)
{
	if (in->size < CONN_OPTS_V0 || in->size > sizeof(*out))
		return rdmx__fail(-EINVAL, "struct rdmx_conn_opts of size %u (this "
				  "library: %zu..%zu): fill it with rdmx_conn_opts_init()",
				  in->size, CONN_OPTS_V0, sizeof(*out));
	rdmx_conn_opts_init(out);
	memcpy(out, in, in->size);
	out->size = sizeof(*out);
	return src_check(out->src_addr);
}

void rdmx_ctx_opts_init(struct rdmx_ctx_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
}

int rdmx__ctx_opts_copy(const struct rdmx_ctx_opts *in,
			struct rdmx_ctx_opts *out)
{
	size_t n = in && in->size ? in->size : CTX_OPTS_V0;

	rdmx_ctx_opts_init(out);
	if (!in)
		return 0;
	if (n < CTX_OPTS_V0 || n > sizeof(*out))
		return rdmx__fail(-EINVAL, "struct rdmx_ctx_opts of size %zu (this "
				  "library: %zu..%zu): fill it with rdmx_ctx_opts_init()",
				  n, CTX_OPTS_V0, sizeof(*out));
	memcpy(out, in, n);
	out->size = sizeof(*out);
	return 0;
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
