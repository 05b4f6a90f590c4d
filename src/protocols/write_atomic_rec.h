/* SPDX-License-Identifier: MIT */
/*
 * write_atomic ring records: layout and stamp arithmetic, shared by the
 * protocol (write_atomic_conn.c) and its unit tests. See write_atomic_conn.c for the
 * protocol and the argument why stale bytes never pass for a record.
 *
 * A format of its own, not the single-sender ring record of
 * src/core/ring.h (write_simplex/magic/duplex: 16-byte header, 16-byte
 * alignment, a footer stamp): the names here are wa_* / WA_* and the two
 * files share no code.
 *
 * A record reserved at 64-bit virtual offset V sits at ring byte V & mask,
 * never crosses the ring's end, and is written by ONE RDMA WRITE_WITH_IMM
 * whose immediate, wa_imm(V, span), announces it (see wa_imm()):
 *   0  u32 len      payload bytes (a pad: bytes to skip, from V)
 *   4  u32 sender   sender id the receiver gave the writing connection
 *   8  u16 flags    WA_F_IMM, WA_F_PAD (the receiver adds its own bits)
 *  10  u16 reserved
 *  12  u32 imm      immediate data when WA_F_IMM
 *  16  u64 stamp    wa_hstamp(salt, V), last header bytes in address order
 *  24  payload, zero-padded to a multiple of 8
 *  24 + round8(len)  u64 trailer wa_tstamp(salt, V), written last
 * then unwritten padding up to wa_rec_size(len), a multiple of WA_ALIGN.
 * A pad record is the header alone (its span: len). The header's sender
 * must be the id of the member whose QP announced it. All fields are
 * little-endian.
 */
#ifndef RDMX_PROTOCOLS_WRITE_ATOMIC_REC_H
#define RDMX_PROTOCOLS_WRITE_ATOMIC_REC_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define WA_ALIGN 64u
#define WA_HDR 24u
#define WA_TRL 8u
#define WA_STAMP_OFF 16u

enum {
	WA_F_IMM = 0x1,       /* sender: imm is valid */
	WA_F_PAD = 0x2,       /* sender: skip len bytes */
	WA_F_HELD = 0x100,    /* receiver: handed out */
	WA_F_RELEASED = 0x200, /* receiver: given back or skipped */
	WA_F_PARKED = 0x400,  /* receiver: waits for its connection */
	WA_F_SKIPPED = 0x800, /* receiver: a hole it moved past */
};

struct wa_hdr {
	uint32_t len;
	uint32_t sender;
	uint16_t flags;
	uint32_t imm;
};

static inline uint64_t wa_round8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

/* Ring bytes one record of @len payload bytes takes. */
static inline uint64_t wa_rec_size(uint64_t len)
{
	uint64_t n = WA_HDR + wa_round8(len) + WA_TRL;

	return (n + WA_ALIGN - 1) & ~(uint64_t)(WA_ALIGN - 1);
}

/* Bytes the one WRITE of a record carries (the header alone for a pad). */
static inline uint64_t wa_write_len(uint64_t len)
{
	return WA_HDR + wa_round8(len) + WA_TRL;
}

/* Offset of the trailer stamp within a record. */
static inline uint64_t wa_trailer_off(uint64_t len)
{
	return WA_HDR + wa_round8(len);
}

/* splitmix64's finalizer: a bijection on 64-bit words with mix(0) == 0. */
static inline uint64_t wa_mix(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * The stamps of the record at V. @salt is odd and V a multiple of
 * WA_ALIGN, so the word mixed is odd, never 0, and the stamp never 0
 * (zeroed memory never matches); a header stamp never equals a trailer
 * stamp (bit 1 differs before mixing) and two different V never share a
 * stamp (the mix is a bijection).
 */
static inline uint64_t wa_hstamp(uint64_t salt, uint64_t v)
{
	return wa_mix(v ^ salt);
}

static inline uint64_t wa_tstamp(uint64_t salt, uint64_t v)
{
	return wa_mix(v ^ salt ^ 2);
}

/* Does a reservation of @rec bytes at @v cross the end of the ring? */
static inline int wa_crosses(uint64_t v, uint64_t rec, uint64_t ring_size)
{
	return (v & (ring_size - 1)) + rec > ring_size;
}

/* May a sender write [v, v + len) when the receiver's head is @head?
 * (A head past v + len, as a sender's estimate may be, leaves room.) */
static inline int wa_fits(uint64_t v, uint64_t len, uint64_t head,
			  uint64_t ring_size)
{
	return head >= v + len || v + len - head <= ring_size;
}

/*
 * The immediate of a record's WRITE_WITH_IMM: its ring slot ((V & mask) /
 * WA_ALIGN) in the low log2(ring_size / WA_ALIGN) bits, its span in
 * WA_ALIGN units above them. wa_imm_fits() says whether a span of @span
 * bytes can be encoded for a ring of @ring_size bytes.
 */
static inline unsigned wa_slot_bits(uint64_t ring_size)
{
	return (unsigned)__builtin_ctzll(ring_size / WA_ALIGN);
}

static inline int wa_imm_fits(uint64_t span, uint64_t ring_size)
{
	return ((span / WA_ALIGN) >> (32 - wa_slot_bits(ring_size))) == 0;
}

static inline uint32_t wa_imm(uint64_t v, uint64_t span, uint64_t ring_size)
{
	return (uint32_t)(((v & (ring_size - 1)) / WA_ALIGN) |
			  ((span / WA_ALIGN) << wa_slot_bits(ring_size)));
}

/* Ring byte offset and span in bytes of an immediate from wa_imm(). */
static inline void wa_imm_get(uint32_t imm, uint64_t ring_size, uint64_t *off,
			      uint64_t *span)
{
	unsigned bits = wa_slot_bits(ring_size);

	*off = (uint64_t)(imm & ((1u << bits) - 1)) * WA_ALIGN;
	*span = (uint64_t)(imm >> bits) * WA_ALIGN;
}

static inline void wa_put_hdr(uint8_t *p, const struct wa_hdr *h)
{
	uint32_t len = htole32(h->len), sender = htole32(h->sender),
		 imm = htole32(h->imm);
	uint16_t flags = htole16(h->flags), zero = 0;

	memcpy(p, &len, 4);
	memcpy(p + 4, &sender, 4);
	memcpy(p + 8, &flags, 2);
	memcpy(p + 10, &zero, 2);
	memcpy(p + 12, &imm, 4);
}

static inline void wa_get_hdr(const uint8_t *p, struct wa_hdr *h)
{
	uint32_t len, sender, imm;
	uint16_t flags;

	memcpy(&len, p, 4);
	memcpy(&sender, p + 4, 4);
	memcpy(&flags, p + 8, 2);
	memcpy(&imm, p + 12, 4);
	h->len = le32toh(len);
	h->sender = le32toh(sender);
	h->flags = le16toh(flags);
	h->imm = le32toh(imm);
}

static inline void wa_put_stamp(uint8_t *p, uint64_t stamp)
{
	uint64_t le = htole64(stamp);

	memcpy(p, &le, 8);
}

/* An acquire load of the stamp at @p (8-byte aligned ring memory). */
static inline uint64_t wa_load_stamp(const uint8_t *p)
{
	return le64toh(__atomic_load_n((const uint64_t *)(const void *)p,
				       __ATOMIC_ACQUIRE));
}

/*
 * Test hook: when set, called by a sender after its FETCH_ADD reserved
 * [voff, voff + rec) and before it writes the record (tests make a slow
 * sender with it). NULL in production.
 */
struct rdmx_conn;
extern void (*rdmx__wa_test_reserved)(struct rdmx_conn *c, uint64_t voff,
				      uint64_t rec);

#endif /* RDMX_PROTOCOLS_WRITE_ATOMIC_REC_H */
