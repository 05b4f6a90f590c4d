/* SPDX-License-Identifier: MIT */
/*
 * The out-of-line value memory of rdmx KV: offsets into one flat region
 * (the slab, owned by the store), in power-of-two chunks from
 * RDMX__KV_SLAB_MIN bytes. Fresh chunks come from a bump pointer, freed ones
 * go to their class's stack. No coalescing: a workload that moves between
 * sizes can run out of slab while bytes are free (then -ENOSPC, as for a
 * full table). The bookkeeping lives outside the slab, so a remote reader
 * only ever sees value bytes there. Called with the store's writer lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "kv/kv_internal.h"

#define SLAB_CLASSES 40

struct rdmx__kv_slab {
	uint64_t size, bump, used;
	uint64_t *free[SLAB_CLASSES];
	size_t n_free[SLAB_CLASSES], cap_free[SLAB_CLASSES];
};

/* The size class of a chunk for @len bytes (chunks of RDMX__KV_SLAB_MIN << class). */
unsigned rdmx__kv_slab_class(uint64_t len)
{
	unsigned c = 0;

	while ((uint64_t)RDMX__KV_SLAB_MIN << c < len)
		c++;
	return c;
}

int rdmx__kv_slab_init(struct rdmx__kv_slab **out, uint64_t size)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->size = size;
	return 0;
}

void rdmx__kv_slab_fini(struct rdmx__kv_slab *s)
{
	if (!s)
		return;
	for (unsigned c = 0; c < SLAB_CLASSES; c++)
		free(s->free[c]);
	free(s);
}

/* A chunk of at least @len bytes at *@off; -ENOSPC when none is left. */
int rdmx__kv_slab_alloc(struct rdmx__kv_slab *s, uint64_t len, uint64_t *off)
{
	unsigned c = rdmx__kv_slab_class(len);
	uint64_t chunk = (uint64_t)RDMX__KV_SLAB_MIN << c;

	if (c >= SLAB_CLASSES)
		return -ENOSPC;
	if (s->n_free[c]) {
		*off = s->free[c][--s->n_free[c]];
	} else {
		if (chunk > s->size - s->bump)
			return -ENOSPC;
		*off = s->bump;
		s->bump += chunk;
	}
	s->used += chunk;
	return 0;
}

/* Give back the chunk at @off that was allocated for @len bytes. */
void rdmx__kv_slab_free(struct rdmx__kv_slab *s, uint64_t off, uint64_t len)
{
	unsigned c = rdmx__kv_slab_class(len);

	if (s->n_free[c] == s->cap_free[c]) {
		size_t cap = s->cap_free[c] ? 2 * s->cap_free[c] : 16;
		uint64_t *p = realloc(s->free[c], cap * sizeof(*p));

		if (!p)
			return; /* the chunk is lost to this run, never reused twice */
		s->free[c] = p;
		s->cap_free[c] = cap;
	}
	s->free[c][s->n_free[c]++] = off;
	s->used -= (uint64_t)RDMX__KV_SLAB_MIN << c;
}

uint64_t rdmx__kv_slab_used(const struct rdmx__kv_slab *s)
{
	return s->used;
}
