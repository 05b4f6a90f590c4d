/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV's opt-in eviction (--evict lru): which live entry makes room.
 *
 * Recency: every slot has an access tick in a side array the server keeps
 * (never in the exported table: a touch must not change an entry, or a
 * concurrent one-sided READ would see it torn). A store, a touch and a GET
 * the server answers (memcached front door, get RPC) set the slot's tick
 * from one counter. A GET by one-sided READ is invisible to the server, so
 * a key read only that way ages as if unread: the price of GETs that
 * never involve the server's CPU.
 *
 * The victim is the least recently accessed live entry of a sample
 * (sampled LRU, as Redis approximates LRU; memcached keeps exact
 * segmented LRU lists, which would cost a list update per GET here):
 *  - a key whose probe window is full of live entries: the window's own
 *    (all RDMX__KV_PROBE_MAX slots), and the key takes that slot;
 *  - a table at --capacity: the first RDMX__KV_PROBE_MAX live entries from
 *    a hand that moves past each victim (exact LRU while the table holds
 *    no more than that many), deleted;
 *  - a full slab: as at capacity, among the entries whose out-of-line
 *    chunk is of the size class the new value needs (the slab does not
 *    split or join chunks: memcached too evicts within the slab class).
 * The store then removes the victim as a delete does (entry.c's versioned
 * publish: a reader's copy is the old entry whole, torn and read again, or
 * the new one, which never matches the evicted key) and frees its chunk.
 * Called with the store's writer lock, except rdmx__kv_lru_touch().
 */
#include <errno.h>
#include <stdlib.h>

#include "kv/kv_internal.h"

struct rdmx__kv_lru {
	uint64_t *atime;  /* per slot: the tick of its last access (atomic) */
	uint64_t buckets;
	uint64_t tick;    /* atomic: the last tick given */
	uint64_t hand;    /* where the next table-wide sample starts */
};

int rdmx__kv_lru_init(struct rdmx__kv_lru **out, uint64_t buckets)
{
	struct rdmx__kv_lru *lru = calloc(1, sizeof(*lru));

	if (!lru)
		return -ENOMEM;
	lru->atime = calloc(buckets, sizeof(*lru->atime));
	if (!lru->atime) {
		free(lru);
		return -ENOMEM;
	}
	lru->buckets = buckets;
	*out = lru;
	return 0;
}

void rdmx__kv_lru_fini(struct rdmx__kv_lru *lru)
{
	if (!lru)
		return;
	free(lru->atime);
	free(lru);
}

/* Slot @slot was just accessed (any thread; @lru NULL: no eviction). */
void rdmx__kv_lru_touch(struct rdmx__kv_lru *lru, uint64_t slot)
{
	uint64_t t;

	if (!lru || slot >= lru->buckets)
		return;
	t = __atomic_add_fetch(&lru->tick, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&lru->atime[slot], t, __ATOMIC_RELAXED);
}

/* Is the entry @h at @slot a candidate of the sample @sc? */
static bool candidate(const struct rdmx__kv_lru_sample *sc,
		      const struct rdmx__kv_ehdr *h, uint64_t slot)
{
	if (h->state != RDMX__KV_LIVE || slot == sc->exclude)
		return false;
	if (sc->slab_class < 0)
		return true;
	return h->ool_off != RDMX__KV_INLINE &&
	       rdmx__kv_slab_class(h->value_len) == (unsigned)sc->slab_class;
}

/*
 * rdmx__kv_lru_pick - the least recently accessed candidate among the
 * first RDMX__KV_PROBE_MAX of the @sc->span slots from @sc->from (from the
 * hand when @sc->from is UINT64_MAX): true and its slot in *@victim, or
 * false when there is none. An expired entry is taken first.
 */
bool rdmx__kv_lru_pick(struct rdmx__kv_lru *lru, const struct rdmx__kv_lru_sample *sc,
		       uint64_t *victim)
{
	uint64_t from = sc->from == UINT64_MAX ? lru->hand : sc->from;
	uint64_t best = UINT64_MAX, n = 0;
	struct rdmx__kv_ehdr h;

	for (uint64_t i = 0; i < sc->span && n < RDMX__KV_PROBE_MAX; i++) {
		uint64_t slot = (from + i) % lru->buckets, t;

		rdmx__kv_load(&h, sc->table + rdmx__kv_slot_offset(sc->l, slot), sizeof(h));
		if (!candidate(sc, &h, slot))
			continue;
		n++;
		t = h.expiry && h.expiry <= sc->now ? 0 :
		    __atomic_load_n(&lru->atime[slot], __ATOMIC_RELAXED);
		if (best == UINT64_MAX || t < best) {
			best = t;
			*victim = slot;
		}
	}
	if (!n)
		return false;
	if (sc->from == UINT64_MAX)
		lru->hand = (*victim + 1) % lru->buckets;
	return true;
}
