/* SPDX-License-Identifier: MIT */
/*
 * Receive buffers reposted in chains (issue 10 section 1), one for the
 * two-sided family: a released buffer's receive is added to the chain,
 * and the chain goes out as one post (one doorbell) when it is @max long
 * or when the protocol flushes it - before its receiver idles, and
 * whenever a peer could be waiting for those buffers (srq: its credits).
 * @max is a quarter of the receive depth, at most RDMX__REPOST_MAX, so the
 * sender always has three quarters of the buffers to send into.
 */
#ifndef RDMX_CORE_REPOST_H
#define RDMX_CORE_REPOST_H

#include "conn.h"
#include "fabric.h"

#define RDMX__REPOST_MAX 16

struct rdmx__repost {
	struct rdmx__wr wr[RDMX__REPOST_MAX]; /* released, not yet reposted */
	uint32_t n, max;
};

/* An empty chain for a receiver of @depth buffers. */
static inline void rdmx__repost_init(struct rdmx__repost *r, uint32_t depth)
{
	r->n = 0;
	r->max = depth / 4 < RDMX__REPOST_MAX ? depth / 4 : RDMX__REPOST_MAX;
	if (!r->max)
		r->max = 1;
}

/* Add @wr: 1 when the chain is full (flush it now), else 0. */
static inline int rdmx__repost_add(struct rdmx__repost *r,
				   const struct rdmx__wr *wr)
{
	r->wr[r->n++] = *wr;
	return r->n == r->max;
}

/* Post the chain in one post: to @srq (may be NULL: @c's own receive
 * queue). 0, or -errno with @c down. Nothing is posted on a connection
 * that is down. */
int rdmx__repost_flush(rdmx_conn *c, struct rdmx__repost *r,
		       struct rdmx__srq *srq);

#endif /* RDMX_CORE_REPOST_H */
