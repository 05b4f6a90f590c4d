/* SPDX-License-Identifier: MIT */
/*
 * buffered_read: the receiver pulls. No verbs on the send path.
 *
 * The sender copies nothing and posts nothing: rdmx_msg_alloc hands out
 * the next record's payload bytes in the sender's own ring (ring_size
 * bytes, double-mapped when the system allows, registered for remote
 * READ), rdmx_send stamps header and footer around them (the ring
 * protocols' record format, core/ring.h) and publishes the new tail with
 * a release store into its control block. The receiver RDMA-READs the
 * sender's tail word, then the whole new section [fetched, tail) in ONE
 * READ (two where a ring is not double-mapped and the section crosses the
 * end) into its mirror ring at the same offsets, and hands the records out
 * in place. Its progress (bytes fetched, bytes and records released) it
 * publishes in its own control block, and writes back into the sender's
 * with one 24-byte RDMA WRITE now and then: when the released bytes since
 * the last report reach a third of the ring or the released records half
 * the sender's window (the receiver's recv_depth). A sender that would
 * block (no room, or rdmx_flush) does not wait for a report: it RDMA-READs
 * the receiver's published progress itself, so it never depends on the
 * receiving application calling in.
 *
 * Trust. The tail, the records and the progress words are written by the
 * peer and read once. rxe reads memory with a byte copy, so a tail READ
 * racing the sender's store can return a value mixing old and new bytes:
 * the tail word carries its complement, as the progress words do
 * (buffered_read.h), and a torn one is read again - never taken, as a
 * mixed value can run past what was written, and the receiver would
 * report as fetched records it read before they were there (the sender's
 * rdmx_flush would return and a close lose them). The receiver widens the
 * low 32 bits against what it fetched. A tail is still only a hint of how
 * much to READ: every record is taken only when its stamps (a hash of its
 * offset and the sender's seed) match, and a record that does not match
 * below the tail makes the receiver read the tail again from that record
 * on. A tail beyond what the ring can hold is clamped to it. A record with a length above max_msg, or
 * more records unreleased than the window, fails the connection. Progress
 * words carry their complement (buffered_read.h): a torn copy is not
 * taken, and a count behind what the sender knew is ignored.
 *
 * Sleeping receivers. The sender posts nothing, so a receiver that sleeps
 * on its wait set (wait modes block and adaptive, rdmx_conn_fd) is woken
 * by a doorbell (core/doorbell.h): before it sleeps it WRITEs its sleep
 * count into the sender's control block and, once that completed, READs
 * the tail once more; the sender, after its release store of a new tail,
 * reads that word once (a full fence between) and posts a 0-byte SEND
 * into one of the RDMX__BR_BELLS receives the receiver keeps posted when
 * it holds a count not rung for. The tail store comes before the read and
 * the count's placement before the receiver's last tail READ, so either
 * that READ sees the tail or the sender sees the count; the sender need
 * not call again. A sender waiting for room or for rdmx_flush READs the
 * receiver's progress in timed steps (nothing rings for it).
 *
 * Costs: receiving pays a READ round trip (two READs when something is
 * there) where the push protocols pay none: small-message latency is the
 * worst of the set. Many small messages go out with no work request at
 * all and come in a whole section per READ: implicit batching, the best
 * small-message rate. rdmx_flush waits until the receiver has fetched
 * everything sent (it needs a receiving peer); after that the sender may
 * close without losing a message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/qp.h"
#include "core/wire.h"
#include "buffered_read.h"
#include "buffered_read_priv.h"

#define BLOCK_LEN 40
#define HELLO_MAGIC 0x1
#define N_WRS (5 + RDMX__BR_REPS + RDMX__BR_BELLS) /* tail READ, two data
				   * READs, a progress READ, reports, our
				   * count's WRITE, doorbells */

/* ---------------------------------------------------------------- setup */

static int map_rings(rdmx_conn *c, struct br *p)
{
	size_t size = c->opts.ring_size;
	int rc;

	p->ring = rdmx__ring_map(size, 1);
	p->ring_magic = p->ring != NULL;
	if (!p->ring)
		p->ring = rdmx__ring_map(size, 0);
	p->mirror = p->ring ? rdmx__ring_map(size, 1) : NULL;
	p->mirror_magic = p->mirror != NULL;
	if (p->ring && !p->mirror)
		p->mirror = rdmx__ring_map(size, 0);
	if (!p->mirror)
		return -ENOMEM;
	rc = c->f->reg_mr(c->ep, p->ring, p->ring_magic ? 2 * size : size,
			  RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ, &p->ring_mr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->mirror, p->mirror_magic ? 2 * size : size,
				  RDMX__ACCESS_LOCAL, &p->mirror_mr);
	return rc;
}

static int create_queues(rdmx_conn *c)
{
	/* receives: the doorbells */
	struct rdmx__qp_want w = { .send_wr = N_WRS, .recv_wr = RDMX__BR_BELLS };
	int rc = rdmx__qp_make(c, &w);

	for (uint32_t i = 0; !rc && i < RDMX__BR_BELLS; i++)
		rc = rdmx__br_post_bell_recv(c, i);
	return rc;
}

void rdmx__br_teardown(rdmx_conn *c)
{
	struct br *p = br_of(c);
	size_t size = c->opts.ring_size;

	if (p->ctl_mr)
		c->f->dereg_mr(p->ctl_mr);
	if (p->mirror_mr)
		c->f->dereg_mr(p->mirror_mr);
	if (p->ring_mr)
		c->f->dereg_mr(p->ring_mr);
	rdmx__ring_unmap(p->mirror, size, p->mirror_magic);
	rdmx__ring_unmap(p->ring, size, p->ring_magic);
	free(p->ctl);
	rdmx__ring_rel_free(&p->rel);
}

/* On failure the core destroys the ep (and QP) and its CQs first, then
 * calls rdmx__br_teardown(), which copes with a half-made setup. */
int rdmx__br_setup(rdmx_conn *c)
{
	struct br *p = br_of(c);
	int rc;

	p->seed = rdmx__ring_seed();
	p->ctl = rdmx__alloc_buf(sizeof(*p->ctl));
	if (!p->ctl || rdmx__ring_rel_init(&p->rel, c->opts.recv_depth))
		return rdmx__fail(-ENOMEM, "buffered_read: out of memory");
	p->ctl->tail = rdmx__cword((uint32_t)0);
	rc = map_rings(c, p);
	if (!rc)
		rc = rdmx__ring_geo_init(&p->geo, c->opts.ring_size, p->ring_magic);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->ctl, sizeof(*p->ctl),
				  RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ |
				  RDMX__ACCESS_WRITE, &p->ctl_mr);
	if (!rc)
		rc = create_queues(c);
	return rc;
}

/* Block: ring address (8), rkey (4), size (4), seed (8), control block
 * address (8), rkey (4), flags (1), 3 zero bytes. */
int rdmx__br_hello_out(rdmx_conn *c, uint8_t *b, size_t cap, size_t *len)
{
	struct br *p = br_of(c);

	if (cap < BLOCK_LEN)
		return -ENOSPC;
	memset(b, 0, BLOCK_LEN);
	rdmx__put_u64(b, (uintptr_t)p->ring);
	rdmx__put_u32(b + 8, p->ring_mr->rkey);
	rdmx__put_u32(b + 12, c->opts.ring_size);
	rdmx__put_u64(b + 16, p->seed);
	rdmx__put_u64(b + 24, (uintptr_t)p->ctl);
	rdmx__put_u32(b + 32, p->ctl_mr->rkey);
	b[36] = p->ring_magic ? HELLO_MAGIC : 0;
	*len = BLOCK_LEN;
	return 0;
}

int rdmx__br_hello_in(rdmx_conn *c, const uint8_t *b, size_t len)
{
	struct br *p = br_of(c);
	uint32_t size;

	if (len != BLOCK_LEN)
		return rdmx__fail(-EPROTO, "buffered_read: %zu-byte protocol block, expected %d",
				  len, BLOCK_LEN);
	size = rdmx__get_u32(b + 12);
	p->peer_magic = b[36] & HELLO_MAGIC;
	if (rdmx__ring_geo_init(&p->pgeo, size, p->peer_magic) ||
	    size != c->opts.ring_size)
		return rdmx__fail(-EPROTO, "buffered_read: the peer's ring is %u bytes, ours %u",
				  size, c->opts.ring_size);
	p->peer_ring = rdmx__get_u64(b);
	p->peer_ring_rkey = rdmx__get_u32(b + 8);
	p->pseed = rdmx__get_u64(b + 16);
	p->peer_ctl = rdmx__get_u64(b + 24);
	p->peer_ctl_rkey = rdmx__get_u32(b + 32);
	p->win_out = c->peer_recv_depth ? c->peer_recv_depth : 1;
	return 0;
}

int rdmx__br_check_opts(const struct rdmx_protocol_ops *proto,
			 const struct rdmx_conn_opts *o, uint32_t max_msg)
{
	uint64_t rec = rdmx__ring_rec_size(max_msg);
	int rc = rdmx__check_ring_opts(o);

	if (rc)
		return rc;
	if (max_msg && 2 * rec > o->ring_size)
		return rdmx__fail(-EINVAL, "%s: ring_size %u cannot hold two records of max_msg_size %u (needs %llu bytes)",
				  proto->name, o->ring_size, max_msg,
				  (unsigned long long)(2 * rec));
	if (o->notify > RDMX_NOTIFY_POLL || o->ack != RDMX_ACK_DEFAULT)
		return rdmx__fail(-EINVAL, "%s: the receiver pulls whole sections by READ: notify %u / ack %u do not apply (only notify poll, ack default)",
				  proto->name, o->notify, o->ack);
	return 0;
}

struct rdmx__br_ctl *rdmx__br_ctl_of(rdmx_conn *c)
{
	return br_of(c)->ctl;
}

void rdmx__br_bells(rdmx_conn *c, uint64_t *sent, uint64_t *recv)
{
	*sent = br_of(c)->bells_sent;
	*recv = br_of(c)->bells_recv;
}

uint8_t *rdmx__br_ring(rdmx_conn *c, uint64_t *seed)
{
	*seed = br_of(c)->seed;
	return br_of(c)->ring;
}

/* Registered per connection: two rings (the mirror and ours). */
uint64_t rdmx__br_mem_estimate(const rdmx_conn *c)
{
	return 2 * (uint64_t)c->opts.ring_size + sizeof(struct rdmx__br_ctl);
}
