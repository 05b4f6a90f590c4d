/* SPDX-License-Identifier: MIT */
/*
 * The ring engine of the single-sender ring protocols (write_simplex,
 * write_magic, write_duplex; their verbs side is src/protocols/
 * write_ring_conn.c): what a record in a receive ring looks like, where the next
 * one goes, how much room is left, and which prefix of the ring the
 * receiver has given back. Pure code (no verbs, no allocation but the
 * release tracker's), unit-tested natively in tests/unit/test_ring.c.
 * Every name here is rdmx__ring_* / RDMX__RING_*.
 *
 * A ring is a power-of-two number of bytes addressed by 64-bit virtual
 * offsets that only grow: offset o lives at byte (o & mask). Senders move a
 * tail, the receiver a head; used = tail - head never exceeds the size, and
 * 64-bit counters never wrap in practice (2^64 bytes).
 *
 * Record at offset o (all fields little-endian, the host order: rdmx needs a
 * little-endian host), RDMX__RING_ALIGN-aligned:
 *    0 u32 len      payload bytes
 *    4 u32 imm      the user's immediate data (valid with RDMX__RING_REC_IMM)
 *    8 u16 flags    RDMX__RING_REC_IMM, RDMX__RING_REC_PAD
 *   10 u16 reserved 0
 *   12 u32 hstamp   high half of stamp(seed, o), low bit forced to 1
 *   16 payload, then padding up to the footer
 *  size-8 u64 fstamp  stamp(seed, o) (the footer, the record's last word)
 * size = rdmx__ring_rec_size(len) = align(16 + len + 8).
 *
 * The stamp is a hash of the record's virtual offset and a per-ring random
 * seed, so the bytes left at the same place by an earlier lap (offset
 * o - k * size) carry a different stamp and are never taken for a new
 * record; the ring may start zeroed (a zero hstamp never matches). A sender
 * lays out header, payload and footer in increasing address order and
 * moves them with ONE RDMA WRITE; the receiver takes a record as complete
 * only when the header stamp and the footer both match (read with acquire
 * loads, header first, footer before the payload). That relies on the
 * WRITE's bytes being placed in increasing address order, which rxe and
 * real HCAs do but the InfiniBand spec does not promise; protocols that
 * announce records with WRITE_WITH_IMM do not depend on it (the receive
 * completion guarantees the whole WRITE was placed). Caveat for software
 * RDMA (rxe): it places each packet with a CPU memcpy, and on x86 the
 * stores of one fast-string copy (rep movsb) are not promised to become
 * visible to another core in address order, only before those of the
 * next packet; a record within one packet relies on that copy. Never seen
 * to matter in testing; use notify IMM where it must not. The fake fabric
 * places bytes strictly in increasing order (memmove does not: under ASan
 * a record was seen with a stamped header over a stale length before the
 * fake was changed to ordered 8-byte stores).
 *
 * A pad record (flags RDMX__RING_REC_PAD, header only, its len ignored) says
 * "the rest of this lap is unused, the next record is at the next lap's
 * start": rings without a double mapping never split a record across the
 * end. With the magic (double) mapping a record may cross the end and no
 * pad is ever needed.
 *
 * write_atomic's many-sender ring does NOT use this format or this file:
 * its records (src/protocols/write_atomic_rec.h, names wa_* / WA_*) have a
 * 24-byte header carrying the writing connection's id, 64-byte alignment,
 * their own stamps, and are announced by WRITE_WITH_IMM. The two formats
 * share only the idea of a record stamped with its ring offset.
 */
#ifndef RDMX_CORE_RING_H
#define RDMX_CORE_RING_H

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ring record format assumes a little-endian host"
#endif

#define RDMX__RING_ALIGN 16u
#define RDMX__RING_HDR 16u
#define RDMX__RING_FTR 8u

enum rdmx__ring_rec_flags {
	RDMX__RING_REC_IMM = 1 << 0, /* imm carries the user's immediate data */
	RDMX__RING_REC_PAD = 1 << 1, /* skip to the next lap */
};

struct rdmx__ring_rec_hdr {
	uint32_t len;
	uint32_t imm;
	uint16_t flags;
	uint16_t reserved;
	uint32_t hstamp;
};

/* What the receiver found at an offset. */
struct rdmx__ring_rec_view {
	uint32_t len;
	uint32_t imm;
	uint16_t flags;
	uint32_t size;   /* bytes the record takes (a pad: to the lap's end) */
};

/* Geometry of one ring. */
struct rdmx__ring_geo {
	uint64_t size;   /* power of two */
	uint64_t mask;
	int magic;       /* double-mapped: records may cross the end */
};

/* 0, or -EINVAL when @size is not a power of two >= 2 * RDMX__RING_ALIGN. */
int rdmx__ring_geo_init(struct rdmx__ring_geo *g, uint64_t size, int magic);

/* Bytes a record of @len payload bytes takes. */
static inline uint64_t rdmx__ring_rec_size(uint64_t len)
{
	return (RDMX__RING_HDR + len + RDMX__RING_FTR + RDMX__RING_ALIGN - 1) &
	       ~(uint64_t)(RDMX__RING_ALIGN - 1);
}

/* The 64-bit stamp of offset @off in a ring with @seed (never 0). */
uint64_t rdmx__ring_stamp(uint64_t seed, uint64_t off);

/* A fresh seed (time, address and pid mixed; not for cryptography). */
uint64_t rdmx__ring_seed(void);

/* Free bytes with @tail and @head (tail >= head, tail - head <= size). */
static inline uint64_t rdmx__ring_free(const struct rdmx__ring_geo *g,
				       uint64_t tail, uint64_t head)
{
	return g->size - (tail - head);
}

/*
 * The wrap decision: where a record of @rsize bytes written at @tail
 * starts. Returns the start offset; *@pad receives the bytes skipped
 * before it (a pad record fills them), 0 when the record fits before the
 * end or the ring is magic. The record then ends at start + @rsize.
 */
uint64_t rdmx__ring_place(const struct rdmx__ring_geo *g, uint64_t tail,
			  uint64_t rsize, uint64_t *pad);

/* Does a record of @rsize at @tail (with its pad) fit with @head? */
int rdmx__ring_fits(const struct rdmx__ring_geo *g, uint64_t tail,
		    uint64_t head, uint64_t rsize);

/*
 * Write header and footer of a record at @off around the @len payload
 * bytes already at rec + RDMX__RING_HDR (@rec: the record's first byte,
 * contiguous for rdmx__ring_rec_size(len) bytes). Header first, footer
 * last; the stamps are stored with release semantics.
 */
void rdmx__ring_put_rec(void *rec, uint64_t seed, uint64_t off, uint32_t len,
			uint32_t imm, uint16_t flags);

/* Write a pad record (header only) at @off. */
void rdmx__ring_put_pad(void *rec, uint64_t seed, uint64_t off);

/*
 * Look at the ring at @off (@rec its first byte, contiguous through the
 * record's end: magic rings, or records that never cross the end).
 * @check_footer: 0 when something else (an IMM completion) already says
 * the record is complete. Returns 1 with *@v filled for a complete record
 * or pad, 0 when nothing complete is there yet, -EPROTO (with a message)
 * when a stamped header holds a length above @max_len or a pad where none
 * can be. The header is read once (after its stamp, with an acquire load)
 * into a local copy; only the copy is validated and used, so a peer
 * rewriting it meanwhile cannot get an unchecked length through.
 */
int rdmx__ring_peek(const struct rdmx__ring_geo *g, const void *rec,
		    uint64_t seed, uint64_t off, uint32_t max_len,
		    int check_footer, struct rdmx__ring_rec_view *v);

/*
 * Test hook: when set, called by rdmx__ring_peek() after it validated the
 * header and before it fills the view (a test rewrites the header there
 * to show that only the validated copy is used). NULL in production.
 */
extern void (*rdmx__ring_test_peeked)(const void *rec);

/*
 * Reverse records (notify REV). The ring is filled from its top down:
 * the record at offset o of rsize bytes occupies bytes
 * [size - (o & mask) - rsize, size - (o & mask)) - rdmx__ring_rev_at() -
 * so offsets still grow and everything above (placement, room, release)
 * is unchanged; a record never crosses the bottom (a pad fills the rest
 * of the lap, skip to the top). In address order a record is
 *    0 payload, then padding up to the trailer
 *  size-16 u32 len, u32 imm, u32 size (bytes of the slot), u16 flags,
 *          u8 reserved 0, u8 valid (1)
 * so that one WRITE, placed in increasing address order, lands the valid
 * byte last, and it sits at the slot's top byte: the byte the receiver
 * polls. Before each record (and pad) the sender writes one zero byte at
 * the top of the slot that follows it (the pre-clear: a separate inline
 * WRITE posted first, RC keeps the order), so a valid byte left by an
 * earlier lap is never taken and the receiver never zeroes memory. The
 * slot size travels in the trailer (a sender may send fewer bytes than it
 * allocated: the payload stays at the slot's bottom).
 */
#define RDMX__RING_REV_TRL 16u

struct rdmx__ring_rev_trl {
	uint32_t len;
	uint32_t imm;
	uint32_t size;
	uint16_t flags;
	uint8_t reserved;
	uint8_t valid;
};

/* Bytes a reverse record of @len payload bytes takes. */
static inline uint64_t rdmx__ring_rev_size(uint64_t len)
{
	return (len + RDMX__RING_REV_TRL + RDMX__RING_ALIGN - 1) &
	       ~(uint64_t)(RDMX__RING_ALIGN - 1);
}

/* The byte index of the first byte of the @rsize-byte record at @off. */
static inline uint64_t rdmx__ring_rev_at(const struct rdmx__ring_geo *g,
					 uint64_t off, uint64_t rsize)
{
	return g->size - (off & g->mask) - rsize;
}

/* Write the trailer of a reverse record of @size bytes at @slot (its
 * first byte; the payload is there already). The valid byte last, with
 * release semantics. */
void rdmx__ring_rev_put(void *slot, uint32_t size, uint32_t len, uint32_t imm,
			uint16_t flags);

/*
 * Look at the reverse ring @ring at @off: 1 with *@v filled (a record, or
 * a pad running to the lap's end), 0 when its valid byte is still 0,
 * -EPROTO (with a message) for a valid byte that is not 1, a length above
 * @max_len, a slot size that is not a multiple of RDMX__RING_ALIGN, holds
 * no such record or crosses the ring's bottom, or a pad at a lap's start.
 * The trailer is read once into a local copy after the valid byte (acquire).
 */
int rdmx__ring_rev_peek(const struct rdmx__ring_geo *g, const uint8_t *ring,
			uint64_t off, uint32_t max_len,
			struct rdmx__ring_rec_view *v);

/*
 * Out-of-order release. The receiver delivers records in ring order, each
 * gets a sequence number; the user may hand them back in any order, and
 * the head advances only over the contiguous released prefix. Holds at
 * most @cap delivered-but-unreleased records.
 */
struct rdmx__ring_rel {
	uint32_t cap;
	uint64_t released;  /* records before this number are all released */
	uint64_t delivered; /* records handed out so far */
	uint64_t head;      /* ring offset up to which everything is released */
	uint64_t *end;      /* per slot (seq % cap): record end offset */
	uint8_t *done;      /* per slot: released out of order */
};

int rdmx__ring_rel_init(struct rdmx__ring_rel *r, uint32_t cap);
void rdmx__ring_rel_free(struct rdmx__ring_rel *r);

/* Record a delivered record ending at @end; returns its sequence number,
 * or -ENOBUFS when @cap records are already held. */
int64_t rdmx__ring_rel_push(struct rdmx__ring_rel *r, uint64_t end);

/* Release record @seq; returns the number of records the head advanced
 * over (0 if @seq is not the oldest held), -EINVAL if @seq is not held. */
int rdmx__ring_rel_release(struct rdmx__ring_rel *r, uint64_t seq);

/* Is @seq delivered and not yet released? */
int rdmx__ring_rel_held(const struct rdmx__ring_rel *r, uint64_t seq);

/*
 * Ring memory: @size bytes (a multiple of the page size), zeroed. With
 * @magic the same pages are mapped twice back to back (a memfd mapped
 * MAP_SHARED twice into a 2 * @size PROT_NONE reservation), so byte i and
 * byte i + @size are the same byte and a record crossing the end reads and
 * writes contiguously. Returns NULL (with a message) on failure.
 */
void *rdmx__ring_map(size_t size, int magic);
void rdmx__ring_unmap(void *base, size_t size, int magic);

#endif /* RDMX_CORE_RING_H */
