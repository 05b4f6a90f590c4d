/* SPDX-License-Identifier: MIT */
/*
 * Counted posts (the counters show which verbs a side used) and the
 * page-aligned buffers the protocols register and post from.
 */
#ifndef RDMX_CORE_POST_H
#define RDMX_CORE_POST_H

#include <stddef.h>

#include "conn.h"
#include "fabric.h"

/* Post @n send work requests; a lone SEND or WRITE of at most
 * c->max_inline bytes goes inline (the device copies it at post time). */
int rdmx__post_send(rdmx_conn *c, const struct rdmx__wr *wr, int n);
/* @wr, not yet inline, may go inline: a SEND or WRITE of 1..max_inline
 * bytes. A caller that sets RDMX__WR_INLINE itself spares
 * rdmx__post_send its copy of a lone request. */
static inline int rdmx__wr_may_inline(const rdmx_conn *c,
				      const struct rdmx__wr *wr)
{
	return !(wr->flags & RDMX__WR_INLINE) && wr->len && wr->len <= c->max_inline &&
	       (wr->op == RDMX__OP_SEND || wr->op == RDMX__OP_SEND_IMM ||
		wr->op == RDMX__OP_WRITE || wr->op == RDMX__OP_WRITE_IMM);
}
int rdmx__post_recv(rdmx_conn *c, const struct rdmx__wr *wr, int n);

/* Page-aligned zeroed allocation for registered buffers. */
void *rdmx__alloc_buf(size_t len);

#endif /* RDMX_CORE_POST_H */
