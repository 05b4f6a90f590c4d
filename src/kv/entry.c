/* SPDX-License-Identifier: MIT */
/*
 * The entry format of rdmx KV (Pilaf's self-verifying entries; layout in
 * kv_internal.h) and the one function that decides whether a copy of an
 * entry is a valid entry for a key: rdmx__kv_entry_check(). The local GET
 * and the remote GET by RDMA READ both call it on their copy.
 *
 * Why a copy can be trusted: the writer makes the version odd, writes the
 * entry, then makes it even with a checksum computed over the new version,
 * the fixed fields, the key and the inline value. A copy taken while the
 * writer was in the entry has an odd version, or mixes words of two
 * versions and then its checksum does not match (a 64-bit hash: a false
 * match is a 2^-64 event). The key is compared byte for byte, never by its
 * hash, and only a LIVE entry matches, so a tombstone or a slot since given
 * to another key is never taken for the key. An out-of-line value is
 * checked against the checksum its (verified) entry holds.
 *
 * Threads: the table is written by the writer with atomic word stores
 * (release) and copied by readers with atomic word loads (acquire), so the
 * seqlock copy is race-free in C11 terms and TSan-clean, with no
 * suppression and no fences (which TSan does not model); on x86 these are
 * plain moves. The ordering a reader relies on is only this: a copy that
 * mixes words of two writes fails its checksum.
 */
#include <errno.h>
#include <string.h>

#include "kv/kv_internal.h"

#define K1 0x9e3779b97f4a7c15ULL
#define K2 0xc2b2ae3d27d4eb4fULL

static uint64_t fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

static uint64_t mix_word(uint64_t h, uint64_t w)
{
	w *= K2;
	w = (w << 31) | (w >> 33);
	h ^= w * K1;
	return ((h << 27) | (h >> 37)) * 5 + 0x52dce729;
}

/* The hash of the table (bucket of a key) and of every checksum. */
uint64_t rdmx__kv_hash(const void *p, size_t n, uint64_t seed)
{
	const uint8_t *b = p;
	uint64_t h = seed ^ (n * K1), w;

	for (; n >= 8; n -= 8, b += 8) {
		memcpy(&w, b, 8);
		h = mix_word(h, w);
	}
	w = 0;
	memcpy(&w, b, n); /* n < 8: the top byte stays free for the length */
	return fmix64(mix_word(h, w ^ (uint64_t)n << 56));
}

/* Where slot @i starts, from the start of the table region. */
uint64_t rdmx__kv_slot_offset(const struct rdmx__kv_layout *l, uint64_t i)
{
	return sizeof(struct rdmx__kv_header) + i * l->entry_size;
}

/* The first slot of @key's probe window (RDMX__KV_PROBE_MAX slots). */
uint64_t rdmx__kv_bucket(const struct rdmx__kv_layout *l, const void *key, size_t klen)
{
	return rdmx__kv_hash(key, klen, l->seed) % l->buckets;
}

/*
 * Do a peer's table sizes add up, without wrapping? The entry size is the
 * fixed part plus inline_max (summed in 64 bits: in 32 an inline_max near
 * 2^32 wraps it to 0 and a reader would hash and copy far past its
 * one-entry buffer), inline_max within what a store makes, and the table
 * length its header plus buckets whole entries (no u64 wrap).
 */
bool rdmx__kv_layout_sizes_ok(uint64_t buckets, uint32_t entry_size, uint32_t inline_max,
			      uint64_t table_len)
{
	uint64_t esz = (uint64_t)RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + inline_max;

	if (!buckets || buckets > RDMX__KV_BUCKETS_LIMIT || inline_max % 8 ||
	    inline_max > RDMX__KV_INLINE_LIMIT || entry_size != esz)
		return false;
	return table_len == sizeof(struct rdmx__kv_header) + buckets * esz;
}

/* A table header as a remote reader gets it, checked into @l. */
int rdmx__kv_layout_from(const void *hdr, size_t n, struct rdmx__kv_layout *l)
{
	struct rdmx__kv_header h;

	if (n < sizeof(h))
		return -EINVAL;
	memcpy(&h, hdr, sizeof(h));
	if (h.magic != RDMX__KV_MAGIC || h.format != RDMX__KV_FORMAT ||
	    h.hash_id != RDMX__KV_HASH_MIX64)
		return -EPROTO;
	if (!rdmx__kv_layout_sizes_ok(h.buckets, h.entry_size, h.inline_max,
				      sizeof(h) + h.buckets * h.entry_size))
		return -EPROTO;
	*l = (struct rdmx__kv_layout){ .seed = h.seed, .buckets = h.buckets,
				       .entry_size = h.entry_size,
				       .inline_max = h.inline_max,
				       .slab_size = h.slab_size };
	return 0;
}

/* Copy @n bytes (a multiple of 8, both 8-aligned) by atomic word loads. */
void rdmx__kv_load(void *dst, const void *src, size_t n)
{
	uint64_t *d = dst;
	const uint64_t *s = src;

	for (size_t i = 0; i < n / 8; i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE);
}

/* Store @n bytes (a multiple of 8, @dst 8-aligned) by atomic word stores. */
void rdmx__kv_store_words(void *dst, const void *src, size_t n)
{
	uint64_t *d = dst, w;
	const uint8_t *s = src;

	for (size_t i = 0; i < n / 8; i++) {
		memcpy(&w, s + 8 * i, 8);
		__atomic_store_n(&d[i], w, __ATOMIC_RELEASE);
	}
}

/* The checksum an entry with header @h and bytes @entry must carry. */
uint64_t rdmx__kv_entry_sum(const struct rdmx__kv_ehdr *h, const uint8_t *entry)
{
	uint64_t s = rdmx__kv_hash((const uint8_t *)h + 16, RDMX__KV_EHDR - 16,
				   h->version);

	s = rdmx__kv_hash(entry + RDMX__KV_EHDR, h->key_len, s);
	if (h->ool_off == RDMX__KV_INLINE)
		s = rdmx__kv_hash(entry + RDMX__KV_EHDR + RDMX__KV_KEY_SLOT,
				  h->value_len, s);
	return s;
}

/* The copy's fields within the layout's bounds (before any use of them). */
static bool ehdr_in_bounds(const struct rdmx__kv_layout *l,
			   const struct rdmx__kv_ehdr *h)
{
	if (h->key_len > RDMX__KV_KEY_MAX || h->state > RDMX__KV_TOMB)
		return false;
	if (h->ool_off == RDMX__KV_INLINE)
		return h->value_len <= l->inline_max;
	return h->ool_off % 8 == 0 && h->ool_off <= l->slab_size &&
	       h->value_len <= l->slab_size - h->ool_off;
}

/*
 * rdmx__kv_entry_check - is @copy (entry_size bytes copied from the table)
 * a valid entry for @key? The one decision of both read paths; @out gets
 * the copy's header when the verdict is HIT or EXPIRED.
 */
enum rdmx__kv_verdict rdmx__kv_entry_check(const struct rdmx__kv_layout *l,
					   const uint8_t *copy, const void *key,
					   size_t klen, uint64_t now,
					   struct rdmx__kv_ehdr *out)
{
	struct rdmx__kv_ehdr h;

	memcpy(&h, copy, sizeof(h));
	if (h.version & 1 || !ehdr_in_bounds(l, &h) ||
	    rdmx__kv_entry_sum(&h, copy) != h.checksum)
		return RDMX__KV_V_TORN;
	if (h.state == RDMX__KV_EMPTY)
		return RDMX__KV_V_EMPTY;
	if (h.state != RDMX__KV_LIVE || h.key_len != klen ||
	    memcmp(copy + RDMX__KV_EHDR, key, klen))
		return RDMX__KV_V_OTHER;
	*out = h;
	if (h.expiry && h.expiry <= now)
		return RDMX__KV_V_EXPIRED;
	return RDMX__KV_V_HIT;
}

/* Is @value (a copy of the slab bytes @h names) the value @h was written with? */
bool rdmx__kv_ool_check(const struct rdmx__kv_layout *l,
			const struct rdmx__kv_ehdr *h, const uint8_t *value)
{
	return rdmx__kv_hash(value, h->value_len, l->seed) == h->ool_sum;
}

/*
 * Write @image (a whole entry, its version even and checksum set) over
 * @slot: version odd, the body, version even (each store a release).
 */
void rdmx__kv_entry_publish(uint8_t *slot, const uint8_t *image, size_t size)
{
	uint64_t *v = (uint64_t *)slot, cur = __atomic_load_n(v, __ATOMIC_RELAXED);

	__atomic_store_n(v, cur | 1, __ATOMIC_RELEASE);
	rdmx__kv_store_words(slot + 8, image + 8, size - 8);
	__atomic_store_n(v, *(const uint64_t *)image, __ATOMIC_RELEASE);
}
