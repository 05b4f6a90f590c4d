/* SPDX-License-Identifier: MIT */
/*
 * The read protocol's set-up, hello and tables (the design is at the top
 * of read.c). The tables point into read_recv.c and read_send.c, so this
 * file stands above them; nothing calls into it.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/qp.h"
#include "read_priv.h"

#define READ_DEPTH 16     /* READs in flight asked for (rd_atomic) */

static size_t align_up(size_t n)
{
	return (n + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
}

/* ---------------------------------------------------------------- setup */

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
		.ops = &rdmx__read_pool_ops,
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
		rc = rdmx__read_post_rx(c, i);
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
	.send = rdmx__read_send,
	.send_more = rdmx__read_send_more,
	.send_from = rdmx__default_send_from,
	.sendv = rdmx__default_sendv,
	.flush = rdmx__read_flush,
	.sends_done = rdmx__sendpool_conn_sends_done,
	.recv = rdmx__read_recv,
	.recv_many = rdmx__default_recv_many,
	.release = rdmx__read_release,
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
