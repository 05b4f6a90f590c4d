/* SPDX-License-Identifier: MIT */
/*
 * The ring engine (src/core/ring.c): record layout, alignment, free space,
 * the wrap decision, stale-lap detection, out-of-order release, the double
 * mapping, and randomized sender/receiver sequences checked byte for byte.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/ring.h"
#include "harness.h"

#define SEED 0x1234abcdull

static void test_record_layout(void **state)
{
	uint8_t buf[256] __attribute__((aligned(16)));
	struct rdmx__ring_geo g;
	struct rdmx__ring_rec_view v;
	struct rdmx__ring_rec_hdr *h = (void *)buf;

	(void)state;
	assert_int_equal(sizeof(struct rdmx__ring_rec_hdr), RDMX__RING_HDR);
	assert_int_equal(rdmx__ring_rec_size(0), 32);
	assert_int_equal(rdmx__ring_rec_size(1), 32);
	assert_int_equal(rdmx__ring_rec_size(8), 32);
	assert_int_equal(rdmx__ring_rec_size(9), 48);
	assert_int_equal(rdmx__ring_rec_size(100) % RDMX__RING_ALIGN, 0);
	assert_int_equal(rdmx__ring_geo_init(&g, 256, 0), 0);
	assert_int_equal(rdmx__ring_geo_init(&g, 100, 0), -EINVAL);
	assert_int_equal(rdmx__ring_geo_init(&g, 256, 0), 0);
	memset(buf, 0, sizeof(buf));
	/* A zeroed ring holds no record. */
	assert_int_equal(rdmx__ring_peek(&g, buf, SEED, 0, 200, 1, &v), 0);
	memset(buf + 16, 0x77, 40);
	rdmx__ring_put_rec(buf, SEED, 0, 40, 0xfeed, RDMX__RING_REC_IMM);
	assert_int_equal(h->len, 40);
	assert_int_equal(h->imm, 0xfeed);
	assert_int_equal(h->flags, RDMX__RING_REC_IMM);
	assert_int_equal(rdmx__ring_peek(&g, buf, SEED, 0, 200, 1, &v), 1);
	assert_int_equal(v.len, 40);
	assert_int_equal(v.imm, 0xfeed);
	assert_int_equal(v.size, rdmx__ring_rec_size(40));
	/* Too long for the receiver's maximum: a protocol error, not a record. */
	assert_int_equal(rdmx__ring_peek(&g, buf, SEED, 0, 39, 1, &v), -EPROTO);
	/* Another seed (another ring) does not match. */
	assert_int_equal(rdmx__ring_peek(&g, buf, SEED + 1, 0, 200, 1, &v), 0);
}

/* A peer rewriting the header between peek's check and its use. */
static void rewrite_len(const void *rec)
{
	struct rdmx__ring_rec_hdr *h = (void *)(uintptr_t)rec;

	__atomic_store_n(&h->len, 0x7ffffff0u, __ATOMIC_RELAXED);
	__atomic_store_n(&h->imm, 0xbadu, __ATOMIC_RELAXED);
}

/* The view comes from the validated copy: never a length above max. */
static void test_peek_reads_header_once(void **state)
{
	uint8_t buf[256] __attribute__((aligned(16)));
	struct rdmx__ring_geo g;
	struct rdmx__ring_rec_view v;

	(void)state;
	assert_int_equal(rdmx__ring_geo_init(&g, 256, 0), 0);
	memset(buf, 0, sizeof(buf));
	rdmx__ring_put_rec(buf, SEED, 0, 48, 7, RDMX__RING_REC_IMM);
	rdmx__ring_test_peeked = rewrite_len;
	assert_int_equal(rdmx__ring_peek(&g, buf, SEED, 0, 200, 1, &v), 1);
	rdmx__ring_test_peeked = NULL;
	assert_int_equal(v.len, 48);
	assert_int_equal(v.imm, 7);
	assert_int_equal(v.size, rdmx__ring_rec_size(48));
}

/* Header there, footer not yet: incomplete; then complete. */
static void test_footer_written_last(void **state)
{
	uint8_t buf[256] __attribute__((aligned(16))), rec[256] __attribute__((aligned(16)));
	struct rdmx__ring_geo g;
	struct rdmx__ring_rec_view v;
	size_t size = rdmx__ring_rec_size(50);

	(void)state;
	rdmx__ring_geo_init(&g, 256, 0);
	memset(buf, 0, sizeof(buf));
	rdmx__ring_put_rec(rec, SEED, 0, 50, 0, 0);
	/* Place the bytes in increasing order, checking at each step. */
	for (size_t i = 0; i < size; i++) {
		buf[i] = rec[i];
		assert_int_equal(rdmx__ring_peek(&g, buf, SEED, 0, 200, 1, &v),
				 i == size - 1 ? 1 : 0);
	}
	/* Without the footer check (IMM mode) the header alone is enough. */
	memset(buf + size - 8, 0, 8);
	assert_int_equal(rdmx__ring_peek(&g, buf, SEED, 0, 200, 0, &v), 1);
}

/* Bytes from an earlier lap at the same place are never a record. */
static void test_stale_lap(void **state)
{
	uint8_t buf[4096] __attribute__((aligned(16)));
	struct rdmx__ring_geo g;
	struct rdmx__ring_rec_view v;

	(void)state;
	rdmx__ring_geo_init(&g, 4096, 0);
	for (uint64_t lap = 0; lap < 100; lap++) {
		uint64_t off = lap * 4096 + 64;

		rdmx__ring_put_rec(buf + 64, SEED, off, 100, 0, 0);
		assert_int_equal(rdmx__ring_peek(&g, buf + 64, SEED, off, 4096, 1, &v), 1);
		/* The next laps at the same place see stale bytes. */
		for (uint64_t k = 1; k < 4; k++)
			assert_int_equal(rdmx__ring_peek(&g, buf + 64, SEED,
							 off + k * 4096, 4096, 1, &v), 0);
	}
	/* Distinct stamps over many offsets (no collision of hstamp+footer). */
	for (uint64_t o = 0; o < 100000; o += 16)
		assert_true(rdmx__ring_stamp(SEED, o) != rdmx__ring_stamp(SEED, o + 4096));
}

static void test_free_and_place(void **state)
{
	struct rdmx__ring_geo g, m;
	uint64_t pad, start;

	(void)state;
	rdmx__ring_geo_init(&g, 1024, 0);
	rdmx__ring_geo_init(&m, 1024, 1);
	assert_int_equal(rdmx__ring_free(&g, 0, 0), 1024);
	assert_int_equal(rdmx__ring_free(&g, 5000, 4000), 24);
	/* Fits before the end. */
	start = rdmx__ring_place(&g, 900, 124, &pad);
	assert_int_equal(start, 900);
	assert_int_equal(pad, 0);
	/* Would cross: skip to the next lap, pad the rest. */
	start = rdmx__ring_place(&g, 3000, 128, &pad);
	assert_int_equal(pad, 3072 - 3000);
	assert_int_equal(start, 3072);
	/* Magic: never a pad. */
	start = rdmx__ring_place(&m, 3000, 128, &pad);
	assert_int_equal(start, 3000);
	assert_int_equal(pad, 0);
	/* fits() counts the pad. */
	assert_true(rdmx__ring_fits(&g, 1000, 0, 24));
	assert_false(rdmx__ring_fits(&g, 1000, 0, 32));  /* 24 pad + 32 > 1024 */
	assert_true(rdmx__ring_fits(&g, 1000, 32, 32));
	assert_false(rdmx__ring_fits(&g, 1000, 31, 32));
	assert_true(rdmx__ring_fits(&m, 1000, 8, 32));
	assert_false(rdmx__ring_fits(&m, 1000, 7, 32));
	assert_false(rdmx__ring_fits(&g, 0, 0, 2048));
}

static void test_pad_record(void **state)
{
	uint8_t buf[1024] __attribute__((aligned(16)));
	struct rdmx__ring_geo g, m;
	struct rdmx__ring_rec_view v;

	(void)state;
	rdmx__ring_geo_init(&g, 1024, 0);
	rdmx__ring_geo_init(&m, 1024, 1);
	memset(buf, 0, sizeof(buf));
	rdmx__ring_put_pad(buf + 960, SEED, 2048 + 960);
	assert_int_equal(rdmx__ring_peek(&g, buf + 960, SEED, 2048 + 960, 100, 1, &v), 1);
	assert_int_equal(v.flags, RDMX__RING_REC_PAD);
	assert_int_equal(v.size, 64);
	/* A pad where none can be is a protocol error. */
	assert_int_equal(rdmx__ring_peek(&m, buf + 960, SEED, 2048 + 960, 100, 1, &v),
			 -EPROTO);
	rdmx__ring_put_pad(buf, SEED, 2048);
	assert_int_equal(rdmx__ring_peek(&g, buf, SEED, 2048, 100, 1, &v), -EPROTO);
}

/* Reverse records (notify REV): laid from the top down, the valid byte
 * last and on top; a hostile trailer is refused, never used. */
static void test_rev_records(void **state)
{
	uint8_t ring[1024] __attribute__((aligned(16)));
	struct rdmx__ring_rev_trl *t;
	struct rdmx__ring_geo g;
	struct rdmx__ring_rec_view v;
	uint64_t size = rdmx__ring_rev_size(100), at;

	(void)state;
	assert_int_equal(sizeof(struct rdmx__ring_rev_trl), RDMX__RING_REV_TRL);
	assert_int_equal(size, 128);
	rdmx__ring_geo_init(&g, 1024, 0);
	memset(ring, 0, sizeof(ring));
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 0, 200, &v), 0);
	at = rdmx__ring_rev_at(&g, 1024, size); /* the second lap's first */
	assert_int_equal(at, 1024 - 128);
	memset(ring + at, 0xab, 100);
	rdmx__ring_rev_put(ring + at, (uint32_t)size, 100, 7, RDMX__RING_REC_IMM);
	assert_int_equal(ring[1023], 1); /* the valid byte is the top byte */
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 1024, 200, &v), 1);
	assert_int_equal(v.len, 100);
	assert_int_equal(v.imm, 7);
	assert_int_equal(v.size, 128);
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 1024, 99, &v), -EPROTO);
	t = (void *)(ring + 1024 - RDMX__RING_REV_TRL);
	t->size = 120; /* not aligned */
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 1024, 200, &v), -EPROTO);
	t->size = 96;  /* smaller than its length needs */
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 1024, 200, &v), -EPROTO);
	t->size = 2048; /* crosses the bottom */
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 1024, 200, &v), -EPROTO);
	t->size = 128;
	t->valid = 2;
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 1024, 200, &v), -EPROTO);
	/* a pad runs to the lap's end, never at its start */
	rdmx__ring_rev_put(ring, 64, 0, 0, RDMX__RING_REC_PAD);
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 960, 200, &v), 1);
	assert_int_equal(v.flags, RDMX__RING_REC_PAD);
	assert_int_equal(v.size, 64);
	rdmx__ring_rev_put(ring + 1024 - 16, 16, 0, 0, RDMX__RING_REC_PAD);
	assert_int_equal(rdmx__ring_rev_peek(&g, ring, 0, 200, &v), -EPROTO);
}

static void test_release_out_of_order(void **state)
{
	struct rdmx__ring_rel r;

	(void)state;
	assert_int_equal(rdmx__ring_rel_init(&r, 4), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rdmx__ring_rel_push(&r, 100 * (uint64_t)(i + 1)), i);
	assert_int_equal(rdmx__ring_rel_push(&r, 500), -ENOBUFS);
	assert_int_equal(rdmx__ring_rel_release(&r, 2), 0);
	assert_int_equal(r.head, 0);
	assert_int_equal(rdmx__ring_rel_release(&r, 2), -EINVAL); /* twice */
	assert_int_equal(rdmx__ring_rel_release(&r, 1), 0);
	assert_int_equal(rdmx__ring_rel_release(&r, 7), -EINVAL); /* never */
	assert_int_equal(rdmx__ring_rel_release(&r, 0), 3);
	assert_int_equal(r.head, 300);
	assert_int_equal(r.released, 3);
	assert_false(rdmx__ring_rel_held(&r, 0));
	assert_true(rdmx__ring_rel_held(&r, 3));
	assert_int_equal(rdmx__ring_rel_push(&r, 500), 4);
	assert_int_equal(rdmx__ring_rel_release(&r, 4), 0);
	assert_int_equal(rdmx__ring_rel_release(&r, 3), 2);
	assert_int_equal(r.head, 500);
	rdmx__ring_rel_free(&r);
}

static void test_double_mapping(void **state)
{
	size_t size = 65536;
	uint8_t *p = rdmx__ring_map(size, 1), *q = rdmx__ring_map(size, 0);

	(void)state;
	assert_non_null(p);
	assert_non_null(q);
	assert_int_equal(p[0], 0);
	p[size + 10] = 0x5a;
	assert_int_equal(p[10], 0x5a);
	p[size - 1] = 0x11;
	assert_int_equal(p[2 * size - 1], 0x11);
	q[size - 1] = 1;
	rdmx__ring_unmap(p, size, 1);
	rdmx__ring_unmap(q, size, 0);
}

/*
 * A model sender and receiver on one ring: random sizes, random holds and
 * out-of-order releases, the sender only writes what fits by the head the
 * receiver publishes. Every record is checked byte for byte; every wasted
 * byte is a pad; a magic ring wastes none.
 */
static void run_model(int magic, uint64_t rseed)
{
	enum { SIZE = 4096, MAXLEN = 1000, HOLD = 6, N = 20000 };
	struct rdmx__ring_geo g;
	struct rdmx__ring_rel rel;
	uint8_t *ring = rdmx__ring_map(SIZE, magic);
	uint64_t tail = 0, rd = 0, sent = 0, got = 0, padded = 0, rs = rseed;
	uint64_t held[HOLD];
	int nheld = 0;

	assert_non_null(ring);
	rdmx__ring_geo_init(&g, SIZE, magic);
	assert_int_equal(rdmx__ring_rel_init(&rel, HOLD), 0);
	while (got < N) {
		/* Sender: as much as fits. */
		for (;;) {
			uint32_t len = (uint32_t)(th_rand(&rs) % MAXLEN) + 1;
			uint64_t rsz = rdmx__ring_rec_size(len), pad, start;
			uint8_t *rec;

			if (sent >= N || !rdmx__ring_fits(&g, tail, rel.head, rsz))
				break;
			start = rdmx__ring_place(&g, tail, rsz, &pad);
			if (pad) {
				rdmx__ring_put_pad(ring + (tail & g.mask), SEED, tail);
				padded += pad;
			}
			rec = ring + (start & g.mask);
			assert_true(magic || (start & g.mask) + rsz <= SIZE);
			th_fill(rec + RDMX__RING_HDR, len, sent);
			rdmx__ring_put_rec(rec, SEED, start, len, (uint32_t)sent,
					   RDMX__RING_REC_IMM);
			tail = start + rsz;
			sent++;
		}
		/* Receiver: take what is there while it may hold more. */
		while (rel.delivered - rel.released < HOLD) {
			struct rdmx__ring_rec_view v;
			int rc = rdmx__ring_peek(&g, ring + (rd & g.mask), SEED, rd,
						 MAXLEN, 1, &v);

			assert_true(rc >= 0);
			if (!rc)
				break;
			if (v.flags & RDMX__RING_REC_PAD) {
				rd += v.size;
				continue;
			}
			assert_int_equal(v.imm, (uint32_t)got);
			assert_int_equal(th_check(ring + (rd & g.mask) + RDMX__RING_HDR,
						  v.len, got), -1);
			rd += v.size;
			held[nheld++] = (uint64_t)rdmx__ring_rel_push(&rel, rd);
			got++;
		}
		/* Release a random one of those held (or all at the end). */
		while (nheld && (nheld == HOLD || got == N || th_rand(&rs) % 3)) {
			int i = (int)(th_rand(&rs) % (uint64_t)nheld);

			assert_true(rdmx__ring_rel_release(&rel, held[i]) >= 0);
			held[i] = held[--nheld];
		}
		assert_true(tail - rel.head <= SIZE);
	}
	assert_int_equal(rel.released, N);
	assert_int_equal(rel.head, tail);
	if (magic)
		assert_int_equal(padded, 0);
	else
		assert_true(padded > 0);
	assert_true(tail > 20ull * SIZE);
	rdmx__ring_rel_free(&rel);
	rdmx__ring_unmap(ring, SIZE, magic);
}

static void test_model_skip(void **state)
{
	(void)state;
	for (uint64_t s = 1; s <= 5; s++)
		run_model(0, s);
}

static void test_model_magic(void **state)
{
	(void)state;
	for (uint64_t s = 1; s <= 5; s++)
		run_model(1, s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_layout),
		cmocka_unit_test(test_peek_reads_header_once),
		cmocka_unit_test(test_footer_written_last),
		cmocka_unit_test(test_stale_lap),
		cmocka_unit_test(test_free_and_place),
		cmocka_unit_test(test_pad_record),
		cmocka_unit_test(test_release_out_of_order),
		cmocka_unit_test(test_rev_records),
		cmocka_unit_test(test_double_mapping),
		cmocka_unit_test(test_model_skip),
		cmocka_unit_test(test_model_magic),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
