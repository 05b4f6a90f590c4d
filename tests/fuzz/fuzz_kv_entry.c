/* SPDX-License-Identifier: MIT */
/*
 * What a KV client judges of a server's bytes, and the server of a
 * client's (src/kv/entry.c, kv_door.c's wire):
 *   byte 0 bit 0-1: 0 the table header (64 bytes) through
 *     rdmx__kv_layout_from(), then, if taken, one entry copy (entry_size
 *     bytes of the input, zero-padded, in a buffer of exactly that size)
 *     through rdmx__kv_entry_check() for a key from the input; bit 7 sets
 *     the copy's checksum as a writer would (once its key and inline value
 *     lengths are within the layout), so the checks behind the checksum
 *     are reached too. 1: the layout's sizes through
 *     rdmx__kv_layout_sizes_ok(). 2: a request through rdmx__kv_req_get().
 * Invariants: no crash or out-of-bounds access; a hit is the key asked
 * for, its value within the entry or the slab the layout names; a layout
 * taken has an entry size that adds up and a table length without wrap; a
 * request taken is exactly as long as it says, its lengths within limits.
 */
#include <string.h>

#include "fuzz.h"
#include "kv/kv_internal.h"
#include "kv/kv_rdma.h"

/* Set @e's checksum as a writer would, when its lengths allow the sum. */
static void fz_seal(const struct rdmx__kv_layout *l, uint8_t *e)
{
	struct rdmx__kv_ehdr h;

	memcpy(&h, e, sizeof(h));
	if (h.key_len > RDMX__KV_KEY_MAX ||
	    (h.ool_off == RDMX__KV_INLINE && h.value_len > l->inline_max))
		return;
	h.checksum = rdmx__kv_entry_sum(&h, e);
	memcpy(e, &h, sizeof(h));
}

static void fz_entry(struct fz_in *in, int seal)
{
	uint8_t hdr[sizeof(struct rdmx__kv_header)] = { 0 }, key[RDMX__KV_KEY_MAX];
	struct rdmx__kv_layout l;
	struct rdmx__kv_ehdr h;
	size_t klen;
	uint8_t *e;

	for (size_t i = 0; i < sizeof(hdr); i++)
		hdr[i] = (uint8_t)fz_take(in, 1);
	if (rdmx__kv_layout_from(hdr, sizeof(hdr), &l))
		return;
	FZ_CHECK(l.entry_size == RDMX__KV_EHDR + RDMX__KV_KEY_SLOT + (uint64_t)l.inline_max,
		 "a layout whose entry size does not add up");
	klen = 1 + fz_take(in, 1) % RDMX__KV_KEY_MAX;
	for (size_t i = 0; i < klen; i++)
		key[i] = (uint8_t)fz_take(in, 1);
	e = calloc(1, l.entry_size);
	if (!e)
		return;
	memcpy(e, in->p, in->n < l.entry_size ? in->n : l.entry_size);
	if (seal)
		fz_seal(&l, e);
	switch (rdmx__kv_entry_check(&l, e, key, klen, fz_take(in, 8), &h)) {
	case RDMX__KV_V_HIT:
	case RDMX__KV_V_EXPIRED:
		FZ_CHECK(h.key_len == klen && !memcmp(e + RDMX__KV_EHDR, key, klen),
			 "a hit for another key");
		FZ_CHECK(h.ool_off == RDMX__KV_INLINE ? h.value_len <= l.inline_max :
			 h.ool_off <= l.slab_size && h.value_len <= l.slab_size - h.ool_off,
			 "a hit whose value is out of its bounds");
		break;
	default:
		break;
	}
	free(e);
}

static void fz_sizes(struct fz_in *in)
{
	uint64_t buckets = fz_take(in, 8), table_len = fz_take(in, 8);
	uint32_t entry_size = (uint32_t)fz_take(in, 4), inline_max = (uint32_t)fz_take(in, 4);

	if (!rdmx__kv_layout_sizes_ok(buckets, entry_size, inline_max, table_len))
		return;
	FZ_CHECK(inline_max <= RDMX__KV_INLINE_LIMIT && entry_size > inline_max,
		 "sizes taken with a wrapped entry size");
	FZ_CHECK((table_len - sizeof(struct rdmx__kv_header)) / entry_size == buckets,
		 "sizes taken with a wrapped table length");
}

static void fz_req(const struct fz_in *in)
{
	struct kv_req r;

	if (rdmx__kv_req_get(in->p, in->n, &r))
		return;
	FZ_CHECK(r.klen && r.klen <= RDMX_KV_KEY_MAX && r.vlen <= RDMX_KV_RPC_VALUE_MAX &&
		 in->n == KV_REQ_HDR + r.klen + (size_t)r.vlen, "a request taken out of bounds");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	unsigned sel = (unsigned)fz_take(&in, 1);

	switch (sel & 3) {
	case 0:
		fz_entry(&in, sel & 0x80);
		break;
	case 1:
		fz_sizes(&in);
		break;
	default:
		fz_req(&in);
		break;
	}
	return 0;
}
