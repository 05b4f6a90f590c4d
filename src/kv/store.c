/* SPDX-License-Identifier: MIT */
/*
 * The rdmx KV store: a hash table in one flat region (layout and entry
 * format in kv_internal.h, the checks in entry.c), values longer than
 * inline_max in a second flat region, the slab.
 *
 * Design:
 *  - linear probing from the key's bucket, at most RDMX__KV_PROBE_MAX
 *    slots; the table has at least twice as many buckets as --capacity, so
 *    a key is in its own bucket in the common case and a GET is one read of
 *    one entry (plus one of the slab for an out-of-line value). A key with
 *    no free slot within the bound, a table at capacity or a full slab is
 *    -ENOSPC, unless the store was made with evict_lru (--evict lru): then
 *    the least recently used live entry in the way goes (evict.c chooses,
 *    make_room() and evict_one() here remove it as a delete would).
 *  - a lookup stops at an EMPTY slot; deletes leave tombstones (probed
 *    past, reused by inserts), so a key after a deleted one stays found.
 *  - one writer at a time (the writer lock); readers take no lock: they
 *    copy entries and let rdmx__kv_entry_check() judge the copy, exactly as
 *    a remote reader does with its RDMA READ. A torn copy is read again, up
 *    to RDMX__KV_RETRIES times; then the local reader falls back to a read
 *    under the writer lock (the remote one will fall back to an RPC).
 *  - a value's slab chunk is freed after the entry stops naming it and may
 *    be reused at once: a reader still holding the old entry then finds
 *    the bytes do not match the entry's value checksum and reads again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "kv/kv_internal.h"

struct rdmx__kv {
	struct rdmx__kv_layout l;
	struct rdmx__kv_opts o;
	uint8_t *table, *slab;
	size_t table_len;
	struct rdmx__kv_slab *alloc;
	pthread_mutex_t lock;  /* the writer lock: everything below */
	uint8_t *image, *wcopy; /* an entry being built, one copied */
	uint8_t *vbuf;          /* a value being built (item_max + 8) */
	uint64_t items, next_cas;
	uint64_t swept;         /* store clock of the last expired sweep */
	uint64_t gets, hits, sets, retries, fallbacks; /* atomic counters */
	struct rdmx__kv_lru *lru; /* evict_lru: access ticks; else NULL */
	uint64_t evictions;
};

/* Where a writer's search for a key ended. */
struct kv_found {
	uint64_t slot;  /* the key's slot, or the slot to put it in */
	bool hit;       /* the key is live at slot */
	bool stale;     /* the key is at slot, expired */
	bool reclaim;   /* slot holds another key, expired: reused for this one */
	bool space;     /* there is a slot to put it in */
	bool evict;     /* slot holds the live entry evicted for this one */
	uint64_t first, scanned; /* the slots the search looked at */
	struct rdmx__kv_ehdr h; /* slot's header (hit or stale) */
	uint64_t version;       /* slot's current version */
};

static uint64_t clock_realtime(void *arg)
{
	(void)arg;
	return (uint64_t)(rdmx__wall_ns() / 1000000000);
}

uint64_t rdmx__kv_now(const struct rdmx__kv *kv)
{
	return kv->o.now(kv->o.now_arg);
}

static uint8_t *slot_at(const struct rdmx__kv *kv, uint64_t i)
{
	return kv->table + rdmx__kv_slot_offset(&kv->l, i);
}

static uint64_t probe_len(const struct rdmx__kv *kv)
{
	return kv->l.buckets < RDMX__KV_PROBE_MAX ? kv->l.buckets : RDMX__KV_PROBE_MAX;
}

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* 64-byte aligned memory (aligned_alloc wants a multiple of 64). */
static void *alloc64(size_t n)
{
	return aligned_alloc(64, (n + 63) & ~(size_t)63);
}

/* ---------------------------------------------------------------- create */

static int opts_check(const struct rdmx__kv_opts *in, struct rdmx__kv_opts *o)
{
	*o = *in;
	if (!o->inline_max)
		o->inline_max = 1024;
	if (!o->item_max)
		o->item_max = 1024 * 1024;
	if (!o->now)
		o->now = clock_realtime;
	if (!o->capacity || o->capacity > (1ULL << 32) || o->inline_max % 8 ||
	    o->inline_max > RDMX__KV_INLINE_LIMIT || o->item_max < o->inline_max ||
	    o->item_max > (1U << 30))
		return -EINVAL;
	return 0;
}

static void header_init(struct rdmx__kv *kv)
{
	struct rdmx__kv_header h = {
		.magic = RDMX__KV_MAGIC, .format = RDMX__KV_FORMAT,
		.hash_id = RDMX__KV_HASH_MIX64, .seed = kv->l.seed,
		.buckets = kv->l.buckets, .entry_size = kv->l.entry_size,
		.inline_max = kv->l.inline_max, .slab_size = kv->l.slab_size,
	};

	memcpy(kv->table, &h, sizeof(h));
}

/* Every slot an EMPTY entry that checks (version 0, its checksum). */
static void slots_init(struct rdmx__kv *kv)
{
	struct rdmx__kv_ehdr h = { .ool_off = RDMX__KV_INLINE };

	memset(kv->image, 0, kv->l.entry_size);
	h.checksum = rdmx__kv_entry_sum(&h, kv->image);
	for (uint64_t i = 0; i < kv->l.buckets; i++)
		memcpy(slot_at(kv, i), &h, sizeof(h));
}

static int regions_alloc(struct rdmx__kv *kv)
{
	kv->table_len = sizeof(struct rdmx__kv_header) + kv->l.buckets * kv->l.entry_size;
	kv->table = alloc64(kv->table_len);
	kv->slab = alloc64(kv->l.slab_size + 64);
	kv->image = alloc64(kv->l.entry_size);
	kv->wcopy = alloc64(kv->l.entry_size);
	kv->vbuf = malloc(round8(kv->o.item_max) + 16);
	if (!kv->table || !kv->slab || !kv->image || !kv->wcopy || !kv->vbuf)
		return -ENOMEM;
	if (kv->o.evict_lru && rdmx__kv_lru_init(&kv->lru, kv->l.buckets))
		return -ENOMEM;
	memset(kv->table, 0, kv->table_len);
	return rdmx__kv_slab_init(&kv->alloc, kv->l.slab_size);
}

/* A store for @o; its regions are allocated and zeroed here. */
int rdmx__kv_create(const struct rdmx__kv_opts *o, struct rdmx__kv **out)
{
	struct rdmx__kv *kv = calloc(1, sizeof(*kv));
	uint64_t buckets = 8;
	int rc;

	if (!kv)
		return -ENOMEM;
	rc = opts_check(o, &kv->o);
	if (rc)
		goto free_kv;
	while (buckets < 2 * kv->o.capacity)
		buckets <<= 1;
	kv->l = (struct rdmx__kv_layout){
		.seed = kv->o.seed, .buckets = buckets,
		.entry_size = RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + kv->o.inline_max,
		.inline_max = kv->o.inline_max, .slab_size = kv->o.memory,
	};
	rc = regions_alloc(kv);
	if (rc)
		goto free_kv;
	header_init(kv);
	slots_init(kv);
	pthread_mutex_init(&kv->lock, NULL);
	*out = kv;
	return 0;
free_kv:
	rdmx__kv_destroy(kv);
	return rc;
}

/* Free the store; no reader or writer may be in it. */
void rdmx__kv_destroy(struct rdmx__kv *kv)
{
	if (!kv)
		return;
	if (kv->alloc)
		pthread_mutex_destroy(&kv->lock);
	rdmx__kv_slab_fini(kv->alloc);
	rdmx__kv_lru_fini(kv->lru);
	free(kv->vbuf);
	free(kv->wcopy);
	free(kv->image);
	free(kv->slab);
	free(kv->table);
	free(kv);
}

#define REALTIME_MAXDELTA (60 * 60 * 24 * 30)

/*
 * memcached's realtime(): an exptime (0 never, up to 30 days: seconds from
 * now, else a Unix time, negative: expired at once) as absolute store
 * seconds (0 never).
 */
uint64_t rdmx__kv_expiry(const struct rdmx__kv *kv, int32_t exptime)
{
	if (exptime == 0)
		return 0;
	if (exptime < 0)
		return 1; /* already expired */
	if (exptime > REALTIME_MAXDELTA)
		return (uint64_t)exptime;
	return rdmx__kv_now(kv) + (uint64_t)exptime;
}

const struct rdmx__kv_layout *rdmx__kv_layout(const struct rdmx__kv *kv)
{
	return &kv->l;
}

const uint8_t *rdmx__kv_table(const struct rdmx__kv *kv, size_t *len)
{
	*len = kv->table_len;
	return kv->table;
}

const uint8_t *rdmx__kv_slab(const struct rdmx__kv *kv, size_t *len)
{
	*len = kv->l.slab_size;
	return kv->slab;
}

uint32_t rdmx__kv_item_max(const struct rdmx__kv *kv)
{
	return kv->o.item_max;
}

/* ----------------------------------------------------------------- reads */

int rdmx__kv_reader_init(struct rdmx__kv *kv, struct rdmx__kv_reader *r)
{
	memset(r, 0, sizeof(*r));
	r->entry = alloc64(kv->l.entry_size);
	return r->entry ? 0 : -ENOMEM;
}

void rdmx__kv_reader_fini(struct rdmx__kv_reader *r)
{
	free(r->entry);
	free(r->value);
	memset(r, 0, sizeof(*r));
}

static int reader_room(struct rdmx__kv_reader *r, size_t n)
{
	uint8_t *p;

	if (r->value && n <= r->value_cap)
		return 0;
	p = alloc64(n + 64);
	if (!p)
		return -ENOMEM;
	free(r->value);
	r->value = p;
	r->value_cap = round8(n) + 64;
	return 0;
}

/* The value of the verified entry copy r->entry into r->value. */
static int read_value(struct rdmx__kv *kv, struct rdmx__kv_reader *r)
{
	const struct rdmx__kv_ehdr *h = &r->hit;
	int rc = reader_room(r, h->value_len);

	if (rc)
		return rc;
	if (h->ool_off == RDMX__KV_INLINE) {
		memcpy(r->value, r->entry + RDMX__KV_EHDR + RDMX__KV_KEY_SLOT,
		       h->value_len);
		return 0;
	}
	/* The second read: the slab bytes, checked against the entry. */
	rdmx__kv_load(r->value, kv->slab + h->ool_off, round8(h->value_len));
	return rdmx__kv_ool_check(&kv->l, h, r->value) ? 0 : -EAGAIN;
}

/* One lookup by copies: 0 hit, -ENOENT miss, -EAGAIN a torn copy. */
static int lookup_once(struct rdmx__kv *kv, struct rdmx__kv_reader *r,
		       const void *key, size_t klen, uint64_t now)
{
	uint64_t b = rdmx__kv_bucket(&kv->l, key, klen);

	for (uint64_t i = 0; i < probe_len(kv); i++) {
		uint8_t *s = slot_at(kv, (b + i) % kv->l.buckets);

		r->hit_slot = (b + i) % kv->l.buckets;
		rdmx__kv_load(r->entry, s, kv->l.entry_size);
		switch (rdmx__kv_entry_check(&kv->l, r->entry, key, klen, now, &r->hit)) {
		case RDMX__KV_V_TORN:
			return -EAGAIN;
		case RDMX__KV_V_OTHER:
			continue;
		case RDMX__KV_V_HIT:
			return read_value(kv, r);
		case RDMX__KV_V_EMPTY:
		case RDMX__KV_V_EXPIRED:
			return -ENOENT;
		}
	}
	return -ENOENT;
}

/*
 * rdmx__kv_get_nolock - the lock-free read alone: 0 (r->hit, r->value),
 * -ENOENT, or -EAGAIN when RDMX__KV_RETRIES copies in a row were torn.
 */
int rdmx__kv_get_nolock(struct rdmx__kv *kv, struct rdmx__kv_reader *r,
			const void *key, size_t klen)
{
	uint64_t now = rdmx__kv_now(kv);
	int rc = -EAGAIN;

	if (!klen || klen > RDMX__KV_KEY_MAX)
		return -EINVAL;
	for (int i = 0; i < RDMX__KV_RETRIES && rc == -EAGAIN; i++) {
		rc = lookup_once(kv, r, key, klen, now);
		if (rc == -EAGAIN)
			r->retries++;
	}
	return rc;
}

/* A GET: lock-free, then under the writer lock if every copy was torn. */
int rdmx__kv_get(struct rdmx__kv *kv, struct rdmx__kv_reader *r,
		 const void *key, size_t klen)
{
	uint64_t retries = r->retries;
	int rc = rdmx__kv_get_nolock(kv, r, key, klen);

	if (rc == -EAGAIN) {
		pthread_mutex_lock(&kv->lock);
		rc = lookup_once(kv, r, key, klen, rdmx__kv_now(kv));
		pthread_mutex_unlock(&kv->lock);
		r->fallbacks++;
		__atomic_add_fetch(&kv->fallbacks, 1, __ATOMIC_RELAXED);
		if (rc == -EAGAIN)
			rc = -EIO; /* torn with no writer: the table is damaged */
	}
	__atomic_add_fetch(&kv->retries, r->retries - retries, __ATOMIC_RELAXED);
	__atomic_add_fetch(&kv->gets, 1, __ATOMIC_RELAXED);
	if (!rc) {
		__atomic_add_fetch(&kv->hits, 1, __ATOMIC_RELAXED);
		rdmx__kv_lru_touch(kv->lru, r->hit_slot);
	}
	return rc;
}

/* ---------------------------------------------------------------- writes */

static bool expired(const struct rdmx__kv_ehdr *h, uint64_t now)
{
	return h->expiry && h->expiry <= now;
}

/*
 * The writer's search for @key (lock held): its slot, or the first slot
 * free for it (empty, a tombstone, or another key's expired entry, which
 * is reclaimed); -EIO if a slot is damaged.
 */
static int writer_find(struct rdmx__kv *kv, const void *key, size_t klen,
		       struct kv_found *f)
{
	uint64_t b = rdmx__kv_bucket(&kv->l, key, klen), now = rdmx__kv_now(kv);

	memset(f, 0, sizeof(*f));
	f->first = b;
	for (uint64_t i = 0; i < probe_len(kv); i++) {
		uint64_t at = (b + i) % kv->l.buckets;
		struct rdmx__kv_ehdr h;
		enum rdmx__kv_verdict v;

		rdmx__kv_load(kv->wcopy, slot_at(kv, at), kv->l.entry_size);
		memcpy(&h, kv->wcopy, sizeof(h));
		v = rdmx__kv_entry_check(&kv->l, kv->wcopy, key, klen, now, &f->h);
		f->scanned = i + 1;
		if (v == RDMX__KV_V_TORN)
			return -EIO;
		if (v == RDMX__KV_V_HIT || v == RDMX__KV_V_EXPIRED) {
			*f = (struct kv_found){ .slot = at, .hit = v == RDMX__KV_V_HIT,
						.stale = v == RDMX__KV_V_EXPIRED,
						.space = true, .h = f->h,
						.version = h.version, .first = b,
						.scanned = i + 1 };
			return 0;
		}
		if (!f->space && (h.state != RDMX__KV_LIVE || expired(&h, now))) {
			f->space = true;
			f->reclaim = h.state == RDMX__KV_LIVE;
			f->slot = at;
			f->h = h;
			f->version = h.version;
		}
		if (v == RDMX__KV_V_EMPTY)
			break;
	}
	return 0;
}

/* @key's live entry into @f (lock held): 0, -ENOENT, or -EIO. */
static int live_find(struct rdmx__kv *kv, const void *key, size_t klen,
		     struct kv_found *f)
{
	int rc = writer_find(kv, key, klen, f);

	return rc ? rc : f->hit ? 0 : -ENOENT;
}

/* The writer's copy of the value its search found (in kv->wcopy). */
static const uint8_t *found_value(struct rdmx__kv *kv, const struct kv_found *f)
{
	if (f->h.ool_off == RDMX__KV_INLINE)
		return kv->wcopy + RDMX__KV_EHDR + RDMX__KV_KEY_SLOT;
	return kv->slab + f->h.ool_off;
}

static void ool_release(struct rdmx__kv *kv, const struct kv_found *f)
{
	if ((f->hit || f->stale || f->reclaim) && f->h.ool_off != RDMX__KV_INLINE)
		rdmx__kv_slab_free(kv->alloc, f->h.ool_off, f->h.value_len);
}

/* ------------------------------------------------------------- eviction */

static void slot_clear(struct rdmx__kv *kv, const struct kv_found *f, bool empty);

/* Slot @i's header, as the writer (lock held) sees it. */
static void header_at(struct rdmx__kv *kv, uint64_t i, struct rdmx__kv_ehdr *h)
{
	rdmx__kv_load(h, slot_at(kv, i), sizeof(*h));
}

static struct rdmx__kv_lru_sample sample(struct rdmx__kv *kv, int slab_class)
{
	return (struct rdmx__kv_lru_sample){ .l = &kv->l, .table = kv->table,
					     .from = UINT64_MAX, .span = kv->l.buckets,
					     .exclude = UINT64_MAX, .slab_class = slab_class,
					     .now = rdmx__kv_now(kv) };
}

/*
 * Delete the least recently used live entry of a table-wide sample (only
 * out-of-line ones of @slab_class when >= 0), never @f's slot: 0, or
 * -ENOSPC when there is none.
 */
static int evict_one(struct rdmx__kv *kv, const struct kv_found *f, int slab_class)
{
	struct rdmx__kv_lru_sample sc = sample(kv, slab_class);
	struct kv_found v = { .hit = true, .space = true };

	sc.exclude = f->slot;
	if (!rdmx__kv_lru_pick(kv->lru, &sc, &v.slot))
		return -ENOSPC;
	header_at(kv, v.slot, &v.h);
	v.version = v.h.version;
	slot_clear(kv, &v, false);
	kv->items--;
	kv->evictions++;
	return 0;
}

/*
 * Room in the table for @f's key when it needs some: 0, or -ENOSPC (no
 * eviction). A window full of live entries gives its least recently used
 * slot to the key (overwritten by it: f->reclaim); a table at capacity
 * loses its least recently used entry of a sample (evict_one).
 */
static int make_room(struct rdmx__kv *kv, struct kv_found *f)
{
	bool fresh = !f->hit && !f->stale && !f->reclaim;
	struct rdmx__kv_lru_sample sc = sample(kv, -1);

	if (f->space && !(fresh && kv->items >= kv->o.capacity))
		return 0;
	if (!kv->lru)
		return -ENOSPC;
	if (f->space)
		return evict_one(kv, f, -1);
	sc.from = f->first;
	sc.span = f->scanned;
	if (!rdmx__kv_lru_pick(kv->lru, &sc, &f->slot))
		return -ENOSPC;
	header_at(kv, f->slot, &f->h);
	f->version = f->h.version;
	f->space = f->reclaim = f->evict = true;
	return 0;
}

/* Out of line: the value (kv->vbuf) into a fresh slab chunk. */
static int ool_write(struct rdmx__kv *kv, const struct kv_found *f,
		     struct rdmx__kv_ehdr *h)
{
	int rc = rdmx__kv_slab_alloc(kv->alloc, h->value_len, &h->ool_off);

	if (rc == -ENOSPC && kv->lru) {
		rc = evict_one(kv, f, (int)rdmx__kv_slab_class(h->value_len));
		if (!rc)
			rc = rdmx__kv_slab_alloc(kv->alloc, h->value_len, &h->ool_off);
	}
	if (rc)
		return rc;
	memset(kv->vbuf + h->value_len, 0, 8);
	rdmx__kv_store_words(kv->slab + h->ool_off, kv->vbuf, round8(h->value_len));
	h->ool_sum = rdmx__kv_hash(kv->vbuf, h->value_len, kv->l.seed);
	return 0;
}

/* Build the entry @h (its key @key, value in kv->vbuf if inline) and publish it at @f. */
static void entry_write(struct rdmx__kv *kv, const struct kv_found *f,
			struct rdmx__kv_ehdr *h, const void *key)
{
	memset(kv->image, 0, kv->l.entry_size);
	h->version = (f->version | 1) + 1;
	memcpy(kv->image + RDMX__KV_EHDR, key, h->key_len);
	if (h->ool_off == RDMX__KV_INLINE)
		memcpy(kv->image + RDMX__KV_EHDR + RDMX__KV_KEY_SLOT, kv->vbuf,
		       h->value_len);
	h->checksum = rdmx__kv_entry_sum(h, kv->image);
	memcpy(kv->image, h, sizeof(*h));
	rdmx__kv_entry_publish(slot_at(kv, f->slot), kv->image, kv->l.entry_size);
}

/* Put the value in kv->vbuf (@vlen bytes) for @key at @f. */
static int put_found(struct rdmx__kv *kv, const struct kv_found *found,
		     const struct rdmx__kv_put *p, size_t vlen, uint64_t *cas_out)
{
	struct rdmx__kv_ehdr h = { .state = RDMX__KV_LIVE, .key_len = (uint16_t)p->klen,
				   .value_len = (uint32_t)vlen, .flags = p->flags,
				   .expiry = p->expiry, .ool_off = RDMX__KV_INLINE,
				   .cas = kv->next_cas + 1 };
	struct kv_found f = *found;
	bool fresh;
	int rc = make_room(kv, &f);

	if (rc)
		return rc;
	fresh = !f.hit && !f.stale && !f.reclaim;
	if (vlen > kv->l.inline_max) {
		rc = ool_write(kv, &f, &h);
		if (rc)
			return rc;
	}
	entry_write(kv, &f, &h, p->key);
	ool_release(kv, &f);
	rdmx__kv_lru_touch(kv->lru, f.slot);
	kv->evictions += f.evict;
	kv->next_cas++;
	if (fresh)
		kv->items++;
	kv->sets++;
	if (cas_out)
		*cas_out = h.cas;
	return 0;
}

/* set/add/replace/cas semantics: 0 to go on, or the refusal. */
static int mode_check(const struct rdmx__kv_put *p, const struct kv_found *f)
{
	switch (p->mode) {
	case RDMX__KV_ADD:
		return f->hit ? -EEXIST : 0;
	case RDMX__KV_REPLACE:
	case RDMX__KV_APPEND:
	case RDMX__KV_PREPEND:
		return f->hit ? 0 : -ENOENT;
	case RDMX__KV_CAS:
		if (!f->hit)
			return -ENOENT;
		return f->h.cas == p->cas ? 0 : -EEXIST;
	case RDMX__KV_SET:
		break;
	}
	return 0;
}

/* The new value into kv->vbuf: the caller's, or joined to the old one. */
static int value_build(struct rdmx__kv *kv, const struct rdmx__kv_put *p,
		       const struct kv_found *f, size_t *vlen)
{
	size_t old = 0;

	if (p->mode == RDMX__KV_APPEND || p->mode == RDMX__KV_PREPEND)
		old = f->h.value_len;
	if (p->vlen > kv->o.item_max || old > kv->o.item_max - p->vlen)
		return -E2BIG;
	if (p->mode == RDMX__KV_APPEND) {
		memmove(kv->vbuf, found_value(kv, f), old);
		memcpy(kv->vbuf + old, p->value, p->vlen);
	} else if (p->mode == RDMX__KV_PREPEND) {
		memmove(kv->vbuf + p->vlen, found_value(kv, f), old);
		memcpy(kv->vbuf, p->value, p->vlen);
	} else {
		memcpy(kv->vbuf, p->value, p->vlen);
	}
	*vlen = old + p->vlen;
	return 0;
}

static bool slot_live(struct rdmx__kv *kv, uint64_t i, struct kv_found *f);

/*
 * At capacity: turn every expired entry into a tombstone, at most once per
 * store-clock second (a table full of live keys is not scanned per store).
 */
static void expired_sweep(struct rdmx__kv *kv)
{
	uint64_t now = rdmx__kv_now(kv);
	struct kv_found f;

	if (kv->swept == now)
		return;
	kv->swept = now;
	for (uint64_t i = 0; i < kv->l.buckets; i++) {
		if (slot_live(kv, i, &f) && expired(&f.h, now)) {
			slot_clear(kv, &f, false);
			kv->items--;
		}
	}
}

/*
 * rdmx__kv_store - set, add, replace, append, prepend or cas @p. 0 (and
 * the new cas in *@cas_out), -EEXIST (add: present; cas: changed since),
 * -ENOENT (replace/append/prepend/cas: absent), -E2BIG (longer than
 * item_max), -ENOSPC (no slot, at capacity or no slab), -EINVAL (key).
 */
int rdmx__kv_store(struct rdmx__kv *kv, const struct rdmx__kv_put *p,
		   uint64_t *cas_out)
{
	struct rdmx__kv_put q = *p;
	struct kv_found f;
	size_t vlen;
	int rc;

	if (!p->klen || p->klen > RDMX__KV_KEY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&kv->lock);
	if (kv->items >= kv->o.capacity)
		expired_sweep(kv);
	rc = writer_find(kv, p->key, p->klen, &f);
	if (!rc)
		rc = mode_check(p, &f);
	if (!rc && (p->mode == RDMX__KV_APPEND || p->mode == RDMX__KV_PREPEND)) {
		q.flags = f.h.flags; /* memcached: the item keeps its flags and expiry */
		q.expiry = f.h.expiry;
	}
	if (!rc)
		rc = value_build(kv, &q, &f, &vlen);
	if (!rc)
		rc = put_found(kv, &f, &q, vlen, cas_out);
	pthread_mutex_unlock(&kv->lock);
	return rc;
}

/* Turn the slot @f into a tombstone (or EMPTY, @empty) and free its value. */
static void slot_clear(struct rdmx__kv *kv, const struct kv_found *f, bool empty)
{
	struct rdmx__kv_ehdr h = { .state = empty ? RDMX__KV_EMPTY : RDMX__KV_TOMB,
				   .ool_off = RDMX__KV_INLINE };

	entry_write(kv, f, &h, "");
	ool_release(kv, f);
}

/* Delete @key: 0, or -ENOENT. */
int rdmx__kv_delete(struct rdmx__kv *kv, const void *key, size_t klen)
{
	struct kv_found f;
	int rc;

	if (!klen || klen > RDMX__KV_KEY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&kv->lock);
	rc = writer_find(kv, key, klen, &f);
	if (!rc && (f.hit || f.stale)) {
		slot_clear(kv, &f, false);
		kv->items--;
	}
	if (!rc && !f.hit)
		rc = -ENOENT;
	pthread_mutex_unlock(&kv->lock);
	return rc;
}

/* memcached's safe_strtoull over a value followed by "\r\n". */
static bool value_number(const uint8_t *v, size_t n, uint64_t *out)
{
	char buf[32], *end;
	unsigned long long x;

	if (!n || n > 20 + 8)
		return false;
	memcpy(buf, v, n);
	memcpy(buf + n, "\r\n", 3);
	errno = 0;
	x = strtoull(buf, &end, 10);
	if (errno == ERANGE || end == buf || !(*end == ' ' || *end == '\r' ||
					       *end == '\t' || *end == '\n'))
		return false;
	if ((long long)x < 0 && memchr(buf, '-', (size_t)(end - buf)))
		return false;
	*out = x;
	return true;
}

/* The new number into kv->vbuf, as memcached does: in place and space-padded when it fits. */
static size_t delta_format(struct rdmx__kv *kv, const struct kv_found *f,
			   uint64_t value)
{
	char digits[24];
	size_t n = (size_t)snprintf(digits, sizeof(digits), "%llu",
				    (unsigned long long)value);

	memcpy(kv->vbuf, digits, n);
	if (n < f->h.value_len) {
		memset(kv->vbuf + n, ' ', f->h.value_len - n);
		n = f->h.value_len;
	}
	return n;
}

/*
 * incr (or decr, @decr) @key by @delta: 0 and the new number in *@result,
 * -ENOENT, or -EINVAL when the value is not a decimal number.
 */
int rdmx__kv_delta(struct rdmx__kv *kv, const void *key, size_t klen,
		   uint64_t delta, bool decr, uint64_t *result)
{
	struct rdmx__kv_put p = { .mode = RDMX__KV_SET, .key = key, .klen = klen };
	struct kv_found f;
	uint64_t v;
	int rc;

	if (!klen || klen > RDMX__KV_KEY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&kv->lock);
	rc = live_find(kv, key, klen, &f);
	if (!rc && !value_number(found_value(kv, &f), f.h.value_len, &v))
		rc = -EINVAL;
	if (!rc) {
		v = decr ? (delta > v ? 0 : v - delta) : v + delta;
		p.flags = f.h.flags;
		p.expiry = f.h.expiry;
		rc = put_found(kv, &f, &p, delta_format(kv, &f, v), NULL);
		*result = v;
	}
	pthread_mutex_unlock(&kv->lock);
	return rc;
}

/* Rewrite the live entry at @f with @expiry, its value where it is. */
static void expiry_set(struct rdmx__kv *kv, const struct kv_found *f,
		       uint64_t expiry)
{
	struct rdmx__kv_ehdr h = f->h;

	h.expiry = expiry;
	if (h.ool_off == RDMX__KV_INLINE)
		memcpy(kv->vbuf, found_value(kv, f), h.value_len);
	entry_write(kv, f, &h, kv->wcopy + RDMX__KV_EHDR);
}

/* Set @key's expiry: 0, or -ENOENT. */
int rdmx__kv_touch(struct rdmx__kv *kv, const void *key, size_t klen,
		   uint64_t expiry)
{
	struct kv_found f;
	int rc;

	if (!klen || klen > RDMX__KV_KEY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&kv->lock);
	rc = live_find(kv, key, klen, &f);
	if (!rc) {
		expiry_set(kv, &f, expiry);
		rdmx__kv_lru_touch(kv->lru, f.slot);
	}
	pthread_mutex_unlock(&kv->lock);
	return rc;
}

/* The live entry in slot @i as a kv_found (in kv->wcopy), or false. */
static bool slot_live(struct rdmx__kv *kv, uint64_t i, struct kv_found *f)
{
	rdmx__kv_load(kv->wcopy, slot_at(kv, i), kv->l.entry_size);
	memcpy(&f->h, kv->wcopy, sizeof(f->h));
	*f = (struct kv_found){ .slot = i, .hit = true, .space = true,
				.h = f->h, .version = f->h.version };
	return f->h.state == RDMX__KV_LIVE;
}

/*
 * flush_all: every item gone now (@at 0 or past), or expiring at @at at
 * the latest. Slots emptied now become EMPTY again (no tombstones left).
 */
void rdmx__kv_flush(struct rdmx__kv *kv, uint64_t at)
{
	bool now = !at || at <= rdmx__kv_now(kv);
	struct kv_found f;

	pthread_mutex_lock(&kv->lock);
	for (uint64_t i = 0; i < kv->l.buckets; i++) {
		bool live = slot_live(kv, i, &f);

		if (now && f.h.state != RDMX__KV_EMPTY) {
			f.hit = live;
			slot_clear(kv, &f, true);
			kv->items -= live;
		} else if (live && (!f.h.expiry || f.h.expiry > at)) {
			expiry_set(kv, &f, at);
		}
	}
	pthread_mutex_unlock(&kv->lock);
}

void rdmx__kv_stats(struct rdmx__kv *kv, struct rdmx__kv_stats *s)
{
	pthread_mutex_lock(&kv->lock);
	*s = (struct rdmx__kv_stats){
		.items = kv->items, .capacity = kv->o.capacity,
		.buckets = kv->l.buckets, .slab_used = rdmx__kv_slab_used(kv->alloc),
		.slab_size = kv->l.slab_size, .sets = kv->sets,
		.evictions = kv->evictions,
	};
	pthread_mutex_unlock(&kv->lock);
	s->gets = __atomic_load_n(&kv->gets, __ATOMIC_RELAXED);
	s->hits = __atomic_load_n(&kv->hits, __ATOMIC_RELAXED);
	s->retries = __atomic_load_n(&kv->retries, __ATOMIC_RELAXED);
	s->fallbacks = __atomic_load_n(&kv->fallbacks, __ATOMIC_RELAXED);
}
