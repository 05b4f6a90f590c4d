/* SPDX-License-Identifier: MIT */
/*
 * The rdmx KV store (src/kv/store.c, entry.c): every operation, a full
 * table and a full slab, TTL on an injected clock, the entry check on
 * damaged copies, and the torture test: writer threads rewriting a hot set
 * of keys with self-checking values while reader threads read by copy (the
 * check the RDMA READ path uses), zero torn values accepted.
 * RDMX_KV_TORTURE_SECONDS sets its length (default 3 s, 1 s with
 * RDMX_TEST_QUICK; make soak runs 30 s).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kv/kv_internal.h"

static uint64_t fake_now = 1000;

static uint64_t test_clock(void *arg)
{
	(void)arg;
	return __atomic_load_n(&fake_now, __ATOMIC_RELAXED);
}

static struct rdmx__kv *mk(uint64_t cap, uint64_t mem, uint32_t inline_max)
{
	struct rdmx__kv_opts o = { .capacity = cap, .memory = mem,
				   .inline_max = inline_max, .item_max = 64 * 1024,
				   .seed = 42, .now = test_clock };
	struct rdmx__kv *kv = NULL;

	assert_int_equal(rdmx__kv_create(&o, &kv), 0);
	return kv;
}

static int put(struct rdmx__kv *kv, enum rdmx__kv_mode m, const char *k,
	       const char *v, uint64_t cas, uint64_t *cas_out)
{
	struct rdmx__kv_put p = { .mode = m, .key = k, .klen = strlen(k), .value = v,
				  .vlen = strlen(v), .flags = 7, .cas = cas };

	return rdmx__kv_store(kv, &p, cas_out);
}

/* @k's value is @want (NULL: absent). */
static void expect(struct rdmx__kv *kv, const char *k, const char *want)
{
	struct rdmx__kv_reader r;
	int rc;

	assert_int_equal(rdmx__kv_reader_init(kv, &r), 0);
	rc = rdmx__kv_get(kv, &r, k, strlen(k));
	if (!want) {
		assert_int_equal(rc, -ENOENT);
	} else {
		assert_int_equal(rc, 0);
		assert_int_equal(r.hit.value_len, strlen(want));
		assert_memory_equal(r.value, want, strlen(want));
	}
	rdmx__kv_reader_fini(&r);
}

static void test_set_add_replace(void **state)
{
	struct rdmx__kv *kv = mk(16, 4096, 64);

	(void)state;
	expect(kv, "a", NULL);
	assert_int_equal(put(kv, RDMX__KV_REPLACE, "a", "x", 0, NULL), -ENOENT);
	assert_int_equal(put(kv, RDMX__KV_ADD, "a", "one", 0, NULL), 0);
	assert_int_equal(put(kv, RDMX__KV_ADD, "a", "two", 0, NULL), -EEXIST);
	expect(kv, "a", "one");
	assert_int_equal(put(kv, RDMX__KV_REPLACE, "a", "three", 0, NULL), 0);
	expect(kv, "a", "three");
	assert_int_equal(put(kv, RDMX__KV_SET, "a", "", 0, NULL), 0);
	expect(kv, "a", "");
	assert_int_equal(put(kv, RDMX__KV_SET, "", "v", 0, NULL), -EINVAL);
	rdmx__kv_destroy(kv);
}

static void test_append_prepend_ool(void **state)
{
	struct rdmx__kv *kv = mk(16, 8192, 16);
	char big[200];

	(void)state;
	assert_int_equal(put(kv, RDMX__KV_APPEND, "k", "x", 0, NULL), -ENOENT);
	assert_int_equal(put(kv, RDMX__KV_SET, "k", "middle", 0, NULL), 0);
	assert_int_equal(put(kv, RDMX__KV_APPEND, "k", "-end", 0, NULL), 0);
	assert_int_equal(put(kv, RDMX__KV_PREPEND, "k", "start-", 0, NULL), 0);
	expect(kv, "k", "start-middle-end"); /* 16 bytes: still inline */
	assert_int_equal(put(kv, RDMX__KV_APPEND, "k", "!", 0, NULL), 0);
	expect(kv, "k", "start-middle-end!"); /* now out of line */
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(put(kv, RDMX__KV_SET, "big", big, 0, NULL), 0);
	expect(kv, "big", big);
	assert_int_equal(put(kv, RDMX__KV_SET, "big", "small", 0, NULL), 0);
	expect(kv, "big", "small");
	rdmx__kv_destroy(kv);
}

static void test_cas(void **state)
{
	struct rdmx__kv *kv = mk(16, 0, 64);
	uint64_t c1, c2;

	(void)state;
	assert_int_equal(put(kv, RDMX__KV_CAS, "c", "v", 1, NULL), -ENOENT);
	assert_int_equal(put(kv, RDMX__KV_SET, "c", "v1", 0, &c1), 0);
	assert_int_equal(put(kv, RDMX__KV_SET, "c", "v2", 0, &c2), 0);
	assert_true(c2 != c1);
	assert_int_equal(put(kv, RDMX__KV_CAS, "c", "v3", c1, NULL), -EEXIST);
	expect(kv, "c", "v2");
	assert_int_equal(put(kv, RDMX__KV_CAS, "c", "v3", c2, NULL), 0);
	expect(kv, "c", "v3");
	rdmx__kv_destroy(kv);
}

static void test_delete_tombstone(void **state)
{
	struct rdmx__kv *kv = mk(8, 0, 64);
	char k[8];
	struct rdmx__kv_stats st;

	(void)state;
	for (int i = 0; i < 8; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(put(kv, RDMX__KV_SET, k, k, 0, NULL), 0);
	}
	for (int i = 0; i < 8; i += 2) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(rdmx__kv_delete(kv, k, strlen(k)), 0);
		assert_int_equal(rdmx__kv_delete(kv, k, strlen(k)), -ENOENT);
	}
	for (int i = 0; i < 8; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		expect(kv, k, i % 2 ? k : NULL); /* keys past tombstones stay found */
	}
	rdmx__kv_stats(kv, &st);
	assert_int_equal(st.items, 4);
	rdmx__kv_destroy(kv);
}

static void test_incr_decr(void **state)
{
	struct rdmx__kv *kv = mk(8, 0, 64);
	uint64_t v;

	(void)state;
	assert_int_equal(rdmx__kv_delta(kv, "n", 1, 1, false, &v), -ENOENT);
	assert_int_equal(put(kv, RDMX__KV_SET, "n", "100", 0, NULL), 0);
	assert_int_equal(rdmx__kv_delta(kv, "n", 1, 5, false, &v), 0);
	assert_int_equal(v, 105);
	assert_int_equal(rdmx__kv_delta(kv, "n", 1, 10, true, &v), 0);
	assert_int_equal(v, 95);
	expect(kv, "n", "95 "); /* memcached pads in place */
	assert_int_equal(rdmx__kv_delta(kv, "n", 1, 1000, true, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(put(kv, RDMX__KV_SET, "n", "18446744073709551615", 0, NULL), 0);
	assert_int_equal(rdmx__kv_delta(kv, "n", 1, 2, false, &v), 0);
	assert_int_equal(v, 1); /* wraps at 2^64 */
	assert_int_equal(put(kv, RDMX__KV_SET, "s", "12abc", 0, NULL), 0);
	assert_int_equal(rdmx__kv_delta(kv, "s", 1, 1, false, &v), -EINVAL);
	assert_int_equal(put(kv, RDMX__KV_SET, "s", "-3", 0, NULL), 0);
	assert_int_equal(rdmx__kv_delta(kv, "s", 1, 1, false, &v), -EINVAL);
	rdmx__kv_destroy(kv);
}

static void test_ttl_touch_flush(void **state)
{
	struct rdmx__kv *kv = mk(8, 4096, 64);
	struct rdmx__kv_put p = { .mode = RDMX__KV_SET, .key = "t", .klen = 1,
				  .value = "v", .vlen = 1, .expiry = 1010 };
	struct rdmx__kv_layout l;

	(void)state;
	fake_now = 1000;
	assert_int_equal(rdmx__kv_store(kv, &p, NULL), 0);
	expect(kv, "t", "v");
	fake_now = 1010;
	expect(kv, "t", NULL);
	assert_int_equal(rdmx__kv_touch(kv, "t", 1, 2000), -ENOENT);
	assert_int_equal(put(kv, RDMX__KV_ADD, "t", "w", 0, NULL), 0); /* expired: absent */
	assert_int_equal(rdmx__kv_touch(kv, "t", 1, 1020), 0);
	fake_now = 1019;
	expect(kv, "t", "w");
	fake_now = 1020;
	expect(kv, "t", NULL);
	assert_int_equal(put(kv, RDMX__KV_SET, "u", "1", 0, NULL), 0);
	rdmx__kv_flush(kv, 1030); /* delayed */
	assert_int_equal(rdmx__kv_layout_from(rdmx__kv_table(kv, &(size_t){ 0 }), 64, &l), 0);
	assert_int_equal(l.buckets, rdmx__kv_layout(kv)->buckets);
	expect(kv, "u", "1");
	fake_now = 1030;
	expect(kv, "u", NULL);
	assert_int_equal(put(kv, RDMX__KV_SET, "u", "2", 0, NULL), 0);
	rdmx__kv_flush(kv, 0);
	expect(kv, "u", NULL);
	fake_now = 1000;
	rdmx__kv_destroy(kv);
}

/* Expired entries of other keys make room: the table is not full of them. */
static void test_expired_reclaimed(void **state)
{
	struct rdmx__kv *kv = mk(2, 1024, 16);
	struct rdmx__kv_put p = { .mode = RDMX__KV_SET, .klen = 2, .vlen = 40,
				  .value = "0123456789012345678901234567890123456789",
				  .expiry = 1005 };
	struct rdmx__kv_stats st;

	(void)state;
	fake_now = 1000;
	p.key = "e1";
	assert_int_equal(rdmx__kv_store(kv, &p, NULL), 0);
	p.key = "e2";
	assert_int_equal(rdmx__kv_store(kv, &p, NULL), 0);
	assert_int_equal(put(kv, RDMX__KV_SET, "e3", "v", 0, NULL), -ENOSPC);
	fake_now = 1005;
	for (int i = 0; i < 8; i++) { /* room again, and out-of-line chunks back */
		char k[8];

		snprintf(k, sizeof(k), "n%d", i);
		assert_int_equal(put(kv, RDMX__KV_SET, k, "v", 0, NULL), 0);
		assert_int_equal(rdmx__kv_delete(kv, k, strlen(k)), 0);
	}
	rdmx__kv_stats(kv, &st);
	assert_int_equal(st.slab_used, 0);
	expect(kv, "e1", NULL);
	fake_now = 1000;
	rdmx__kv_destroy(kv);
}

static void test_full(void **state)
{
	struct rdmx__kv *kv = mk(4, 256, 16);
	char k[8], big[100];

	(void)state;
	for (int i = 0; i < 4; i++) {
		snprintf(k, sizeof(k), "f%d", i);
		assert_int_equal(put(kv, RDMX__KV_SET, k, "v", 0, NULL), 0);
	}
	assert_int_equal(put(kv, RDMX__KV_SET, "f4", "v", 0, NULL), -ENOSPC);
	assert_int_equal(put(kv, RDMX__KV_SET, "f0", "again", 0, NULL), 0); /* a replace fits */
	for (int i = 0; i < 4; i++) { /* nothing was evicted */
		snprintf(k, sizeof(k), "f%d", i);
		expect(kv, k, i ? "v" : "again");
	}
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(put(kv, RDMX__KV_SET, "f1", big, 0, NULL), 0);  /* 128 B chunk */
	assert_int_equal(put(kv, RDMX__KV_SET, "f2", big, 0, NULL), 0);  /* 256 B used */
	assert_int_equal(put(kv, RDMX__KV_SET, "f3", big, 0, NULL), -ENOSPC);
	expect(kv, "f3", "v");
	assert_int_equal(rdmx__kv_delete(kv, "f2", 2), 0); /* its chunk comes back */
	assert_int_equal(put(kv, RDMX__KV_SET, "f3", big, 0, NULL), 0);
	expect(kv, "f3", big);
	rdmx__kv_destroy(kv);
}

static struct rdmx__kv *mk_lru(uint64_t cap, uint64_t mem, uint32_t inline_max)
{
	struct rdmx__kv_opts o = { .capacity = cap, .memory = mem,
				   .inline_max = inline_max, .item_max = 64 * 1024,
				   .seed = 42, .now = test_clock, .evict_lru = true };
	struct rdmx__kv *kv = NULL;

	assert_int_equal(rdmx__kv_create(&o, &kv), 0);
	return kv;
}

static uint64_t evictions(struct rdmx__kv *kv)
{
	struct rdmx__kv_stats st;

	rdmx__kv_stats(kv, &st);
	return st.evictions;
}

/* A get of each key f<c> for c in @which (an access). */
static void gets(struct rdmx__kv *kv, const char *which)
{
	char k[3] = "f?";

	for (const char *p = which; *p; p++) {
		k[1] = *p;
		expect(kv, k, "v");
	}
}

/* --evict lru at capacity: the least recently touched key goes, and only it. */
static void test_evict_capacity(void **state)
{
	struct rdmx__kv *kv = mk_lru(4, 256, 16);
	char k[8];

	(void)state;
	for (int i = 0; i < 4; i++) {
		snprintf(k, sizeof(k), "f%d", i);
		assert_int_equal(put(kv, RDMX__KV_SET, k, "v", 0, NULL), 0);
	}
	gets(kv, "023");                       /* f1 is now the oldest */
	assert_int_equal(put(kv, RDMX__KV_SET, "n1", "v", 0, NULL), 0);
	expect(kv, "f1", NULL);
	assert_int_equal(evictions(kv), 1);
	gets(kv, "0");
	assert_int_equal(rdmx__kv_touch(kv, "f2", 2, 0), 0); /* a touch is an access */
	gets(kv, "3");                         /* n1's set is now the oldest access */
	assert_int_equal(put(kv, RDMX__KV_SET, "n2", "v", 0, NULL), 0);
	expect(kv, "n1", NULL);
	expect(kv, "f0", "v");
	expect(kv, "f2", "v");
	expect(kv, "f3", "v");
	expect(kv, "n2", "v");
	assert_int_equal(evictions(kv), 2);
	assert_int_equal(put(kv, RDMX__KV_SET, "f0", "again", 0, NULL), 0); /* a replace */
	assert_int_equal(evictions(kv), 2);
	rdmx__kv_destroy(kv);
}

/* A full slab: the oldest entry of the new value's size class goes. */
static void test_evict_slab(void **state)
{
	struct rdmx__kv *kv = mk_lru(8, 320, 16);
	char big[100], mid[50];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memset(mid, 'm', sizeof(mid) - 1);
	mid[sizeof(mid) - 1] = 0;
	assert_int_equal(put(kv, RDMX__KV_SET, "b1", big, 0, NULL), 0); /* 128 B chunk */
	assert_int_equal(put(kv, RDMX__KV_SET, "m1", mid, 0, NULL), 0); /* 64 B */
	assert_int_equal(put(kv, RDMX__KV_SET, "b2", big, 0, NULL), 0); /* 128 B: the slab is full */
	assert_int_equal(put(kv, RDMX__KV_SET, "s", "v", 0, NULL), 0);  /* inline */
	expect(kv, "b1", big);                 /* b2 is the older 128 B entry now */
	assert_int_equal(put(kv, RDMX__KV_SET, "b3", big, 0, NULL), 0);
	expect(kv, "b2", NULL);
	expect(kv, "b1", big);
	expect(kv, "b3", big);
	expect(kv, "m1", mid);                 /* older, but another class */
	expect(kv, "s", "v");
	assert_int_equal(evictions(kv), 1);
	rdmx__kv_destroy(kv);
}

/* @n keys whose bucket is @bucket's, into @keys (8 bytes each). */
static void keys_of_bucket(struct rdmx__kv *kv, uint64_t bucket, char (*keys)[8], int n)
{
	int found = 0;

	for (int i = 0; found < n && i < 1000000; i++) {
		snprintf(keys[found], 8, "w%d", i);
		if (rdmx__kv_bucket(rdmx__kv_layout(kv), keys[found], strlen(keys[found])) ==
		    bucket)
			found++;
	}
	assert_int_equal(found, n);
}

/* A probe window full of live keys: refused, or (lru) its oldest slot reused. */
static void test_evict_window(void **state)
{
	char keys[RDMX__KV_PROBE_MAX + 1][8];

	(void)state;
	for (int lru = 0; lru < 2; lru++) {
		struct rdmx__kv *kv = lru ? mk_lru(64, 0, 16) : mk(64, 0, 16);
		struct rdmx__kv_stats st;

		keys_of_bucket(kv, 5, keys, RDMX__KV_PROBE_MAX + 1);
		for (int i = 0; i < RDMX__KV_PROBE_MAX; i++)
			assert_int_equal(put(kv, RDMX__KV_SET, keys[i], "v", 0, NULL), 0);
		for (int i = 0; i < RDMX__KV_PROBE_MAX; i++)
			if (i != 7)
				expect(kv, keys[i], "v");
		assert_int_equal(put(kv, RDMX__KV_SET, keys[RDMX__KV_PROBE_MAX], "v", 0, NULL),
				 lru ? 0 : -ENOSPC);
		expect(kv, keys[7], lru ? NULL : "v");
		expect(kv, keys[RDMX__KV_PROBE_MAX], lru ? "v" : NULL);
		expect(kv, keys[8], "v");
		rdmx__kv_stats(kv, &st);
		assert_int_equal(st.evictions, lru);
		assert_int_equal(st.items, RDMX__KV_PROBE_MAX);
		rdmx__kv_destroy(kv);
	}
}

/* The one check, on damaged copies of a valid entry. */
static void test_entry_check(void **state)
{
	struct rdmx__kv *kv = mk(4, 0, 64);
	const struct rdmx__kv_layout *l = rdmx__kv_layout(kv);
	struct rdmx__kv_reader r;
	struct rdmx__kv_ehdr h;
	uint8_t *copy;

	(void)state;
	assert_int_equal(put(kv, RDMX__KV_SET, "key", "value", 0, NULL), 0);
	assert_int_equal(rdmx__kv_reader_init(kv, &r), 0);
	assert_int_equal(rdmx__kv_get(kv, &r, "key", 3), 0);
	copy = r.entry; /* the copy that hit */
	assert_int_equal(rdmx__kv_entry_check(l, copy, "key", 3, 0, &h), RDMX__KV_V_HIT);
	assert_int_equal(rdmx__kv_entry_check(l, copy, "kez", 3, 0, &h), RDMX__KV_V_OTHER);
	assert_int_equal(rdmx__kv_entry_check(l, copy, "ke", 2, 0, &h), RDMX__KV_V_OTHER);
	copy[0] ^= 1; /* odd version: in progress */
	assert_int_equal(rdmx__kv_entry_check(l, copy, "key", 3, 0, &h), RDMX__KV_V_TORN);
	copy[0] ^= 1;
	copy[RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + 2] ^= 0x20; /* a value byte */
	assert_int_equal(rdmx__kv_entry_check(l, copy, "key", 3, 0, &h), RDMX__KV_V_TORN);
	copy[RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + 2] ^= 0x20;
	copy[0] += 2; /* another version with this version's bytes */
	assert_int_equal(rdmx__kv_entry_check(l, copy, "key", 3, 0, &h), RDMX__KV_V_TORN);
	copy[0] -= 2;
	copy[56] = 251; /* key length past the limit */
	assert_int_equal(rdmx__kv_entry_check(l, copy, "key", 3, 0, &h), RDMX__KV_V_TORN);
	/* A deleted key's slot is never taken for it. */
	assert_int_equal(rdmx__kv_delete(kv, "key", 3), 0);
	assert_int_equal(rdmx__kv_get(kv, &r, "key", 3), -ENOENT);
	rdmx__kv_reader_fini(&r);
	rdmx__kv_destroy(kv);
}

/*
 * A hostile server's table header: an inline_max whose sum with the fixed
 * part wraps the u32 entry size to 0 (a reader would then hash and copy
 * gigabytes past its one-entry buffer), or a bucket count whose table
 * length wraps u64. Both are refused, a sane header is not.
 */
static void test_layout_hostile(void **state)
{
	struct rdmx__kv_header h = { .magic = RDMX__KV_MAGIC, .format = RDMX__KV_FORMAT,
		.hash_id = RDMX__KV_HASH_MIX64, .buckets = 8,
		.entry_size = RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + 64, .inline_max = 64 };
	struct rdmx__kv_layout l;

	(void)state;
	assert_int_equal(rdmx__kv_layout_from(&h, sizeof(h), &l), 0);
	h.inline_max = 0u - (RDMX__KV_EHDR + RDMX__KV_KEY_SLOT); /* entry size wraps */
	h.entry_size = 0;
	assert_int_equal(rdmx__kv_layout_from(&h, sizeof(h), &l), -EPROTO);
	h.inline_max = 65536 + 8; /* above what any store makes */
	h.entry_size = RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + h.inline_max;
	assert_int_equal(rdmx__kv_layout_from(&h, sizeof(h), &l), -EPROTO);
	assert_false(rdmx__kv_layout_sizes_ok(1ULL << 58, RDMX__KV_EHDR + RDMX__KV_KEY_SLOT +
					       64, 64, 64)); /* 2^58 * 384 + 64 wraps to 64 */
	assert_true(rdmx__kv_layout_sizes_ok(8, RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + 64, 64,
					     64 + 8 * 384));
}

/* ---------------------------------------------------------------- torture */

#define HOT 16

struct torture {
	struct rdmx__kv *kv;
	int stop;
	uint64_t reads, hits, torn_accepted, retries, fallbacks, errors;
	unsigned seed;
};

/* A self-checking value: key index, sequence, length, then a pattern of them. */
static size_t value_make(uint8_t *v, unsigned key, uint64_t seq, size_t len)
{
	memcpy(v, &key, 4);
	memcpy(v + 4, &seq, 8);
	memcpy(v + 12, &len, 4);
	for (size_t i = 16; i < len; i++)
		v[i] = (uint8_t)(key * 31 + seq * 7 + i);
	return len;
}

static bool value_ok(const uint8_t *v, size_t n, unsigned key)
{
	unsigned k;
	uint64_t seq;
	uint32_t len;

	if (n < 16)
		return false;
	memcpy(&k, v, 4);
	memcpy(&seq, v + 4, 8);
	memcpy(&len, v + 12, 4);
	if (k != key || len != n)
		return false;
	for (size_t i = 16; i < n; i++)
		if (v[i] != (uint8_t)(key * 31 + seq * 7 + i))
			return false;
	return true;
}

static bool del_err(int rc)
{
	return rc && rc != -ENOENT;
}

static void *writer(void *arg)
{
	struct torture *t = arg;
	unsigned seed = __atomic_add_fetch(&t->seed, 1, __ATOMIC_RELAXED);
	uint8_t v[2048];
	uint64_t seq = 0;
	char k[8];

	while (!__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
		unsigned key = (unsigned)rand_r(&seed) % HOT;
		size_t len = 16 + (size_t)rand_r(&seed) % 1500; /* inline and out of line */
		struct rdmx__kv_put p = { .mode = RDMX__KV_SET, .key = k, .value = v };

		p.klen = (size_t)snprintf(k, sizeof(k), "hot%u", key);
		p.vlen = value_make(v, key, ++seq, len);
		/* The other writer may delete the key between our store
		 * and our delete: -ENOENT from the delete is that race. */
		if (rdmx__kv_store(t->kv, &p, NULL) ||
		    (seq % 64 == 0 && del_err(rdmx__kv_delete(t->kv, k, p.klen))))
			__atomic_add_fetch(&t->errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct torture *t = arg;
	unsigned seed = __atomic_add_fetch(&t->seed, 1, __ATOMIC_RELAXED);
	struct rdmx__kv_reader r;
	uint64_t reads = 0, hits = 0, bad = 0, fallbacks = 0;
	char k[8];

	if (rdmx__kv_reader_init(t->kv, &r))
		return NULL;
	while (!__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
		unsigned key = (unsigned)rand_r(&seed) % HOT;
		size_t kl = (size_t)snprintf(k, sizeof(k), "hot%u", key);
		int rc = rdmx__kv_get_nolock(t->kv, &r, k, kl); /* the copy path only */

		reads++;
		if (rc == -EAGAIN)
			fallbacks++;
		else if (rc == 0 && ++hits && !value_ok(r.value, r.hit.value_len, key))
			bad++;
		else if (rc && rc != -ENOENT)
			__atomic_add_fetch(&t->errors, 1, __ATOMIC_RELAXED);
	}
	__atomic_add_fetch(&t->reads, reads, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->hits, hits, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->torn_accepted, bad, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->retries, r.retries, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->fallbacks, fallbacks, __ATOMIC_RELAXED);
	rdmx__kv_reader_fini(&r);
	return NULL;
}

static unsigned torture_seconds(void)
{
	const char *s = getenv("RDMX_KV_TORTURE_SECONDS");

	if (s && atoi(s) > 0)
		return (unsigned)atoi(s);
	return getenv("RDMX_TEST_QUICK") ? 1 : 3;
}

static void test_torture(void **state)
{
	struct torture t = { .kv = mk(64, 1 << 20, 256), .seed = 7 };
	pthread_t w[2], r[3];
	struct timespec d = { .tv_sec = torture_seconds() };

	(void)state;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer, &t), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&r[i], NULL, reader, &t), 0);
	nanosleep(&d, NULL);
	__atomic_store_n(&t.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(r[i], NULL);
	printf("kv torture: %us, %llu reads, %llu hits, %llu torn copies read again "
	       "(%.1f per million reads), %llu lookups out of retries, %llu torn values accepted\n",
	       (unsigned)d.tv_sec, (unsigned long long)t.reads, (unsigned long long)t.hits,
	       (unsigned long long)t.retries, t.reads ? 1e6 * (double)t.retries / (double)t.reads : 0.0,
	       (unsigned long long)t.fallbacks, (unsigned long long)t.torn_accepted);
	assert_int_equal(t.torn_accepted, 0);
	assert_int_equal(t.errors, 0);
	assert_true(t.hits > 0);
	rdmx__kv_destroy(t.kv);
}

/* Evictions racing lock-free readers: keys e0, e1, ... put once each. */
struct ev_race {
	struct rdmx__kv *kv;
	uint64_t top; /* atomic: keys put so far */
	int stop;
	uint64_t hits, misses, bad, errors, retries;
};

static void *ev_writer(void *arg)
{
	struct ev_race *t = arg;
	uint8_t v[2048];
	char k[16];

	for (uint64_t n = 0; !__atomic_load_n(&t->stop, __ATOMIC_RELAXED); n++) {
		struct rdmx__kv_put p = { .mode = RDMX__KV_SET, .key = k, .value = v };

		p.klen = (size_t)snprintf(k, sizeof(k), "e%llu", (unsigned long long)n);
		p.vlen = value_make(v, (unsigned)n, n, 16 + n * 37 % 1000);
		if (rdmx__kv_store(t->kv, &p, NULL))
			__atomic_add_fetch(&t->errors, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&t->top, n + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *ev_reader(void *arg)
{
	struct ev_race *t = arg;
	uint64_t hits = 0, misses = 0, bad = 0, errors = 0;
	unsigned seed = 3;
	struct rdmx__kv_reader r;
	char k[16];

	if (rdmx__kv_reader_init(t->kv, &r))
		return NULL;
	while (!__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
		uint64_t top = __atomic_load_n(&t->top, __ATOMIC_ACQUIRE), n;
		int rc;

		if (!top)
			continue;
		n = top - 1 - (uint64_t)rand_r(&seed) % (top < 64 ? top : 64);
		rc = rdmx__kv_get_nolock(t->kv, &r, k,
					 (size_t)snprintf(k, sizeof(k), "e%llu",
							  (unsigned long long)n));
		if (!rc)
			hits++, bad += !value_ok(r.value, r.hit.value_len, (unsigned)n);
		else if (rc == -ENOENT)
			misses++;
		else if (rc != -EAGAIN)
			errors++;
	}
	__atomic_add_fetch(&t->hits, hits, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->misses, misses, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->bad, bad, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->errors, errors, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->retries, r.retries, __ATOMIC_RELAXED);
	rdmx__kv_reader_fini(&r);
	return NULL;
}

/*
 * --evict lru under lock-free readers (the check a GET by READ makes): a
 * writer puts new keys into a full table and slab (a table or slab
 * eviction per put), readers read recent keys: a miss or the key's own
 * value, never a torn or another key's value.
 */
static void test_evict_torture(void **state)
{
	struct ev_race t = { .kv = mk_lru(32, 1 << 13, 256) };
	struct timespec d = { .tv_sec = torture_seconds() };
	pthread_t w, r[2];

	(void)state;
	assert_int_equal(pthread_create(&w, NULL, ev_writer, &t), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&r[i], NULL, ev_reader, &t), 0);
	nanosleep(&d, NULL);
	__atomic_store_n(&t.stop, 1, __ATOMIC_RELAXED);
	pthread_join(w, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	printf("kv evict torture: %us, %llu puts, %llu evictions, %llu hits, %llu misses, "
	       "%llu torn copies read again, %llu bad values accepted\n", (unsigned)d.tv_sec,
	       (unsigned long long)t.top, (unsigned long long)evictions(t.kv),
	       (unsigned long long)t.hits, (unsigned long long)t.misses,
	       (unsigned long long)t.retries, (unsigned long long)t.bad);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.errors, 0);
	assert_true(t.hits > 0 && t.misses > 0);
	assert_true(evictions(t.kv) >= t.top - 32);
	rdmx__kv_destroy(t.kv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_add_replace),
		cmocka_unit_test(test_append_prepend_ool),
		cmocka_unit_test(test_cas),
		cmocka_unit_test(test_delete_tombstone),
		cmocka_unit_test(test_incr_decr),
		cmocka_unit_test(test_ttl_touch_flush),
		cmocka_unit_test(test_expired_reclaimed),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_evict_capacity),
		cmocka_unit_test(test_evict_slab),
		cmocka_unit_test(test_evict_window),
		cmocka_unit_test(test_entry_check),
		cmocka_unit_test(test_layout_hostile),
		cmocka_unit_test(test_torture),
		cmocka_unit_test(test_evict_torture),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
