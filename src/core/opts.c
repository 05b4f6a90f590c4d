/* SPDX-License-Identifier: MIT */
/*
 * Options: their defaults, the caller's structs loaded by their size,
 * and the checks of every field the core reads (the protocols check their
 * own in check_opts(), with rdmx__check_range and rdmx__check_ring_opts).
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

#include "conn.h"
#include "errors.h"
#include "opts.h"
#include "wait.h"

#define MAX_MSG_LIMIT (1u << 30)
#define DEPTH_LIMIT 16384u
#define LIVENESS_MIN 1000u
#define LIVENESS_MAX 3600000u

void rdmx_conn_opts_init(struct rdmx_conn_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->protocol = "send_recv";
	o->max_msg_size = 65536;
	o->send_depth = 64;
	o->recv_depth = 64;
	o->rnr_retry = 7;
	o->retry_count = 7;
	o->connect_timeout_ms = 5000;
	o->ring_size = 1u << 20;
	o->notify = RDMX_NOTIFY_DEFAULT;
	o->eager_max = 1024;
	o->liveness_ms = 10000;
}

/* Range checks of options, also for the protocols' check_opts(). */
int rdmx__check_range(const char *what, uint32_t v, uint32_t lo, uint32_t hi)
{
	if (v < lo || v > hi)
		return rdmx__fail(-EINVAL, "%s %u out of range %u..%u", what,
				  v, lo, hi);
	return 0;
}

/* ring_size and notify, for the ring protocols' check_opts(). */
int rdmx__check_ring_opts(const struct rdmx_conn_opts *o)
{
	if (o->ring_size < RDMX__RING_SIZE_MIN || o->ring_size > RDMX__RING_SIZE_MAX ||
	    (o->ring_size & (o->ring_size - 1)))
		return rdmx__fail(-EINVAL, "ring_size %u is not a power of two in %u..%u",
				  o->ring_size, RDMX__RING_SIZE_MIN, RDMX__RING_SIZE_MAX);
	if (o->notify > RDMX_NOTIFY_REV)
		return rdmx__fail(-EINVAL, "notify %u is not an enum rdmx_notify value",
				  o->notify);
	if (o->ack > RDMX_ACK_READ)
		return rdmx__fail(-EINVAL, "ack %u is not an enum rdmx_ack value",
				  o->ack);
	return 0;
}

/* The fields every protocol reads, of options loaded by rdmx__conn_opts_copy. */
int rdmx__opts_check(const struct rdmx_conn_opts *o)
{
	if (rdmx__check_range("max_msg_size", o->max_msg_size, 1, MAX_MSG_LIMIT) ||
	    rdmx__check_range("send_depth", o->send_depth, 1, DEPTH_LIMIT) ||
	    rdmx__check_range("recv_depth", o->recv_depth, 1, DEPTH_LIMIT) ||
	    rdmx__check_range("rnr_retry", o->rnr_retry, 0, 7) ||
	    rdmx__check_range("retry_count", o->retry_count, 0, 7) ||
	    rdmx__check_range("liveness_ms", o->liveness_ms, LIVENESS_MIN, LIVENESS_MAX))
		return -EINVAL;
	if (o->connect_timeout_ms <= 0)
		return rdmx__fail(-EINVAL, "connect_timeout_ms must be > 0");
	if (o->wait_mode > RDMX_WAIT_ADAPTIVE)
		return rdmx__fail(-EINVAL, "wait_mode %u is not an enum rdmx_wait_mode value",
				  o->wait_mode);
	if (rdmx__check_range("spin_us", o->spin_us, 0, RDMX__SPIN_US_MAX))
		return -EINVAL;
	if (o->signal_every > 1 && o->signal_every > o->send_depth / 2)
		return rdmx__fail(-EINVAL, "signal_every %u: a send queue of send_depth %u must hold two unsignaled batches (1 or up to %u)",
				  o->signal_every, o->send_depth,
				  o->send_depth / 2);
	if (o->coalesce > RDMX_COALESCE_ON)
		return rdmx__fail(-EINVAL, "coalesce %u is not an enum rdmx_coalesce value",
				  o->coalesce);
	return 0;
}

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

/* Fill @o's wait_mode and spin_us left at their defaults from @ctx. */
void rdmx__wait_resolve(const rdmx_ctx *ctx, struct rdmx_conn_opts *o)
{
	if (o->wait_mode == RDMX_WAIT_DEFAULT)
		o->wait_mode = ctx->wait_mode;
	if (!o->spin_us)
		o->spin_us = ctx->spin_us;
}
