/* SPDX-License-Identifier: MIT */
/*
 * Message handles and the one-buffer-at-a-time helper of the protocols.
 */
#ifndef RDMX_CORE_MSG_H
#define RDMX_CORE_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <rdmx/rdmx.h>

#include "conn.h"
#include "errors.h"
#include "protocol.h"
#include "ring.h"

/*
 * Message handles: the one encoding of struct rdmx_msg's priv_ for every
 * protocol. priv_[0] is the protocol's value (a slot index, a ring
 * offset, a record's sequence number); priv_[1] is the connection with
 * the handle's kind in its low bits (a connection is at least 8-byte
 * aligned), 0 once the handle is spent. rdmx_msg_conn() masks the kind
 * off. A handle is user memory: rdmx__msg_get() reads it once and checks
 * connection and kind; the protocol then checks the value (in range, in
 * the right state) before it uses it.
 */
enum rdmx__msg_kind {
	RDMX__MSG_CONN = 0,   /* names a connection, holds nothing */
	RDMX__MSG_SEND = 1,   /* an allocated send buffer */
	RDMX__MSG_RECV = 2,   /* a received message */
};
#define RDMX__MSG_KIND_MASK UINT64_C(7)
_Static_assert(_Alignof(struct rdmx_conn) > RDMX__MSG_KIND_MASK,
	       "a connection's low bits carry a handle's kind");

static inline void rdmx__msg_set(struct rdmx_msg *m, rdmx_conn *c,
				 enum rdmx__msg_kind kind, uint64_t val)
{
	m->priv_[0] = val;
	m->priv_[1] = (uintptr_t)c | (uint64_t)kind;
}

/* 0 with the handle's value in *@val if @m is a live @kind handle of @c,
 * else -EINVAL (no message formatted). */
static inline int rdmx__msg_get(const struct rdmx_msg *m, const rdmx_conn *c,
				enum rdmx__msg_kind kind, uint64_t *val)
{
	uint64_t tag = m->priv_[1], v = m->priv_[0];

	if (tag != ((uintptr_t)c | (uint64_t)kind))
		return -EINVAL;
	*val = v;
	return 0;
}

/* The handle's connection (NULL once spent). */
static inline rdmx_conn *rdmx__msg_conn(const struct rdmx_msg *m)
{
	return (rdmx_conn *)(uintptr_t)(m->priv_[1] & ~RDMX__MSG_KIND_MASK);
}

static inline void rdmx__msg_spend(struct rdmx_msg *m)
{
	m->priv_[1] = 0;
}

/*
 * One send buffer at a time (the write rings, buffered_read): the buffer
 * rdmx_msg_alloc handed out, where its record starts and how big it may
 * be. Each buffer gets a new id, so the handle of an earlier one is
 * refused.
 */
struct rdmx__one_buf {
	int live;
	uint64_t id, start;
	size_t cap;
};

/* -EBUSY (with a message) while a buffer is out, else 0. */
int rdmx__one_buf_busy(const rdmx_conn *c, const struct rdmx__one_buf *b);

/* Hand out @data, @cap bytes, for the record at @start, in @m. */
static inline void rdmx__one_buf_give(rdmx_conn *c, struct rdmx__one_buf *b,
				      struct rdmx_msg *m, void *data,
				      uint64_t start, size_t cap)
{
	b->live = 1;
	b->id++;
	b->start = start;
	b->cap = cap;
	m->data = data;
	m->cap = cap;
	m->len = 0;
	m->imm = 0;
	m->flags = 0;
	rdmx__msg_set(m, c, RDMX__MSG_SEND, b->id);
}

/* Is @m the buffer out now? */
static inline int rdmx__one_buf_is(rdmx_conn *c, const struct rdmx__one_buf *b,
				   const struct rdmx_msg *m)
{
	uint64_t id;

	return !rdmx__msg_get(m, c, RDMX__MSG_SEND, &id) && b->live && id == b->id;
}

/*
 * Give back @m, a message of a ring receiver (its one rdmx_msg_alloc
 * buffer @b, or a record held in @rel), without telling the peer: 1 if
 * @rel's released prefix grew (the caller publishes or reports it), 0, or
 * -EINVAL with a message. The release of buffered_read and the write
 * rings; inlined, as it is on every message's path.
 */
RDMX__HOT int rdmx__one_buf_release(rdmx_conn *c, struct rdmx__one_buf *b,
				    struct rdmx__ring_rel *rel, struct rdmx_msg *m)
{
	uint64_t seq;
	int n;

	if (rdmx__one_buf_is(c, b, m)) {
		b->live = 0;
		rdmx__msg_spend(m);
		return 0;
	}
	if (rdmx__msg_get(m, c, RDMX__MSG_RECV, &seq) ||
	    (n = rdmx__ring_rel_release(rel, seq)) < 0)
		return rdmx__fail(-EINVAL, "%s: message not held on this connection",
				  c->proto->name);
	rdmx__msg_spend(m);
	return n > 0;
}

#endif /* RDMX_CORE_MSG_H */
