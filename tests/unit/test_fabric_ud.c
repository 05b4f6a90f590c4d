/* SPDX-License-Identifier: MIT */
/*
 * UD and UC queue pairs through the fabric seam (src/core/dgram.h), the
 * same tests on the fake fabric (unit, natively) and on a real device
 * (integration, rxe in the sandbox): UD ping-pong with the payload after
 * the 40-byte GRH and every byte checked, UD drops when no receive is
 * posted or the qkey is wrong, the MTU bound, UC WRITE of a region
 * verified by checksum, and descriptors from a peer validated.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/dgram.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "core/mw.h"
#include "harness.h"

#define DEPTH 64
#define MSG_MAX 1024
#define SLOT (RDMX__GRH_LEN + MSG_MAX)
#define WAIT_MS 5000
#define QUIET_MS 200
#define QKEY 0x11111111u
#define PORT 7471
#define REGION (64 * 1024)
#define CHUNK 4096

static const int ALL = RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE | RDMX__ACCESS_READ;

/* One end: an ep on the device, its dgram QP, its registered memory. */
struct end {
	struct rdmx__fabric *fab;
	struct rdmx__ep *ep;
	struct rdmx__dgram *g;
	struct rdmx__mr *mr;
	struct rdmx__ah *ah;      /* UD: toward the other end */
	struct rdmx__qp_desc peer;
	uint8_t *buf;             /* DEPTH receive slots, then a send slot */
	size_t len;
};

static const struct rdmx__fabric_ops *fops(void)
{
	return strcmp(th_fabric(), "fake") ? &rdmx__fabric_verbs : &rdmx__fabric_fake;
}

static int is_fake(void)
{
	return !strcmp(th_fabric(), "fake");
}

static void end_open(struct end *e, enum rdmx__dqp_type type, uint32_t qkey, size_t len)
{
	const struct rdmx__fabric_ops *f = fops();
	const char *addr = th_addr();

	assert_non_null(addr);
	assert_int_equal(f->create(&e->fab), 0);
	assert_int_equal(f->resolve(e->fab, addr, PORT, WAIT_MS, &e->ep), 0);
	if (rdmx__dgram_open(f, e->ep, type, DEPTH, qkey, &e->g))
		fail_msg("dgram_open: %s", rdmx__last());
	e->len = (len + 63) & ~(size_t)63; /* aligned_alloc: a multiple of 64 */
	e->buf = aligned_alloc(64, e->len);
	assert_non_null(e->buf);
	memset(e->buf, 0, e->len);
	assert_int_equal(f->reg_mr(e->ep, e->buf, e->len, ALL, &e->mr), 0);
}

static void end_close(struct end *e)
{
	const struct rdmx__fabric_ops *f = fops();

	rdmx__ud_ah_free(e->g, e->ah);
	rdmx__dgram_close(e->g);
	f->dereg_mr(e->mr);
	f->destroy_ep(e->ep);
	f->destroy(e->fab);
	free(e->buf);
}

/* Each end learns the other's descriptor through its wire form. */
static void exchange(struct end *a, struct end *b, enum rdmx__dqp_type type)
{
	uint8_t wire[RDMX__QP_DESC_WIRE];

	rdmx__qp_desc_encode(&a->g->self, wire);
	assert_int_equal(rdmx__qp_desc_decode(wire, sizeof(wire), type, &b->peer), 0);
	rdmx__qp_desc_encode(&b->g->self, wire);
	assert_int_equal(rdmx__qp_desc_decode(wire, sizeof(wire), type, &a->peer), 0);
	assert_int_equal(a->peer.qpn, b->g->self.qpn);
	if (type == RDMX__DQP_UD) {
		assert_int_equal(rdmx__ud_ah(a->g, &a->peer, &a->ah), 0);
		assert_int_equal(rdmx__ud_ah(b->g, &b->peer, &b->ah), 0);
	} else {
		if (rdmx__uc_connect(a->g, &a->peer) || rdmx__uc_connect(b->g, &b->peer))
			fail_msg("uc_connect: %s", rdmx__last());
	}
}

static void ud_pair(struct end *a, struct end *b)
{
	end_open(a, RDMX__DQP_UD, QKEY, (DEPTH + 1) * SLOT);
	end_open(b, RDMX__DQP_UD, QKEY, (DEPTH + 1) * SLOT);
	exchange(a, b, RDMX__DQP_UD);
}

static void post_slot(struct end *e, uint32_t i)
{
	assert_int_equal(rdmx__dgram_recv(e->g, e->buf + (size_t)i * SLOT, SLOT,
					  e->mr->lkey, i), 0);
}

static uint8_t *send_slot(struct end *e)
{
	return e->buf + (size_t)DEPTH * SLOT;
}

static void send_to_peer(struct end *e, uint64_t seq, uint32_t len)
{
	struct rdmx__wc wc;

	th_fill(send_slot(e), len, seq);
	if (rdmx__ud_send(e->g, e->ah, &e->peer, send_slot(e), len, e->mr->lkey, seq) ||
	    rdmx__dgram_wait(e->g, 0, WAIT_MS, "a UD SEND", &wc))
		fail_msg("UD send of seq %llu: %s", (unsigned long long)seq, rdmx__last());
	assert_int_equal(wc.wr_id, seq);
}

/* Take one message: the payload after the GRH, from @src, reposted. */
static const uint8_t *take(struct end *e, const struct end *src, uint32_t *len)
{
	struct rdmx__wc wc;

	if (rdmx__dgram_wait(e->g, 1, WAIT_MS, "a UD message", &wc))
		fail_msg("%s", rdmx__last());
	assert_true(wc.wr_id < DEPTH);
	assert_true(wc.byte_len >= RDMX__GRH_LEN);
	assert_int_equal(wc.src_qp, src->g->self.qpn);
	*len = wc.byte_len - RDMX__GRH_LEN;
	post_slot(e, (uint32_t)wc.wr_id);
	return e->buf + wc.wr_id * SLOT + RDMX__GRH_LEN;
}

/* Nothing arrives on @e's receive CQ for QUIET_MS. */
static void assert_quiet(struct end *e)
{
	struct rdmx__wc wc;
	int rc = rdmx__dgram_wait(e->g, 1, QUIET_MS, "nothing (a dropped SEND)", &wc);

	assert_int_equal(rc, -ETIMEDOUT);
	assert_non_null(strstr(rdmx__last(), "waiting for nothing (a dropped SEND)"));
}

/* 1,000 messages each way, 8 B .. the MTU, every byte checked where the
 * GRH offset puts it; the echo carries the sequence number back. */
static void test_ud_ping_pong(void **state)
{
	uint64_t n = th_count(1000);
	struct end a, b;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ud_pair(&a, &b);
	for (uint32_t i = 0; i < DEPTH; i++) {
		post_slot(&a, i);
		post_slot(&b, i);
	}
	for (uint64_t seq = 0; seq < n; seq++) {
		uint32_t len = 8 + (uint32_t)(seq * 97 % (a.g->dev.ud_max - 7)), got;
		const uint8_t *p;

		send_to_peer(&a, seq, len);
		p = take(&b, &a, &got);
		assert_int_equal(got, len);
		assert_int_equal(th_check(p, len, seq), -1);
		send_to_peer(&b, seq, len); /* the echo */
		p = take(&a, &b, &got);
		assert_int_equal(got, len);
		assert_int_equal(th_check(p, len, seq), -1);
	}
	if (is_fake())
		assert_int_equal(a.g->self.mtu, 3);
	printf("UD: %llu messages echoed, up to %u bytes (MTU); UC %s on this device\n",
	       (unsigned long long)n, a.g->dev.ud_max, a.g->dev.uc ? "runs" : "does not run");
	end_close(&a);
	end_close(&b);
}

/* The 40 bytes in front of the payload are the GRH: with IPv4 GIDs
 * (RoCEv2 on rxe, the fake) its last 20 are the IPv4 header, UDP, from the
 * sender's address to the receiver's. */
static void test_ud_grh(void **state)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct end a, b;
	const uint8_t *grh;
	uint32_t got;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ud_pair(&a, &b);
	post_slot(&b, 0);
	send_to_peer(&a, 7, 300);
	grh = take(&b, &a, &got) - RDMX__GRH_LEN;
	assert_int_equal(th_check(grh + RDMX__GRH_LEN, 300, 7), -1);
	if (memcmp(a.g->self.gid, v4mapped, sizeof(v4mapped))) {
		end_close(&a);
		end_close(&b);
		skip(); /* IB or IPv6 GIDs: an IPv6-style GRH, not checked */
	}
	assert_int_equal(grh[20], 0x45);
	assert_int_equal(grh[29], 17);
	assert_memory_equal(grh + 32, a.g->self.gid + 12, 4);
	assert_memory_equal(grh + 36, b.g->self.gid + 12, 4);
	end_close(&a);
	end_close(&b);
}

/* UD is unreliable: a SEND finding no receive posted is gone for good,
 * and so is one with the wrong qkey; the sender completes OK. */
static void test_ud_drops(void **state)
{
	unsigned long drops0 = rdmx__fake_ud_drops;
	struct rdmx__qp_desc wrong;
	struct end a, b;
	uint32_t got;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ud_pair(&a, &b);
	send_to_peer(&a, 1, 64); /* b has no receive posted */
	post_slot(&b, 0);
	post_slot(&b, 1);
	assert_quiet(&b);
	wrong = a.peer;
	a.peer.qkey = QKEY + 1;
	send_to_peer(&a, 2, 64);
	a.peer = wrong;
	assert_quiet(&b);
	send_to_peer(&a, 3, 64);
	assert_int_equal(th_check(take(&b, &a, &got), 64, 3), -1);
	if (is_fake())
		assert_int_equal(rdmx__fake_ud_drops - drops0, 2);
	end_close(&a);
	end_close(&b);
}

/* Over the MTU is refused before anything is posted; a wait needs a
 * bound. */
static void test_ud_mtu(void **state)
{
	struct end a, b;
	struct rdmx__wc wc;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ud_pair(&a, &b);
	assert_int_equal(rdmx__ud_send(a.g, a.ah, &a.peer, a.buf, a.g->dev.ud_max + 1,
				       a.mr->lkey, 0), -EMSGSIZE);
	assert_int_equal(rdmx__dgram_wait(a.g, 1, -1, "a message", &wc), -EINVAL);
	end_close(&a);
	end_close(&b);
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* Wait (bounded) until @e's region has checksum @want: UC gives the
 * target no completion, so its memory is the only witness. */
static void wait_sum(const uint8_t *buf, uint32_t qpn, uint64_t want)
{
	double end = th_now_ms() + WAIT_MS;
	uint64_t got;

	while ((got = fnv1a(buf, REGION)) != want && th_now_ms() < end)
		;
	if (got != want)
		fail_msg("UC region of QP %u: checksum %016llx, want %016llx after %d ms",
			 qpn, (unsigned long long)got, (unsigned long long)want, WAIT_MS);
}

static void wait_region(const struct end *e, uint64_t want)
{
	wait_sum(e->buf, e->g->self.qpn, want);
}

/* @a WRITEs its REGION bytes to @dst (of its UC peer) with @rkey. */
static void uc_write_to(struct end *a, const uint8_t *dst, uint32_t rkey)
{
	struct rdmx__wc wc;

	for (uint32_t off = 0; off < REGION; off += CHUNK) {
		if (rdmx__uc_write(a->g, a->buf + off, CHUNK, a->mr->lkey,
				   (uintptr_t)dst + off, rkey, off) ||
		    rdmx__dgram_wait(a->g, 0, WAIT_MS, "a UC WRITE", &wc))
			fail_msg("UC write at %u: %s", off, rdmx__last());
		assert_int_equal(wc.wr_id, off);
	}
}

static void uc_write_region(struct end *a, const struct end *b, uint32_t rkey)
{
	uc_write_to(a, b->buf, rkey);
}

/* 64 KiB WRITTEN over UC in 4 KiB pieces land whole (checksum); on the
 * fake a WRITE with a foreign rkey is dropped (no ACK, no error). */
static void test_uc_write(void **state)
{
	unsigned long drops0 = rdmx__fake_uc_drops;
	struct end a, b;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	end_open(&a, RDMX__DQP_UC, 0, REGION);
	if (!a.g->dev.uc) {
		end_close(&a);
		skip();
	}
	end_open(&b, RDMX__DQP_UC, 0, REGION);
	exchange(&a, &b, RDMX__DQP_UC);
	th_fill(a.buf, REGION, 42);
	uc_write_region(&a, &b, b.mr->rkey);
	wait_region(&b, fnv1a(a.buf, REGION));
	printf("UC: %d bytes written in %d WRITEs, checksum %016llx matches\n", REGION,
	       REGION / CHUNK, (unsigned long long)fnv1a(b.buf, REGION));
	if (is_fake()) {
		th_fill(a.buf, REGION, 43);
		uc_write_region(&a, &b, 0xfffffff1u); /* no such rkey */
		assert_int_equal(rdmx__fake_uc_drops - drops0, REGION / CHUNK);
		assert_int_equal(th_check(b.buf, REGION, 42), -1);
	}
	end_close(&a);
	end_close(&b);
}

/* @a WRITEs to @dst with @rkey and is refused: after QUIET_MS @dst still
 * has checksum @want (on the fake: every WRITE counted dropped). */
static void uc_refused(struct end *a, const uint8_t *dst, uint32_t rkey, uint64_t want)
{
	unsigned long drops0 = rdmx__fake_uc_drops;

	th_fill(a->buf, REGION, rkey);
	uc_write_to(a, dst, rkey);
	usleep(QUIET_MS * 1000);
	assert_true(fnv1a(dst, REGION) == want);
	if (is_fake())
		assert_int_equal(rdmx__fake_uc_drops - drops0, REGION / CHUNK);
}

/*
 * A server's memory exported to one client (core/mw.h): a type 2 window
 * bound to the server's UC QP toward client A. A's WRITEs land; client B,
 * connected to another UC QP of the same server (same protection domain),
 * WRITEs with A's key, and with the region's own key: the device refuses
 * both (UC: dropped) and A's bytes stay. Revoked, A's own key is refused.
 * On a device without windows the test says so and is skipped.
 */
static void test_uc_window(void **state)
{
	const struct rdmx__fabric_ops *f = fops();
	struct rdmx__dgram *d = NULL;
	struct rdmx__export e;
	struct end a, b, c;
	uint8_t *slots;
	uint64_t sum;
	uint32_t ka;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	end_open(&a, RDMX__DQP_UC, 0, REGION);
	if (!a.g->dev.uc) {
		end_close(&a);
		skip();
	}
	end_open(&b, RDMX__DQP_UC, 0, REGION);
	end_open(&c, RDMX__DQP_UC, 0, REGION);
	exchange(&a, &b, RDMX__DQP_UC);
	if (rdmx__dgram_open(f, b.ep, RDMX__DQP_UC, DEPTH, 0, &d) ||
	    rdmx__uc_connect(d, &c.g->self) || rdmx__uc_connect(c.g, &d->self))
		fail_msg("the server's second UC QP: %s", rdmx__last());
	slots = aligned_alloc(64, REGION);
	assert_non_null(slots);
	memset(slots, 0, REGION);
	if (rdmx__export_dgram(b.g, slots, REGION, RDMX__ACCESS_WRITE, WAIT_MS, &e))
		fail_msg("export: %s", rdmx__last());
	printf("UC window: isolation on this device: %s\n", rdmx__iso_name(e.how));
	if (e.how == RDMX__ISO_WINDOW) {
		th_fill(a.buf, REGION, 7);
		uc_write_to(&a, slots, e.rkey);
		sum = fnv1a(a.buf, REGION);
		wait_sum(slots, b.g->self.qpn, sum);
		uc_refused(&c, slots, e.rkey, sum);     /* A's key, over B's QP */
		uc_refused(&c, slots, e.mr->rkey, sum); /* the region's own key */
		ka = e.rkey;
		rdmx__export_revoke(&e);
		uc_refused(&a, slots, ka, sum); /* a stale key */
		printf("UC window: A's %d WRITEs landed; B's with A's key and with the "
		       "region's key refused; A's key refused once revoked\n", REGION / CHUNK);
	}
	rdmx__export_revoke(&e);
	rdmx__dgram_close(d);
	free(slots);
	end_close(&a);
	end_close(&b);
	end_close(&c);
	if (e.how != RDMX__ISO_WINDOW)
		skip();
}

/*
 * HERD's shape, server on its own thread: the client WRITES each request
 * over UC into its slot of the server's memory (the valid mark, the last
 * byte, written last), the server polls the slot, reads it once, checks
 * it and answers over UD; the client waits for each answer.
 */
#define HSLOT 64

struct herd {
	struct end uc_s, uc_c, ud_s, ud_c;
	uint64_t n;
	char err[160];
	pthread_t thread;
};

static uint8_t mark_of(uint64_t seq)
{
	return (uint8_t)(0x80 | (seq & 0x7f));
}

/* The server's wait for request @seq: its mark in the slot's last byte. */
static int herd_poll(struct herd *h, uint64_t seq, uint8_t *req)
{
	double end = th_now_ms() + WAIT_MS;
	const uint8_t *slot = h->uc_s.buf;

	while (__atomic_load_n(&slot[HSLOT - 1], __ATOMIC_ACQUIRE) != mark_of(seq)) {
		if (th_now_ms() > end)
			return snprintf(h->err, sizeof(h->err), "server: no request %llu in %d ms",
					(unsigned long long)seq, WAIT_MS);
		sched_yield(); /* two cores shared: let the client run */
	}
	memcpy(req, slot, HSLOT); /* the peer's bytes, read once */
	return 0;
}

static void *herd_server(void *arg)
{
	struct herd *h = arg;
	struct end *u = &h->ud_s;
	uint8_t req[HSLOT];
	struct rdmx__wc wc;

	for (uint64_t seq = 0; seq < h->n && !h->err[0]; seq++) {
		if (herd_poll(h, seq, req))
			break;
		if (th_check(req, HSLOT - 1, seq) != -1) {
			snprintf(h->err, sizeof(h->err), "server: request %llu corrupt",
				 (unsigned long long)seq);
			break;
		}
		memcpy(send_slot(u), req, HSLOT);
		if (rdmx__ud_send(u->g, u->ah, &u->peer, send_slot(u), HSLOT, u->mr->lkey, seq) ||
		    rdmx__dgram_wait(u->g, 0, WAIT_MS, "the answer's SEND", &wc))
			snprintf(h->err, sizeof(h->err), "server: %s", rdmx__last());
	}
	return NULL;
}

static void herd_call(struct herd *h, uint64_t seq)
{
	struct end *c = &h->uc_c;
	struct rdmx__wc wc;
	uint32_t got;

	th_fill(c->buf, HSLOT - 1, seq);
	c->buf[HSLOT - 1] = mark_of(seq);
	if (rdmx__uc_write(c->g, c->buf, HSLOT, c->mr->lkey, (uintptr_t)h->uc_s.buf,
			   h->uc_s.mr->rkey, seq) ||
	    rdmx__dgram_wait(c->g, 0, WAIT_MS, "the request's WRITE", &wc))
		fail_msg("client: %s", rdmx__last());
	assert_int_equal(th_check(take(&h->ud_c, &h->ud_s, &got), HSLOT - 1, seq), -1);
	assert_int_equal(got, HSLOT);
}

static void test_herd_threads(void **state)
{
	struct herd h;

	(void)state;
	memset(&h, 0, sizeof(h));
	h.n = th_count(1000);
	end_open(&h.uc_s, RDMX__DQP_UC, 0, HSLOT);
	end_open(&h.uc_c, RDMX__DQP_UC, 0, HSLOT);
	exchange(&h.uc_c, &h.uc_s, RDMX__DQP_UC);
	ud_pair(&h.ud_s, &h.ud_c);
	for (uint32_t i = 0; i < DEPTH; i++)
		post_slot(&h.ud_c, i);
	assert_int_equal(pthread_create(&h.thread, NULL, herd_server, &h), 0);
	for (uint64_t seq = 0; seq < h.n && !h.err[0]; seq++)
		herd_call(&h, seq);
	pthread_join(h.thread, NULL);
	if (h.err[0])
		fail_msg("%s", h.err);
	end_close(&h.uc_s);
	end_close(&h.uc_c);
	end_close(&h.ud_s);
	end_close(&h.ud_c);
}

static int decode_one(uint8_t *wire, size_t off, uint8_t v)
{
	struct rdmx__qp_desc d;

	wire[off] = v;
	return rdmx__qp_desc_decode(wire, RDMX__QP_DESC_WIRE, RDMX__DQP_UC, &d);
}

/* A peer's descriptor: every field out of range is -EINVAL, and the
 * caller's struct is untouched. */
static void test_bad_desc(void **state)
{
	struct rdmx__qp_desc good = { .qpn = 0x123456, .psn = 0xabcdef, .mtu = 3,
				      .type = RDMX__DQP_UC, .lid = 7, .gid = { 1, 2 } };
	struct rdmx__qp_desc out = { .qpn = 99 };
	static const struct { size_t off; uint8_t v; } bad[] = {
		{ 0, 2 },        /* version */
		{ 1, 1 },        /* type: UD where UC is wanted */
		{ 1, 9 },        /* type */
		{ 2, 0 },        /* mtu */
		{ 2, 6 },        /* mtu */
		{ 3, 1 },        /* reserved */
		{ 7, 1 },        /* qpn over 24 bits */
		{ 11, 1 },       /* psn over 24 bits */
		{ 17, 0xc0 },    /* lid: multicast */
		{ 31, 1 },       /* reserved */
	};
	uint8_t wire[RDMX__QP_DESC_WIRE], copy[RDMX__QP_DESC_WIRE];

	(void)state;
	rdmx__qp_desc_encode(&good, wire);
	assert_int_equal(rdmx__qp_desc_decode(wire, sizeof(wire), RDMX__DQP_UC, &out), 0);
	assert_memory_equal(&out, &good, sizeof(good));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(copy, wire, sizeof(wire));
		out.qpn = 99;
		assert_int_equal(decode_one(copy, bad[i].off, bad[i].v), -EINVAL);
		assert_int_equal(out.qpn, 99);
	}
	memcpy(copy, wire, sizeof(wire));
	memset(copy + 4, 0, 4); /* qpn 0 */
	assert_int_equal(rdmx__qp_desc_decode(copy, sizeof(copy), RDMX__DQP_UC, &out), -EINVAL);
	assert_int_equal(rdmx__qp_desc_decode(wire, sizeof(wire) - 1, RDMX__DQP_UC, &out),
			 -EINVAL);
	assert_non_null(strstr(rdmx__last(), "bytes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ud_ping_pong),
		cmocka_unit_test(test_ud_grh),
		cmocka_unit_test(test_ud_drops),
		cmocka_unit_test(test_ud_mtu),
		cmocka_unit_test(test_uc_write),
		cmocka_unit_test(test_uc_window),
		cmocka_unit_test(test_herd_threads),
		cmocka_unit_test(test_bad_desc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
