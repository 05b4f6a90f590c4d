/* SPDX-License-Identifier: MIT */
/*
 * Packed frames (issue 10 section 3): several small messages of a burst
 * (RDMX_SEND_MORE) in one SEND, which the receiver splits; the user still
 * gets one message per rdmx_recv. The send pool packs (sendpool.c, when
 * the protocol set sp->pack: send_recv, with a peer that said in its hello
 * that it splits, and coalesce not OFF); the receiver (send_recv.c) parses
 * a frame with rdmx__pack_parse and hands its messages out in place.
 *
 * Wire: a SEND_WITH_IMM whose immediate is RDMX__PACK_IMM, little-endian:
 *   u32 count (1..RDMX__PACK_MAX), u32 0,
 *   count x { u32 len | RDMX__PACK_HAS_IMM, u32 imm, len bytes, zero to
 *             7 bytes to the next multiple of 8 }
 * A user message with immediate data equal to RDMX__PACK_IMM goes as a
 * frame of one, so a frame is never mistaken for one (a frame of one fits:
 * the two-sided protocols' buffers hold max_msg + RDMX__PACK_OVERHEAD).
 * The buffer is the peer's: rdmx__pack_parse reads every header once into
 * the caller's table and checks it against the bytes received.
 */
#ifndef RDMX_CORE_PACK_H
#define RDMX_CORE_PACK_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RDMX__PACK_IMM 0x7061636bu  /* "pack" */
#define RDMX__PACK_HAS_IMM (1u << 31)
#define RDMX__PACK_MAX 64           /* messages per frame */
#define RDMX__PACK_SMALL 256        /* larger messages are not packed */
#define RDMX__PACK_HDR 8            /* frame header */
#define RDMX__PACK_ENT 8            /* entry header */
#define RDMX__PACK_OVERHEAD (RDMX__PACK_HDR + RDMX__PACK_ENT)
/* The smallest buffer of a side that splits frames: a full frame of
 * 64-byte messages (RDMX__PACK_MAX of them) fits whatever max_msg is, so
 * a burst of 64 such messages is one SEND. */
#define RDMX__PACK_FRAME_MIN (RDMX__PACK_HDR + RDMX__PACK_MAX * (RDMX__PACK_ENT + 64))
/* The floor of an rdmx before it (hello flag RDMX__UNPACK_FRAME_MIN
 * without RDMX__UNPACK_FRAME_FULL): 56 messages of 64 bytes. */
#define RDMX__PACK_FRAME_MIN_V1 4096
#define RDMX__PACK_SLOT_ALIGN 64

/* One message of a parsed frame. */
struct rdmx__pack_ent {
	uint32_t off;             /* its bytes in the frame */
	uint32_t len;
	uint32_t imm;
	uint8_t has_imm;
};

static inline uint32_t rdmx__pack_pad(uint32_t n)
{
	return (n + 7u) & ~7u;
}

/*
 * The bytes between two buffers (send slots, receive buffers) of a
 * two-sided protocol with @max_msg: a message and a frame's overhead, and
 * at least RDMX__PACK_FRAME_MIN. Without that floor a small max_msg made
 * frames of one message: rdmx bench --sizes 64 (max_msg 64) had buffers
 * of 128 bytes, a frame of two 64-byte messages is 152, and send_recv and
 * srq sent one message per SEND in every burst.
 */
static inline size_t rdmx__pack_slot_min(uint32_t max_msg, size_t floor)
{
	size_t b = (size_t)max_msg + RDMX__PACK_OVERHEAD;

	if (b < floor)
		b = floor;
	return (b + RDMX__PACK_SLOT_ALIGN - 1) & ~(size_t)(RDMX__PACK_SLOT_ALIGN - 1);
}

static inline size_t rdmx__pack_slot(uint32_t max_msg)
{
	return rdmx__pack_slot_min(max_msg, RDMX__PACK_FRAME_MIN);
}

/* Parse the frame of @len bytes at @buf (peer-written, read once) into
 * @ent (RDMX__PACK_MAX entries), every message at most @max_msg bytes:
 * how many messages, or -EPROTO (message recorded) when malformed. */
int rdmx__pack_parse(const uint8_t *buf, uint32_t len, uint32_t max_msg,
		     struct rdmx__pack_ent *ent);

/* Turn the message of @len bytes at the start of @slot (immediate @imm if
 * @has_imm) into a frame of one: the new length of the frame. */
uint32_t rdmx__pack_start(uint8_t *slot, uint32_t len, int has_imm,
			  uint32_t imm);

/* The frame length after a message of @len is added to one of @flen. */
static inline uint32_t rdmx__pack_grown(uint32_t flen, uint32_t len)
{
	return flen + RDMX__PACK_ENT + rdmx__pack_pad(len);
}

/* Little-endian u32 at any alignment. Inline, as rdmx__pack_add is: it
 * runs once per packed message (bench/profile-burst). */
static inline uint32_t rdmx__pack_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline void rdmx__pack_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

/* Append a message to the frame of @flen bytes at @slot: its new length.
 * The caller checked it fits (rdmx__pack_grown against its cap). */
static inline uint32_t rdmx__pack_add(uint8_t *slot, uint32_t flen,
				      const void *data, uint32_t len,
				      int has_imm, uint32_t imm)
{
	rdmx__pack_put32(slot, rdmx__pack_get32(slot) + 1);
	rdmx__pack_put32(slot + flen, len | (has_imm ? RDMX__PACK_HAS_IMM : 0));
	rdmx__pack_put32(slot + flen + 4, has_imm ? imm : 0);
	if (len) /* rdmx_sendv's empty message may have no bytes at all */
		memcpy(slot + flen + RDMX__PACK_ENT, data, len);
	return rdmx__pack_grown(flen, len);
}

#endif /* RDMX_CORE_PACK_H */
