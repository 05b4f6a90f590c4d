/* SPDX-License-Identifier: MIT */
/*
 * read: the receiver pulls. For large messages: the payload never crosses
 * the receiver's receive queue, it is fetched with one RDMA READ straight
 * into a receive buffer, and the sender's buffer is zero copy both ways.
 * Both directions run on one RC connection; each side is sender and
 * receiver.
 *
 * Sender: send_depth buffers of max_msg bytes, registered for remote READ
 * (the core's send pool, core/sendpool.h, holding a slot until its ack);
 * the user fills one in place (rdmx_msg_alloc). rdmx_send posts one small
 * signaled SEND carrying a 32-byte descriptor (below). The buffer stays
 * the sender's until the receiver acknowledges it.
 *
 * Receiver: posts desc_depth receives for descriptors. For each descriptor,
 * in arrival order, it takes one of its recv_depth receive buffers, posts
 * an RDMA READ of the payload into it and, once the READ completed,
 * acknowledges: an RDMA WRITE of the descriptor's generation into the
 * sender's ack slot for that buffer (u64 per send buffer; address and rkey
 * come in the hello block). The receive buffer is handed to the user in
 * place and reused on rdmx_msg_release. Messages are delivered in the order
 * their descriptors arrived, whatever order READ completions are seen in.
 *
 * Why the ack is a WRITE and not a SEND: it needs no receive posted on the
 * sender (no RNR, no receive buffers, no credits for acks), it does not mix
 * with the peer's descriptors in the sender's receive queue (which would
 * break their in-order delivery and the credit count), and the sender polls
 * its ack word (acquire load) only when it waits for a buffer. The
 * generation (per-buffer use count, never 0) makes a stale ack harmless.
 * Acks go behind the data: a message's ack is posted at the receiver's next
 * call after rdmx_recv handed it out (after the SEND of an rdmx_send, in
 * rdmx_msg_release, or when a wait finds nothing to do), so a reply is not
 * queued behind the ack of the request it answers.
 *
 * Eager payloads: a payload of at most the receiver's eager_max (its
 * opts.eager_max, 1 KiB by default, or max_msg if smaller; announced in
 * the hello; 0 turns eager off) travels in the same SEND, right after
 * the descriptor (the descriptor sits just before the payload in every send
 * buffer, so one SGE covers both). The receiver copies it into a receive
 * buffer and acknowledges as for a READ. Small messages thus cost one SEND
 * and no round trip; and they are in the receiver's memory as soon as the
 * SEND completed, so a sender may flush and close and the receiver still
 * gets them (a READ needs the sender to be alive until the ack).
 *
 * Flow control: a side holds up to desc_depth = max(recv_depth, send_depth)
 * descriptors it has not acknowledged yet (a receive posted for each) and
 * says so in its hello. A sender never has more descriptors unacknowledged
 * than that (its credits; a credit comes back with the ack), and
 * rdmx_msg_alloc reserves one, so every descriptor finds a receive posted:
 * no RNR in any state, nothing queued on the sender. Back-pressure is
 * rdmx_msg_alloc waiting (-ETIMEDOUT, -EAGAIN for timeout 0) for a buffer
 * that is both free and covered by a credit. A receiver whose buffers are
 * all held by the user leaves descriptors waiting (acknowledged later);
 * nothing is overwritten or dropped.
 *
 * READ depth: both sides ask rdma_cm for READ_DEPTH outstanding READs
 * (initiator depth and responder resources, clamped to the device), and
 * advertise it; a receiver keeps at most min(own, peer's) READs in flight
 * and leaves further descriptors waiting in its queue.
 *
 * Completion model: rdmx_flush returns once every message sent is in the
 * receiver's memory: a READ message when its ack arrived (so flushing needs
 * the receiver to be calling rdmx_recv, rdmx_msg_alloc or rdmx_flush), an
 * eager one when its SEND completed. A sender that closes with READ
 * messages unacknowledged loses them.
 *
 * Descriptor (32 bytes, little-endian), the head of every SEND:
 *   0  u8  type: 1 READ (payload in the sender), 2 EAGER (payload follows)
 *   1  u8  flags: bit 0 = imm valid (RDMX_MSG_IMM)
 *   2  u16 sender buffer index (= ack slot)
 *   4  u32 generation of that buffer (never 0)
 *   8  u64 READ: payload address in the sender; EAGER: 0
 *  16  u32 READ: rkey of the sender's buffers; EAGER: 0
 *  20  u32 payload length
 *  24  u32 immediate data
 *  28  u32 reserved, 0
 *
 * Hello block (24 bytes, little-endian, same in request and reply):
 *   0  u8  block version (1)
 *   1  u8  READs this side answers at once (rd_atomic)
 *   2  u16 desc_depth: descriptors this side can hold (peer's credits)
 *   4  u16 send_depth: send buffers = entries in the ack array
 *   6  u16 eager_max: largest payload carried in a descriptor
 *   8  u32 rkey of the ack array
 *  12  u32 reserved, 0
 *  16  u64 address of the ack array (u64 LE generation per send buffer)
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
#include "core/qp.h"
#include "core/wait.h"
#include "core/waitset.h"
#include "core/wire.h"
#include "core/sendpool.h"
#include "protocols/read.h"

#define READ_DEPTH 16     /* READs in flight asked for (rd_atomic) */
#define SLOT_ALIGN 64
#define DESC_OFF (SLOT_ALIGN - RDMX__READ_DESC_SIZE) /* in a send buffer */
#define DATA_OFF SLOT_ALIGN
#define WC_BATCH 16
#define DEPTH_MAX 16384u
#define NO_BUF UINT32_MAX

enum { RB_FREE, RB_BUSY, RB_HELD };     /* receive buffer */
enum { M_WAIT, M_READING, M_READY };    /* descriptor received */
enum { WR_DESC = 1, WR_READ, WR_ACK, WR_RX }; /* wr_id >> 32 */

struct tx {
	uint32_t gen;
	uint8_t eager;
	uint8_t acked;  /* ack seen (credit back); SEND completed: the pool's */
};

struct rmsg {
	struct rdmx__read_desc d;
	uint32_t rx;    /* descriptor receive holding it */
	uint32_t buf;   /* receive buffer, NO_BUF before one is taken */
	uint8_t state;
};

struct ackreq {
	uint32_t slot, gen;
};

struct rd {
	/* sending */
	struct rdmx__sendpool sp;  /* send buffers, held until acked */
	uint32_t nsend;
	struct tx *tx;
	uint32_t *posted, nposted; /* buffers posted, not given back */
	uint32_t unacked;          /* posted, not acked: with sp.nalloc, the
				    * credits used */
	uint64_t *ack;             /* the peer WRITEs generations here */
	struct rdmx__mr *ackmr;

	/* the peer */
	struct rdmx__read_hello peer;
	uint32_t read_limit;

	/* receiving */
	uint8_t *dbuf;             /* descriptor receives */
	struct rdmx__mr *dmr;
	size_t dstride;
	uint32_t ndesc, eager_cap;
	uint8_t *rbuf;             /* receive buffers */
	struct rdmx__mr *rmr;
	size_t rstride;
	uint32_t nrecv;
	uint8_t *rstate;
	uint32_t *free_rb, nfree_rb;
	struct rmsg *fifo;         /* descriptors in arrival order */
	uint32_t fcap, fhead, fcount;
	uint32_t fstarted;         /* fifo entries from the head under way */
	uint32_t reads;            /* READs in flight */
	struct ackreq *ackq;       /* acks not posted yet, ndesc entries */
	uint32_t aq_head, aq_count;
	uint32_t acks;             /* ack WRITEs in flight */
	uint64_t *acksrc;          /* ack WRITE sources, per peer buffer */
	struct rdmx__mr *acksrcmr;
};

RDMX__SENDPOOL_FIRST(struct rd, sp);

static struct rd *rd_of(rdmx_conn *c)
{
	return c->priv;
}

static const struct rdmx__sendpool_ops rd_pool_ops; /* below */

static uint64_t wr_id(unsigned kind, uint32_t idx)
{
	return ((uint64_t)kind << 32) | idx;
}

static size_t align_up(size_t n)
{
	return (n + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
}

/* ----------------------------------------------------------- wire formats */

void rdmx__read_desc_encode(const struct rdmx__read_desc *d, uint8_t *b)
{
	b[0] = d->type;
	b[1] = d->flags;
	rdmx__put_u16(b + 2, d->slot);
	rdmx__put_u32(b + 4, d->gen);
	rdmx__put_u64(b + 8, d->addr);
	rdmx__put_u32(b + 16, d->rkey);
	rdmx__put_u32(b + 20, d->len);
	rdmx__put_u32(b + 24, d->imm);
	rdmx__put_u32(b + 28, 0);
}

int rdmx__read_desc_decode(const uint8_t *b, struct rdmx__read_desc *d)
{
	d->type = b[0];
	d->flags = b[1];
	d->slot = rdmx__get_u16(b + 2);
	d->gen = rdmx__get_u32(b + 4);
	d->addr = rdmx__get_u64(b + 8);
	d->rkey = rdmx__get_u32(b + 16);
	d->len = rdmx__get_u32(b + 20);
	d->imm = rdmx__get_u32(b + 24);
	if (d->type != RDMX__READ_DESC_READ && d->type != RDMX__READ_DESC_EAGER)
		return rdmx__fail(-EPROTO, "read: descriptor of unknown type %u", d->type);
	if (d->flags & ~RDMX__READ_DESC_IMM)
		return rdmx__fail(-EPROTO, "read: descriptor with unknown flags 0x%x", d->flags);
	if (rdmx__get_u32(b + 28))
		return rdmx__fail(-EPROTO, "read: descriptor with reserved bytes set");
	if (!d->gen)
		return rdmx__fail(-EPROTO, "read: descriptor with generation 0");
	return 0;
}

void rdmx__read_hello_encode(const struct rdmx__read_hello *h, uint8_t *b)
{
	b[0] = h->version;
	b[1] = h->rd_atomic;
	rdmx__put_u16(b + 2, h->desc_depth);
	rdmx__put_u16(b + 4, h->send_depth);
	rdmx__put_u16(b + 6, h->eager_max);
	rdmx__put_u32(b + 8, h->ack_rkey);
	rdmx__put_u32(b + 12, 0);
	rdmx__put_u64(b + 16, h->ack_addr);
}

/* The values a peer must have for this side to talk to it. */
static int hello_check(const struct rdmx__read_hello *h)
{
	if (!h->desc_depth || h->desc_depth > DEPTH_MAX)
		return rdmx__fail(-EPROTO, "read: peer can hold %u descriptors (1..%u)",
				  h->desc_depth, DEPTH_MAX);
	if (!h->send_depth || h->send_depth > DEPTH_MAX)
		return rdmx__fail(-EPROTO, "read: peer has %u send buffers (1..%u)",
				  h->send_depth, DEPTH_MAX);
	if (!h->rd_atomic)
		return rdmx__fail(-EPROTO, "read: peer answers no RDMA READ (rd_atomic 0)");
	if (!h->ack_addr)
		return rdmx__fail(-EPROTO, "read: peer sent no ack array address");
	return 0;
}

int rdmx__read_hello_decode(const uint8_t *b, size_t len,
			    struct rdmx__read_hello *h)
{
	if (len != RDMX__READ_HELLO_SIZE)
		return rdmx__fail(-EPROTO, "read: peer's hello block is %zu bytes, this side expects %d",
				  len, RDMX__READ_HELLO_SIZE);
	h->version = b[0];
	if (h->version != RDMX__READ_HELLO_VERSION)
		return rdmx__fail(-EPROTO, "read: hello block version mismatch: peer %u, this side %u",
				  h->version, RDMX__READ_HELLO_VERSION);
	if (rdmx__get_u32(b + 12))
		return rdmx__fail(-EPROTO, "read: peer's hello block has reserved bytes set");
	h->rd_atomic = b[1];
	h->desc_depth = rdmx__get_u16(b + 2);
	h->send_depth = rdmx__get_u16(b + 4);
	h->eager_max = rdmx__get_u16(b + 6);
	h->ack_rkey = rdmx__get_u32(b + 8);
	h->ack_addr = rdmx__get_u64(b + 16);
	return hello_check(h);
}

/* ---------------------------------------------------------------- setup */

static int post_rx(rdmx_conn *c, uint32_t idx)
{
	struct rd *p = rd_of(c);
	struct rdmx__wr wr = {
		.wr_id = wr_id(WR_RX, idx),
		.op = RDMX__OP_RECV,
		.addr = p->dbuf + (size_t)idx * p->dstride,
		.len = (uint32_t)p->dstride,
		.lkey = p->dmr->lkey,
	};

	return rdmx__post_recv(c, &wr, 1);
}

static int alloc_send_side(struct rd *p)
{
	p->ack = rdmx__alloc_buf(sizeof(*p->ack) * p->nsend);
	p->tx = calloc(p->nsend, sizeof(*p->tx));
	p->posted = calloc(p->nsend, sizeof(*p->posted));
	if (!p->ack || !p->tx || !p->posted)
		return rdmx__fail(-ENOMEM, "read: out of memory for %u send buffers of %zu bytes",
				  p->nsend, p->sp.stride);
	return 0;
}

static int alloc_recv_side(struct rd *p)
{
	p->dbuf = rdmx__alloc_buf(p->dstride * p->ndesc);
	p->rbuf = rdmx__alloc_buf(p->rstride * p->nrecv);
	p->rstate = calloc(p->nrecv, 1);
	p->free_rb = calloc(p->nrecv, sizeof(*p->free_rb));
	p->fifo = calloc(p->fcap, sizeof(*p->fifo));
	p->ackq = calloc(p->ndesc, sizeof(*p->ackq));
	if (!p->dbuf || !p->rbuf || !p->rstate || !p->free_rb || !p->fifo || !p->ackq)
		return rdmx__fail(-ENOMEM, "read: out of memory for %u receive buffers of %zu bytes",
				  p->nrecv, p->rstride);
	for (uint32_t i = 0; i < p->nrecv; i++)
		p->free_rb[i] = p->nrecv - 1 - i;
	p->nfree_rb = p->nrecv;
	return 0;
}

static int register_all(rdmx_conn *c)
{
	struct rd *p = rd_of(c);
	int rc;

	rc = c->f->reg_mr(c->ep, p->ack, sizeof(*p->ack) * p->nsend,
			  RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE, &p->ackmr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->dbuf, p->dstride * p->ndesc,
				  RDMX__ACCESS_LOCAL, &p->dmr);
	if (!rc)
		rc = c->f->reg_mr(c->ep, p->rbuf, p->rstride * p->nrecv,
				  RDMX__ACCESS_LOCAL, &p->rmr);
	return rc;
}

/* Every WR is signaled: descriptor SENDs (one per send buffer, freed only
 * once polled), READs (read_limit) and ack WRITEs (ndesc) bound the queue. */
static int create_queues(rdmx_conn *c)
{
	struct rd *p = rd_of(c);
	struct rdmx__qp_want w = {
		.send_wr = p->nsend + READ_DEPTH + p->ndesc,
		.recv_wr = p->ndesc,
		.rd_atomic = READ_DEPTH,
	};

	return rdmx__qp_make(c, &w);
}

static void rd_teardown(rdmx_conn *c)
{
	struct rd *p = rd_of(c);
	struct rdmx__mr *mrs[] = { p->ackmr, p->dmr, p->rmr, p->acksrcmr };
	void *mem[] = { p->ack, p->tx, p->posted, p->dbuf, p->rbuf, p->rstate,
			p->free_rb, p->fifo, p->ackq, p->acksrc };

	for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
		if (mrs[i])
			c->f->dereg_mr(mrs[i]);
	for (size_t i = 0; i < sizeof(mem) / sizeof(mem[0]); i++)
		free(mem[i]);
	rdmx__sendpool_unmake(c, &p->sp);
}

/* On failure the core destroys the ep and the CQs (qp.h) first, then
 * calls rd_teardown(), which copes with a half-made setup. */
static int rd_setup(rdmx_conn *c)
{
	struct rd *p = rd_of(c);
	int rc;

	p->nsend = c->opts.send_depth;
	p->nrecv = c->opts.recv_depth;
	p->ndesc = p->nsend > p->nrecv ? p->nsend : p->nrecv;
	p->eager_cap = c->max_msg < c->opts.eager_max ? c->max_msg : c->opts.eager_max;
	p->sp = (struct rdmx__sendpool){
		.ops = &rd_pool_ops,
		.who = "read",
		.post_what = "a descriptor",
		.n = p->nsend,
		.stride = align_up(DATA_OFF + (size_t)c->max_msg),
		.data_off = DATA_OFF,
		.wr_kind = WR_DESC,
		.hold = 1,
	};
	p->dstride = align_up(RDMX__READ_DESC_SIZE + (size_t)p->eager_cap);
	p->rstride = align_up(c->max_msg);
	p->fcap = p->ndesc + p->nrecv;
	rc = rdmx__sendpool_make(c, &p->sp, RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ);
	if (!rc)
		rc = alloc_send_side(p);
	if (!rc)
		rc = alloc_recv_side(p);
	if (!rc)
		rc = register_all(c);
	if (!rc)
		rc = create_queues(c);
	for (uint32_t i = 0; !rc && i < p->ndesc; i++)
		rc = post_rx(c, i);
	return rc;
}

static int rd_hello_out(rdmx_conn *c, uint8_t *block, size_t cap, size_t *len)
{
	struct rd *p = rd_of(c);
	struct rdmx__read_hello h = {
		.version = RDMX__READ_HELLO_VERSION,
		.rd_atomic = READ_DEPTH,
		.desc_depth = (uint16_t)p->ndesc,
		.send_depth = (uint16_t)p->nsend,
		.eager_max = (uint16_t)p->eager_cap,
		.ack_rkey = p->ackmr->rkey,
		.ack_addr = (uintptr_t)p->ack,
	};

	if (cap < RDMX__READ_HELLO_SIZE)
		return rdmx__fail(-EMSGSIZE, "read: hello block of %d bytes does not fit in %zu",
				  RDMX__READ_HELLO_SIZE, cap);
	rdmx__read_hello_encode(&h, block);
	*len = RDMX__READ_HELLO_SIZE;
	return 0;
}

/* Adopt the peer's limits; ack WRITE sources are one per peer buffer. */
static int rd_hello_in(rdmx_conn *c, const uint8_t *block, size_t len)
{
	struct rd *p = rd_of(c);
	int rc = rdmx__read_hello_decode(block, len, &p->peer);

	if (rc)
		return rc;
	p->read_limit = p->peer.rd_atomic < READ_DEPTH ? p->peer.rd_atomic : READ_DEPTH;
	p->acksrc = rdmx__alloc_buf(sizeof(*p->acksrc) * p->peer.send_depth);
	if (!p->acksrc)
		return rdmx__fail(-ENOMEM, "read: out of memory for %u ack sources",
				  p->peer.send_depth);
	return c->f->reg_mr(c->ep, p->acksrc, sizeof(*p->acksrc) * p->peer.send_depth,
			    RDMX__ACCESS_LOCAL, &p->acksrcmr);
}

/* -------------------------------------------------------------- acking */

/* Queue an ack for the peer's buffer @slot (dropped once down). */
static int ack_push(rdmx_conn *c, uint32_t slot, uint32_t gen)
{
	struct rd *p = rd_of(c);

	if (c->state == RDMX__CONN_DOWN)
		return 0;
	if (p->aq_count == p->ndesc)
		return rdmx__conn_down(c, -EPROTO, "read: peer has more than the %u descriptors it was allowed",
				       p->ndesc);
	p->ackq[(p->aq_head + p->aq_count++) % p->ndesc] = (struct ackreq){ slot, gen };
	return 0;
}

/* Post queued acks: an RDMA WRITE of the generation into the ack slot. */
static void ack_flush(rdmx_conn *c)
{
	struct rd *p = rd_of(c);

	while (p->aq_count && p->acks < p->ndesc && c->state != RDMX__CONN_DOWN) {
		struct ackreq *a = &p->ackq[p->aq_head];
		struct rdmx__wr wr = {
			.wr_id = wr_id(WR_ACK, a->slot),
			.op = RDMX__OP_WRITE,
			.flags = RDMX__WR_SIGNALED,
			.addr = &p->acksrc[a->slot],
			.len = sizeof(uint64_t),
			.lkey = p->acksrcmr->lkey,
			.remote_addr = p->peer.ack_addr + (uint64_t)a->slot * sizeof(uint64_t),
			.rkey = p->peer.ack_rkey,
		};

		rdmx__put_u64((uint8_t *)&p->acksrc[a->slot], a->gen);
		if (rdmx__post_send(c, &wr, 1)) {
			rdmx__conn_down(c, -EIO, "read: posting an ack: %s", rdmx__last());
			return;
		}
		p->acks++;
		p->aq_head = (p->aq_head + 1) % p->ndesc;
		p->aq_count--;
	}
}

/* ------------------------------------------------------------ receiving */

static struct rmsg *fifo_at(struct rd *p, uint32_t i)
{
	return &p->fifo[(p->fhead + i) % p->fcap];
}

static uint32_t rb_take(struct rd *p)
{
	uint32_t b = p->free_rb[--p->nfree_rb];

	p->rstate[b] = RB_BUSY;
	return b;
}

static void rb_free(struct rd *p, uint32_t b)
{
	p->rstate[b] = RB_FREE;
	p->free_rb[p->nfree_rb++] = b;
}

/* Check a descriptor against what this side allowed the peer. */
static int desc_parse(rdmx_conn *c, const uint8_t *buf, uint32_t byte_len,
		      struct rdmx__read_desc *d)
{
	struct rd *p = rd_of(c);
	int eager;

	if (byte_len < RDMX__READ_DESC_SIZE)
		return rdmx__fail(-EPROTO, "read: %u-byte descriptor", byte_len);
	if (rdmx__read_desc_decode(buf, d))
		return -EPROTO;
	eager = d->type == RDMX__READ_DESC_EAGER;
	if (d->slot >= p->peer.send_depth)
		return rdmx__fail(-EPROTO, "read: descriptor for buffer %u of a peer with %u",
				  d->slot, p->peer.send_depth);
	if (d->len > c->max_msg || (eager && d->len > p->eager_cap))
		return rdmx__fail(-EPROTO, "read: %s descriptor of %u bytes exceeds %u",
				  eager ? "eager" : "READ", d->len,
				  eager ? p->eager_cap : c->max_msg);
	if (byte_len != RDMX__READ_DESC_SIZE + (eager ? d->len : 0))
		return rdmx__fail(-EPROTO, "read: descriptor of %u bytes arrived in %u",
				  d->len, byte_len);
	return 0;
}

/* A descriptor arrived: queue it in arrival order. A READ descriptor's
 * receive is reposted at once; an eager one's once its payload is copied. */
static int on_desc(rdmx_conn *c, const struct rdmx__wc *wc)
{
	struct rd *p = rd_of(c);
	uint32_t rx = (uint32_t)wc->wr_id;
	struct rdmx__read_desc d;
	struct rmsg *m;

	if (wc->status == RDMX__WC_FLUSHED)
		return rdmx__conn_flushed(c);
	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "descriptor receive");
	if (desc_parse(c, p->dbuf + (size_t)rx * p->dstride, wc->byte_len, &d))
		return rdmx__conn_down(c, -EPROTO, "%s", rdmx__last());
	if (p->fcount == p->fcap)
		return rdmx__conn_down(c, -EPROTO, "read: peer sent more descriptors than allowed");
	m = fifo_at(p, p->fcount++);
	*m = (struct rmsg){ .d = d, .rx = rx, .buf = NO_BUF, .state = M_WAIT };
	if (d.type == RDMX__READ_DESC_READ && c->state != RDMX__CONN_DOWN &&
	    post_rx(c, rx))
		return rdmx__conn_down(c, -EIO, "read: reposting a receive: %s", rdmx__last());
	return 0;
}

static int reap_rq(rdmx_conn *c)
{
	struct rdmx__wc wc[WC_BATCH];
	int n = c->f->poll_cq(c->qp.rcq, wc, WC_BATCH), err = 0, rc;

	if (n < 0)
		return rdmx__conn_down(c, n, "polling receive completions: %s", rdmx__last());
	for (int i = 0; i < n; i++)
		if ((rc = on_desc(c, &wc[i])) && !err)
			err = rc;
	return err;
}

/* An eager payload: copy it out of its descriptor receive, repost that. */
static void rx_eager(rdmx_conn *c, struct rmsg *m)
{
	struct rd *p = rd_of(c);

	m->buf = rb_take(p);
	memcpy(p->rbuf + (size_t)m->buf * p->rstride,
	       p->dbuf + (size_t)m->rx * p->dstride + RDMX__READ_DESC_SIZE, m->d.len);
	m->state = M_READY;
	if (c->state != RDMX__CONN_DOWN && post_rx(c, m->rx))
		rdmx__conn_down(c, -EIO, "read: reposting a receive: %s", rdmx__last());
	ack_push(c, m->d.slot, m->d.gen);
}

/* Start the READ of @m (fifo entry @i); nonzero when it cannot start now. */
static int rx_read(rdmx_conn *c, struct rmsg *m, uint32_t i)
{
	struct rd *p = rd_of(c);
	struct rdmx__wr wr = {
		.wr_id = wr_id(WR_READ, (p->fhead + i) % p->fcap),
		.op = RDMX__OP_READ,
		.flags = RDMX__WR_SIGNALED,
		.len = m->d.len,
		.lkey = p->rmr->lkey,
		.remote_addr = m->d.addr,
		.rkey = m->d.rkey,
	};

	if (c->state == RDMX__CONN_DOWN || p->reads >= p->read_limit)
		return 1;
	m->buf = rb_take(p);
	wr.addr = p->rbuf + (size_t)m->buf * p->rstride;
	if (rdmx__post_send(c, &wr, 1)) {
		rb_free(p, m->buf);
		m->buf = NO_BUF;
		rdmx__conn_down(c, -EIO, "read: posting an RDMA READ: %s", rdmx__last());
		return 1;
	}
	p->reads++;
	m->state = M_READING;
	return 0;
}

/* Give waiting descriptors a receive buffer, in arrival order. */
static void rx_start(rdmx_conn *c)
{
	struct rd *p = rd_of(c);

	while (p->fstarted < p->fcount && p->nfree_rb) {
		struct rmsg *m = fifo_at(p, p->fstarted);

		if (m->d.type == RDMX__READ_DESC_EAGER)
			rx_eager(c, m);
		else if (rx_read(c, m, p->fstarted))
			return;
		p->fstarted++;
	}
}

/* Hand the oldest descriptor's buffer to the user once its data is in. */
static int rx_deliver(rdmx_conn *c, struct rdmx_msg *out)
{
	struct rd *p = rd_of(c);
	struct rmsg *m = fifo_at(p, 0);

	if (!p->fcount || m->state != M_READY)
		return 0;
	p->rstate[m->buf] = RB_HELD;
	out->data = p->rbuf + (size_t)m->buf * p->rstride;
	out->len = m->d.len;
	out->cap = m->d.len;
	out->imm = (m->d.flags & RDMX__READ_DESC_IMM) ? m->d.imm : 0;
	out->flags = (m->d.flags & RDMX__READ_DESC_IMM) ? RDMX_MSG_IMM : 0;
	rdmx__msg_set(out, c, RDMX__MSG_RECV, m->buf);
	p->fhead = (p->fhead + 1) % p->fcap;
	p->fcount--;
	p->fstarted--;
	return 1;
}

/* ---------------------------------------------------------- completions */

static int on_read_done(rdmx_conn *c, const struct rdmx__wc *wc, uint32_t idx)
{
	struct rd *p = rd_of(c);
	struct rmsg *m = &p->fifo[idx];

	p->reads--;
	if (wc->status != RDMX__WC_OK)
		return rdmx__conn_wc_error(c, wc, "RDMA READ of a payload");
	m->state = M_READY;
	return ack_push(c, m->d.slot, m->d.gen);
}

static int on_send_wc(rdmx_conn *c, const struct rdmx__wc *wc)
{
	struct rd *p = rd_of(c);
	uint32_t idx = (uint32_t)wc->wr_id;

	switch (wc->wr_id >> 32) {
	case WR_DESC:
		if (wc->status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, wc, "descriptor send");
		rdmx__sendpool_sent(&p->sp, idx);
		return 0;
	case WR_READ:
		return on_read_done(c, wc, idx);
	default:
		p->acks--;
		if (wc->status != RDMX__WC_OK)
			return rdmx__conn_wc_error(c, wc, "ack write");
		return 0;
	}
}

static int reap_sq(rdmx_conn *c)
{
	struct rdmx__wc wc[WC_BATCH];
	int n = rdmx__poll_cq(c, c->qp.scq, wc, WC_BATCH), err = 0, rc;

	if (n < 0)
		return rdmx__conn_down(c, n, "polling send completions: %s", rdmx__last());
	for (int i = 0; i < n; i++)
		if ((rc = on_send_wc(c, &wc[i])) && !err)
			err = rc;
	return err;
}

/* -------------------------------------------------------------- sending */

static uint64_t ack_load(const struct rd *p, uint32_t slot)
{
	uint64_t v = __atomic_load_n(&p->ack[slot], __ATOMIC_ACQUIRE);

	return rdmx__get_u64((const uint8_t *)&v);
}

/* Take in acks; a buffer is free once acked and its SEND completed. */
static void tx_scan(struct rd *p)
{
	for (uint32_t i = 0; i < p->nposted;) {
		uint32_t s = p->posted[i];
		struct tx *t = &p->tx[s];

		if (!t->acked && ack_load(p, s) == t->gen) {
			t->acked = 1;
			p->unacked--;
		}
		if (t->acked && rdmx__sendpool_done(&p->sp, s)) {
			rdmx__sendpool_put(&p->sp, s);
			p->posted[i] = p->posted[--p->nposted];
			continue;
		}
		i++;
	}
}

/* Sent messages not yet in the receiver's memory. */
static uint32_t tx_unflushed(const struct rd *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nposted; i++) {
		uint32_t s = p->posted[i];
		const struct tx *t = &p->tx[s];

		n += !(t->acked || (t->eager && rdmx__sendpool_done(&p->sp, s)));
	}
	return n;
}

/* Completions and descriptors in, READs and eager copies started. */
static int poll_all(rdmx_conn *c)
{
	int rc = reap_sq(c), rc2 = reap_rq(c);

	rx_start(c);
	return rc ? rc : rc2;
}

/* One round of everything, acks out and in as well. */
static int progress(rdmx_conn *c)
{
	int rc = poll_all(c);

	ack_flush(c);
	tx_scan(rd_of(c));
	return rc;
}

/* The pool's room hook: a credit for one more descriptor. */
static int rd_room(rdmx_conn *c)
{
	struct rd *p = rd_of(c);

	return p->sp.nalloc + p->unacked < p->peer.desc_depth;
}

/* The pool's unflushed hook. */
static uint32_t rd_unflushed(rdmx_conn *c)
{
	return tx_unflushed(rd_of(c));
}

static const struct rdmx__sendpool_ops rd_pool_ops = {
	.reap = progress,
	.room = rd_room,
	.unflushed = rd_unflushed,
};

/* The receive buffer a handle refers to, or -EINVAL. */
static int64_t rb_slot(rdmx_conn *c, const struct rdmx_msg *m)
{
	struct rd *p = rd_of(c);
	uint64_t idx;

	if (rdmx__msg_get(m, c, RDMX__MSG_RECV, &idx) || idx >= p->nrecv ||
	    p->rstate[idx] != RB_HELD)
		return -EINVAL;
	return (int64_t)idx;
}

/* Write the descriptor in front of the payload; eager: one SGE for both. */
static void tx_describe(rdmx_conn *c, uint32_t idx, const struct rdmx_msg *m,
			struct rdmx__wr *wr)
{
	struct rd *p = rd_of(c);
	struct tx *t = &p->tx[idx];
	uint8_t *slot = rdmx__sendpool_at(&p->sp, idx);
	struct rdmx__read_desc d = {
		.type = RDMX__READ_DESC_EAGER,
		.slot = (uint16_t)idx,
		.len = (uint32_t)m->len,
	};

	t->gen = t->gen + 1 ? t->gen + 1 : 1;
	t->eager = m->len <= p->peer.eager_max;
	d.gen = t->gen;
	if (m->flags & RDMX_MSG_IMM) {
		d.flags = RDMX__READ_DESC_IMM;
		d.imm = m->imm;
	}
	if (!t->eager) {
		d.type = RDMX__READ_DESC_READ;
		d.addr = (uintptr_t)(slot + DATA_OFF);
		d.rkey = p->sp.mr->rkey;
	}
	rdmx__read_desc_encode(&d, slot + DESC_OFF);
	wr->addr = slot + DESC_OFF;
	wr->len = RDMX__READ_DESC_SIZE + (t->eager ? d.len : 0);
}

/* Post @m's descriptor; with @more (RDMX_SEND_MORE) the pool may hold it
 * to chain it with the next ones (core/sendpool.h). */
static int rd_post(rdmx_conn *c, struct rdmx_msg *m, int more)
{
	struct rd *p = rd_of(c);
	int64_t idx = rdmx__sendpool_slot(c, &p->sp, m);
	struct rdmx__wr wr = { .op = RDMX__OP_SEND };
	struct tx *t;
	int rc;

	if (idx < 0)
		return rdmx__fail(-EINVAL, "read: not a message from rdmx_msg_alloc on this connection");
	t = &p->tx[idx];
	tx_describe(c, (uint32_t)idx, m, &wr);
	rc = rdmx__sendpool_post_more(c, &p->sp, (uint32_t)idx, &wr, m, more);
	if (rc)
		return rc;
	t->acked = 0;
	p->posted[p->nposted++] = (uint32_t)idx;
	p->unacked++;
	if (!p->sp.nheld)
		ack_flush(c); /* acks go behind the data */
	return 0;
}

static int rd_send(rdmx_conn *c, struct rdmx_msg *m)
{
	return rd_post(c, m, 0);
}

static int rd_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	return rd_post(c, m, 1);
}

/* One round of progress first: queued acks go out even when nothing of
 * ours is unflushed. */
static int rd_flush(rdmx_conn *c, int timeout_ms)
{
	int rc = progress(c);

	return rc ? rc : rdmx__sendpool_flush(c, &rd_of(c)->sp, timeout_ms);
}

/* Messages whose data arrived before the peer left are still delivered. */
static int rd_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		poll_all(c); /* a failure marks the connection down */
		if (rx_deliver(c, m))
			return 0; /* its ack goes at the next call */
		ack_flush(c);
		tx_scan(rd_of(c));
		if ((rc = rdmx__recv_idle(c, &d)))
			return rc;
	}
}

static int rd_release(rdmx_conn *c, struct rdmx_msg *m)
{
	struct rd *p = rd_of(c);
	int64_t idx;

	if (!rdmx__sendpool_release(c, &p->sp, m))
		return 0;
	if ((idx = rb_slot(c, m)) >= 0) {
		rb_free(p, (uint32_t)idx);
		rx_start(c); /* a waiting descriptor may take it now */
		ack_flush(c);
	} else {
		return rdmx__fail(-EINVAL, "read: message not held on this connection");
	}
	rdmx__msg_spend(m);
	return 0;
}

/* Registered per connection: send slots, descriptors, receive buffers. */
static uint64_t rd_mem_estimate(const rdmx_conn *c)
{
	uint32_t nsend = c->opts.send_depth, nrecv = c->opts.recv_depth;
	uint32_t ndesc = nsend > nrecv ? nsend : nrecv;
	uint32_t eager = c->max_msg < c->opts.eager_max ? c->max_msg : c->opts.eager_max;

	return (uint64_t)align_up(DATA_OFF + (size_t)c->max_msg) * nsend +
	       (uint64_t)align_up(RDMX__READ_DESC_SIZE + (size_t)eager) * ndesc +
	       (uint64_t)align_up(c->max_msg) * nrecv;
}

/* eager_max travels in a u16 of the hello. */
static int rd_check_opts(const struct rdmx_protocol_ops *proto,
			 const struct rdmx_conn_opts *o, uint32_t max_msg)
{
	(void)proto;
	(void)max_msg;
	return rdmx__check_range("eager_max", o->eager_max, 0, UINT16_MAX);
}

static const struct rdmx__conn_ops rd_conn_ops = {
	.priv_size = sizeof(struct rd),
	.check_opts = rd_check_opts,
	.mem_estimate = rd_mem_estimate,
	.setup = rd_setup,
	.hello_out = rd_hello_out,
	.hello_in = rd_hello_in,
	.teardown = rd_teardown,
};

static const struct rdmx__data_ops rd_data_ops = {
	.msg_alloc = rdmx__sendpool_msg_alloc,
	.send = rd_send,
	.send_more = rd_send_more,
	.send_from = rdmx__default_send_from,
	.sendv = rdmx__default_sendv,
	.flush = rd_flush,
	.sends_done = rdmx__sendpool_conn_sends_done,
	.recv = rd_recv,
	.recv_many = rdmx__default_recv_many,
	.release = rd_release,
	.release_many = rdmx__default_release_many,
	.own_wc = rdmx__default_own_wc,
	.sleep_announce = rdmx__default_sleep_announce,
};

const struct rdmx_protocol_ops rdmx__proto_read = {
	.name = "read",
	.id = RDMX__PROTO_READ,
	.conn = &rd_conn_ops,
	.data = &rd_data_ops,
	.group = &rdmx__group_none,
};
