/* SPDX-License-Identifier: MIT */
/* The fixture test_fabric_fake's files share (fabric_fake_common.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fabric_fake_common.h"

const struct rdmx__fabric_ops *F = &rdmx__fabric_fake;

static const int ALL_ACCESS = RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE |
			      RDMX__ACCESS_READ | RDMX__ACCESS_ATOMIC;

double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

void sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

struct rdmx__qp_caps default_caps(void)
{
	return (struct rdmx__qp_caps){ .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
				       .max_inline = 64, .rnr_retry = 7, .retry_count = 7 };
}

/* Register the buffer, make the CQs and the QP on s->ep. */
int side_setup(struct side *s)
{
	int depth = s->cq_depth ? s->cq_depth : DEPTH * 4;
	struct rdmx__qp_caps caps = s->caps;
	int rc;

	rc = F->reg_mr(s->ep, s->buf, sizeof(s->buf), s->access ? s->access : ALL_ACCESS,
		       &s->mr);
	if (!rc)
		rc = F->create_cq(s->ep, depth, &s->scq);
	if (!rc)
		rc = F->create_cq(s->ep, depth, &s->rcq);
	if (rc)
		return rc;
	caps.send_cq = s->scq;
	if (!caps.recv_cq)
		caps.recv_cq = s->rcq;
	return F->create_qp(s->ep, &caps);
}

void side_close(struct side *s)
{
	F->destroy_ep(s->ep);
	s->ep = NULL;
	F->destroy_cq(s->scq);
	F->destroy_cq(s->rcq);
	F->dereg_mr(s->mr);
	s->scq = s->rcq = NULL;
	s->mr = NULL;
}


static void *dial_main(void *arg)
{
	struct dial *d = arg;

	d->rc = F->resolve(d->fab, "fake", d->port, 1000, &d->side->ep);
	if (!d->rc)
		d->rc = side_setup(d->side);
	if (!d->rc)
		d->rc = F->connect(d->side->ep, d->pdata, strlen(d->pdata),
				   d->timeout_ms, d->reply, &d->rlen);
	return NULL;
}

void dial_start(struct dial *d, struct rdmx__fabric *fab, uint16_t port,
		       struct side *side, const char *pdata, int timeout_ms)
{
	d->fab = fab;
	d->port = port;
	d->side = side;
	d->pdata = pdata;
	d->timeout_ms = timeout_ms;
	d->rlen = 0;
	assert_int_equal(pthread_create(&d->thread, NULL, dial_main, d), 0);
}

/* Dial @lis from @cfab into @c and accept it into @s. */
void conn_open(struct pair *p, struct side *c, struct side *s)
{
	struct rdmx__ep *child;
	struct dial d;

	dial_start(&d, p->cfab, F->local_port(p->lis), c, "hello", WAIT_MS);
	p->req_len = 0;
	assert_int_equal(F->get_request(p->lis, WAIT_MS, &child, p->req, &p->req_len), 0);
	s->ep = child;
	assert_int_equal(side_setup(s), 0);
	assert_int_equal(F->accept(child, "server-hi", 9, WAIT_MS), 0);
	pthread_join(d.thread, NULL);
	assert_int_equal(d.rc, 0);
	memcpy(p->rep, d.reply, d.rlen);
	p->rep_len = d.rlen;
}

static void pair_init(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->c.caps = default_caps();
	p->s.caps = default_caps();
	assert_int_equal(F->create(&p->cfab), 0);
	assert_int_equal(F->create(&p->sfab), 0);
	assert_int_equal(F->listen(p->sfab, NULL, 0, &p->lis), 0);
}

struct pair *pair_new(void)
{
	struct pair *p = malloc(sizeof(*p));

	assert_non_null(p);
	pair_init(p);
	return p;
}

void pair_open(struct pair *p)
{
	conn_open(p, &p->c, &p->s);
}

void pair_free(struct pair *p)
{
	side_close(&p->c);
	side_close(&p->s);
	F->destroy_ep(p->lis);
	F->destroy(p->cfab);
	F->destroy(p->sfab);
	free(p);
}

/* A signaled WR on @s's buffer at @off. */
struct rdmx__wr wr_on(struct side *s, enum rdmx__op op, size_t off,
			     uint32_t len)
{
	return (struct rdmx__wr){ .wr_id = off, .op = op, .flags = RDMX__WR_SIGNALED,
				  .addr = s->buf + off, .len = len, .lkey = s->mr->lkey };
}

uint64_t raddr(struct side *s, size_t off)
{
	return (uintptr_t)(s->buf + off);
}

/* A signaled RDMA WR from @s's buffer at @off to @to's at @roff. */
struct rdmx__wr rdma_on(struct side *s, enum rdmx__op op, size_t off,
			       uint32_t len, struct side *to, size_t roff)
{
	struct rdmx__wr w = wr_on(s, op, off, len);

	w.remote_addr = raddr(to, roff);
	w.rkey = to->mr->rkey;
	return w;
}

int post(struct side *s, struct rdmx__wr w)
{
	return F->post_send(s->ep, &w, 1);
}

/* Post @n receives of @len bytes at @off, @off + len, ... */
void post_recvs(struct side *s, size_t off, uint32_t len, int n)
{
	for (int i = 0; i < n; i++) {
		struct rdmx__wr w = wr_on(s, RDMX__OP_RECV, off + (size_t)i * len, len);

		assert_int_equal(F->post_recv(s->ep, &w, 1), 0);
	}
}

/* Poll until @n completions arrived or WAIT_MS passed; how many came. */
int poll_n(struct rdmx__cq *cq, struct rdmx__wc *wc, int n)
{
	double end = now_ms() + WAIT_MS;
	int got = 0;

	while (got < n && now_ms() < end) {
		int k = F->poll_cq(cq, wc + got, n - got);

		assert_true(k >= 0);
		got += k;
	}
	return got;
}

/* The next completion on @cq (within WAIT_MS) has @status. */
void expect_wc(struct rdmx__cq *cq, enum rdmx__wc_status status)
{
	struct rdmx__wc wc;

	assert_int_equal(poll_n(cq, &wc, 1), 1);
	assert_int_equal(wc.status, status);
}

int poll_now(struct rdmx__cq *cq)
{
	struct rdmx__wc wc[8];

	return F->poll_cq(cq, wc, 8);
}

/* The fixture of most tests: an open pair in *state, freed after. */
int open_pair(void **state)
{
	struct pair *p = pair_new();

	pair_open(p);
	*state = p;
	return 0;
}

int free_pair(void **state)
{
	pair_free(*state);
	return 0;
}
