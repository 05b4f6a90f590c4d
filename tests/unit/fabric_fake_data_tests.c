/* SPDX-License-Identifier: MIT */
/*
 * test_fabric_fake's data path: SEND/RECV, RNR, RDMA WRITE/READ, atomics,
 * SRQs, errors, and the limits of queues.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fabric_fake_common.h"

/* ------------------------------------------------------------ SEND/RECV */

void test_send_recv_imm_order(void **state)
{
	struct pair *p = *state;
	struct rdmx__wr w;
	struct rdmx__wc wc[3];

	post_recvs(&p->c, 0, 100, 3);
	memcpy(p->s.buf, "0123456789abcdefghij", 20);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 0, 10)), 0);
	w = wr_on(&p->s, RDMX__OP_SEND_IMM, 10, 10);
	w.imm = 0xdeadbeef;
	assert_int_equal(post(&p->s, w), 0);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 20, 0)), 0);

	assert_int_equal(poll_n(p->c.rcq, wc, 3), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(wc[i].status, RDMX__WC_OK);
		assert_int_equal(wc[i].op, RDMX__OP_RECV);
		assert_int_equal(wc[i].wr_id, i * 100);
		assert_int_equal(wc[i].qp_num, F->qp_num(p->c.ep));
	}
	assert_int_equal(wc[0].byte_len, 10);
	assert_false(wc[0].has_imm);
	assert_int_equal(wc[1].byte_len, 10);
	assert_true(wc[1].has_imm);
	assert_int_equal(wc[1].imm, 0xdeadbeef);
	assert_int_equal(wc[2].byte_len, 0);
	assert_memory_equal(p->c.buf, "0123456789", 10);
	assert_memory_equal(p->c.buf + 100, "abcdefghij", 10);

	assert_int_equal(poll_n(p->s.scq, wc, 3), 3);
	assert_int_equal(wc[0].op, RDMX__OP_SEND);
	assert_int_equal(wc[1].op, RDMX__OP_SEND_IMM);
	assert_int_equal(wc[2].wr_id, 20);
	assert_int_equal(wc[2].status, RDMX__WC_OK);
}

/* RNR with rnr_retry 7: sends wait for receives, in order, and a WRITE
 * posted behind a waiting send waits too. */
void test_rnr_waits_in_order(void **state)
{
	struct pair *p = *state;
	struct rdmx__wr w;
	struct rdmx__wc wc[3];

	memcpy(p->s.buf, "first", 5);
	memcpy(p->s.buf + 8, "written", 7);
	memcpy(p->s.buf + 16, "second", 6);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 0, 5)), 0);
	w = rdma_on(&p->s, RDMX__OP_WRITE, 8, 7, &p->c, 2000);
	assert_int_equal(post(&p->s, w), 0);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 16, 6)), 0);
	sleep_ms(20);
	assert_int_equal(poll_now(p->s.scq), 0);
	assert_int_equal(p->c.buf[2000], 0); /* the WRITE waits behind */

	post_recvs(&p->c, 0, 100, 1);
	assert_int_equal(poll_n(p->s.scq, wc, 2), 2);
	assert_int_equal(wc[0].wr_id, 0);
	assert_int_equal(wc[1].wr_id, 8);
	assert_memory_equal(p->c.buf + 2000, "written", 7);
	assert_int_equal(poll_now(p->s.scq), 0);

	post_recvs(&p->c, 100, 100, 1);
	assert_int_equal(poll_n(p->s.scq, wc, 1), 1);
	assert_int_equal(wc[0].wr_id, 16);
	assert_int_equal(wc[0].status, RDMX__WC_OK);
	assert_int_equal(poll_n(p->c.rcq, wc, 2), 2);
	assert_memory_equal(p->c.buf, "first", 5);
	assert_memory_equal(p->c.buf + 100, "second", 6);
}

void test_rnr_retry_exhausted(void **state)
{
	struct pair *p = pair_new();
	struct rdmx__wc wc[2];

	(void)state;
	p->s.caps.rnr_retry = 0;
	pair_open(p);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 0, 8)), 0);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 8, 8)), 0);
	assert_int_equal(poll_n(p->s.scq, wc, 2), 2);
	assert_int_equal(wc[0].status, RDMX__WC_RNR_RETRY);
	assert_int_equal(wc[0].wr_id, 0);
	assert_int_equal(wc[1].status, RDMX__WC_FLUSHED);
	/* Nothing is delivered late; the connection itself stays up. */
	post_recvs(&p->c, 0, 100, 1);
	assert_int_equal(poll_now(p->c.rcq), 0);
	assert_int_equal(F->check_event(p->c.ep), 0);
	pair_free(p);
}

void test_send_too_long(void **state)
{
	struct pair *p = *state;
	struct rdmx__wc wc[2];

	post_recvs(&p->c, 0, 8, 2);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 0, 16)), 0);
	assert_int_equal(poll_n(p->c.rcq, wc, 2), 2);
	assert_int_equal(wc[0].status, RDMX__WC_LOCAL_LENGTH);
	assert_int_equal(wc[1].status, RDMX__WC_FLUSHED); /* QP in error */
	expect_wc(p->s.scq, RDMX__WC_OTHER);
	assert_int_equal(post(&p->s, wr_on(&p->s, RDMX__OP_SEND, 0, 4)), 0);
	expect_wc(p->s.scq, RDMX__WC_FLUSHED);
}

/* INLINE data is taken at post time, even when the send waits (RNR). */
void test_inline_copied_at_post(void **state)
{
	struct pair *p = *state;
	struct rdmx__wr w;

	memcpy(p->s.buf, "inline", 6);
	w = wr_on(&p->s, RDMX__OP_SEND, 0, 6);
	w.flags |= RDMX__WR_INLINE;
	w.lkey = 0;
	assert_int_equal(post(&p->s, w), 0);
	memcpy(p->s.buf, "XXXXXX", 6);
	post_recvs(&p->c, 0, 100, 1);
	expect_wc(p->c.rcq, RDMX__WC_OK);
	assert_memory_equal(p->c.buf, "inline", 6);
	w.len = 65; /* above max_inline */
	assert_int_equal(post(&p->s, w), -EINVAL);
}

/* -------------------------------------------------------- RDMA and atomics */

void test_write_then_read(void **state)
{
	struct pair *p = *state;
	struct rdmx__wr w;
	struct rdmx__wc wc[2];

	for (int i = 0; i < 100; i++)
		p->c.buf[i] = (uint8_t)(i * 7 + 1);
	w = rdma_on(&p->c, RDMX__OP_WRITE, 0, 100, &p->s, 64);
	assert_int_equal(post(&p->c, w), 0);
	w = rdma_on(&p->c, RDMX__OP_READ, 1024, 100, &p->s, 64);
	assert_int_equal(post(&p->c, w), 0);
	assert_int_equal(poll_n(p->c.scq, wc, 2), 2);
	assert_int_equal(wc[0].op, RDMX__OP_WRITE);
	assert_int_equal(wc[0].status, RDMX__WC_OK);
	assert_int_equal(wc[1].op, RDMX__OP_READ);
	assert_int_equal(wc[1].status, RDMX__WC_OK);
	assert_memory_equal(p->s.buf + 64, p->c.buf, 100);
	assert_memory_equal(p->c.buf + 1024, p->c.buf, 100);
	assert_int_equal(poll_now(p->s.rcq), 0); /* a WRITE takes no receive */
}

enum violation { BAD_RKEY, OUT_OF_BOUNDS, NO_ACCESS, DEREGISTERED };

static void remote_access_case(enum violation v)
{
	struct pair *p = pair_new();
	struct rdmx__wr w;
	struct rdmx__wc wc[2];
	uint32_t rkey;

	if (v == NO_ACCESS)
		p->s.access = RDMX__ACCESS_LOCAL | RDMX__ACCESS_READ;
	pair_open(p);
	rkey = p->s.mr->rkey;
	post_recvs(&p->s, 0, 64, 1);
	if (v == DEREGISTERED) {
		F->dereg_mr(p->s.mr);
		p->s.mr = NULL;
	}
	w = wr_on(&p->c, RDMX__OP_WRITE, 0, 16);
	w.remote_addr = raddr(&p->s, 128);
	w.rkey = v == BAD_RKEY ? p->s.mr->lkey : rkey;
	if (v == OUT_OF_BOUNDS)
		w.remote_addr = raddr(&p->s, BUF - 8);
	assert_int_equal(post(&p->c, w), 0);
	w.wr_id = 77;
	w.rkey = rkey;
	w.remote_addr = raddr(&p->s, 0);
	assert_int_equal(post(&p->c, w), 0);
	assert_int_equal(poll_n(p->c.scq, wc, 2), 2);
	assert_int_equal(wc[0].status, RDMX__WC_REMOTE_ACCESS);
	assert_int_equal(wc[1].status, RDMX__WC_FLUSHED);
	assert_int_equal(wc[1].wr_id, 77);
	assert_int_equal(p->s.buf[128], 0);
	/* The responder's QP went to error too: its receive is flushed. */
	expect_wc(p->s.rcq, RDMX__WC_FLUSHED);
	pair_free(p);
}

void test_remote_access_errors(void **state)
{
	(void)state;
	remote_access_case(BAD_RKEY);
	remote_access_case(OUT_OF_BOUNDS);
	remote_access_case(NO_ACCESS);
	remote_access_case(DEREGISTERED);
}

void test_local_key_error(void **state)
{
	struct pair *p = *state;
	struct rdmx__wr w;
	struct rdmx__wc wc[2];

	w = rdma_on(&p->c, RDMX__OP_WRITE, 0, 16, &p->s, 0);
	w.lkey = p->c.mr->rkey; /* an rkey is not an lkey */
	assert_int_equal(post(&p->c, w), 0);
	assert_int_equal(poll_n(p->c.scq, wc, 1), 1);
	assert_int_equal(wc[0].status, RDMX__WC_OTHER);
	assert_int_not_equal(wc[0].vendor_status, 0);
	/* Only the requester is in error: the peer's WRs get no answer. */
	w = rdma_on(&p->s, RDMX__OP_WRITE, 0, 16, &p->c, 0);
	assert_int_equal(post(&p->s, w), 0);
	expect_wc(p->s.scq, RDMX__WC_RETRY);
}

/* A pair whose MRs lack LOCAL access (remote WRITE and READ only). */
static struct pair *pair_no_local(void)
{
	struct pair *p = pair_new();

	p->c.access = RDMX__ACCESS_WRITE | RDMX__ACCESS_READ;
	p->s.access = RDMX__ACCESS_WRITE | RDMX__ACCESS_READ;
	pair_open(p);
	return p;
}

/* What the NIC writes locally (a receive, a READ's destination) needs
 * LOCAL access on the MR, as verbs' LOCAL_WRITE; a source does not. */
void test_local_write_needs_access(void **state)
{
	struct pair *p = pair_no_local();
	struct rdmx__wr w;

	(void)state;
	w = rdma_on(&p->c, RDMX__OP_WRITE, 0, 16, &p->s, 0); /* a source: fine */
	assert_int_equal(post(&p->c, w), 0);
	expect_wc(p->c.scq, RDMX__WC_OK);
	w = rdma_on(&p->s, RDMX__OP_READ, 0, 16, &p->c, 0); /* a READ's destination */
	assert_int_equal(post(&p->s, w), 0);
	expect_wc(p->s.scq, RDMX__WC_OTHER);
	pair_free(p);

	p = pair_no_local();
	post_recvs(&p->s, 64, 64, 1);
	w = wr_on(&p->c, RDMX__OP_SEND, 0, 16); /* into a receive */
	assert_int_equal(post(&p->c, w), 0);
	expect_wc(p->s.rcq, RDMX__WC_OTHER);
	pair_free(p);
}

void test_write_imm(void **state)
{
	struct pair *p = *state;
	struct rdmx__wr w;
	struct rdmx__wc wc;

	memset(p->s.buf, 0xab, 32);
	w = rdma_on(&p->s, RDMX__OP_WRITE_IMM, 0, 32, &p->c, 512);
	w.imm = 77;
	assert_int_equal(post(&p->s, w), 0);
	assert_int_equal(poll_now(p->s.scq), 0); /* RNR: no receive yet */
	post_recvs(&p->c, 0, 4, 1);
	assert_int_equal(poll_n(p->c.rcq, &wc, 1), 1);
	assert_int_equal(wc.status, RDMX__WC_OK);
	assert_int_equal(wc.op, RDMX__OP_RECV_IMM);
	assert_int_equal(wc.byte_len, 32);
	assert_true(wc.has_imm);
	assert_int_equal(wc.imm, 77);
	assert_memory_equal(p->c.buf + 512, p->s.buf, 32);
	assert_int_equal(p->c.buf[0], 0); /* the receive buffer is untouched */
}

#define ADDERS 4
#define ADDS 10000
#define BATCH 16

static _Alignas(8) uint64_t counter;

struct adder {
	pthread_t thread;
	struct side *c;
	uint32_t rkey;
	uint64_t *olds;
	int rc;
};

static int add_batch(struct adder *a, uint64_t *olds)
{
	struct rdmx__wr w[BATCH];
	struct rdmx__wc wc[BATCH];
	int got = 0, rc;

	for (int i = 0; i < BATCH; i++) {
		w[i] = wr_on(a->c, RDMX__OP_FETCH_ADD, (size_t)i * 8, 8);
		w[i].remote_addr = (uintptr_t)&counter;
		w[i].rkey = a->rkey;
		w[i].add = 1;
	}
	rc = F->post_send(a->c->ep, w, BATCH);
	while (!rc && got < BATCH) {
		int k = F->poll_cq(a->c->scq, wc + got, BATCH - got);

		rc = k < 0 ? k : 0;
		for (int i = got; i < got + k && !rc; i++)
			rc = wc[i].status == RDMX__WC_OK ? 0 : -EIO;
		got += k > 0 ? k : 0;
	}
	memcpy(olds, a->c->buf, sizeof(uint64_t) * BATCH);
	return rc;
}

static void *adder_main(void *arg)
{
	struct adder *a = arg;

	for (int n = 0; n < ADDS && !a->rc; n += BATCH)
		a->rc = add_batch(a, a->olds + n);
	return NULL;
}

void test_fetch_add_threads(void **state)
{
	struct pair *p[ADDERS];
	struct adder a[ADDERS];
	struct rdmx__mr *cmr;
	uint8_t *seen = calloc(ADDERS * ADDS, 1);

	(void)state;
	assert_int_equal(ADDS % BATCH, 0);
	counter = 0;
	for (int i = 0; i < ADDERS; i++) {
		p[i] = pair_new();
		pair_open(p[i]);
	}
	assert_int_equal(F->reg_mr(p[0]->s.ep, &counter, 8, RDMX__ACCESS_ATOMIC, &cmr), 0);
	for (int i = 0; i < ADDERS; i++) {
		a[i] = (struct adder){ .c = &p[i]->c, .rkey = cmr->rkey,
				       .olds = calloc(ADDS, sizeof(uint64_t)) };
		assert_int_equal(pthread_create(&a[i].thread, NULL, adder_main, &a[i]), 0);
	}
	/* The owner reads its counter while the adders run. */
	for (double end = now_ms() + 10 * WAIT_MS; now_ms() < end;) {
		if (__atomic_load_n(&counter, __ATOMIC_ACQUIRE) == ADDERS * ADDS)
			break;
		sched_yield();
	}
	for (int i = 0; i < ADDERS; i++) {
		pthread_join(a[i].thread, NULL);
		assert_int_equal(a[i].rc, 0);
		for (int n = 0; n < ADDS; n++) {
			assert_true(a[i].olds[n] < ADDERS * ADDS);
			assert_int_equal(seen[a[i].olds[n]]++, 0);
		}
		free(a[i].olds);
	}
	assert_int_equal(counter, ADDERS * ADDS);
	F->dereg_mr(cmr);
	for (int i = 0; i < ADDERS; i++)
		pair_free(p[i]);
	free(seen);
}

/* --------------------------------------------------------------- SRQ */

#define SENDERS 3

/* Check SRQ completions: the byte each message carries names its sender
 * (i, then 10 + i); qp_num must be that sender's server-side QP. */
static void srq_check(struct rdmx__wc *wc, int n, struct side *s, const uint8_t *buf)
{
	int next[SENDERS] = { 0 };

	for (int k = 0; k < n; k++) {
		uint8_t b = buf[wc[k].wr_id];
		int i = b % 10;

		assert_int_equal(wc[k].status, RDMX__WC_OK);
		assert_true(i < SENDERS);
		assert_int_equal(wc[k].qp_num, F->qp_num(s[i].ep));
		assert_int_equal(b / 10, next[i]++); /* in order per QP */
	}
}

void test_srq_shared(void **state)
{
	struct pair *p = pair_new();
	struct side *c = calloc(SENDERS, sizeof(*c)), *s = calloc(SENDERS, sizeof(*s));
	struct rdmx__wc wc[2 * SENDERS];
	struct rdmx__srq *srq;
	struct rdmx__cq *rcq;
	struct rdmx__wr w;

	(void)state;
	assert_int_equal(F->create_cq(p->lis, 4 * SENDERS, &rcq), 0);
	assert_int_equal(F->create_srq(p->lis, 4 * SENDERS, &srq), 0);
	for (int i = 0; i < SENDERS; i++) {
		c[i].caps = s[i].caps = default_caps();
		s[i].caps.srq = srq;
		s[i].caps.recv_cq = rcq;
		conn_open(p, &c[i], &s[i]);
	}
	w = wr_on(&s[0], RDMX__OP_RECV, 0, 64);
	assert_int_equal(F->post_recv(s[0].ep, &w, 1), -EINVAL);
	/* Round 1 waits (RNR) until the SRQ gets receives; round 2 not. */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < SENDERS; i++) {
			c[i].buf[round] = (uint8_t)(round * 10 + i);
			assert_int_equal(post(&c[i], wr_on(&c[i], RDMX__OP_SEND, (size_t)round, 1)), 0);
		}
		if (round)
			continue;
		for (int k = 0; k < 2 * SENDERS; k++) {
			w = wr_on(&s[0], RDMX__OP_RECV, (size_t)k * 64, 64);
			assert_int_equal(F->post_srq_recv(srq, &w, 1), 0);
		}
	}
	assert_int_equal(poll_n(rcq, wc, 2 * SENDERS), 2 * SENDERS);
	srq_check(wc, 2 * SENDERS, s, s[0].buf);

	/* A QP going to error does not flush its SRQ's receives. */
	w = wr_on(&s[0], RDMX__OP_RECV, 1024, 64);
	assert_int_equal(F->post_srq_recv(srq, &w, 1), 0);
	assert_int_equal(F->disconnect(c[0].ep), 0);
	assert_int_equal(poll_now(rcq), 0);
	c[1].buf[8] = 11;
	assert_int_equal(post(&c[1], wr_on(&c[1], RDMX__OP_SEND, 8, 1)), 0);
	assert_int_equal(poll_n(rcq, wc, 1), 1);
	assert_int_equal(wc[0].wr_id, 1024);
	assert_int_equal(wc[0].qp_num, F->qp_num(s[1].ep));

	for (int i = 0; i < SENDERS; i++) {
		side_close(&c[i]);
		side_close(&s[i]);
	}
	F->destroy_srq(srq);
	F->destroy_cq(rcq);
	free(c);
	free(s);
	pair_free(p);
}

/* ---------------------------------------------------------------- limits */

void test_unsignaled(void **state)
{
	struct pair *p = *state;
	struct rdmx__wc wc[4];
	struct rdmx__wr w;

	post_recvs(&p->c, 0, 64, 4);
	for (int i = 0; i < 4; i++) {
		w = wr_on(&p->s, RDMX__OP_SEND, (size_t)i * 8, 8);
		if (i < 3)
			w.flags = 0;
		assert_int_equal(post(&p->s, w), 0);
	}
	assert_int_equal(poll_n(p->c.rcq, wc, 4), 4);
	assert_int_equal(F->poll_cq(p->s.scq, wc, 4), 1);
	assert_int_equal(wc[0].wr_id, 24);
}

void test_max_send_wr(void **state)
{
	struct pair *p = pair_new();
	struct rdmx__wc wc[4];
	struct rdmx__wr w;

	(void)state;
	p->c.caps.max_send_wr = 4;
	p->s.caps.max_send_wr = 4;
	pair_open(p);
	w = rdma_on(&p->c, RDMX__OP_WRITE, 0, 8, &p->s, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(post(&p->c, w), 0);
	assert_int_equal(post(&p->c, w), -ENOMEM);
	assert_int_equal(poll_n(p->c.scq, wc, 1), 1);
	assert_int_equal(post(&p->c, w), 0);
	assert_int_equal(poll_n(p->c.scq, wc, 4), 4);
	/* Unsignaled WRs hold their slots until a later completion is polled. */
	w.flags = 0;
	for (int i = 0; i < 4; i++)
		assert_int_equal(post(&p->c, w), 0);
	assert_int_equal(poll_now(p->c.scq), 0);
	assert_int_equal(post(&p->c, w), -ENOMEM);

	w = rdma_on(&p->s, RDMX__OP_WRITE, 0, 8, &p->c, 0);
	w.flags = 0;
	for (int i = 0; i < 4; i++) {
		w.flags = i == 3 ? RDMX__WR_SIGNALED : 0;
		assert_int_equal(post(&p->s, w), 0);
	}
	assert_int_equal(post(&p->s, w), -ENOMEM);
	/* Polling the one completion frees the slots of the WRs it covers. */
	assert_int_equal(poll_n(p->s.scq, wc, 1), 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(post(&p->s, w), 0);
	pair_free(p);
}

void test_cq_overflow(void **state)
{
	struct pair *p = pair_new();
	struct rdmx__wr w;

	(void)state;
	p->c.cq_depth = 2;
	pair_open(p);
	w = rdma_on(&p->c, RDMX__OP_WRITE, 0, 8, &p->s, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(post(&p->c, w), 0);
	assert_int_equal(poll_now(p->c.scq), -EOVERFLOW);
	pair_free(p);
}
