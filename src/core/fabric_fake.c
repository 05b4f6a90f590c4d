/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric: an in-process model of rdma_cm and RC verbs, faithful
 * enough that protocol code unit-tested on it behaves the same on rxe.
 *
 * All state is process-wide behind one mutex, so every fabric created in
 * the process (say a client and a server context, on any threads) reaches
 * the others by port. The data path never blocks: work requests execute
 * at post time, under the lock, except those queued behind a send that
 * found no receive posted (RNR).
 *
 * What is modelled, and how:
 *  - rdma_cm: a queue of connect requests per listening port; accept()
 *    establishes both sides at once. Private data is zero-padded to the IB
 *    CM sizes (connect 56, accept 196, reject 148), as IB CM delivers it;
 *    a connect refused for want of a listener carries none.
 *  - QP states: INIT after create_qp (receives may be posted, sends are
 *    -EINVAL), RTS once connected, ERR. Entering ERR flushes the QP's
 *    queued sends and its own posted receives (not those of its SRQ) with
 *    FLUSHED completions; WRs posted in ERR complete FLUSHED at once.
 *  - Send queue slots: a WR holds its slot until the completion covering
 *    it is polled (an unsignaled WR is covered by the next completion of
 *    its QP), as providers free slots in poll_cq. A QP that only posts
 *    unsignaled WRs therefore fills up and gets -ENOMEM, as on hardware.
 *    Receive queue slots are freed when a message consumes them.
 *  - RNR: a SEND, SEND_IMM or WRITE_IMM meeting an empty receive queue
 *    stays at the head of its QP's queue with everything posted after it
 *    (RC executes in order) and is delivered when the peer posts a
 *    receive. With rnr_retry < 7 it fails with RNR_RETRY (requester QP to
 *    ERR) unless a receive comes within (rnr_retry + 1) ms of the first
 *    refusal. The deadline is checked whenever the QP is progressed: on
 *    post_send, when the peer posts receives, and on every poll of the
 *    QP's send CQ (the only place a requester can see the failure).
 *    Receives posted to an SRQ go to its waiting senders in no fair order.
 *  - INLINE data is copied at post time (no lkey needed) and limited to
 *    the max_inline asked for at create_qp; other data is read when the
 *    WR executes, which for a WR held up by RNR is when it is delivered.
 *  - Errors: remote access and length errors put both QPs in ERR, local
 *    protection and RNR only the requester's; a requester whose peer QP is
 *    in ERR while still connected gets RETRY (the peer stopped answering).
 *    vendor_status holds the matching ibv_wc_status number.
 *  - A silent host (rdmx__fake_silence, a test's dead peer): its QP runs
 *    nothing; a WR its peer posts toward it waits at the head of the
 *    queue and fails with RETRY after (retry_count + 1) local ACK
 *    timeouts (caps.ack_timeout, 0: 17), as the transport gives up;
 *    retry_count 7 retries forever, as rxe does (rxe_comp.c never counts
 *    down a retry_cnt of 7; the IB spec gives 7 no such meaning).
 *  - Keys: lkey and rkey differ (even, odd) so one used for the other
 *    fails; any rkey registered in the process is valid remotely, and a
 *    zero-length transfer checks no key. Every local access is checked
 *    against the lkey's MR (range), and what the NIC writes locally (a
 *    receive, a READ's or FETCH_ADD's destination) needs LOCAL access.
 *  - The owner of memory reached by WRITE/READ/FETCH_ADD may access it
 *    concurrently with __atomic operations. Built with ThreadSanitizer,
 *    the fake moves remote bytes one at a time with atomic release stores
 *    (acquire loads for READ), so an owner polling a flag written last
 *    with an acquire load sees the data before it race-free; otherwise
 *    8-byte release stores in increasing address order (never a memmove,
 *    which may store its last bytes first). An aligned 8-byte READ is
 *    one acquire load (never torn), FETCH_ADD always an __atomic_fetch_add.
 *  - A CQ holds exactly @depth completions. Overflowing one is a caller
 *    bug: it is reported on stderr and poll_cq returns -EOVERFLOW forever.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "errors.h"
#include "fabric_fake.h"

struct rdmx__fake_globals rdmx__fake_g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.next_key = 1,
	.next_qpn = FIRST_QPN,
	.next_port = EPHEMERAL_FIRST,
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void g_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&G.cm, &a);
	pthread_condattr_destroy(&a);
}

/* ---------------------------------------------------------------- memory */

void rdmx__fake_mem_copy(void *dst, const void *src, size_t len)
{
	if (len)
		memmove(dst, src, len);
}

/* Bytes into memory its owner may be polling (see the top). */
static void remote_store(uint64_t raddr, const void *src, size_t len)
{
#ifdef FAKE_TSAN
	uint8_t *d = (uint8_t *)(uintptr_t)raddr;
	const uint8_t *s = src;

	for (size_t i = 0; i < len; i++)
		__atomic_store_n(d + i, s[i], __ATOMIC_RELEASE);
#else
	/* In increasing address order, as rxe and HCAs place a WRITE (a
	 * memmove may store its last bytes first): bytes up to an 8-byte
	 * boundary, 8-byte release stores, then the tail bytes. */
	uint8_t *d = (uint8_t *)(uintptr_t)raddr;
	const uint8_t *s = src;
	size_t i = 0;
	uint64_t w;

	for (; i < len && ((uintptr_t)(d + i) & 7); i++)
		__atomic_store_n(d + i, s[i], __ATOMIC_RELEASE);
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		__atomic_store_n((uint64_t *)(void *)(d + i), w, __ATOMIC_RELEASE);
	}
	for (; i < len; i++)
		__atomic_store_n(d + i, s[i], __ATOMIC_RELEASE);
#endif
}

static void remote_load(void *dst, uint64_t raddr, size_t len)
{
	/* An aligned 8-byte READ is one load, as on HCAs (never torn). */
	if (len == 8 && !(raddr & 7)) {
		uint64_t w = __atomic_load_n((const uint64_t *)(uintptr_t)raddr,
					     __ATOMIC_ACQUIRE);

		memcpy(dst, &w, 8);
		return;
	}
#ifdef FAKE_TSAN
	const uint8_t *s = (const uint8_t *)(uintptr_t)raddr;
	uint8_t *d = dst;

	for (size_t i = 0; i < len; i++)
		d[i] = __atomic_load_n(s + i, __ATOMIC_ACQUIRE);
#else
	rdmx__fake_mem_copy(dst, (const void *)(uintptr_t)raddr, len);
#endif
}

/* The MR with @key (an rkey if @remote) if it covers [addr, addr+len). */
static struct fmr *mr_find(uint32_t key, int remote, uint64_t addr,
			   uint64_t len)
{
	for (struct fmr *m = G.mrs; m; m = m->next) {
		uint64_t base = (uintptr_t)m->pub.addr;

		if ((remote ? m->pub.rkey : m->pub.lkey) != key)
			continue;
		if (addr < base || len > m->pub.len || addr - base > m->pub.len - len)
			return NULL;
		return m;
	}
	return NULL;
}

static int local_ok(uint32_t lkey, const void *addr, uint64_t len)
{
	return !len || mr_find(lkey, 0, (uintptr_t)addr, len);
}

/* Memory the NIC writes locally (a receive, a READ's or FETCH_ADD's
 * destination) needs local write access, as verbs' LOCAL_WRITE. */
static int local_write_ok(uint32_t lkey, const void *addr, uint64_t len)
{
	struct fmr *m;

	if (!len)
		return 1;
	m = mr_find(lkey, 0, (uintptr_t)addr, len);
	return m && (m->access & RDMX__ACCESS_LOCAL);
}

static int remote_ok(const struct rdmx__wr *wr, uint64_t len, int access)
{
	struct fmr *m;

	if (!len)
		return 1;
	m = mr_find(wr->rkey, 1, wr->remote_addr, len);
	return m && (m->access & access);
}

static int ff_reg_mr(struct rdmx__ep *ep, void *addr, size_t len, int access,
		     struct rdmx__mr **out)
{
	struct fmr *m = calloc(1, sizeof(*m));

	(void)ep;
	if (!m)
		return rdmx__fail(-ENOMEM, "fake: out of memory for a memory region");
	m->access = access;
	lock();
	m->pub = (struct rdmx__mr){ addr, len, G.next_key * 2, G.next_key * 2 + 1 };
	G.next_key = G.next_key % 0x7fffffff + 1;
	m->next = G.mrs;
	G.mrs = m;
	unlock();
	*out = &m->pub;
	return 0;
}

static void ff_dereg_mr(struct rdmx__mr *mr)
{
	struct fmr *m = (struct fmr *)mr, **pp;

	if (!m)
		return;
	lock();
	for (pp = &G.mrs; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = m->next;
	unlock();
	free(m);
}

/* ----------------------------------------------------------- completions */

static void cq_push(struct rdmx__cq *cq, const struct rdmx__wc *wc,
		    struct rdmx__ep *owner, uint32_t slots)
{
	if (!cq)
		return; /* destroyed under a live QP: reported then */
	if (cq->count == cq->cap) {
		if (!cq->overflow)
			fprintf(stderr, "rdmx fake fabric: completion queue of depth %u overflowed\n",
				cq->cap);
		cq->overflow = 1;
		return;
	}
	cq->ring[(cq->head + cq->count++) % cq->cap] = (struct cqe){ *wc, owner, slots };
	if (cq->notify) { /* a completion channel's event */
		cq->notify = 0;
		(void)!write(cq->efd, &(uint64_t){ 1 }, 8);
	}
}

/* Successful unsignaled WRs complete silently; errors always report. */
static void send_done(struct rdmx__ep *qp, const struct rdmx__wr *wr,
		      enum rdmx__wc_status st, int vs)
{
	struct rdmx__wc wc = {
		.wr_id = wr->wr_id,
		.op = wr->op,
		.status = st,
		.byte_len = wr->op == RDMX__OP_FETCH_ADD ? 8 : wr->len,
		.qp_num = qp->qpn,
		.vendor_status = vs,
	};

	if (st == RDMX__WC_OK && !(wr->flags & RDMX__WR_SIGNALED)) {
		qp->unsig++;
		return;
	}
	cq_push(qp->caps.send_cq, &wc, qp, qp->unsig + 1);
	qp->unsig = 0;
}

static void recv_done(struct rdmx__ep *qp, const struct rdmx__wr *r,
		      struct rdmx__wc *wc)
{
	wc->wr_id = r->wr_id;
	wc->qp_num = qp->qpn;
	cq_push(qp->caps.recv_cq, wc, NULL, 0);
}

/* ---------------------------------------------------------------- queues */

static struct rq *recv_queue(struct rdmx__ep *qp)
{
	return qp->caps.srq ? &qp->caps.srq->rq : &qp->rq;
}

static int rq_push(struct rq *q, const struct rdmx__wr *wr)
{
	if (q->count == q->cap)
		return rdmx__fail(-ENOMEM, "fake: receive queue full (%u posted)", q->cap);
	q->w[(q->head + q->count++) % q->cap] = *wr;
	return 0;
}

static struct rdmx__wr rq_pop(struct rq *q)
{
	struct rdmx__wr w = q->w[q->head];

	q->head = (q->head + 1) % q->cap;
	q->count--;
	return w;
}

static void rq_flush(struct rdmx__ep *qp)
{
	while (qp->rq.count) {
		struct rdmx__wr r = rq_pop(&qp->rq);
		struct rdmx__wc wc = { .op = RDMX__OP_RECV, .status = RDMX__WC_FLUSHED,
				       .vendor_status = VS_FLUSH };

		recv_done(qp, &r, &wc);
	}
}

/* Queue @wr; INLINE data is copied now and the WR pointed at the copy. */
static void sq_push(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	uint32_t i = (qp->sq_head + qp->sq_count++) % qp->caps.max_send_wr;
	uint8_t *copy = qp->inl + (size_t)i * qp->caps.max_inline;

	qp->sq[i] = (struct pend){ .wr = *wr };
	if ((wr->flags & RDMX__WR_INLINE) && wr->len) {
		memcpy(copy, wr->addr, wr->len);
		qp->sq[i].wr.addr = copy;
	}
}

static struct rdmx__wr sq_pop(struct rdmx__ep *qp)
{
	struct rdmx__wr wr = qp->sq[qp->sq_head].wr;

	qp->sq_head = (qp->sq_head + 1) % qp->caps.max_send_wr;
	qp->sq_count--;
	return wr;
}

void rdmx__fake_qp_error(struct rdmx__ep *qp)
{
	if (qp->qp != QP_INIT && qp->qp != QP_RTS)
		return;
	qp->qp = QP_ERR;
	while (qp->sq_count) {
		struct rdmx__wr wr = sq_pop(qp);

		send_done(qp, &wr, RDMX__WC_FLUSHED, VS_FLUSH);
	}
	rq_flush(qp);
}

/* ------------------------------------------------------------- execution */

/* Complete @wr in error; the requester's QP, and the responder's if
 * @both, go to ERR. */
static void wr_fail(struct rdmx__ep *qp, const struct rdmx__wr *wr,
		    enum rdmx__wc_status st, int vs, int both)
{
	struct rdmx__ep *peer = qp->peer;

	send_done(qp, wr, st, vs);
	rdmx__fake_qp_error(qp);
	if (both && peer)
		rdmx__fake_qp_error(peer);
}

static int wr_local_ok(const struct rdmx__wr *wr)
{
	if (wr->flags & RDMX__WR_INLINE)
		return 1;
	if (wr->op == RDMX__OP_FETCH_ADD || wr->op == RDMX__OP_CMP_SWAP)
		return local_write_ok(wr->lkey, wr->addr, 8);
	if (wr->op == RDMX__OP_READ)
		return local_write_ok(wr->lkey, wr->addr, wr->len);
	return local_ok(wr->lkey, wr->addr, wr->len);
}

/* SEND/SEND_IMM: fill the responder's oldest receive (there is one). */
static void run_send(struct rdmx__ep *qp, struct rdmx__ep *peer,
		     const struct rdmx__wr *wr)
{
	struct rdmx__wr r = rq_pop(recv_queue(peer));
	struct rdmx__wc wc = { .op = RDMX__OP_RECV, .byte_len = wr->len };

	if (wr->op == RDMX__OP_SEND_IMM) {
		wc.has_imm = 1;
		wc.imm = wr->imm;
	}
	if (wr->len > r.len) {
		wc.status = RDMX__WC_LOCAL_LENGTH;
		wc.vendor_status = VS_LOC_LEN;
	} else if (!local_write_ok(r.lkey, r.addr, wr->len)) {
		wc.status = RDMX__WC_OTHER;
		wc.vendor_status = VS_LOC_PROT;
	} else {
		rdmx__fake_mem_copy(r.addr, wr->addr, wr->len);
	}
	recv_done(peer, &r, &wc);
	if (wc.status == RDMX__WC_OK)
		send_done(qp, wr, RDMX__WC_OK, 0);
	else
		wr_fail(qp, wr, RDMX__WC_OTHER, wc.status == RDMX__WC_LOCAL_LENGTH ?
			VS_REM_INV_REQ : VS_REM_OP, 1);
}

/* WRITE/WRITE_IMM: the data lands before the receive completes. */
static void run_write(struct rdmx__ep *qp, struct rdmx__ep *peer,
		      const struct rdmx__wr *wr)
{
	struct rdmx__wc wc = { .op = RDMX__OP_RECV_IMM, .byte_len = wr->len,
			       .has_imm = 1, .imm = wr->imm };
	struct rdmx__wr r;

	if (!remote_ok(wr, wr->len, RDMX__ACCESS_WRITE)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	remote_store(wr->remote_addr, wr->addr, wr->len);
	if (wr->op == RDMX__OP_WRITE_IMM) {
		r = rq_pop(recv_queue(peer));
		recv_done(peer, &r, &wc);
	}
	send_done(qp, wr, RDMX__WC_OK, 0);
}

static void run_read(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	if (!remote_ok(wr, wr->len, RDMX__ACCESS_READ)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	remote_load(wr->addr, wr->remote_addr, wr->len);
	send_done(qp, wr, RDMX__WC_OK, 0);
}

unsigned rdmx__fake_stale_faa;

static void run_fetch_add(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	uint64_t old, seen;

	if (wr->remote_addr % 8) {
		wr_fail(qp, wr, RDMX__WC_OTHER, VS_REM_INV_REQ, 1);
		return;
	}
	if (!remote_ok(wr, 8, RDMX__ACCESS_ATOMIC)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	old = __atomic_fetch_add((uint64_t *)(uintptr_t)wr->remote_addr, wr->add,
				 __ATOMIC_SEQ_CST);
	seen = old;
	if (++qp->nfaa > 1 && rdmx__fake_stale_faa &&
	    qp->nfaa % rdmx__fake_stale_faa == 0)
		seen = qp->last_faa;
	qp->last_faa = old;
	memcpy(wr->addr, &seen, sizeof(seen));
	send_done(qp, wr, RDMX__WC_OK, 0);
}

static void run_cmp_swap(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	uint64_t old = wr->compare;

	if (wr->remote_addr % 8) {
		wr_fail(qp, wr, RDMX__WC_OTHER, VS_REM_INV_REQ, 1);
		return;
	}
	if (!remote_ok(wr, 8, RDMX__ACCESS_ATOMIC)) {
		wr_fail(qp, wr, RDMX__WC_REMOTE_ACCESS, VS_REM_ACCESS, 1);
		return;
	}
	__atomic_compare_exchange_n((uint64_t *)(uintptr_t)wr->remote_addr, &old,
				    wr->swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	memcpy(wr->addr, &old, sizeof(old));
	send_done(qp, wr, RDMX__WC_OK, 0);
}

static void wr_run(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	struct rdmx__ep *peer = qp->peer;

	if (qp->qp != QP_RTS)
		send_done(qp, wr, RDMX__WC_FLUSHED, VS_FLUSH);
	else if (!peer || peer->qp != QP_RTS)
		wr_fail(qp, wr, RDMX__WC_RETRY, VS_RETRY, 0);
	else if (!wr_local_ok(wr))
		wr_fail(qp, wr, RDMX__WC_OTHER, VS_LOC_PROT, 0);
	else if (wr->op == RDMX__OP_SEND || wr->op == RDMX__OP_SEND_IMM)
		run_send(qp, peer, wr);
	else if (wr->op == RDMX__OP_WRITE || wr->op == RDMX__OP_WRITE_IMM)
		run_write(qp, peer, wr);
	else if (wr->op == RDMX__OP_READ)
		run_read(qp, wr);
	else if (wr->op == RDMX__OP_CMP_SWAP)
		run_cmp_swap(qp, wr);
	else
		run_fetch_add(qp, wr);
}

/* RNR: @wr needs a receive and the responder has none posted. */
static int wr_blocked(struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	struct rdmx__ep *peer = qp->peer;

	if (wr->op != RDMX__OP_SEND && wr->op != RDMX__OP_SEND_IMM &&
	    wr->op != RDMX__OP_WRITE_IMM)
		return 0;
	if (qp->qp != QP_RTS || !peer || peer->qp != QP_RTS || !wr_local_ok(wr))
		return 0; /* fails in wr_run() */
	return recv_queue(peer)->count == 0;
}

static int64_t rnr_deadline(const struct rdmx__ep *qp)
{
	if (qp->caps.rnr_retry >= RNR_INFINITE)
		return INT64_MAX;
	return now_ns() + (qp->caps.rnr_retry + 1) * RNR_STEP_NS;
}

/* (retry_count + 1) local ACK timeouts of 4.096 us * 2^ack_timeout. */
static int64_t retry_deadline(const struct rdmx__ep *qp)
{
	int t = qp->caps.ack_timeout ? qp->caps.ack_timeout : 17;

	if (qp->caps.retry_count >= 7)
		return INT64_MAX; /* rxe: forever */
	return now_ns() + (qp->caps.retry_count + 1) * (4096LL << t);
}

/* The peer is silent: @head waits for its transport retries to run out. */
static void head_unanswered(struct rdmx__ep *qp, struct pend *head)
{
	if (head->retry)
		return;
	head->retry = 1;
	head->deadline = retry_deadline(qp);
}

/* Execute @qp's queued WRs in order, up to one that meets RNR or a silent
 * peer. A silent QP runs nothing. */
static void sq_progress(struct rdmx__ep *qp)
{
	while (qp->sq_count && !qp->silent) {
		struct pend *head = &qp->sq[qp->sq_head];
		struct rdmx__wr wr;
		int retry = head->retry;

		if (head->deadline && now_ns() >= head->deadline) {
			wr = sq_pop(qp);
			wr_fail(qp, &wr, retry ? RDMX__WC_RETRY : RDMX__WC_RNR_RETRY,
				retry ? VS_RETRY : VS_RNR_RETRY, 0);
			continue;
		}
		if (qp->qp == QP_RTS && qp->peer && qp->peer->silent) {
			head_unanswered(qp, head);
			return;
		}
		if (wr_blocked(qp, &head->wr)) {
			if (!head->deadline)
				head->deadline = rnr_deadline(qp);
			return;
		}
		wr = sq_pop(qp);
		wr_run(qp, &wr);
	}
}

/* ---------------------------------------------------------- data path ops */

static int send_check(const struct rdmx__ep *qp, const struct rdmx__wr *wr)
{
	if ((unsigned)wr->op > RDMX__OP_CMP_SWAP)
		return rdmx__fail(-EINVAL, "fake: bad send opcode %d", wr->op);
	if (qp->sq_used >= qp->caps.max_send_wr)
		return rdmx__fail(-ENOMEM, "fake: send queue full: %u WRs outstanding "
				  "(max_send_wr %u; poll the send CQ, signal now and then)",
				  qp->sq_used, qp->caps.max_send_wr);
	if (!(wr->flags & RDMX__WR_INLINE))
		return 0;
	if (wr->op == RDMX__OP_READ || wr->op == RDMX__OP_FETCH_ADD ||
	    wr->op == RDMX__OP_CMP_SWAP)
		return rdmx__fail(-EINVAL, "fake: INLINE on a READ or an atomic");
	if (wr->len > qp->caps.max_inline)
		return rdmx__fail(-EINVAL, "fake: %u bytes inline exceed max_inline %u",
				  wr->len, qp->caps.max_inline);
	return 0;
}

static int ff_post_send(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n)
{
	int rc = 0;

	lock();
	if (ep->qp != QP_RTS && ep->qp != QP_ERR)
		rc = rdmx__fail(-EINVAL, "fake: post_send on a QP that was never connected");
	for (int i = 0; i < n && !rc; i++) {
		rc = send_check(ep, &wr[i]);
		if (rc)
			break;
		ep->sq_used++;
		ep->signaled += !!(wr[i].flags & RDMX__WR_SIGNALED);
		sq_push(ep, &wr[i]);
	}
	ep->posts++;
	sq_progress(ep);
	unlock();
	return rc;
}

void rdmx__fake_sq_counts(struct rdmx__ep *ep, unsigned long *posts,
			  unsigned long *signaled)
{
	lock();
	*posts = ep->posts;
	*signaled = ep->signaled;
	unlock();
}

static int post_recvs(struct rq *q, const struct rdmx__wr *wr, int n)
{
	int rc = 0;

	q->posts++;
	for (int i = 0; i < n && !rc; i++)
		rc = rq_push(q, &wr[i]);
	return rc;
}

void rdmx__fake_rq_posts(struct rdmx__ep *ep, unsigned long *posts)
{
	lock();
	*posts = ep->caps.srq ? ep->caps.srq->rq.posts : ep->rq.posts;
	unlock();
}

static int ff_post_recv(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n)
{
	int rc;

	lock();
	if (ep->qp == QP_NONE || ep->caps.srq)
		rc = rdmx__fail(-EINVAL, "fake: post_recv needs a QP with its own receive queue");
	else
		rc = post_recvs(&ep->rq, wr, n);
	if (ep->qp == QP_ERR)
		rq_flush(ep);
	else if (ep->peer && ep->qp == QP_RTS)
		sq_progress(ep->peer);
	unlock();
	return rc;
}

/* Senders to any QP on the SRQ may be waiting for these receives. */
static int ff_post_srq_recv(struct rdmx__srq *srq, const struct rdmx__wr *wr,
			    int n)
{
	int rc;

	lock();
	rc = post_recvs(&srq->rq, wr, n);
	for (struct rdmx__ep *qp = G.qps; qp && srq->rq.count; qp = qp->qnext)
		if (qp->caps.srq == srq && qp->qp == QP_RTS && qp->peer)
			sq_progress(qp->peer);
	unlock();
	return rc;
}

static int ff_poll_cq(struct rdmx__cq *cq, struct rdmx__wc *wc, int n)
{
	int got = 0;

	lock();
	for (struct rdmx__ep *qp = G.qps; qp; qp = qp->qnext)
		if (qp->caps.send_cq == cq && qp->sq_count)
			sq_progress(qp); /* RNR deadlines */
	if (cq->overflow) {
		unlock();
		return rdmx__fail(-EOVERFLOW, "fake: completion queue overflow: more than "
				  "%u completions were outstanding", cq->cap);
	}
	for (; got < n && cq->count; got++) {
		struct cqe *e = &cq->ring[cq->head];

		wc[got] = e->wc;
		if (e->owner)
			e->owner->sq_used -= e->slots;
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	unlock();
	return got;
}

/* ------------------------------------------------------------- resources */

static int ff_create_cq(struct rdmx__ep *ep, int depth, struct rdmx__cq **out)
{
	struct rdmx__cq *cq;

	(void)ep;
	if (depth <= 0)
		return rdmx__fail(-EINVAL, "fake: CQ depth %d", depth);
	cq = calloc(1, sizeof(*cq) + (size_t)depth * sizeof(cq->ring[0]));
	if (!cq)
		return rdmx__fail(-ENOMEM, "fake: out of memory for a CQ of %d", depth);
	cq->cap = (uint32_t)depth;
	cq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cq->efd < 0) {
		free(cq);
		return rdmx__fail(-errno, "fake: no eventfd for a completion channel: %s",
				  strerror(errno));
	}
	*out = cq;
	return 0;
}

static int ff_cq_fd(struct rdmx__cq *cq)
{
	return cq->efd;
}

/* As the verbs' completion channel: take the notifications that came,
 * then arm the CQ unless it still is (see fabric.h). */
static int ff_cq_arm(struct rdmx__cq *cq)
{
	uint64_t n;
	int rc = 0;

	lock();
	if (read(cq->efd, &n, sizeof(n)) == (ssize_t)sizeof(n))
		cq->armed = 0;
	if (!cq->armed) {
		cq->armed = cq->notify = 1;
		rc = 1;
	}
	unlock();
	return rc;
}

static int ff_create_srq(struct rdmx__ep *ep, int depth,
			 struct rdmx__srq **out)
{
	struct rdmx__srq *srq;

	(void)ep;
	if (depth <= 0)
		return rdmx__fail(-EINVAL, "fake: SRQ depth %d", depth);
	srq = calloc(1, sizeof(*srq) + (size_t)depth * sizeof(srq->ring[0]));
	if (!srq)
		return rdmx__fail(-ENOMEM, "fake: out of memory for an SRQ of %d", depth);
	srq->rq = (struct rq){ .w = srq->ring, .cap = (uint32_t)depth };
	*out = srq;
	return 0;
}

/* Destroying a CQ or SRQ still in use is a caller bug (verbs refuses with
 * EBUSY): say so, detach it from its QPs, and free it. */
static void destroy_queue(void *res, const char *what)
{
	if (!res)
		return;
	lock();
	for (struct rdmx__ep *qp = G.qps; qp; qp = qp->qnext) {
		struct rdmx__qp_caps *c = &qp->caps;

		if (c->send_cq != res && c->recv_cq != res && (void *)c->srq != res)
			continue;
		fprintf(stderr, "rdmx fake fabric: %s destroyed while QP %u uses it\n",
			what, qp->qpn);
		c->send_cq = c->send_cq == res ? NULL : c->send_cq;
		c->recv_cq = c->recv_cq == res ? NULL : c->recv_cq;
		c->srq = (void *)c->srq == res ? NULL : c->srq;
	}
	unlock();
	free(res);
}

static void ff_destroy_cq(struct rdmx__cq *cq)
{
	if (cq)
		close(cq->efd);
	destroy_queue(cq, "CQ");
}

static void ff_destroy_srq(struct rdmx__srq *srq)
{
	destroy_queue(srq, "SRQ");
}

void rdmx__fake_qp_free_rings(struct rdmx__ep *ep)
{
	free(ep->rq.w);
	free(ep->sq);
	free(ep->inl);
	ep->rq.w = NULL;
	ep->sq = NULL;
	ep->inl = NULL;
}

static int qp_alloc_rings(struct rdmx__ep *ep, const struct rdmx__qp_caps *caps)
{
	size_t nsend = caps->max_send_wr ? caps->max_send_wr : 1;
	size_t nrecv = caps->srq || !caps->max_recv_wr ? 1 : caps->max_recv_wr;

	ep->sq = calloc(nsend, sizeof(*ep->sq));
	ep->inl = calloc(nsend, caps->max_inline ? caps->max_inline : 1);
	ep->rq.w = calloc(nrecv, sizeof(*ep->rq.w));
	if (ep->sq && ep->inl && ep->rq.w)
		return 0;
	rdmx__fake_qp_free_rings(ep);
	return rdmx__fail(-ENOMEM, "fake: out of memory for a QP (send %u, recv %u)",
			  caps->max_send_wr, caps->max_recv_wr);
}

static int ff_create_qp(struct rdmx__ep *ep, struct rdmx__qp_caps *caps)
{
	int rc;

	if (!caps || !caps->send_cq || !caps->recv_cq)
		return rdmx__fail(-EINVAL, "fake: create_qp needs a send and a receive CQ");
	if (ep->kind == EP_LISTENER)
		return rdmx__fail(-EINVAL, "fake: create_qp on a listening ep");
	lock();
	rc = ep->qp == QP_NONE ? qp_alloc_rings(ep, caps) :
	     rdmx__fail(-EEXIST, "fake: the ep already has a QP");
	if (!rc) {
		ep->caps = *caps;
		ep->rq.cap = caps->srq ? 0 : caps->max_recv_wr;
		ep->qpn = G.next_qpn++;
		ep->qp = QP_INIT;
		ep->qnext = G.qps;
		G.qps = ep;
	}
	unlock();
	return rc;
}

/* Destroy the QP: its completions still queued no longer free slots. */
void rdmx__fake_qp_release(struct rdmx__ep *qp)
{
	struct rdmx__cq *cq = qp->caps.send_cq;
	struct rdmx__ep **pp;

	if (qp->qp == QP_NONE)
		return;
	for (pp = &G.qps; *pp != qp; pp = &(*pp)->qnext)
		;
	*pp = qp->qnext;
	for (uint32_t i = 0; cq && i < cq->count; i++)
		if (cq->ring[(cq->head + i) % cq->cap].owner == qp)
			cq->ring[(cq->head + i) % cq->cap].owner = NULL;
	qp->qp = QP_NONE;
}

static uint32_t ff_qp_num(const struct rdmx__ep *ep)
{
	return ep->qpn;
}

/* One process-wide domain per fabric: any rkey is valid remotely. */
static const void *ff_domain(const struct rdmx__ep *ep)
{
	return ep->fab;
}

/* "fake:qpN" for the local QP or the peer's, "fake:port" without a QP. */
static int ff_addr_str(const struct rdmx__ep *ep, int peer, char *buf,
		       size_t len)
{
	const struct rdmx__ep *e;
	int n;

	lock();
	e = peer ? ep->peer : ep;
	if (!e)
		n = snprintf(buf, len, "fake:-");
	else if (e->qpn)
		n = snprintf(buf, len, "fake:qp%u", (unsigned)e->qpn);
	else
		n = snprintf(buf, len, "fake:%u", (unsigned)e->port);
	unlock();
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

/* --------------------------------- for fabric_fake_dgram.c (UD, UC QPs) */

void rdmx__fake_cq_push(struct rdmx__cq *cq, const struct rdmx__wc *wc,
			struct rdmx__ep *owner, uint32_t slots)
{
	cq_push(cq, wc, owner, slots);
}

int rdmx__fake_local_ok(uint32_t lkey, const void *addr, uint64_t len,
			int write)
{
	return write ? local_write_ok(lkey, addr, len) : local_ok(lkey, addr, len);
}

int rdmx__fake_remote_write(const struct rdmx__wr *wr)
{
	if (!remote_ok(wr, wr->len, RDMX__ACCESS_WRITE))
		return 0;
	if (wr->len)
		remote_store(wr->remote_addr, wr->addr, wr->len);
	return 1;
}

/* ---------------------------------------------------------------- fabric */

static int ff_create(struct rdmx__fabric **out)
{
	struct rdmx__fabric *fab;

	pthread_once(&g_once, g_init);
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return rdmx__fail(-ENOMEM, "fake: out of memory for the fabric");
	*out = fab;
	return 0;
}

static void ff_destroy(struct rdmx__fabric *fab)
{
	free(fab);
}

const struct rdmx__fabric_ops rdmx__fabric_fake = {
	.name = "fake",
	.create = ff_create,
	.destroy = ff_destroy,
	.listen = rdmx__fake_listen,
	.local_port = rdmx__fake_local_port,
	.get_request = rdmx__fake_get_request,
	.resolve = rdmx__fake_resolve,
	.resolve_src = rdmx__fake_resolve_src,
	.connect = rdmx__fake_connect,
	.accept = rdmx__fake_accept,
	.accept_poll = rdmx__fake_accept_poll,
	.reject = rdmx__fake_reject,
	.disconnect = rdmx__fake_disconnect,
	.check_event = rdmx__fake_check_event,
	.destroy_ep = rdmx__fake_destroy_ep,
	.reg_mr = ff_reg_mr,
	.dereg_mr = ff_dereg_mr,
	.create_cq = ff_create_cq,
	.destroy_cq = ff_destroy_cq,
	.create_srq = ff_create_srq,
	.destroy_srq = ff_destroy_srq,
	.create_qp = ff_create_qp,
	.qp_num = ff_qp_num,
	.post_send = ff_post_send,
	.post_recv = ff_post_recv,
	.post_srq_recv = ff_post_srq_recv,
	.poll_cq = ff_poll_cq,
	.cq_fd = ff_cq_fd,
	.cq_arm = ff_cq_arm,
	.ep_fd = rdmx__fake_ep_fd,
	.domain = ff_domain,
	.addr_str = ff_addr_str,
	.dgram = &rdmx__dgram_fake,
};
