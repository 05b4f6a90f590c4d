/* SPDX-License-Identifier: MIT */
#include "wire.h"

#include <errno.h>
#include <string.h>

#include "errors.h"

void rdmx__put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

void rdmx__put_u32(uint8_t *p, uint32_t v)
{
	rdmx__put_u16(p, (uint16_t)v);
	rdmx__put_u16(p + 2, (uint16_t)(v >> 16));
}

void rdmx__put_u64(uint8_t *p, uint64_t v)
{
	rdmx__put_u32(p, (uint32_t)v);
	rdmx__put_u32(p + 4, (uint32_t)(v >> 32));
}

uint16_t rdmx__get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

uint32_t rdmx__get_u32(const uint8_t *p)
{
	return rdmx__get_u16(p) | ((uint32_t)rdmx__get_u16(p + 2) << 16);
}

uint64_t rdmx__get_u64(const uint8_t *p)
{
	return rdmx__get_u32(p) | ((uint64_t)rdmx__get_u32(p + 4) << 32);
}

int rdmx__hello_encode(const struct rdmx__hello *h, uint8_t *buf, size_t cap)
{
	size_t len = RDMX__HELLO_HDR + (size_t)h->block_len;

	if (h->block_len > RDMX__HELLO_BLOCK_MAX || len > cap)
		return rdmx__fail(-EMSGSIZE,
				  "hello of %zu bytes exceeds %zu bytes of private data",
				  len, cap);
	memset(buf, 0, len);
	rdmx__put_u32(buf, RDMX__WIRE_MAGIC);
	buf[4] = h->version;
	buf[5] = h->protocol;
	rdmx__put_u16(buf + 6, h->flags);
	rdmx__put_u32(buf + 8, h->max_msg);
	rdmx__put_u16(buf + 12, h->recv_depth);
	buf[14] = h->block_len;
	memcpy(buf + RDMX__HELLO_HDR, h->block, h->block_len);
	return (int)len;
}

static int has_magic(const uint8_t *buf, size_t len)
{
	return len >= 4 && rdmx__get_u32(buf) == RDMX__WIRE_MAGIC;
}

int rdmx__hello_decode(const uint8_t *buf, size_t len, struct rdmx__hello *h)
{
	if (!has_magic(buf, len))
		return rdmx__fail(-EPROTO,
				  "not an rdmx peer (%zu bytes of private data without the rdmx magic)",
				  len);
	if (len < RDMX__HELLO_HDR)
		return rdmx__fail(-EPROTO, "truncated hello (%zu of %d bytes)",
				  len, RDMX__HELLO_HDR);
	memset(h, 0, sizeof(*h));
	h->version = buf[4];
	if (h->version != RDMX__WIRE_VERSION)
		return rdmx__fail(-EPROTO,
				  "wire version mismatch: peer speaks %u, this side %u",
				  h->version, RDMX__WIRE_VERSION);
	h->protocol = buf[5];
	h->flags = rdmx__get_u16(buf + 6);
	h->max_msg = rdmx__get_u32(buf + 8);
	h->recv_depth = rdmx__get_u16(buf + 12);
	h->block_len = buf[14];
	if (buf[15] != 0 || h->block_len > RDMX__HELLO_BLOCK_MAX ||
	    RDMX__HELLO_HDR + (size_t)h->block_len > len)
		return rdmx__fail(-EPROTO,
				  "malformed hello (block of %u bytes in %zu bytes)",
				  h->block_len, len);
	memcpy(h->block, buf + RDMX__HELLO_HDR, h->block_len);
	return 0;
}

int rdmx__reject_encode(enum rdmx__reject_code code, const char *reason,
			uint8_t *buf, size_t cap)
{
	size_t n = strlen(reason);

	if (cap <= RDMX__REJECT_HDR)
		return 0;
	if (n > cap - RDMX__REJECT_HDR - 1)
		n = cap - RDMX__REJECT_HDR - 1;
	memset(buf, 0, RDMX__REJECT_HDR);
	rdmx__put_u32(buf, RDMX__WIRE_MAGIC);
	buf[4] = RDMX__WIRE_VERSION;
	buf[5] = (uint8_t)code;
	memcpy(buf + RDMX__REJECT_HDR, reason, n);
	buf[RDMX__REJECT_HDR + n] = 0;
	return (int)(RDMX__REJECT_HDR + n + 1);
}

int rdmx__reject_decode(const uint8_t *buf, size_t len, char *reason,
			size_t rlen)
{
	size_t n;

	if (rlen)
		reason[0] = 0;
	if (!has_magic(buf, len) || len <= RDMX__REJECT_HDR || buf[5] == 0)
		return 0;
	n = strnlen((const char *)buf + RDMX__REJECT_HDR,
		    len - RDMX__REJECT_HDR);
	if (rlen) {
		if (n >= rlen)
			n = rlen - 1;
		memcpy(reason, buf + RDMX__REJECT_HDR, n);
		reason[n] = 0;
	}
	return buf[5];
}
