/* SPDX-License-Identifier: MIT */
/* The doorbell of a receiver that polls memory: see doorbell.h. */
#include <errno.h>

#include "doorbell.h"
#include "errors.h"
#include "live.h"
#include "post.h"

int rdmx__bell_announce(rdmx_conn *c, struct rdmx__bell *b, uint64_t *src,
			const struct rdmx__wr *wr)
{
	int rc;

	if (c->state != RDMX__CONN_UP || b->announced == RDMX__BELL_PLACED)
		return 0;
	if (b->gen_out) /* a round trip: poll on rather than sleep twice */
		return 1;
	if (b->announced == RDMX__BELL_POSTED) {
		b->announced = RDMX__BELL_PLACED;
		return 1; /* the last look before the sleep */
	}
	*src = ++b->gen;
	rc = rdmx__post_send(c, wr, 1);
	if (rc)
		return rdmx__conn_down(c, rc, "publishing a sleep: %s", rdmx__last());
	b->gen_out = 1;
	b->announced = RDMX__BELL_POSTED;
	return 0;
}

int rdmx__bell_ring(rdmx_conn *c, struct rdmx__bell *b, const uint64_t *word,
		    const struct rdmx__wr *wr)
{
	uint64_t g = __atomic_load_n(word, __ATOMIC_SEQ_CST);
	int rc;

	if (g == b->rung)
		return 0;
	b->rung = g;
	rc = rdmx__post_send(c, wr, 1);
	return rc ? rdmx__conn_down(c, rc, "posting a doorbell: %s", rdmx__last()) : 1;
}

int rdmx__bell_reap(rdmx_conn *c, struct rdmx__bell *b, struct rdmx__cq *cq,
		    int (*repost)(rdmx_conn *c, uint64_t wr_id))
{
	struct rdmx__wc wc[8];
	int n = c->f->poll_cq(cq, wc, 8);

	if (n < 0)
		return rdmx__conn_down(c, n, "polling doorbells: %s", rdmx__last());
	for (int i = 0; i < n; i++) {
		if (wc[i].status == RDMX__WC_FLUSHED)
			return rdmx__conn_flushed(c);
		if (wc[i].status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, &wc[i], "doorbell receive");
		rdmx__bell_woke(b);
		if (repost(c, wc[i].wr_id))
			return rdmx__conn_down(c, -EIO, "reposting a doorbell receive: %s",
					       rdmx__last());
	}
	return n;
}
