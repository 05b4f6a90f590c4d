/* SPDX-License-Identifier: MIT */
/*
 * Packed frames (src/core/pack.c): several small messages of a burst in
 * one SEND, split by the receiver. Byte 0 picks: even, the rest is a
 * frame as a peer wrote it, parsed with a max_msg taken from byte 1;
 * odd, the rest describes messages (a length byte, an immediate flag and
 * the bytes) that the sender's pack_start/pack_add put in a frame, which
 * must parse back to exactly those messages.
 * Invariants: no crash or out-of-bounds access; a parsed frame has 1..
 * RDMX__PACK_MAX messages, each within the frame, at most max_msg bytes,
 * in order and not overlapping.
 */
#include <string.h>

#include "fuzz.h"
#include "core/pack.h"

#define SLOT (RDMX__PACK_MAX * (RDMX__PACK_ENT + RDMX__PACK_SMALL) + 64)

static void fz_parse(const uint8_t *p, uint32_t n, uint32_t max_msg)
{
	struct rdmx__pack_ent ent[RDMX__PACK_MAX];
	uint32_t end = RDMX__PACK_HDR;
	int rc = rdmx__pack_parse(p, n, max_msg, ent);

	if (rc < 0)
		return;
	FZ_CHECK(rc >= 1 && rc <= RDMX__PACK_MAX, "a message count out of range");
	for (int i = 0; i < rc; i++) {
		FZ_CHECK(ent[i].off >= end, "messages out of order or overlapping");
		FZ_CHECK(ent[i].len <= max_msg, "a message over max_msg");
		FZ_CHECK(ent[i].off <= n && ent[i].len <= n - ent[i].off,
			 "a message past the frame");
		end = ent[i].off + ent[i].len;
	}
}

/* Messages from @in packed, then parsed back. */
static void fz_roundtrip(struct fz_in *in)
{
	static uint8_t slot[SLOT], want[RDMX__PACK_MAX][RDMX__PACK_SMALL];
	struct rdmx__pack_ent ent[RDMX__PACK_MAX];
	uint32_t len[RDMX__PACK_MAX], imm[RDMX__PACK_MAX], flen = 0;
	int k = 0, has[RDMX__PACK_MAX];

	while (k < RDMX__PACK_MAX && (k == 0 || in->n)) {
		len[k] = (uint32_t)fz_take(in, 1);
		has[k] = len[k] & 1;
		imm[k] = has[k] ? (uint32_t)fz_take(in, 4) : 0;
		for (uint32_t b = 0; b < len[k]; b++)
			want[k][b] = (uint8_t)fz_take(in, 1);
		if (!k) {
			memcpy(slot, want[0], len[0]);
			flen = rdmx__pack_start(slot, len[0], has[0], imm[0]);
		} else {
			flen = rdmx__pack_add(slot, flen, want[k], len[k], has[k], imm[k]);
		}
		FZ_CHECK(flen <= SLOT, "a frame past its slot");
		k++;
	}
	FZ_CHECK(rdmx__pack_parse(slot, flen, RDMX__PACK_SMALL, ent) == k,
		 "a packed frame that does not parse back");
	for (int i = 0; i < k; i++) {
		FZ_CHECK(ent[i].len == len[i] && ent[i].has_imm == has[i] &&
			 (!has[i] || ent[i].imm == imm[i]), "a message's header changed");
		FZ_CHECK(!memcmp(slot + ent[i].off, want[i], len[i]),
			 "a message's bytes changed");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data + 1, size ? size - 1 : 0 };
	uint8_t *copy;

	if (size < 2)
		return 0;
	if (data[0] & 1) {
		fz_roundtrip(&in);
		return 0;
	}
	/* an exact-size copy: a read past the frame is seen by ASan */
	copy = malloc(size - 2 ? size - 2 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 2, size - 2);
	fz_parse(copy, (uint32_t)(size - 2), 1u + data[1] * 16u);
	free(copy);
	return 0;
}
