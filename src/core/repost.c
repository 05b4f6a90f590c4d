/* SPDX-License-Identifier: MIT */
/*
 * Receive buffers reposted in chains: see repost.h.
 */
#include <errno.h>

#include "post.h"
#include "repost.h"

int rdmx__repost_flush(rdmx_conn *c, struct rdmx__repost *r,
		       struct rdmx__srq *srq)
{
	uint32_t n = r->n;
	int rc;

	if (!n || c->state == RDMX__CONN_DOWN)
		return 0;
	r->n = 0;
	if (srq) {
		c->posted_recv += n;
		rc = c->f->post_srq_recv(srq, r->wr, (int)n);
	} else {
		rc = rdmx__post_recv(c, r->wr, (int)n);
	}
	if (rc)
		return rdmx__conn_down(c, -EIO, "reposting %u receives: %s", n, rdmx__last());
	return 0;
}
