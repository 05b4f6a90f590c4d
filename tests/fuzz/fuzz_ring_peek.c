/* SPDX-License-Identifier: MIT */
/*
 * rdmx__ring_peek(), the record parser of every single-writer ring
 * (write_simplex, write_duplex: plain rings; write_magic: double-mapped),
 * over ring memory whose every byte the fuzzer chooses. The input:
 *   byte 0: ring size 2^(5 + b % 8) (32 B..4 KiB), bit 3 magic (4 KiB),
 *           bit 4 check the footer, bit 5 stamp the header, bit 6 the footer
 *   bytes 1-8: the offset peeked; 9-12: max_len
 *   the rest: the ring's bytes (zero beyond the input)
 * The harness stamps header/footer itself when asked (a hash the fuzzer
 * would never hit) so that the length and flag checks are reached. A plain
 * ring is a heap block of exactly its size (ASan sees any read past it); a
 * magic ring is the library's double mapping (mmap: ASan does not see
 * reads past its 2 * size bytes, the invariants below bound them instead).
 * Invariants: a record found has len <= max_len and lies within the ring
 * (or within the double mapping), a pad ends at the lap's end.
 */
#include <string.h>
#include <errno.h>

#include "core/ring.h"
#include "fuzz.h"

#define FZ_SEED 0x9e3779b97f4a7c15ull
#define FZ_MAGIC_SIZE 4096u

static uint8_t *magic_ring(void)
{
	static uint8_t *ring;

	if (!ring)
		ring = rdmx__ring_map(FZ_MAGIC_SIZE, 1);
	FZ_CHECK(ring != NULL, "cannot map a magic ring");
	return ring;
}

/* Stamp the header and/or footer of a record at @off as a writer would. */
static void stamp(uint8_t *rec, uint64_t off, uint64_t avail, int hdr, int ftr)
{
	struct rdmx__ring_rec_hdr h;
	uint64_t s = rdmx__ring_stamp(FZ_SEED, off), size;

	memcpy(&h, rec, sizeof(h));
	if (hdr) {
		h.hstamp = (uint32_t)(s >> 32) | 1u;
		memcpy(rec, &h, sizeof(h));
	}
	size = rdmx__ring_rec_size(h.len);
	if (ftr && size <= avail)
		memcpy(rec + size - RDMX__RING_FTR, &s, sizeof(s));
}

static void check_view(const struct rdmx__ring_geo *g, uint64_t off,
		       uint32_t max_len, const struct rdmx__ring_rec_view *v)
{
	uint64_t at = off & g->mask;

	if (v->flags & RDMX__RING_REC_PAD) {
		FZ_CHECK(!g->magic, "pad found in a magic ring");
		FZ_CHECK(at + v->size == g->size, "pad does not end at the lap's end");
		return;
	}
	FZ_CHECK(v->len <= max_len, "record longer than max_len delivered");
	FZ_CHECK(v->size >= rdmx__ring_rec_size(v->len), "record size below its length");
	FZ_CHECK(v->size <= g->size, "record larger than the ring");
	FZ_CHECK(g->magic || at + v->size <= g->size, "record crosses the end of a plain ring");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	struct rdmx__ring_geo g;
	struct rdmx__ring_rec_view v;
	uint8_t cfg = (uint8_t)fz_take(&in, 1);
	uint64_t off = fz_take(&in, 8);
	uint32_t max_len = (uint32_t)fz_take(&in, 4);
	int magic = cfg & 8, rc;
	uint64_t rsize = magic ? FZ_MAGIC_SIZE : 32u << (cfg % 8);
	uint8_t *ring = magic ? magic_ring() : malloc(rsize);

	FZ_CHECK(ring && !rdmx__ring_geo_init(&g, rsize, magic), "ring set-up");
	memset(ring, 0, rsize);
	memcpy(ring, in.p, in.n < rsize ? in.n : rsize);
	off &= ~(uint64_t)(RDMX__RING_ALIGN - 1); /* writers only place aligned */
	stamp(ring + (off & g.mask), off, magic ? 2 * rsize - (off & g.mask) : rsize - (off & g.mask),
	      cfg & 16 ? 0 : 1, cfg & 64 ? 0 : 1);
	rc = rdmx__ring_peek(&g, ring + (off & g.mask), FZ_SEED, off, max_len, !(cfg & 32), &v);
	FZ_CHECK(rc == 0 || rc == 1 || rc == -EPROTO, "unexpected peek result");
	if (rc == 1)
		check_view(&g, off, max_len, &v);
	if (!magic)
		free(ring);
	return 0;
}
