/* SPDX-License-Identifier: MIT */
/*
 * Coalescing for the single-sender ring protocols: see write_ring_burst.h.
 * Pure bookkeeping; write_ring_conn.c posts.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/ring.h"
#include "write_ring_burst.h"

#define NO_PAD UINT64_MAX

int rdmx__wburst_init(struct rdmx__wburst *b, int on, uint64_t size,
		      uint32_t depth)
{
	*b = (struct rdmx__wburst){
		.on = on, .pad_at = NO_PAD, .bound = size / 4, .cap = depth + 1,
	};
	b->cnt = calloc(b->cap, sizeof(*b->cnt));
	return b->cnt ? 0 : -ENOMEM;
}

void rdmx__wburst_free(struct rdmx__wburst *b)
{
	free(b->cnt);
	b->cnt = NULL;
}

void rdmx__wburst_add(struct rdmx__wburst *b, uint64_t tail, uint64_t start,
		      uint64_t end)
{
	(void)end;
	if (!b->held)
		b->from = tail;
	if (start != tail)
		b->pad_at = tail;
	b->held++;
}

int rdmx__wburst_full(const struct rdmx__wburst *b, uint64_t tail)
{
	return b->held >= RDMX__WBURST_RECS || tail - b->from >= b->bound;
}

int rdmx__wburst_segs(const struct rdmx__wburst *b,
		      const struct rdmx__ring_geo *g, uint64_t tail,
		      struct rdmx__wburst_seg seg[2])
{
	uint64_t lap_end = (b->from | g->mask) + 1;

	seg[0].off = b->from;
	seg[0].len = tail - b->from;
	if (g->magic || tail <= lap_end)
		return 1;
	/* a span of at most a quarter ring crosses the end once, at a pad
	 * (only its header is written) or exactly at the lap's end */
	seg[0].len = (b->pad_at != NO_PAD ? b->pad_at + RDMX__RING_HDR : lap_end) -
		     b->from;
	seg[1].off = lap_end;
	seg[1].len = tail - lap_end;
	return 2;
}

void rdmx__wburst_posted(struct rdmx__wburst *b, uint64_t tail, int nseg)
{
	b->cnt[b->wposted++ % b->cap] = (uint16_t)b->held;
	if (b->held > 1) {
		b->writes++;
		b->splits += nseg > 1;
	}
	b->held = 0;
	b->from = tail;
	b->pad_at = NO_PAD;
}

void rdmx__wburst_done(struct rdmx__wburst *b)
{
	b->recs_done += b->cnt[b->wdone++ % b->cap];
}
