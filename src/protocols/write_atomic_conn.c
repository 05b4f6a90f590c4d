/* SPDX-License-Identifier: MIT */
/*
 * write_atomic: one receive ring shared by many senders.
 *
 * The receiving side owns a ring of opts.ring_size bytes (a power of two)
 * registered for remote WRITE, a 64-bit tail counter registered for remote
 * ATOMIC and, 64 bytes after it, a 64-bit head word registered for remote
 * READ. Every connection accepted on one listener writes into the
 * listener's single ring (c->group->shared); a dialer owns a ring of its
 * own (a group of one) that the accepted side writes its replies into, so
 * every connection carries messages both ways with the same protocol.
 * Addresses, keys, the ring size, a salt and the sender id the receiver
 * gave the connection travel in the hello blocks (see ring_encode()).
 *
 * Sending one message (record layout in write_atomic_rec.h):
 *   1. FETCH_ADD the remote tail by the record size; the old value, a
 *      64-bit virtual offset V, lands in a registered 8-byte buffer.
 *   2. If [V, V + size) crosses the ring's end, write a pad record at V
 *      (header only, "skip size bytes") and go back to 1.
 *   3. Wait until V + size - head <= ring_size: the cached head first, an
 *      RDMA READ of the head word only when it shows too little room.
 *      Nothing is ever overwritten.
 *   4. ONE RDMA WRITE_WITH_IMM of header, payload and trailer; the
 *      immediate is wa_imm(V, size): the record's ring slot and span.
 * So a message costs the sender a FETCH_ADD round trip and a WRITE (plus
 * a READ now and then); the receiver's CPU reposts a zero-length receive
 * per message, in batches of 16 (write_atomic_imm.c).
 *
 * Receiving: records are consumed strictly in reservation order. A record
 * is there when its announcement is: the receive completion of its
 * WRITE_WITH_IMM, which comes after every byte of that WRITE is placed.
 * At its scan cursor the receiver waits for the announcement of that
 * offset, then checks header stamp AND trailer stamp (acquire loads); a
 * slot reserved but not yet written makes it wait (up to the hole bound,
 * below), it never reads torn data. Messages are handed
 * out in place (zero copy) and may be released in any order; the head
 * advances over the contiguous released prefix and is published with a
 * release store into the head word, which senders READ.
 *
 * Stale data. The ring is never cleared: a new record's bytes land over
 * those of earlier laps. A record at V is accepted only if the 8 bytes at
 * its header stamp equal wa_hstamp(salt, V) and the 8 bytes at its
 * trailer (found from the length in that header) equal wa_tstamp(salt, V).
 * Both are a bijection of the full 64-bit V mixed with a per-ring random
 * salt, so a header or trailer a sender wrote for any other reservation
 * (an earlier lap at the same place, a record elsewhere) never matches,
 * and zeroed memory never does (a stamp is never 0). Only payload bytes of
 * an earlier message could, by containing both salted stamps exactly where
 * they are looked for: 2^-128 for data not built to do so. Zeroing
 * consumed headers would add a cache-line store per message and guard
 * only against that same case, so it is not done.
 *
 * Placement order. The announcement is the completion of the WRITE_WITH_IMM,
 * so the receiver no longer relies on a WRITE being placed in increasing
 * address order (the InfiniBand spec does not promise it; the completion
 * does promise the data). The READ of the 8-byte aligned head word is
 * still taken to be single-copy atomic (a torn value could exceed the
 * real head). Every record is announced, so opts.notify=imm adds nothing
 * and setup rejects it.
 *
 * Attribution. The receive completion of a WRITE_WITH_IMM carries the
 * qp_num of the QP it arrived on, and every member has its own QP: the
 * receiver knows which member wrote which reservation, and no member can
 * write in another's name (a member can still WRITE anywhere in the ring
 * without announcing, see "Trust model"). The receives are zero-length,
 * on one SRQ per ring with one receive CQ (a listener's ring: shared by
 * all its members, like its ring), as in the shared ring of the
 * KnowYourMemory thesis. A record whose header names another sender than
 * its announcer, whose length disagrees with the announced span, whose
 * stamps do not match, or that breaks the length and pad rules below, is
 * malformed: its announcer's connection fails (-EPROTO, saying what was
 * wrong) and the scan moves past it by the announced span; the others'
 * records go on. An announcement for a slot the scan has passed, for one
 * already announced, or with a span above the announcer's record size
 * fails the announcer; a record never announced is never delivered.
 *
 * The SRQ holds min(ring_size / 64, 4096) receives, reposted when the
 * receiver polls: a ring above 256 KiB can hold more small records than
 * that, and senders then meet RNR (retried; fatal only with rnr_retry
 * below 7) until the receiver polls again.
 *
 * The immediate is 32 bits: log2(ring_size / 64) bits of slot and the
 * span in 64-byte units above them, so ring_size and max_msg_size must
 * fit together (a 1 MiB ring: records up to 16 MiB; a 1 GiB ring: 16
 * KiB); setup says so when they do not.
 *
 * Bursts (RDMX_SEND_MORE). A flagged message is held, unreserved (its
 * slot stays allocated, so it counts against the credits below); the
 * burst's next send without the flag, rdmx_flush, a token wait, an
 * alloc that would wait (credits, or no free slot), or the bound (the
 * records would pass one record of max_msg, or RDMX__SP_CHAIN_MAX
 * messages) writes what is held: ONE FETCH_ADD for all of their records,
 * which lie back to back from its offset, then one WRITE_WITH_IMM per
 * record (each announced as any record, the receiver sees no
 * difference), rung as one chain by the send pool. A reservation is
 * never larger than one record of max_msg, so one that crosses the
 * ring's end is padded whole, as a single record's is. A burst whose
 * messages were held and then cannot be written (no ring space within
 * liveness_ms) takes its connection down: those sends had returned 0.
 *
 * Flow control. Besides ring space, a sender may have at most
 * peer recv_depth + own send_depth messages that the receiver has not
 * consumed (the head has not passed them): rdmx_msg_alloc waits for that,
 * and for a free local buffer, up to its timeout (-EAGAIN with 0). The
 * wait for ring space in rdmx_send after the FETCH_ADD is bounded by the
 * connection's liveness_ms: then -ETIMEDOUT naming what it waited for,
 * the message not sent, the connection up; the reservation it leaves
 * unwritten is a hole (next paragraph).
 *
 * Holes. A sender that dies between its FETCH_ADD and its WRITE, gives
 * up waiting for space, or loses its reservation to a stale FETCH_ADD
 * result (recover_stale()) leaves a reservation nobody writes. The
 * receiver skips it: when the scan cursor is reserved (below the tail)
 * but unannounced while any member's record would fit there, a timer
 * runs; after the ring's hole bound (the listener's or dialer's
 * liveness_ms, default 10 s, sent to the senders in the hello) the scan
 * moves to the next announced reservation, bounded by the tail when the
 * timer started (so only reservations that existed then, and had the
 * whole bound to be written, are skipped) and by where a record surely
 * fits. The range is marked skipped and released. Reservations met
 * after that which existed when the timer started share its start. The
 * extent of a hole is unknown (the tail gives no boundaries), so one
 * skip may take several unwritten reservations at once: all were
 * unwritten for the whole bound.
 * The writer of a skipped reservation learns it: before writing, a
 * sender whose reservation is older than a quarter of the bound READs
 * the head, and a head past its reservation means skipped: its
 * connection fails with -ETIMEDOUT saying so (nothing is written); a
 * late announcement for a skipped range fails its writer's connection
 * the same way on the receiver. Residual races, stated: a WRITE posted
 * within a quarter of the bound after its FETCH_ADD that then takes more
 * than three quarters of it to be placed (retransmission storms) may land
 * in a range already skipped and released, and so overwrite a record of
 * the next lap in that place if one is there already (the receiver then
 * fails the late writer, but the overwritten record's bytes are lost or
 * mixed; its stamps no longer match only if the late write covered
 * them). And a sender stopped (SIGSTOP, a debugger) for longer than the
 * bound between its check and its WRITE can do the same. Choose the
 * bound well above the network's worst delay: the default is 10 s.
 *
 * Peer-written memory. Every member can write anywhere in the ring, so
 * the receiver reads a header once (after its stamp) into a local copy,
 * validates the copy (a record's size at most wa_rec_size(max_msg) of the
 * member that announced it, equal to the announced span, and inside the
 * ring; a pad only for a reservation that crosses the ring's end, as a
 * sender writes it) and keeps its own record of every scanned record
 * (struct wa_meta: span, length, immediate, sender, held/released state)
 * outside the ring. Delivery, release and the head advance use only that
 * record, so rewriting a header after it was scanned changes nothing but
 * the bytes the user sees (messages are delivered in place).
 *
 * Trust model and limits. Attribution rests on the QP an announcement
 * arrives on, so a member cannot pose as another. But every member may
 * WRITE (without announcing) anywhere in the ring: it can overwrite the
 * others' records before or after they are scanned, or announce a slot
 * another member reserved (the first announcement wins; if it is the
 * forger's, the honest writer's later one fails the honest writer), or
 * reserve without writing and stall the ring for the hole bound. Members
 * of one ring must trust each other (docs/protocols.md). What
 * holds against any member: no access outside the ring, no length above
 * its announcer's max_msg, no message attributed to a member that did not
 * announce it, no unbounded spin, and a malformed record stops nobody but
 * its writer.
 *
 * Receiving per connection. rdmx_listener_recv() hands out every record
 * in ring order, naming its connection. rdmx_recv(c) on an accepted
 * connection takes c's records in order; a record of another member met
 * on the way is parked for that member (handed out by its rdmx_recv or
 * by rdmx_listener_recv, still in ring order) and holds the head back
 * until then. So every member of a listener must be received from.
 * Records of a member closed meanwhile are skipped.
 *
 * Threading. Receive state of a ring (scan cursor, head, parked queues,
 * member table) is guarded by the ring's mutex, so rdmx_recv on different
 * members, rdmx_listener_recv and rdmx_msg_release may run on different
 * threads. The sending state is per connection (one thread at a time).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/live.h"
#include "core/msg.h"
#include "core/opts.h"
#include "core/post.h"
#include "core/protocol.h"
#include "core/sendpool.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "protocols/write_atomic_priv.h"

#define HELLO_RING_LEN 40    /* ring_encode() */
#define HELLO_REPLY_LEN 44   /* ring_encode() + u32 sender id */

/* ------------------------------------------------------------- setup */

/* The send slots (core send pool) and the scratch words. */
static int alloc_tx(rdmx_conn *c)
{
	struct wa *p = wa_of(c);

	p->sp = (struct rdmx__sendpool){
		.ops = &rdmx__wa_pool_ops,
		.who = "write_atomic",
		.post_what = "a write",
		.n = c->opts.send_depth,
		.stride = wa_rec_size(c->max_msg),
		.data_off = WA_HDR,
		.wr_kind = K_WRITE,
	};
	p->scratch = rdmx__alloc_buf(64);
	if (!p->scratch)
		return rdmx__fail(-ENOMEM, "write_atomic: out of memory for %u send buffers of %zu bytes",
				  p->sp.n, p->sp.stride);
	return rdmx__sendpool_make(c, &p->sp, RDMX__ACCESS_LOCAL);
}

static int create_tx(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	/* every record is announced by a receive completion on the ring's
	 * CQ (shared by a listener's members: who takes another member's
	 * announcement kicks it, write_atomic_ring.c park()) */
	struct rdmx__qp_want w = {
		.send_wr = c->opts.send_depth + 4,
		.send_cqe = c->opts.send_depth + 8, /* p->sp.n + 8 */
		.shared = &p->rx->ann,
	};
	int rc = alloc_tx(c);

	if (!rc)
		rc = c->f->reg_mr(c->ep, p->scratch, 64, RDMX__ACCESS_LOCAL,
				  &p->scratch_mr);
	return rc ? rc : rdmx__qp_make(c, &w);
}

/* The ring this connection receives on: the listener's, made once. */
static int join_shared(rdmx_conn *c)
{
	struct wa_ring *r = c->group->shared;
	int rc = 0;

	pthread_mutex_lock(&c->group->lock);
	if (!r->made) {
		rc = rdmx__wa_ring_make(r, c, c->opts.ring_size);
		if (rc)
			rdmx__wa_ring_unmake(r); /* the next connection tries again */
	}
	pthread_mutex_unlock(&c->group->lock);
	wa_of(c)->rx = r;
	return rc;
}

/* ring_size and notify (IMM refused); with @max_msg, the record fits. */
int rdmx__wa_check_opts(const struct rdmx_protocol_ops *proto,
			 const struct rdmx_conn_opts *o, uint32_t max_msg)
{
	uint64_t rec = wa_rec_size(max_msg);
	int rc = rdmx__check_ring_opts(o);

	(void)proto;
	if (rc)
		return rc;
	if (o->notify > RDMX_NOTIFY_POLL || o->ack != RDMX_ACK_DEFAULT)
		return rdmx__fail(-EINVAL, "write_atomic: notify %u / ack %u are not supported (every record is announced with WRITE_WITH_IMM already and the ring is shared; use the defaults)",
				  o->notify, o->ack);
	if (!max_msg)
		return 0;
	if (2 * rec > o->ring_size)
		return rdmx__fail(-EINVAL, "write_atomic: ring_size %u holds fewer than 2 records of max_msg_size %u (%llu bytes each); raise ring_size or lower max_msg_size",
				  o->ring_size, max_msg, (unsigned long long)rec);
	if (!wa_imm_fits(rec, o->ring_size))
		return rdmx__fail(-EINVAL, "write_atomic: a record of max_msg_size %u and a ring offset of ring_size %u do not fit in one 32-bit immediate; lower one of them",
				  max_msg, o->ring_size);
	return 0;
}

/* On failure the core destroys the ep and the send CQ (qp.h), then calls
 * rdmx__wa_teardown(). */
int rdmx__wa_setup(rdmx_conn *c)
{
	struct wa *p = wa_of(c);
	int rc;

	if (c->group) {
		rc = join_shared(c);
	} else {
		rc = rdmx__wa_ring_make(&p->own, c, c->opts.ring_size);
		p->rx = &p->own;
	}
	if (!rc)
		rc = create_tx(c);
	if (!rc)
		rc = rdmx__wa_ring_join(p->rx, c, &p->rx_id);
	if (!rc)
		p->joined = 1;
	return rc;
}

void rdmx__wa_teardown(rdmx_conn *c)
{
	struct wa *p = wa_of(c);

	if (p->joined)
		rdmx__wa_ring_leave(p->rx, c, p->rx_id);
	if (p->scratch_mr)
		c->f->dereg_mr(p->scratch_mr);
	rdmx__sendpool_unmake(c, &p->sp);
	free(p->scratch);
	rdmx__wa_vq_free(&p->outs);
	rdmx__wa_vq_free(&p->parked);
	if (p->own.made || p->own.buf || p->own.ctrl)
		rdmx__wa_ring_unmake(&p->own);
}

void rdmx__wa_shared_teardown(struct rdmx__group *g)
{
	struct wa_ring *r = g->shared;

	if (r->made || r->buf || r->ctrl)
		rdmx__wa_ring_unmake(r);
}

/* ------------------------------------------------------------- hellos */

/*
 * Ring block (40 bytes): 0 u8 version 1, 1 u8 log2 ring size, 2 u16 the
 * hole bound in 100 ms units (0: unknown, the dialer's liveness_ms),
 * 4 u32 ring rkey, 8 u64 ring addr, 16 u64 tail addr (the head word is
 * HEAD_OFF bytes after it), 24 u32 tail rkey, 28 u32 head rkey, 32 u64
 * salt. The accept reply adds 40 u32: the dialer's sender id.
 */
static void ring_encode(const struct wa_ring *r, uint8_t *b)
{
	uint8_t lg = 0;

	while ((1ull << lg) < r->size)
		lg++;
	memset(b, 0, HELLO_RING_LEN);
	b[0] = 1;
	b[1] = lg;
	b[2] = (uint8_t)(r->hole_ms / 100);
	b[3] = (uint8_t)(r->hole_ms / 100 >> 8);
	rdmx__put_u32(b + 4, r->ring_mr->rkey);
	rdmx__put_u64(b + 8, (uintptr_t)r->buf);
	rdmx__put_u64(b + 16, (uintptr_t)r->ctrl);
	rdmx__put_u32(b + 24, r->tail_mr->rkey);
	rdmx__put_u32(b + 28, r->head_mr->rkey);
	rdmx__put_u64(b + 32, r->salt);
}

static int ring_decode(rdmx_conn *c, const uint8_t *b)
{
	struct wa *p = wa_of(c);

	if (b[0] != 1 || b[1] < 12 || b[1] > 30)
		return rdmx__fail(-EPROTO, "write_atomic: peer's ring block version %u, log2 size %u",
				  b[0], b[1]);
	p->r_size = 1ull << b[1];
	if (2 * wa_rec_size(c->max_msg) > p->r_size ||
	    !wa_imm_fits(wa_rec_size(c->max_msg), p->r_size))
		return rdmx__fail(-EPROTO, "write_atomic: the peer's %llu-byte ring holds fewer than 2 records of %u bytes, or a record's immediate does not fit",
				  (unsigned long long)p->r_size, c->max_msg);
	p->r_hole_ms = (uint32_t)(b[2] | b[3] << 8) * 100;
	if (!p->r_hole_ms)
		p->r_hole_ms = c->opts.liveness_ms;
	p->r_ring_rkey = rdmx__get_u32(b + 4);
	p->r_ring = rdmx__get_u64(b + 8);
	p->r_tail = rdmx__get_u64(b + 16);
	p->r_tail_rkey = rdmx__get_u32(b + 24);
	p->r_head_rkey = rdmx__get_u32(b + 28);
	p->r_salt = rdmx__get_u64(b + 32);
	p->credits = (uint32_t)c->peer_recv_depth + c->opts.send_depth;
	return 0;
}

int rdmx__wa_hello_out(rdmx_conn *c, uint8_t *block, size_t cap, size_t *len)
{
	struct wa *p = wa_of(c);
	size_t need = c->is_server ? HELLO_REPLY_LEN : HELLO_RING_LEN;

	if (cap < need)
		return rdmx__fail(-EMSGSIZE, "write_atomic: hello block needs %zu bytes, %zu free",
				  need, cap);
	ring_encode(p->rx, block);
	if (c->is_server)
		rdmx__put_u32(block + HELLO_RING_LEN, p->rx_id);
	*len = need;
	return 0;
}

int rdmx__wa_hello_in(rdmx_conn *c, const uint8_t *block, size_t len)
{
	struct wa *p = wa_of(c);
	size_t need = c->is_server ? HELLO_RING_LEN : HELLO_REPLY_LEN;

	if (len != need)
		return rdmx__fail(-EPROTO, "write_atomic: %zu-byte protocol block, expected %zu",
				  len, need);
	p->tx_id = c->is_server ? 0 : rdmx__get_u32(block + HELLO_RING_LEN);
	return ring_decode(c, block);
}

/* Registered per accepted connection: its send slots (the ring is shared). */
uint64_t rdmx__wa_mem_estimate(const rdmx_conn *c)
{
	return wa_rec_size(c->max_msg) * c->opts.send_depth + 64;
}
