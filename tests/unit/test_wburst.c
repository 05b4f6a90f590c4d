/* SPDX-License-Identifier: MIT */
/*
 * The ring protocols' burst bookkeeping (src/protocols/write_ring_burst.c):
 * how a held span is cut into WRITEs (one; two at a pad or the ring's end
 * without the double mapping), the bounds that post a burst, and the
 * records-per-WRITE FIFO that sends_done counts with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/ring.h"
#include "protocols/write_ring_burst.h"

#define SIZE 4096u

static void hold(struct rdmx__wburst *b, uint64_t *tail, const struct rdmx__ring_geo *g,
		 uint64_t rsize)
{
	uint64_t pad, start = rdmx__ring_place(g, *tail, rsize, &pad);

	rdmx__wburst_add(b, *tail, start, start + rsize);
	*tail = start + rsize;
}

/* A span inside the lap: one piece from the first held byte. */
static void test_one_piece(void **state)
{
	struct rdmx__wburst b;
	struct rdmx__ring_geo g;
	struct rdmx__wburst_seg seg[2];
	uint64_t tail = 100 * 16;

	(void)state;
	assert_int_equal(rdmx__ring_geo_init(&g, SIZE, 0), 0);
	assert_int_equal(rdmx__wburst_init(&b, 1, SIZE, 4), 0);
	hold(&b, &tail, &g, 96);
	hold(&b, &tail, &g, 96);
	assert_int_equal(b.held, 2);
	assert_int_equal(rdmx__wburst_segs(&b, &g, tail, seg), 1);
	assert_int_equal(seg[0].off, 1600);
	assert_int_equal(seg[0].len, 192);
	rdmx__wburst_posted(&b, tail, 1);
	assert_int_equal(b.held, 0);
	assert_int_equal(b.writes, 1);
	rdmx__wburst_free(&b);
}

/* A record that does not fit before the end: a pad, and two pieces, the
 * first ending at the pad's header; the double mapping writes one. */
static void test_split_at_pad(void **state)
{
	struct rdmx__wburst b;
	struct rdmx__ring_geo g, m;
	struct rdmx__wburst_seg seg[2];
	uint64_t tail = SIZE - 128;

	(void)state;
	assert_int_equal(rdmx__ring_geo_init(&g, SIZE, 0), 0);
	assert_int_equal(rdmx__ring_geo_init(&m, SIZE, 1), 0);
	assert_int_equal(rdmx__wburst_init(&b, 1, SIZE, 4), 0);
	hold(&b, &tail, &g, 96);  /* SIZE-128 .. SIZE-32 */
	hold(&b, &tail, &g, 96);  /* pad at SIZE-32, then SIZE .. SIZE+96 */
	assert_int_equal(tail, SIZE + 96);
	assert_int_equal(rdmx__wburst_segs(&b, &g, tail, seg), 2);
	assert_int_equal(seg[0].off, SIZE - 128);
	assert_int_equal(seg[0].len, 96 + RDMX__RING_HDR);
	assert_int_equal(seg[1].off, SIZE);
	assert_int_equal(seg[1].len, 96);
	assert_int_equal(rdmx__wburst_segs(&b, &m, tail, seg), 1);
	rdmx__wburst_posted(&b, tail, 2);
	assert_int_equal(b.splits, 1);
	/* exactly at the lap's end, no pad: two pieces meeting there */
	tail = 2 * SIZE - 96;
	b.from = tail;
	hold(&b, &tail, &g, 96);
	hold(&b, &tail, &g, 96);
	assert_int_equal(rdmx__wburst_segs(&b, &g, tail, seg), 2);
	assert_int_equal(seg[0].len, 96);
	assert_int_equal(seg[1].off, 2 * SIZE);
	assert_int_equal(seg[1].len, 96);
	rdmx__wburst_free(&b);
}

/* The bounds: RDMX__WBURST_RECS records or a quarter of the ring. */
static void test_bounds(void **state)
{
	struct rdmx__wburst b;
	struct rdmx__ring_geo g;
	uint64_t tail = 0;
	unsigned n = 0;

	(void)state;
	assert_int_equal(rdmx__ring_geo_init(&g, 1u << 20, 0), 0);
	assert_int_equal(rdmx__wburst_init(&b, 1, 1u << 20, 4), 0);
	while (!rdmx__wburst_full(&b, tail) && n < 1000) {
		hold(&b, &tail, &g, 32);
		n++;
	}
	assert_int_equal(n, RDMX__WBURST_RECS);
	rdmx__wburst_free(&b);
	assert_int_equal(rdmx__wburst_init(&b, 1, SIZE, 4), 0);
	tail = n = 0;
	while (!rdmx__wburst_full(&b, tail) && n < 1000) {
		hold(&b, &tail, &g, 256);
		n++;
	}
	assert_int_equal(n, SIZE / 4 / 256);
	rdmx__wburst_free(&b);
}

/* sends_done's count: records per WRITE, retired in post order. */
static void test_fifo(void **state)
{
	struct rdmx__wburst b;
	struct rdmx__ring_geo g;
	uint64_t tail = 0;

	(void)state;
	assert_int_equal(rdmx__ring_geo_init(&g, SIZE, 0), 0);
	assert_int_equal(rdmx__wburst_init(&b, 1, SIZE, 2), 0);
	for (unsigned round = 0; round < 10; round++) {
		for (unsigned i = 0; i < 3; i++)
			hold(&b, &tail, &g, 32);
		rdmx__wburst_posted(&b, tail, 1);
		hold(&b, &tail, &g, 32);
		rdmx__wburst_posted(&b, tail, 1);
		rdmx__wburst_done(&b);
		assert_int_equal(b.recs_done, round * 4 + 3);
		rdmx__wburst_done(&b);
		assert_int_equal(b.recs_done, round * 4 + 4);
	}
	rdmx__wburst_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_piece),
		cmocka_unit_test(test_split_at_pad),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_fifo),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
