/* SPDX-License-Identifier: MIT */
/*
 * Wire formats exchanged in rdma_cm private data. All integers little-endian.
 *
 * hello (connect request, and the accept reply), 16-byte header + block:
 *   0  u32 magic "RDMX" (0x584d4452 read as little-endian)
 *   4  u8  wire version (RDMX__WIRE_VERSION)
 *   5  u8  protocol id (enum rdmx__proto_id)
 *   6  u16 flags (RDMX__HELLO_REPLY on the accept reply)
 *   8  u32 max message size (request: proposed; reply: negotiated)
 *  12  u16 receive depth of the sender of this hello
 *  14  u8  length of the protocol block that follows
 *  15  u8  reserved, 0
 *  16  protocol block (up to 40 bytes in a request, 180 in a reply)
 *
 * reject: 8-byte header + NUL-terminated reason text:
 *   0  u32 magic, 4 u8 wire version, 5 u8 reason code, 6 u16 reserved
 */
#ifndef RDMX_CORE_WIRE_H
#define RDMX_CORE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RDMX__WIRE_MAGIC 0x584d4452u
#define RDMX__WIRE_VERSION 1
#define RDMX__HELLO_HDR 16
#define RDMX__HELLO_BLOCK_MAX 180
#define RDMX__HELLO_REPLY 0x1
#define RDMX__REJECT_HDR 8

struct rdmx__hello {
	uint8_t version;
	uint8_t protocol;
	uint16_t flags;
	uint32_t max_msg;
	uint16_t recv_depth;
	uint8_t block_len;
	uint8_t block[RDMX__HELLO_BLOCK_MAX];
};

/*
 * The protocol ids of the hello's byte 5: one per protocol, each table's
 * .id. They are on the wire: never renumber or reuse one; a new protocol
 * takes the next.
 */
enum rdmx__proto_id {
	RDMX__PROTO_SEND_RECV = 1,
	RDMX__PROTO_SRQ = 2,
	RDMX__PROTO_READ = 3,
	RDMX__PROTO_WRITE_SIMPLEX = 4,
	RDMX__PROTO_WRITE_MAGIC = 5,
	RDMX__PROTO_WRITE_DUPLEX = 6,
	RDMX__PROTO_WRITE_ATOMIC = 7,
	RDMX__PROTO_DIRECT_WRITE = 8,
	RDMX__PROTO_BUFFERED_READ = 9,
};

enum rdmx__reject_code {
	RDMX__REJ_MALFORMED = 1,
	RDMX__REJ_VERSION = 2,
	RDMX__REJ_PROTOCOL = 3,
	RDMX__REJ_PARAMS = 4,
	RDMX__REJ_RESOURCES = 5,
};

/* Encode into @buf of @cap bytes; returns bytes written or -EMSGSIZE. */
int rdmx__hello_encode(const struct rdmx__hello *h, uint8_t *buf, size_t cap);

/* Decode @len bytes; trailing zero padding is allowed (IB CM pads to 56).
 * Returns 0 or -EPROTO with a message (not rdmx, version, truncated). */
int rdmx__hello_decode(const uint8_t *buf, size_t len, struct rdmx__hello *h);

/* Encode a reject with @code and @reason; returns bytes written. */
int rdmx__reject_encode(enum rdmx__reject_code code, const char *reason,
			uint8_t *buf, size_t cap);

/* Decode a reject; returns the code (> 0) and copies the reason text, or
 * 0 when the data is not an rdmx reject (e.g. empty, from a plain CM). */
int rdmx__reject_decode(const uint8_t *buf, size_t len, char *reason,
			size_t rlen);

/* Little-endian helpers for protocol blocks. */
void rdmx__put_u16(uint8_t *p, uint16_t v);
void rdmx__put_u32(uint8_t *p, uint32_t v);
void rdmx__put_u64(uint8_t *p, uint64_t v);
uint16_t rdmx__get_u16(const uint8_t *p);
uint32_t rdmx__get_u32(const uint8_t *p);
uint64_t rdmx__get_u64(const uint8_t *p);

/*
 * A checked word: a 32-bit value and its complement in one 8-byte word
 * (little-endian), kept in memory a peer WRITEs or RDMA-READs. RDMA
 * places a copy's bytes one by one (rxe copies with memcpy), so a copy
 * taken while the word changes can mix old and new bytes; its halves then
 * disagree and it is not taken (read it again). The reader widens the
 * value against a 64-bit count of its own. Used by srq's credit word,
 * notify OFF's tail word and buffered_read's tail and progress words.
 */
static inline uint64_t rdmx__cword(uint32_t v)
{
	uint8_t b[8];
	uint64_t w;

	rdmx__put_u32(b, v);
	rdmx__put_u32(b + 4, ~v);
	memcpy(&w, b, sizeof(w));
	return w;
}

/* 0 with the value of @w (loaded once, whole) in *@v; -1: torn. */
static inline int rdmx__cword_get(uint64_t w, uint32_t *v)
{
	uint8_t b[8];

	memcpy(b, &w, sizeof(b));
	*v = rdmx__get_u32(b);
	return rdmx__get_u32(b + 4) == ~*v ? 0 : -1;
}

#endif /* RDMX_CORE_WIRE_H */
