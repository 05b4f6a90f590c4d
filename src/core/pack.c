/* SPDX-License-Identifier: MIT */
/*
 * Packed frames: see pack.h for the format and who uses them.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "errors.h"
#include "pack.h"

/* Little-endian u32 at any alignment, inline: wire.c's byte-wise ones cost
 * a call each, several per packed message. */
static inline uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

int rdmx__pack_parse(const uint8_t *buf, uint32_t len, uint32_t max_msg,
		     struct rdmx__pack_ent *ent)
{
	uint32_t n, off = RDMX__PACK_HDR;

	if (len < RDMX__PACK_HDR)
		return rdmx__fail(-EPROTO, "packed frame of %u bytes: shorter than its header", len);
	n = get32(buf);
	if (!n || n > RDMX__PACK_MAX)
		return rdmx__fail(-EPROTO, "packed frame of %u messages (1..%u)", n,
				  RDMX__PACK_MAX);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t lf, l;

		if (len - off < RDMX__PACK_ENT)
			return rdmx__fail(-EPROTO, "packed frame: message %u of %u starts past its %u bytes",
					  i + 1, n, len);
		lf = get32(buf + off);
		l = lf & ~RDMX__PACK_HAS_IMM;
		ent[i].len = l;
		ent[i].has_imm = !!(lf & RDMX__PACK_HAS_IMM);
		ent[i].imm = get32(buf + off + 4);
		off += RDMX__PACK_ENT;
		if (l > max_msg || l > len - off)
			return rdmx__fail(-EPROTO, "packed frame: message %u of %u is %u bytes, %u left "
					  "of the frame (max_msg %u)", i + 1, n, l, len - off,
					  max_msg);
		ent[i].off = off;
		off += rdmx__pack_pad(l) < len - off ? rdmx__pack_pad(l) : len - off;
	}
	return (int)n;
}

static void put_ent(uint8_t *at, uint32_t len, int has_imm, uint32_t imm)
{
	put32(at, len | (has_imm ? RDMX__PACK_HAS_IMM : 0));
	put32(at + 4, has_imm ? imm : 0);
}

uint32_t rdmx__pack_start(uint8_t *slot, uint32_t len, int has_imm,
			  uint32_t imm)
{
	memmove(slot + RDMX__PACK_OVERHEAD, slot, len);
	put32(slot, 1);
	put32(slot + 4, 0);
	put_ent(slot + RDMX__PACK_HDR, len, has_imm, imm);
	return RDMX__PACK_OVERHEAD + rdmx__pack_pad(len);
}

uint32_t rdmx__pack_add(uint8_t *slot, uint32_t flen, const void *data,
			uint32_t len, int has_imm, uint32_t imm)
{
	put32(slot, get32(slot) + 1);
	put_ent(slot + flen, len, has_imm, imm);
	memcpy(slot + flen + RDMX__PACK_ENT, data, len);
	return rdmx__pack_grown(flen, len);
}
