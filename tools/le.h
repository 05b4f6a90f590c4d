/* SPDX-License-Identifier: MIT */
/* Little-endian fields of the tools' own wire messages (bench control
 * messages, the TCP frames, rpc bench's stats). */
#ifndef RDMX_TOOLS_LE_H
#define RDMX_TOOLS_LE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void le_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint32_t le_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline void le_put64(uint8_t *p, uint64_t v)
{
	le_put32(p, (uint32_t)v);
	le_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t le_get64(const uint8_t *p)
{
	return le_get32(p) | (uint64_t)le_get32(p + 4) << 32;
}

#endif /* RDMX_TOOLS_LE_H */
