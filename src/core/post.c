/* SPDX-License-Identifier: MIT */
/*
 * Posting: every work request of a connection goes through here, counted
 * by verb (rdmx_conn_stats shows which verbs a side used), a lone small
 * one inline; and the page-aligned zeroed buffers that are registered and
 * posted from.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "fabric.h"
#include "post.h"

int rdmx__post_send(rdmx_conn *c, const struct rdmx__wr *wr, int n)
{
	struct rdmx__wr w;

	for (int i = 0; i < n; i++)
		c->posted[wr[i].op]++;
	if (n != 1 || !rdmx__wr_may_inline(c, wr))
		return c->f->post_send(c->ep, wr, n);
	w = *wr;
	w.flags |= RDMX__WR_INLINE;
	return c->f->post_send(c->ep, &w, 1);
}

int rdmx__post_recv(rdmx_conn *c, const struct rdmx__wr *wr, int n)
{
	c->posted_recv += (uint64_t)n;
	return c->f->post_recv(c->ep, wr, n);
}

void *rdmx__alloc_buf(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	memset(p, 0, len);
	return p;
}
