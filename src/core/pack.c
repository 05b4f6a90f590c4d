/* SPDX-License-Identifier: MIT */
/*
 * Packed frames: see pack.h for the format and who uses them.
 */
#include <errno.h>
#include <string.h>

#include "errors.h"
#include "pack.h"

int rdmx__pack_parse(const uint8_t *buf, uint32_t len, uint32_t max_msg,
		     struct rdmx__pack_ent *ent)
{
	uint32_t n, off = RDMX__PACK_HDR;

	if (len < RDMX__PACK_HDR)
		return rdmx__fail(-EPROTO, "packed frame of %u bytes: shorter than its header", len);
	n = rdmx__pack_get32(buf);
	if (!n || n > RDMX__PACK_MAX)
		return rdmx__fail(-EPROTO, "packed frame of %u messages (1..%u)", n,
				  RDMX__PACK_MAX);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t lf, l;

		if (len - off < RDMX__PACK_ENT)
			return rdmx__fail(-EPROTO, "packed frame: message %u of %u starts past its %u bytes",
					  i + 1, n, len);
		lf = rdmx__pack_get32(buf + off);
		l = lf & ~RDMX__PACK_HAS_IMM;
		ent[i].len = l;
		ent[i].has_imm = !!(lf & RDMX__PACK_HAS_IMM);
		ent[i].imm = rdmx__pack_get32(buf + off + 4);
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

uint32_t rdmx__pack_start(uint8_t *slot, uint32_t len, int has_imm,
			  uint32_t imm)
{
	memmove(slot + RDMX__PACK_OVERHEAD, slot, len);
	rdmx__pack_put32(slot, 1);
	rdmx__pack_put32(slot + 4, 0);
	rdmx__pack_put32(slot + RDMX__PACK_HDR, len | (has_imm ? RDMX__PACK_HAS_IMM : 0));
	rdmx__pack_put32(slot + RDMX__PACK_HDR + 4, has_imm ? imm : 0);
	return RDMX__PACK_OVERHEAD + rdmx__pack_pad(len);
}
