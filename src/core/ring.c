/* SPDX-License-Identifier: MIT */
/* The ring engine: record format, placement and release (see ring.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "errors.h"
#include "ring.h"

int rdmx__ring_geo_init(struct rdmx__ring_geo *g, uint64_t size, int magic)
{
	if (size < 2 * RDMX__RING_ALIGN || (size & (size - 1)))
		return -EINVAL;
	g->size = size;
	g->mask = size - 1;
	g->magic = magic;
	return 0;
}

/* splitmix64's finalizer: every input bit moves every output bit. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t rdmx__ring_stamp(uint64_t seed, uint64_t off)
{
	uint64_t z = mix64(off + seed * 0x9e3779b97f4a7c15ull);

	return z ? z : 1;
}

/* The clock here is entropy for a seed, not a bound. */
uint64_t rdmx__ring_seed(void)
{
	static uint64_t counter;
	uint64_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
	uint64_t t = (uint64_t)rdmx__now_ns();

	return mix64(t ^ ((uint64_t)getpid() << 16) ^ (uintptr_t)&t ^ mix64(n));
}

static uint32_t hstamp_of(uint64_t stamp)
{
	return (uint32_t)(stamp >> 32) | 1u;
}

uint64_t rdmx__ring_place(const struct rdmx__ring_geo *g, uint64_t tail,
			  uint64_t rsize, uint64_t *pad)
{
	uint64_t at = tail & g->mask;

	*pad = 0;
	if (g->magic || at + rsize <= g->size)
		return tail;
	*pad = g->size - at;
	return tail + *pad;
}

int rdmx__ring_fits(const struct rdmx__ring_geo *g, uint64_t tail,
		    uint64_t head, uint64_t rsize)
{
	uint64_t pad, start = rdmx__ring_place(g, tail, rsize, &pad);

	return rsize <= g->size && start + rsize - head <= g->size;
}

void rdmx__ring_put_rec(void *rec, uint64_t seed, uint64_t off, uint32_t len,
			uint32_t imm, uint16_t flags)
{
	struct rdmx__ring_rec_hdr *h = rec;
	uint64_t stamp = rdmx__ring_stamp(seed, off);
	uint64_t *ftr = (uint64_t *)((uint8_t *)rec + rdmx__ring_rec_size(len) -
				     RDMX__RING_FTR);

	h->len = len;
	h->imm = imm;
	h->flags = flags;
	h->reserved = 0;
	__atomic_store_n(&h->hstamp, hstamp_of(stamp), __ATOMIC_RELEASE);
	if (!(flags & RDMX__RING_REC_PAD))
		__atomic_store_n(ftr, stamp, __ATOMIC_RELEASE);
}

void rdmx__ring_put_pad(void *rec, uint64_t seed, uint64_t off)
{
	rdmx__ring_put_rec(rec, seed, off, 0, 0, RDMX__RING_REC_PAD);
}

/* A stamped pad: it runs to the end of the lap. */
static int view_pad(const struct rdmx__ring_geo *g, uint64_t off,
		    struct rdmx__ring_rec_view *v)
{
	if (g->magic || !(off & g->mask))
		return rdmx__fail(-EPROTO, "ring: pad record at offset %llu where none can be",
				  (unsigned long long)off);
	v->len = 0;
	v->imm = 0;
	v->flags = RDMX__RING_REC_PAD;
	v->size = (uint32_t)(g->size - (off & g->mask));
	return 1;
}

void (*rdmx__ring_test_peeked)(const void *rec);

/* The header fields after its stamp matched: one relaxed load each, so
 * every later decision uses these copies, never the peer's memory. */
static void load_hdr(const struct rdmx__ring_rec_hdr *h,
		     struct rdmx__ring_rec_hdr *out)
{
	out->len = __atomic_load_n(&h->len, __ATOMIC_RELAXED);
	out->imm = __atomic_load_n(&h->imm, __ATOMIC_RELAXED);
	out->flags = __atomic_load_n(&h->flags, __ATOMIC_RELAXED);
}

int rdmx__ring_peek(const struct rdmx__ring_geo *g, const void *rec,
		    uint64_t seed, uint64_t off, uint32_t max_len,
		    int check_footer, struct rdmx__ring_rec_view *v)
{
	const struct rdmx__ring_rec_hdr *h = rec;
	uint64_t stamp = rdmx__ring_stamp(seed, off), size;
	struct rdmx__ring_rec_hdr hc;
	const uint64_t *ftr;

	if (__atomic_load_n(&h->hstamp, __ATOMIC_ACQUIRE) != hstamp_of(stamp))
		return 0;
	load_hdr(h, &hc);
	if (hc.flags & RDMX__RING_REC_PAD)
		return view_pad(g, off, v);
	size = rdmx__ring_rec_size(hc.len);
	if (hc.len > max_len || size > g->size ||
	    (!g->magic && (off & g->mask) + size > g->size))
		return rdmx__fail(-EPROTO, "ring: record of %u bytes at offset %llu does not fit (max %u)",
				  hc.len, (unsigned long long)off, max_len);
	if (rdmx__ring_test_peeked)
		rdmx__ring_test_peeked(rec);
	ftr = (const uint64_t *)((const uint8_t *)rec + size - RDMX__RING_FTR);
	if (check_footer && __atomic_load_n(ftr, __ATOMIC_ACQUIRE) != stamp)
		return 0;
	v->len = hc.len;
	v->imm = hc.imm;
	v->flags = hc.flags;
	v->size = (uint32_t)size;
	return 1;
}

/* ------------------------------------------------------ reverse records */

void rdmx__ring_rev_put(void *slot, uint32_t size, uint32_t len, uint32_t imm,
			uint16_t flags)
{
	struct rdmx__ring_rev_trl *t = (void *)((uint8_t *)slot + size -
						RDMX__RING_REV_TRL);

	t->len = len;
	t->imm = imm;
	t->size = size;
	t->flags = flags;
	t->reserved = 0;
	__atomic_store_n(&t->valid, 1, __ATOMIC_RELEASE);
}

/* The trailer's fields after its valid byte was seen: one relaxed load
 * each, so only these copies are checked and used. */
static void load_trl(const struct rdmx__ring_rev_trl *t,
		     struct rdmx__ring_rev_trl *out)
{
	out->len = __atomic_load_n(&t->len, __ATOMIC_RELAXED);
	out->imm = __atomic_load_n(&t->imm, __ATOMIC_RELAXED);
	out->size = __atomic_load_n(&t->size, __ATOMIC_RELAXED);
	out->flags = __atomic_load_n(&t->flags, __ATOMIC_RELAXED);
}

int rdmx__ring_rev_peek(const struct rdmx__ring_geo *g, const uint8_t *ring,
			uint64_t off, uint32_t max_len,
			struct rdmx__ring_rec_view *v)
{
	uint64_t top = g->size - (off & g->mask);
	const struct rdmx__ring_rev_trl *t =
		(const void *)(ring + top - RDMX__RING_REV_TRL);
	struct rdmx__ring_rev_trl tc;
	uint8_t valid = __atomic_load_n(&t->valid, __ATOMIC_ACQUIRE);

	if (!valid)
		return 0;
	if (valid != 1)
		return rdmx__fail(-EPROTO, "ring: valid byte %u at offset %llu (only 1 is valid)",
				  valid, (unsigned long long)off);
	load_trl(t, &tc);
	if (tc.flags & RDMX__RING_REC_PAD)
		return view_pad(g, off, v);
	if (tc.len > max_len || tc.size % RDMX__RING_ALIGN ||
	    tc.size < rdmx__ring_rev_size(tc.len) || tc.size > top)
		return rdmx__fail(-EPROTO, "ring: reverse record of %u bytes in a slot of %u at offset %llu does not fit (max %u)",
				  tc.len, tc.size, (unsigned long long)off, max_len);
	v->len = tc.len;
	v->imm = tc.imm;
	v->flags = tc.flags;
	v->size = tc.size;
	return 1;
}

/* ------------------------------------------------------------- release */

int rdmx__ring_rel_init(struct rdmx__ring_rel *r, uint32_t cap)
{
	memset(r, 0, sizeof(*r));
	if (!cap)
		return -EINVAL;
	r->cap = cap;
	r->end = calloc(cap, sizeof(*r->end));
	r->done = calloc(cap, 1);
	if (!r->end || !r->done) {
		rdmx__ring_rel_free(r);
		return -ENOMEM;
	}
	return 0;
}

void rdmx__ring_rel_free(struct rdmx__ring_rel *r)
{
	free(r->end);
	free(r->done);
	r->end = NULL;
	r->done = NULL;
}

int64_t rdmx__ring_rel_push(struct rdmx__ring_rel *r, uint64_t end)
{
	uint64_t seq = r->delivered;

	if (seq - r->released >= r->cap)
		return -ENOBUFS;
	r->end[seq % r->cap] = end;
	r->done[seq % r->cap] = 0;
	r->delivered++;
	return (int64_t)seq;
}

int rdmx__ring_rel_held(const struct rdmx__ring_rel *r, uint64_t seq)
{
	return seq >= r->released && seq < r->delivered &&
	       !r->done[seq % r->cap];
}

int rdmx__ring_rel_release(struct rdmx__ring_rel *r, uint64_t seq)
{
	int n = 0;

	if (!rdmx__ring_rel_held(r, seq))
		return -EINVAL;
	r->done[seq % r->cap] = 1;
	while (r->released < r->delivered && r->done[r->released % r->cap]) {
		r->done[r->released % r->cap] = 0;
		r->head = r->end[r->released % r->cap];
		r->released++;
		n++;
	}
	return n;
}

/* ---------------------------------------------------------------- memory */

/* Two MAP_SHARED views of one memfd at @base and @base + @size. */
static int map_twice(uint8_t *base, size_t size)
{
	int fd = memfd_create("rdmx-ring", MFD_CLOEXEC), rc = 0;

	if (fd < 0)
		return rdmx__fail(-errno, "ring: memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)size))
		rc = rdmx__fail(-errno, "ring: sizing the memfd to %zu bytes: %s",
				size, strerror(errno));
	for (int i = 0; !rc && i < 2; i++)
		if (mmap(base + i * size, size, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
			rc = rdmx__fail(-errno, "ring: mapping view %d of the ring: %s",
					i, strerror(errno));
	close(fd);
	return rc;
}

void *rdmx__ring_map(size_t size, int magic)
{
	size_t span = magic ? 2 * size : size;
	int prot = magic ? PROT_NONE : PROT_READ | PROT_WRITE;
	void *base = mmap(NULL, span, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (base == MAP_FAILED) {
		rdmx__fail(-errno, "ring: reserving %zu bytes: %s", span,
			   strerror(errno));
		return NULL;
	}
	if (magic && map_twice(base, size)) {
		munmap(base, span);
		return NULL;
	}
	return base;
}

void rdmx__ring_unmap(void *base, size_t size, int magic)
{
	if (base)
		munmap(base, magic ? 2 * size : size);
}
