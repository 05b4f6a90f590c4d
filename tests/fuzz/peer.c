/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/post.h"
#include "fuzz.h"
#include "peer.h"

#define FZ_SLOTS 8
#define FZ_ACCEPT_MS 5000
#define FZ_CONNECT_MS 5000
#define FZ_POLLS 200 /* polls for one completion before giving up */

rdmx_ctx *fz_ctx(void)
{
	static rdmx_ctx *ctx;
	struct rdmx_ctx_opts co = { .fabric = "fake" };

	if (!ctx)
		FZ_CHECK(!rdmx_ctx_create(&ctx, &co), "fake context");
	return ctx;
}

static rdmx_listener *lis_of[FZ_SLOTS];
static struct rdmx_conn_opts opts_of[FZ_SLOTS];

struct rdmx_conn_opts fz_opts(const char *protocol, uint32_t max_msg, uint64_t ring_size)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	o.max_msg_size = max_msg;
	o.send_depth = 8;
	o.recv_depth = 8;
	if (ring_size)
		o.ring_size = ring_size;
	return o;
}

rdmx_listener *fz_listener(int slot, const struct rdmx_conn_opts *opts)
{
	FZ_CHECK(slot >= 0 && slot < FZ_SLOTS, "listener slot");
	if (!lis_of[slot]) {
		opts_of[slot] = *opts;
		FZ_CHECK(!rdmx_listen(fz_ctx(), "fake", 0, opts, &lis_of[slot]), "listen");
	}
	return lis_of[slot];
}

void fz_listener_drop(int slot)
{
	FZ_CHECK(slot >= 0 && slot < FZ_SLOTS, "listener slot");
	if (lis_of[slot])
		rdmx_listener_destroy(lis_of[slot]);
	lis_of[slot] = NULL;
}

/* The listener's accept goes on after a reject: end it with a real dial. */
static void end_accept(int slot)
{
	rdmx_conn *c = NULL;

	FZ_CHECK(!rdmx_dial(fz_ctx(), "fake", rdmx_listener_port(lis_of[slot]),
			    &opts_of[slot], &c), "dial after a rejected request");
	rdmx_conn_close(c);
}

struct fz_acceptor {
	rdmx_listener *lis;
	rdmx_conn *conn;
	int rc;
};

static void *accept_main(void *arg)
{
	struct fz_acceptor *a = arg;

	a->rc = rdmx_accept(a->lis, FZ_ACCEPT_MS, &a->conn);
	return NULL;
}

void fz_peer_open(struct fz_peer *p, int slot)
{
	const struct rdmx__fabric_ops *f = fz_ctx()->fops;
	struct rdmx__qp_caps caps = { .max_send_wr = 16, .max_recv_wr = 16,
				      .rnr_retry = 7, .retry_count = 7 };

	FZ_CHECK(slot >= 0 && slot < FZ_SLOTS && lis_of[slot], "fz_peer_open before fz_listener");
	memset(p, 0, sizeof(*p));
	FZ_CHECK(!f->resolve(fz_ctx()->fab, "fake", rdmx_listener_port(lis_of[slot]), 2000,
			     &p->ep), "resolve");
	FZ_CHECK(!f->create_cq(p->ep, 64, &p->cq), "create_cq");
	caps.send_cq = caps.recv_cq = p->cq;
	FZ_CHECK(!f->create_qp(p->ep, &caps), "create_qp");
	p->buf = rdmx__alloc_buf(FZ_PEER_BUF);
	FZ_CHECK(p->buf != NULL, "peer buffer");
	FZ_CHECK(!f->reg_mr(p->ep, p->buf, FZ_PEER_BUF, RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE |
			    RDMX__ACCESS_READ | RDMX__ACCESS_ATOMIC, &p->mr), "reg_mr");
	fz_peer_recvs(p, 8);
}

int fz_peer_connect(struct fz_peer *p, int slot, const void *pd, size_t plen,
		    rdmx_conn **server)
{
	struct fz_acceptor a = { .lis = lis_of[slot] };
	pthread_t t;
	int rc;

	*server = NULL;
	FZ_CHECK(!pthread_create(&t, NULL, accept_main, &a), "acceptor thread");
	p->rlen = 0;
	rc = fz_ctx()->fops->connect(p->ep, pd, plen, FZ_CONNECT_MS, p->reply, &p->rlen);
	p->connected = !rc;
	if (rc)
		end_accept(slot);
	pthread_join(t, NULL);
	if (a.rc)
		return rc ? rc : a.rc;
	if (rc)
		rdmx_conn_close(a.conn);
	else
		*server = a.conn;
	return rc;
}

/* Post @wr and poll its completion, boundedly; 0 or -errno. */
static int post_wait(struct fz_peer *p, const struct rdmx__wr *wr)
{
	const struct rdmx__fabric_ops *f = fz_ctx()->fops;
	struct rdmx__wc wc;
	int rc, n, spins;

	FZ_CHECK((uint8_t *)wr->addr + wr->len <= p->buf + FZ_PEER_SCRATCH,
		 "peer post beyond its scratch bytes");
	if (p->broken)
		return -EIO;
	rc = f->post_send(p->ep, wr, 1);
	/* The fake completes a WR at once unless it is blocked (e.g. a
	 * SEND or WRITE_IMM without a receive posted): then give up, and
	 * post nothing more on this peer. Receive completions on the
	 * shared CQ are skipped. */
	for (spins = 0; !rc && spins < FZ_POLLS; spins++) {
		n = f->poll_cq(p->cq, &wc, 1);
		if (n < 0)
			rc = n;
		else if (n && wc.wr_id == wr->wr_id)
			rc = wc.status == RDMX__WC_OK ? 0 : -EIO;
		if (n && wc.wr_id == wr->wr_id)
			break;
	}
	if (rc || spins == FZ_POLLS)
		p->broken = 1;
	return rc ? rc : spins == FZ_POLLS ? -ETIMEDOUT : 0;
}

int fz_peer_post(struct fz_peer *p, enum rdmx__op op, size_t at, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct rdmx__wr wr = { .wr_id = 1, .op = op, .flags = RDMX__WR_SIGNALED,
			       .addr = p->buf + at, .len = len, .lkey = p->mr->lkey,
			       .remote_addr = raddr, .rkey = rkey, .imm = imm };

	return post_wait(p, &wr);
}

uint64_t fz_peer_faa(struct fz_peer *p, uint64_t raddr, uint32_t rkey, uint64_t add)
{
	uint64_t old = 0;
	struct rdmx__wr wr = { .wr_id = 1, .op = RDMX__OP_FETCH_ADD,
			       .flags = RDMX__WR_SIGNALED, .addr = p->buf, .len = 8,
			       .lkey = p->mr->lkey, .remote_addr = raddr, .rkey = rkey,
			       .add = add };

	if (!post_wait(p, &wr))
		memcpy(&old, p->buf, sizeof(old));
	return old;
}

void fz_peer_recvs(struct fz_peer *p, int n)
{
	const struct rdmx__fabric_ops *f = fz_ctx()->fops;
	struct rdmx__wr wr = { .wr_id = 2, .op = RDMX__OP_RECV, .len = 256,
			       .lkey = p->mr->lkey };

	for (int i = 0; i < n; i++) {
		wr.addr = p->buf + FZ_PEER_BUF - 256 * (size_t)(i + 1);
		if (f->post_recv(p->ep, &wr, 1))
			return;
	}
}

void fz_peer_close(struct fz_peer *p)
{
	const struct rdmx__fabric_ops *f = fz_ctx()->fops;

	if (p->connected)
		f->disconnect(p->ep);
	if (p->ep)
		f->destroy_ep(p->ep);
	if (p->mr)
		f->dereg_mr(p->mr);
	if (p->cq)
		f->destroy_cq(p->cq);
	free(p->buf);
	memset(p, 0, sizeof(*p));
}
