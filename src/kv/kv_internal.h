/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV internals: the store (store.c, its eviction in evict.c), its entry
 * format (entry.c) and the memcached ASCII front door (mc_proto.c,
 * mc_server.c).
 *
 * The table is ONE flat region, so that it can be registered and exported
 * for RDMA READ as it is:
 *
 *   offset              what
 *   0                   struct rdmx__kv_header (64 bytes)
 *   64 + i*entry_size   entry i, i < buckets
 *
 * and the values too long to be inline live in a second flat region, the
 * slab, at the offset the entry names. An entry:
 *
 *   offset  size        field
 *   0       8           version: odd while the writer is in it, 0 never used
 *   8       8           checksum of version, bytes 16..63, key, inline value
 *   16      8           cas (memcached's cas unique)
 *   24      8           expiry (store clock seconds, 0 = never)
 *   32      8           out-of-line value offset in the slab, or KV_INLINE
 *   40      8           checksum of the out-of-line value bytes (seeded)
 *   48      4           value length
 *   52      4           flags (memcached's client flags)
 *   56      2           key length (<= 250)
 *   58      1           state: empty, live, tombstone
 *   59      5           zero
 *   64      256         key (key length bytes used)
 *   320     inline_max  inline value
 *
 * Readers never look at the table in place: they copy an entry (one copy =
 * what one RDMA READ gives) and rdmx__kv_entry_check() decides on the copy
 * alone whether it is a valid entry for the key they look for.
 */
#ifndef RDMX_KV_INTERNAL_H
#define RDMX_KV_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDMX__KV_MAGIC 0x31564b58444d52ULL /* "RDMXKV1" */
#define RDMX__KV_FORMAT 1
#define RDMX__KV_HASH_MIX64 1 /* rdmx__kv_hash() */
#define RDMX__KV_KEY_MAX 250
#define RDMX__KV_KEY_SLOT 256
#define RDMX__KV_EHDR 64
#define RDMX__KV_PROBE_MAX 32 /* slots a key may be from its bucket */
#define RDMX__KV_RETRIES 64   /* lock-free attempts before the fallback */
#define RDMX__KV_INLINE UINT64_MAX
#define RDMX__KV_SLAB_MIN 64  /* smallest slab chunk */
#define RDMX__KV_INLINE_LIMIT 65536 /* largest inline_max a store makes */
#define RDMX__KV_BUCKETS_LIMIT (1ULL << 40) /* most buckets a reader takes */

enum rdmx__kv_state {
	RDMX__KV_EMPTY = 0,
	RDMX__KV_LIVE = 1,
	RDMX__KV_TOMB = 2,
};

/* The table region's header: what a remote reader learns at connect. */
struct rdmx__kv_header {
	uint64_t magic;
	uint32_t format;
	uint32_t hash_id;
	uint64_t seed;
	uint64_t buckets;
	uint32_t entry_size;
	uint32_t inline_max;
	uint64_t slab_size;
	uint8_t zero[16];
};

/* The fixed part of an entry (see the table above). */
struct rdmx__kv_ehdr {
	uint64_t version;
	uint64_t checksum;
	uint64_t cas;
	uint64_t expiry;
	uint64_t ool_off;
	uint64_t ool_sum;
	uint32_t value_len;
	uint32_t flags;
	uint16_t key_len;
	uint8_t state;
	uint8_t zero[5];
};

/* What a reader knows of a table: its header, checked. */
struct rdmx__kv_layout {
	uint64_t seed;
	uint64_t buckets;
	uint32_t entry_size;
	uint32_t inline_max;
	uint64_t slab_size;
};

/* rdmx__kv_entry_check()'s verdict on one copied entry. */
enum rdmx__kv_verdict {
	RDMX__KV_V_TORN,    /* in progress or torn: read it again */
	RDMX__KV_V_EMPTY,   /* never used: the key is not in the table */
	RDMX__KV_V_OTHER,   /* a tombstone or another key: probe on */
	RDMX__KV_V_EXPIRED, /* the key, expired: a miss */
	RDMX__KV_V_HIT,     /* the key, live */
};

/* entry.c: the format, shared by the local and the remote read paths. */
uint64_t rdmx__kv_hash(const void *p, size_t n, uint64_t seed);
int rdmx__kv_layout_from(const void *hdr, size_t n, struct rdmx__kv_layout *l);
bool rdmx__kv_layout_sizes_ok(uint64_t buckets, uint32_t entry_size, uint32_t inline_max,
			      uint64_t table_len);
uint64_t rdmx__kv_slot_offset(const struct rdmx__kv_layout *l, uint64_t i);
uint64_t rdmx__kv_bucket(const struct rdmx__kv_layout *l, const void *key, size_t klen);
void rdmx__kv_load(void *dst, const void *src, size_t n);
void rdmx__kv_store_words(void *dst, const void *src, size_t n);
uint64_t rdmx__kv_entry_sum(const struct rdmx__kv_ehdr *h, const uint8_t *entry);
enum rdmx__kv_verdict rdmx__kv_entry_check(const struct rdmx__kv_layout *l,
					   const uint8_t *copy, const void *key,
					   size_t klen, uint64_t now,
					   struct rdmx__kv_ehdr *out);
bool rdmx__kv_ool_check(const struct rdmx__kv_layout *l,
			const struct rdmx__kv_ehdr *h, const uint8_t *value);
void rdmx__kv_entry_publish(uint8_t *slot, const uint8_t *image, size_t size);

/* ------------------------------------------------------------- the store */

/* Store clock: seconds; injectable for tests. */
typedef uint64_t (*rdmx__kv_clock)(void *arg);

struct rdmx__kv_opts {
	uint64_t capacity;   /* live entries at most */
	uint64_t memory;     /* slab bytes for out-of-line values */
	uint32_t inline_max; /* longest inline value, a multiple of 8 */
	uint32_t item_max;   /* longest value */
	uint64_t seed;
	rdmx__kv_clock now;  /* NULL: CLOCK_REALTIME seconds */
	void *now_arg;
	bool evict_lru;      /* full: evict the least recently used (evict.c) */
};

enum rdmx__kv_mode {
	RDMX__KV_SET,
	RDMX__KV_ADD,
	RDMX__KV_REPLACE,
	RDMX__KV_APPEND,
	RDMX__KV_PREPEND,
	RDMX__KV_CAS,
};

/* One value to store. */
struct rdmx__kv_put {
	enum rdmx__kv_mode mode;
	const void *key;
	size_t klen;
	const void *value;
	size_t vlen;
	uint32_t flags;
	uint64_t expiry; /* absolute store seconds, 0 never */
	uint64_t cas;    /* RDMX__KV_CAS: the cas the caller read */
};

/* A reader's own buffers and counters (one per reading thread). */
struct rdmx__kv_reader {
	uint8_t *entry; /* one entry copy */
	uint8_t *value; /* the value of the last hit */
	size_t value_cap;
	struct rdmx__kv_ehdr hit; /* the last hit's header */
	uint64_t hit_slot;        /* and its slot */
	uint64_t retries;   /* torn copies read again */
	uint64_t fallbacks; /* lookups done under the writer lock */
};

struct rdmx__kv_stats {
	uint64_t items, capacity, buckets, slab_used, slab_size;
	uint64_t gets, hits, sets, retries, fallbacks, evictions;
};

struct rdmx__kv;

int rdmx__kv_create(const struct rdmx__kv_opts *o, struct rdmx__kv **out);
void rdmx__kv_destroy(struct rdmx__kv *kv);
uint64_t rdmx__kv_now(const struct rdmx__kv *kv);
uint64_t rdmx__kv_expiry(const struct rdmx__kv *kv, int32_t exptime);
const struct rdmx__kv_layout *rdmx__kv_layout(const struct rdmx__kv *kv);
const uint8_t *rdmx__kv_table(const struct rdmx__kv *kv, size_t *len);
const uint8_t *rdmx__kv_slab(const struct rdmx__kv *kv, size_t *len);
uint32_t rdmx__kv_item_max(const struct rdmx__kv *kv);

int rdmx__kv_reader_init(struct rdmx__kv *kv, struct rdmx__kv_reader *r);
void rdmx__kv_reader_fini(struct rdmx__kv_reader *r);
int rdmx__kv_get(struct rdmx__kv *kv, struct rdmx__kv_reader *r,
		 const void *key, size_t klen);
int rdmx__kv_get_nolock(struct rdmx__kv *kv, struct rdmx__kv_reader *r,
			const void *key, size_t klen);
int rdmx__kv_store(struct rdmx__kv *kv, const struct rdmx__kv_put *p,
		   uint64_t *cas_out);
int rdmx__kv_delete(struct rdmx__kv *kv, const void *key, size_t klen);
int rdmx__kv_delta(struct rdmx__kv *kv, const void *key, size_t klen,
		   uint64_t delta, bool decr, uint64_t *result);
int rdmx__kv_touch(struct rdmx__kv *kv, const void *key, size_t klen,
		   uint64_t expiry);
void rdmx__kv_flush(struct rdmx__kv *kv, uint64_t at);
void rdmx__kv_stats(struct rdmx__kv *kv, struct rdmx__kv_stats *s);

/* slab.c: the out-of-line value memory (writer lock held). */
struct rdmx__kv_slab;
int rdmx__kv_slab_init(struct rdmx__kv_slab **out, uint64_t size);
void rdmx__kv_slab_fini(struct rdmx__kv_slab *s);
int rdmx__kv_slab_alloc(struct rdmx__kv_slab *s, uint64_t len, uint64_t *off);
void rdmx__kv_slab_free(struct rdmx__kv_slab *s, uint64_t off, uint64_t len);
uint64_t rdmx__kv_slab_used(const struct rdmx__kv_slab *s);
unsigned rdmx__kv_slab_class(uint64_t len);

/* evict.c: --evict lru's access ticks and victim choice. */
struct rdmx__kv_lru;

/* Where rdmx__kv_lru_pick() looks (writer lock held). */
struct rdmx__kv_lru_sample {
	const struct rdmx__kv_layout *l;
	const uint8_t *table;
	uint64_t from;   /* first slot, or UINT64_MAX: the hand */
	uint64_t span;   /* slots to look at, at most */
	uint64_t exclude; /* a slot never taken (UINT64_MAX: none) */
	int slab_class;  /* -1 any entry, else only out-of-line ones of that class */
	uint64_t now;    /* store clock: an expired entry goes first */
};

int rdmx__kv_lru_init(struct rdmx__kv_lru **out, uint64_t buckets);
void rdmx__kv_lru_fini(struct rdmx__kv_lru *lru);
void rdmx__kv_lru_touch(struct rdmx__kv_lru *lru, uint64_t slot);
bool rdmx__kv_lru_pick(struct rdmx__kv_lru *lru, const struct rdmx__kv_lru_sample *sc,
		       uint64_t *victim);

#endif /* RDMX_KV_INTERNAL_H */
