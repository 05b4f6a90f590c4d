/* SPDX-License-Identifier: MIT */
/*
 * Coalescing for the single-sender ring protocols (write_simplex,
 * write_magic, write_duplex; issue 10 section 3): the bookkeeping of
 * records that rdmx_send_flags(RDMX_SEND_MORE) placed in the staging ring
 * but did not post yet, and how a held span of the ring is cut into RDMA
 * WRITEs. The engine (write_ring_conn.c) places every record as before; what
 * changes is only when it posts: a held record waits for the next plain
 * send, flush, an alloc that would wait, sends_done, or the bound here,
 * and then everything held goes out in ONE WRITE (two where the span
 * crosses the ring's end without the double mapping). Each record keeps
 * its own header and footer stamps, so the receiver still takes one
 * record per rdmx_recv and needs no change at all.
 *
 * Bounds: at most RDMX__WBURST_RECS records or a quarter of the ring are
 * held; the send that reaches either posts. Nothing waits for more sends
 * to come: only what the user marked RDMX_SEND_MORE is held.
 *
 * notify IMM: one WRITE_WITH_IMM per record (send_more is send there).
 * Every record takes a posted receive at the peer and the receiver counts
 * completions as records; announcing several records with one immediate
 * would change what the receiver counts, and IMM is the mode for the
 * latency of single messages anyway. coalesce OFF does the same.
 *
 * Completions: the data WRITEs stay one signaled work request per post,
 * in post order, so rdmx_wait's count of complete sends (sends_done) is
 * kept here: a FIFO of records per data WRITE in flight.
 */
#ifndef RDMX_PROTOCOLS_WRITE_RING_BURST_H
#define RDMX_PROTOCOLS_WRITE_RING_BURST_H

#include <stdint.h>

#include "core/ring.h"

#define RDMX__WBURST_RECS 64u /* records a burst holds at most */

struct rdmx__wburst {
	int on;            /* records may be held (POLL, coalesce not OFF) */
	uint32_t held;     /* records placed, not yet posted */
	uint64_t from;     /* ring offset of the first unposted byte */
	uint64_t pad_at;   /* offset of a pad in the held span, or ~0 */
	uint64_t bound;    /* bytes a burst may hold */
	uint16_t *cnt;     /* records per data WRITE in flight (FIFO) */
	uint32_t cap;      /* its entries */
	uint64_t wposted, wdone;
	uint64_t recs_done; /* records whose WRITE completed */
	uint64_t writes;   /* coalesced WRITEs posted (more than 1 record) */
	uint64_t splits;   /* of them, written in two pieces (the ring's end) */
};

/* One contiguous piece of a span: ring offset and bytes. */
struct rdmx__wburst_seg {
	uint64_t off;
	uint64_t len;
};

/* Set up for a connection: @on, ring @size, @depth data WRITEs in
 * flight at most. 0 or -ENOMEM. */
int rdmx__wburst_init(struct rdmx__wburst *b, int on, uint64_t size,
		      uint32_t depth);
void rdmx__wburst_free(struct rdmx__wburst *b);

/* A record was placed at [@start, @end) after the tail @tail (a pad at
 * @tail when @start != @tail). */
void rdmx__wburst_add(struct rdmx__wburst *b, uint64_t tail, uint64_t start,
		      uint64_t end);

/* Must what is held go out now (a bound reached)? @tail: the new tail. */
int rdmx__wburst_full(const struct rdmx__wburst *b, uint64_t tail);

/* Cut the held span [from, @tail) into 1 or 2 segments (@g: the peer's
 * ring geometry); returns how many. The first ends at a pad's header or
 * the ring's end, where a span without the double mapping must break. */
int rdmx__wburst_segs(const struct rdmx__wburst *b,
		      const struct rdmx__ring_geo *g, uint64_t tail,
		      struct rdmx__wburst_seg seg[2]);

/* The held span was posted (@nseg pieces, the last signaled): forget it. */
void rdmx__wburst_posted(struct rdmx__wburst *b, uint64_t tail, int nseg);

/* A data WRITE completed (they complete in post order). */
void rdmx__wburst_done(struct rdmx__wburst *b);

#endif /* RDMX_PROTOCOLS_WRITE_RING_BURST_H */
