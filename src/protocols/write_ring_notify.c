/* SPDX-License-Identifier: MIT */
/*
 * The ring engine's notification step (see write_ring_conn.c for the rest):
 * how a receiver learns that a record landed, chosen per connection with
 * opts.notify (both sides must agree; the hello carries it), and the
 * doorbell that wakes a sleeping receiver.
 *
 *  POLL  the receiver polls the record at its head: a stamp in its header
 *        and one in its footer (src/core/ring.h). One WRITE per record.
 *  IMM   the record WRITE is a WRITE_WITH_IMM; the receiver keeps a
 *        receive posted per message of its window and takes a record per
 *        receive completion (the footer is not checked: the completion
 *        says the whole WRITE landed).
 *  OFF   the record WRITE is unsignaled and chained with an 8-byte inline
 *        WRITE of the sender's new tail offset into the receiver's tail
 *        word (struct ctl.tail), which carries the signal; the receiver
 *        polls that one word and takes every record below it (footers not
 *        checked: RC places the tail WRITE after the record's). The word
 *        is a checked word (rdmx__cword, core/wire.h): RDMA does not
 *        place a WRITE's bytes at once (rxe copies them with memcpy), so a
 *        load can see some bytes of the new tail and some of the old - a
 *        torn word fails the complement and is read again (one that stays
 *        torn for RDMX__WRING_TORN_MS is a forgery: -EPROTO). The receiver
 *        takes the full offset from its own: the tail is at most a ring
 *        ahead of it. The word is peer-written: read once, it must not go
 *        back, run more than a ring ahead of what was taken, or be
 *        unaligned, and a record it promises must be there and end within
 *        it (-EPROTO otherwise).
 *  REV   reverse records (src/core/ring.h): the ring fills from its top
 *        down, a record's valid byte is its last byte, and an inline
 *        1-byte WRITE posted before each record clears the valid byte of
 *        the slot after it, so the receiver polls one byte and never
 *        zeroes memory. The sender keeps that byte free too: a record
 *        fits only if the byte after it is not the peer's unreleased head
 *        (rdmx__wring_fits). Not with write_magic's double mapping.
 *
 * OFF and REV need inline WRITEs (their small WRITEs reuse one source
 * word); a device without inline support refuses them at connect.
 *
 * Sleeping receivers: with IMM a record is a completion. With POLL, OFF
 * and REV a record makes none, so a receiver about to sleep publishes it
 * and the sender adds a doorbell (a 0-byte SEND) after its next record;
 * the doorbell lands in the receives that ack SEND keeps posted for
 * updates, or, with ack READ, in N_CTRL receives posted for doorbells
 * alone (write_ring_conn.c, "Sleeping receivers").
 */
#include <errno.h>
#include <stddef.h>

#include "core/conn.h"
#include "core/doorbell.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/protocol.h"
#include "core/ring.h"
#include "core/wire.h"
#include "write_ring_priv.h"

static const char *const notify_names[] = { "default", "poll", "imm", "off", "rev" };
static const char *const ack_names[] = { "default", "send", "read" };

const char *rdmx__wring_notify_name(unsigned n)
{
	return n < sizeof(notify_names) / sizeof(notify_names[0]) ? notify_names[n] : "?";
}

const char *rdmx__wring_ack_name(unsigned a)
{
	return a < sizeof(ack_names) / sizeof(ack_names[0]) ? ack_names[a] : "?";
}

uint8_t rdmx__wring_notify_of(const struct rdmx_conn_opts *o)
{
	return o->notify ? o->notify : RDMX_NOTIFY_POLL;
}

uint8_t rdmx__wring_ack_of(const struct rdmx_protocol_ops *proto,
			   const struct rdmx_conn_opts *o)
{
	const struct rdmx__wring_variant *v = proto->family;

	if (o->ack)
		return o->ack;
	return v->head_by_read ? RDMX_ACK_READ : RDMX_ACK_SEND;
}

int rdmx__wring_check_variant(const struct rdmx_protocol_ops *proto,
			      const struct rdmx_conn_opts *o)
{
	const struct rdmx__wring_variant *v = proto->family;
	uint8_t n = rdmx__wring_notify_of(o), a = rdmx__wring_ack_of(proto, o);

	if (n == RDMX_NOTIFY_IMM && a == RDMX_ACK_READ)
		return rdmx__fail(-EINVAL, "%s: notify IMM needs posted receives on the receiver, which ack read avoids; use notify poll, off or rev, or ack send",
				  proto->name);
	if (n == RDMX_NOTIFY_REV && v->double_map)
		return rdmx__fail(-EINVAL, "%s: notify rev lays records downward and skips at the ring's bottom; the double mapping is for records crossing the end upward: use write_simplex or write_duplex",
				  proto->name);
	return 0;
}

uint64_t rdmx__wring_rec_size(const struct wring *p, uint64_t len)
{
	return p->notify == RDMX_NOTIFY_REV ? rdmx__ring_rev_size(len) :
	       rdmx__ring_rec_size(len);
}

uint64_t rdmx__wring_at(const struct wring *p, const struct rdmx__ring_geo *g,
			uint64_t off, uint64_t rsize)
{
	return p->notify == RDMX_NOTIFY_REV ? rdmx__ring_rev_at(g, off, rsize) :
	       off & g->mask;
}

int rdmx__wring_fits(const struct wring *p, uint64_t head, uint64_t rsize)
{
	uint64_t pad, start;

	if (!rdmx__ring_fits(&p->sgeo, p->tail, head, rsize))
		return 0;
	if (p->notify != RDMX_NOTIFY_REV)
		return 1;
	start = rdmx__ring_place(&p->sgeo, p->tail, rsize, &pad);
	return start + rsize - head < p->sgeo.size; /* the pre-clear's byte */
}

/* A 1..8-byte inline WRITE of a ctl word into the peer. */
static void ctl_write(rdmx_conn *c, void *src, uint32_t len, uint64_t raddr,
		      uint32_t rkey, struct rdmx__wr *wr)
{
	struct wring *p = wr_of(c);

	*wr = (struct rdmx__wr){
		.op = RDMX__OP_WRITE,
		.flags = RDMX__WR_INLINE,
		.addr = src,
		.len = len,
		.lkey = p->ctl_mr->lkey,
		.remote_addr = raddr,
		.rkey = rkey,
	};
}

int rdmx__wring_notify_pre(rdmx_conn *c, uint64_t end, struct rdmx__wr *wr)
{
	struct wring *p = wr_of(c);
	uint64_t top = p->sgeo.size - 1 - (end & p->sgeo.mask);

	if (p->notify != RDMX_NOTIFY_REV)
		return 0;
	ctl_write(c, &p->ctl->zero, 1, p->peer_ring + top, p->peer_ring_rkey, wr);
	return 1;
}

int rdmx__wring_notify_post(rdmx_conn *c, uint64_t end, struct rdmx__wr *wr,
			    int n)
{
	struct wring *p = wr_of(c);

	if (p->notify != RDMX_NOTIFY_OFF)
		return 0;
	p->ctl->tail_src = rdmx__cword((uint32_t)end); /* inline: copied when posted */
	ctl_write(c, &p->ctl->tail_src, sizeof(uint64_t),
		  p->peer_ctl + offsetof(struct ctl, tail), p->peer_ctl_rkey, &wr[n]);
	wr[n].wr_id = wr[n - 1].wr_id; /* its completion completes the record */
	wr[n].flags |= RDMX__WR_SIGNALED;
	wr[n - 1].flags &= ~RDMX__WR_SIGNALED;
	return 1;
}

int rdmx__wring_torn_ms = RDMX__WRING_TORN_MS;

/* A tail word whose halves disagree: torn by a WRITE landing now (read
 * again), unless the same bytes stay for rdmx__wring_torn_ms. */
static int torn_word(struct wring *p, uint64_t w)
{
	if (w != p->torn) {
		p->torn = w;
		p->torn_since = rdmx__now_ms();
		return 0;
	}
	if (rdmx__now_ms() - p->torn_since < rdmx__wring_torn_ms)
		return 0;
	return rdmx__fail(-EPROTO, "peer's tail word %016llx fails its check (low half, complement) for %d ms",
			  (unsigned long long)w, rdmx__wring_torn_ms);
}

/* OFF: read the peer's tail word once when every record below the last
 * one seen was taken; check it against what it may say. */
static int tail_word(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	uint64_t w, t;
	uint32_t lo;

	if (p->rd < p->tail_seen)
		return 1;
	w = __atomic_load_n(&p->ctl->tail, __ATOMIC_ACQUIRE);
	if (rdmx__cword_get(w, &lo))
		return torn_word(p, w);
	t = p->rd + (uint32_t)(lo - (uint32_t)p->rd); /* at most a ring ahead */
	if (t == p->tail_seen)
		return 0;
	if (t < p->tail_seen || t - p->rd > p->rgeo.size || t % RDMX__RING_ALIGN)
		return rdmx__fail(-EPROTO, "peer's tail word %llu is not in %llu..%llu (or unaligned)",
				  (unsigned long long)t, (unsigned long long)p->tail_seen,
				  (unsigned long long)(p->rd + p->rgeo.size));
	p->tail_seen = t;
	return 1;
}

int rdmx__wring_announced(rdmx_conn *c)
{
	struct wring *p = wr_of(c);

	switch (p->notify) {
	case RDMX_NOTIFY_IMM:
		return p->imm_ready ? 1 : 0;
	case RDMX_NOTIFY_OFF:
		return tail_word(c);
	default:
		return 1; /* the record itself says */
	}
}

int rdmx__wring_peek(rdmx_conn *c, struct rdmx__ring_rec_view *v)
{
	struct wring *p = wr_of(c);
	int rc;

	if (p->notify == RDMX_NOTIFY_REV)
		return rdmx__ring_rev_peek(&p->rgeo, p->ring, p->rd, c->max_msg, v);
	rc = rdmx__ring_peek(&p->rgeo, p->ring + (p->rd & p->rgeo.mask), p->rseed,
			     p->rd, c->max_msg, p->notify == RDMX_NOTIFY_POLL, v);
	if (rc == 0 && p->notify != RDMX_NOTIFY_POLL)
		return rdmx__fail(-EPROTO, "%s without a record at offset %llu",
				  p->imm ? "write completion" : "tail word",
				  (unsigned long long)p->rd);
	if (rc > 0 && p->notify == RDMX_NOTIFY_OFF && p->rd + v->size > p->tail_seen)
		return rdmx__fail(-EPROTO, "record at offset %llu ends past the tail word %llu",
				  (unsigned long long)p->rd,
				  (unsigned long long)p->tail_seen);
	return rc;
}

/* ------------------------------------------------------------ doorbell */

/* Does the peer's receiver sleep on a doorbell (notify not IMM)? With ack
 * SEND it lands in the N_CTRL receives kept for updates, with ack READ
 * in the N_CTRL posted for doorbells alone (rdmx__wring_setup). */
/* The peer published a sleep we did not ring for: post a 0-byte SEND
 * after what we wrote (RC order: it completes at the peer after the
 * WRITEs before it are placed); core/doorbell.h. */
int rdmx__wring_ring_if_asleep(rdmx_conn *c)
{
	struct wring *p = wr_of(c);
	const struct rdmx__wr wr = {
		.wr_id = TAG_ASK << TAG_SHIFT | SUB_WAKE,
		.op = RDMX__OP_SEND,
		.flags = RDMX__WR_SIGNALED,
	};
	int rc;

	if (!rdmx__wring_has_doorbell(p))
		return 0;
	rc = rdmx__bell_ring(c, &p->bell, &p->ctl->sleep_gen, &wr);
	p->st.doorbells_sent += rc > 0;
	return rc < 0 ? rc : 0;
}
