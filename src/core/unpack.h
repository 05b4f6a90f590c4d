/* SPDX-License-Identifier: MIT */
/*
 * The receiving side of packed frames (core/pack.h), one for the
 * two-sided family (send_recv, srq): the hello flag that says "I split
 * frames", what a sender does when its peer said so, and handing a
 * frame's messages out one per rdmx_recv, in place in the receive buffer.
 *
 * A received message's handle is its buffer's index | its message in the
 * buffer << 32 (0 for a message that was not packed); the protocol keeps
 * per buffer a mask of its messages not yet released and gives the buffer
 * back once the mask is empty.
 *
 * A frame is parsed once (rdmx__pack_parse: every header read once into
 * the table, checked against the bytes received); a malformed frame takes
 * its connection down with -EPROTO and nothing of it is handed out.
 */
#ifndef RDMX_CORE_UNPACK_H
#define RDMX_CORE_UNPACK_H

#include "conn.h"
#include "fabric.h"
#include "msg.h"
#include "pack.h"

struct rdmx__sendpool;

/* Hello flag (bit 0 of the protocol's flag byte): this side splits
 * packed frames. */
#define RDMX__UNPACK_SPLITS 1u
/* Hello flag (bit 1, send_recv, whose hello carries no buffer size): this
 * side's receive buffers are rdmx__pack_slot(max_msg) bytes, at least
 * RDMX__PACK_FRAME_MIN. Without it a peer's buffers are taken to hold
 * max_msg and a frame's overhead (an rdmx before the floor). */
#define RDMX__UNPACK_FRAME_MIN 2u
/* Hello flag (bit 2, send_recv, with bit 1): the floor is
 * RDMX__PACK_FRAME_MIN; with bit 1 alone it is RDMX__PACK_FRAME_MIN_V1. */
#define RDMX__UNPACK_FRAME_FULL 4u

/* The frame being handed out. */
struct rdmx__unpack {
	struct rdmx__pack_ent ent[RDMX__PACK_MAX];
	uint8_t *buf;             /* its receive buffer */
	uint32_t idx;             /* and that buffer's index */
	uint32_t next, count;     /* next message to hand out, messages */
};

/* The peer's hello said it splits frames, into receive buffers of
 * @peer_bytes: pack the small messages of bursts toward it (frames at
 * most @peer_bytes and what one of @sp's slots holds) unless coalesce is
 * OFF. */
void rdmx__unpack_peer_splits(rdmx_conn *c, struct rdmx__sendpool *sp,
			      uint32_t peer_bytes);

/* A frame of @len bytes arrived in receive buffer @idx at @buf: parse it
 * into @u. The mask of its messages (in @mask) and 0, or -EPROTO with @c
 * down (@who names the protocol). */
int rdmx__unpack_start(rdmx_conn *c, struct rdmx__unpack *u, const char *who,
		       uint8_t *buf, uint32_t idx, uint32_t len, uint64_t *mask);

/* A received message's buffer (below @nbuf) and in *@ent its message in
 * that buffer (below RDMX__PACK_MAX), or -EINVAL. The caller checks that
 * the buffer is held and the message not yet released. Inline: once per
 * release (bench/profile-burst). */
static inline int64_t rdmx__unpack_handle(rdmx_conn *c, const struct rdmx_msg *m,
					  uint32_t nbuf, uint32_t *ent)
{
	uint64_t v, idx;

	if (rdmx__msg_get(m, c, RDMX__MSG_RECV, &v))
		return -EINVAL;
	idx = v & UINT32_MAX;
	*ent = (uint32_t)(v >> 32);
	if (idx >= nbuf || *ent >= RDMX__PACK_MAX)
		return -EINVAL;
	return (int64_t)idx;
}

/* Messages of the frame not handed out yet. */
static inline int rdmx__unpack_more(const struct rdmx__unpack *u)
{
	return u->next < u->count;
}

/* Fill @m with @len bytes at @data (immediate @imm if @has_imm), handle
 * @h. */
static inline void rdmx__unpack_fill(rdmx_conn *c, struct rdmx_msg *m,
				     uint8_t *data, uint32_t len, int has_imm,
				     uint32_t imm, uint64_t h)
{
	m->data = data;
	m->len = len;
	m->cap = len;
	m->imm = has_imm ? imm : 0;
	m->flags = has_imm ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(m, c, RDMX__MSG_RECV, h);
}

/* Hand out the frame's next message (rdmx__unpack_more said there is). */
static inline void rdmx__unpack_next(rdmx_conn *c, struct rdmx__unpack *u,
				     struct rdmx_msg *m)
{
	const struct rdmx__pack_ent *e = &u->ent[u->next];

	rdmx__unpack_fill(c, m, u->buf + e->off, e->len, e->has_imm, e->imm,
			  u->idx | (uint64_t)u->next << 32);
	u->next++;
}

/* Is @wc's message a packed frame? (A peer that packs marks frames with
 * RDMX__PACK_IMM and sends a user message with that immediate as a frame
 * of one.) */
static inline int rdmx__unpack_is_frame(const struct rdmx__wc *wc)
{
	return wc->has_imm && wc->imm == RDMX__PACK_IMM;
}

#endif /* RDMX_CORE_UNPACK_H */
