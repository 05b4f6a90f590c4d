/* SPDX-License-Identifier: MIT */
/*
 * User memory and one-sided operations (issue 9 s5): registrations, the
 * registered allocator, export/import of region descriptors, READ, WRITE,
 * FETCH_ADD and CMP_SWAP with completion tokens, local checks that keep a
 * bad offset from reaching the QP, and one-sided completions mixed with
 * every protocol's own traffic on its send CQ. Built for the fake fabric
 * (unit) and for verbs (rxe in the sandbox, test_onesided_rxe).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/conn.h"
#include "core/fabric.h"
#include "harness.h"
#ifdef TH_FAKE
#endif

#define WAIT_MS 20000 /* generous: emulated rxe under load */
#define REGION 65536

static const char *protocol;

/* A connected pair, the server's exported region and the client's import. */
struct fix {
	struct th_pair p;
	uint8_t *mem;            /* the server's exported memory */
	rdmx_mr *smr;
	uint8_t *local;          /* the client's buffer */
	rdmx_mr *cmr;
	rdmx_region *region;     /* imported on p.client */
	uint8_t desc[RDMX_REGION_DESC_LEN]; /* what p.server exported */
};

static void fix_open(struct fix *f, unsigned access)
{
	struct rdmx_conn_opts o;
	uint8_t desc[RDMX_REGION_DESC_LEN + 8];
	size_t dlen = sizeof(desc);

	memset(f, 0, sizeof(*f));
	rdmx_conn_opts_init(&o);
	o.protocol = protocol;
	if (th_pair_open(&f->p, &o, &o))
		fail_msg("%s: cannot connect a pair (the harness: line above says why)",
			 protocol);
	f->mem = aligned_alloc(4096, REGION);
	f->local = aligned_alloc(4096, REGION);
	assert_non_null(f->mem);
	assert_non_null(f->local);
	th_fill(f->mem, REGION, 7);
	memset(f->local, 0, REGION);
	assert_int_equal(rdmx_mr_reg(f->p.ctx, f->mem, REGION, access, &f->smr), 0);
	assert_int_equal(rdmx_mr_reg(f->p.ctx, f->local, REGION, RDMX_ACCESS_LOCAL,
				     &f->cmr), 0);
	assert_int_equal(rdmx_mr_export(f->p.server, f->smr, 0, REGION, access,
					desc, &dlen), 0);
	assert_int_equal(dlen, RDMX_REGION_DESC_LEN);
	memcpy(f->desc, desc, sizeof(f->desc));
	assert_int_equal(rdmx_region_import(f->p.client, desc, dlen, &f->region), 0);
	assert_int_equal(rdmx_region_len(f->region), REGION);
}

static void fix_close(struct fix *f)
{
	rdmx_region_free(f->region);
	rdmx_mr_dereg(f->smr); /* nothing in flight; before the context goes */
	rdmx_mr_dereg(f->cmr);
	th_pair_close(&f->p);
	free(f->mem);
	free(f->local);
}

#define ALL (RDMX_ACCESS_REMOTE_READ | RDMX_ACCESS_REMOTE_WRITE | \
	     RDMX_ACCESS_REMOTE_ATOMIC)

static void done(rdmx_conn *c, rdmx_token t)
{
	int rc = rdmx_wait(c, t, WAIT_MS);

	if (rc)
		fail_msg("%s: rdmx_wait: %s (%s)", protocol, rdmx_strerror(rc),
			 rdmx_conn_error(c));
}

/* A message each way still works: the connection is intact. */
static void assert_conn_ok(struct fix *f)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_msg_alloc(f->p.client, 16, &m, WAIT_MS), 0);
	th_fill(m.data, 16, 99);
	m.len = 16;
	assert_int_equal(rdmx_send(f->p.client, &m), 0);
	assert_int_equal(rdmx_recv(f->p.server, &m, WAIT_MS), 0);
	assert_int_equal(m.len, 16);
	assert_int_equal(th_check(m.data, 16, 99), -1);
	assert_int_equal(rdmx_msg_release(f->p.server, &m), 0);
}

static void test_read_write(void **state)
{
	struct fix f;
	rdmx_token t;

	(void)state;
	fix_open(&f, ALL);
	assert_int_equal(rdmx_read(f.p.client, f.region, 0, f.cmr, 0, REGION, &t), 0);
	done(f.p.client, t);
	assert_memory_equal(f.local, f.mem, REGION);
	/* WRITE a pattern to an odd offset; only those bytes change. */
	th_fill(f.local + 100, 333, 42);
	assert_int_equal(rdmx_write(f.p.client, f.region, 1001, f.cmr, 100, 333, &t), 0);
	done(f.p.client, t);
	assert_int_equal(th_check(f.mem + 1001, 333, 42), -1);
	assert_int_equal(th_check(f.mem, 1001, 7), -1);
	assert_conn_ok(&f);
	fix_close(&f);
}

static void test_atomics(void **state)
{
	uint64_t *word, *old;
	struct fix f;
	rdmx_token t;

	(void)state;
	fix_open(&f, ALL);
	word = (uint64_t *)(void *)(f.mem + 64);
	old = (uint64_t *)(void *)(f.local + 8);
	*word = 40;
	assert_int_equal(rdmx_fetch_add(f.p.client, f.region, 64, 2, f.cmr, 8, &t), 0);
	done(f.p.client, t);
	assert_int_equal(*old, 40);
	assert_int_equal(__atomic_load_n(word, __ATOMIC_ACQUIRE), 42);
	/* A compare that does not match leaves the word. */
	assert_int_equal(rdmx_cmp_swap(f.p.client, f.region, 64, 41, 7, f.cmr, 8, &t), 0);
	done(f.p.client, t);
	assert_int_equal(*old, 42);
	assert_int_equal(__atomic_load_n(word, __ATOMIC_ACQUIRE), 42);
	assert_int_equal(rdmx_cmp_swap(f.p.client, f.region, 64, 42, 7, f.cmr, 8, &t), 0);
	done(f.p.client, t);
	assert_int_equal(*old, 42);
	assert_int_equal(__atomic_load_n(word, __ATOMIC_ACQUIRE), 7);
	fix_close(&f);
}

/* Bad offsets, lengths, alignment and rights fail before posting; the
 * connection stays up and the next operation works. */
static void test_local_checks(void **state)
{
	rdmx_region *ro;
	struct fix f;
	rdmx_token t;
	uint8_t desc[RDMX_REGION_DESC_LEN];
	size_t dlen = sizeof(desc);

	(void)state;
	fix_open(&f, ALL);
	assert_int_equal(rdmx_read(f.p.client, f.region, REGION - 7, f.cmr, 0, 8, &t), -EINVAL);
	assert_int_equal(rdmx_read(f.p.client, f.region, SIZE_MAX - 2, f.cmr, 0, 8, &t), -EINVAL);
	assert_int_equal(rdmx_read(f.p.client, f.region, 0, f.cmr, REGION - 3, 8, &t), -EINVAL);
	assert_int_equal(rdmx_read(f.p.client, f.region, 0, f.cmr, 0, 0, &t), -EINVAL);
	assert_int_equal(rdmx_write(f.p.client, f.region, REGION, f.cmr, 0, 1, &t), -EINVAL);
	assert_int_equal(rdmx_fetch_add(f.p.client, f.region, 4, 1, f.cmr, 0, &t), -EINVAL);
	assert_int_equal(rdmx_cmp_swap(f.p.client, f.region, 8, 0, 1, f.cmr, 4, &t), -EINVAL);
	assert_int_equal(rdmx_fetch_add(f.p.client, f.region, REGION - 8, 1, f.cmr, 0, &t), 0);
	done(f.p.client, t);
	/* The region belongs to the client's connection, not the server's. */
	assert_int_equal(rdmx_read(f.p.server, f.region, 0, f.smr, 0, 8, &t), -EINVAL);
	assert_non_null(strstr(rdmx_conn_error(f.p.server), "another connection"));
	/* A read-only export refuses WRITE and atomics with -EACCES. */
	assert_int_equal(rdmx_mr_export(f.p.server, f.smr, 4096, 4096,
					RDMX_ACCESS_REMOTE_READ, desc, &dlen), 0);
	assert_int_equal(rdmx_region_import(f.p.client, desc, dlen, &ro), 0);
	assert_int_equal(rdmx_write(f.p.client, ro, 0, f.cmr, 0, 8, &t), -EACCES);
	assert_int_equal(rdmx_fetch_add(f.p.client, ro, 0, 1, f.cmr, 0, &t), -EACCES);
	assert_int_equal(rdmx_read(f.p.client, ro, 4096 - 8, f.cmr, 0, 9, &t), -EINVAL);
	assert_int_equal(rdmx_read(f.p.client, ro, 0, f.cmr, 0, 4096, &t), 0);
	done(f.p.client, t);
	assert_memory_equal(f.local, f.mem + 4096, 4096);
	rdmx_region_free(ro);
	assert_conn_ok(&f);
	fix_close(&f);
}

static void test_export_checks(void **state)
{
	uint8_t desc[RDMX_REGION_DESC_LEN];
	size_t dlen = sizeof(desc);
	rdmx_mr *ro;
	struct fix f;

	(void)state;
	fix_open(&f, ALL);
	assert_int_equal(rdmx_mr_reg(f.p.ctx, f.mem, 4096, RDMX_ACCESS_REMOTE_READ, &ro), 0);
	assert_int_equal(rdmx_mr_export(f.p.server, ro, 0, 4096, RDMX_ACCESS_REMOTE_WRITE,
					desc, &dlen), -EACCES);
	assert_int_equal(rdmx_mr_export(f.p.server, ro, 1, 4096, RDMX_ACCESS_REMOTE_READ,
					desc, &dlen), -EINVAL);
	assert_int_equal(rdmx_mr_export(f.p.server, ro, 0, 0, RDMX_ACCESS_REMOTE_READ,
					desc, &dlen), -EINVAL);
	dlen = RDMX_REGION_DESC_LEN - 1;
	assert_int_equal(rdmx_mr_export(f.p.server, ro, 0, 4096, RDMX_ACCESS_REMOTE_READ,
					desc, &dlen), -ENOSPC);
	assert_int_equal(rdmx_mr_reg(f.p.ctx, f.mem, 4096, 0x80, &ro), -EINVAL);
	rdmx_mr_dereg(ro);
	fix_close(&f);
}

/* A descriptor is peer-written: every malformed one is refused. */
static void test_import_checks(void **state)
{
	uint8_t good[RDMX_REGION_DESC_LEN], bad[RDMX_REGION_DESC_LEN];
	size_t dlen = sizeof(good);
	rdmx_region *r = NULL;
	struct fix f;
	static const struct { int off; uint8_t val; } cases[] = {
		{ 0, 0x00 },  /* magic */
		{ 4, 2 },     /* version */
		{ 5, 0 },     /* no access */
		{ 5, 0x10 },  /* unknown access */
		{ 6, 1 },     /* reserved */
		{ 28, 1 },    /* reserved */
	};

	(void)state;
	fix_open(&f, ALL);
	assert_int_equal(rdmx_mr_export(f.p.server, f.smr, 0, REGION, ALL, good, &dlen), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(bad, good, sizeof(bad));
		bad[cases[i].off] = cases[i].val;
		assert_int_equal(rdmx_region_import(f.p.client, bad, sizeof(bad), &r), -EPROTO);
	}
	memcpy(bad, good, sizeof(bad));
	memset(bad + 16, 0, 8); /* empty */
	assert_int_equal(rdmx_region_import(f.p.client, bad, sizeof(bad), &r), -EPROTO);
	memcpy(bad, good, sizeof(bad));
	memset(bad + 8, 0xff, 8); /* address + length wraps */
	assert_int_equal(rdmx_region_import(f.p.client, bad, sizeof(bad), &r), -EPROTO);
	assert_int_equal(rdmx_region_import(f.p.client, good, sizeof(good) - 1, &r), -EPROTO);
	assert_null(r);
	fix_close(&f);
}

static void test_tokens(void **state)
{
	rdmx_token t[RDMX_ONESIDED_MAX + 1];
	struct fix f;
	int rc;

	(void)state;
	fix_open(&f, ALL);
	for (int i = 0; i < RDMX_ONESIDED_MAX; i++)
		assert_int_equal(rdmx_read(f.p.client, f.region, (size_t)i * 64, f.cmr,
					   (size_t)i * 64, 64, &t[i]), 0);
	assert_int_equal(rdmx_read(f.p.client, f.region, 0, f.cmr, 0, 64, &t[16]), -ENOBUFS);
	for (int i = RDMX_ONESIDED_MAX - 1; i >= 0; i--) {
		do
			rc = rdmx_wait(f.p.client, t[i], 0);
		while (rc == -EAGAIN);
		assert_int_equal(rc, 0);
	}
	assert_memory_equal(f.local, f.mem, RDMX_ONESIDED_MAX * 64);
	assert_int_equal(rdmx_wait(f.p.client, t[0], 0), -EINVAL); /* spent */
	assert_int_equal(rdmx_wait(f.p.client, 0, 0), -EINVAL);
	assert_int_equal(rdmx_wait(f.p.server, t[1], 0), -EINVAL);
	fix_close(&f);
}

/*
 * One-sided completions land on the protocol's send CQ: interleave them
 * with the protocol's own messages in both directions and check both
 * (the protocol's accounting must never see a one-sided completion).
 */
static void test_mixed_with_messages(void **state)
{
	struct rdmx_msg m;
	struct fix f;
	rdmx_token t;
	uint64_t n = th_count(400);

	(void)state;
	fix_open(&f, ALL);
	for (uint64_t i = 0; i < n; i++) {
		size_t off = (size_t)(i % 64) * 1024;

		assert_int_equal(rdmx_read(f.p.client, f.region, off, f.cmr, off, 1024, &t), 0);
		assert_int_equal(rdmx_msg_alloc(f.p.client, 64, &m, WAIT_MS), 0);
		th_fill(m.data, 64, i);
		m.len = 64;
		assert_int_equal(rdmx_send(f.p.client, &m), 0);
		assert_int_equal(rdmx_recv(f.p.server, &m, WAIT_MS), 0);
		assert_int_equal(th_check(m.data, 64, i), -1);
		assert_int_equal(rdmx_msg_release(f.p.server, &m), 0);
		if (i % 3 == 0) /* let the protocol poll the CQ first now and then */
			assert_int_equal(rdmx_flush(f.p.client, WAIT_MS), 0);
		done(f.p.client, t);
		assert_memory_equal(f.local + off, f.mem + off, 1024);
	}
	assert_int_equal(rdmx_flush(f.p.client, WAIT_MS), 0);
	fix_close(&f);
}

/* rdmx_send_mr: the bytes of a registered range arrive as one message. */
static void test_send_mr(void **state)
{
	struct rdmx_msg m;
	struct fix f;

	(void)state;
	fix_open(&f, ALL);
	th_fill(f.local + 10, 500, 5);
	assert_int_equal(rdmx_send_mr(f.p.client, f.cmr, 10, 500, WAIT_MS), 0);
	assert_int_equal(rdmx_recv(f.p.server, &m, WAIT_MS), 0);
	assert_int_equal(m.len, 500);
	assert_int_equal(th_check(m.data, 500, 5), -1);
	assert_int_equal(rdmx_msg_release(f.p.server, &m), 0);
	assert_int_equal(rdmx_send_mr(f.p.client, f.cmr, REGION - 4, 8, WAIT_MS), -EINVAL);
	fix_close(&f);
}

/* Receive message @seq of @len bytes (th_fill pattern) on @c. */
static void recv_seq(rdmx_conn *c, size_t len, uint64_t seq)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_recv(c, &m, WAIT_MS), 0);
	assert_int_equal(m.len, len);
	assert_int_equal(th_check(m.data, len, seq), -1);
	assert_int_equal(rdmx_msg_release(c, &m), 0);
}

/*
 * rdmx_send_mr_tok (zero copy on send_recv and srq, a copy elsewhere):
 * messages from registered memory, between plain sends and after a held
 * RDMX_SEND_MORE burst (which goes first), arrive whole and in order;
 * the last token completes; bad arguments are refused with nothing sent,
 * and the connection still works.
 */
static void test_send_mr_tok(void **state)
{
	size_t max, lens[] = { 1, 64, 700, 4096, 0 }, sent[40];
	rdmx_token t = 0, t2 = 0;
	struct rdmx_msg m;
	uint64_t n = 0;
	struct fix f;

	(void)state;
	fix_open(&f, ALL);
	max = rdmx_conn_max_msg(f.p.client);
	lens[4] = max < REGION / 2 ? max : REGION / 2;
	for (int r = 0; r < 20; r++) {
		size_t len = lens[r % 5], off = (size_t)r * 97 % (REGION - len);

		if (r % 4 == 3) { /* a held burst of one, then the zero-copy send */
			assert_int_equal(rdmx_msg_alloc(f.p.client, 32, &m, WAIT_MS), 0);
			th_fill(m.data, 32, n);
			m.len = 32;
			assert_int_equal(rdmx_send_flags(f.p.client, &m, RDMX_SEND_MORE, NULL), 0);
			sent[n++] = 32;
		}
		th_fill(f.local + off, len, n);
		assert_int_equal(rdmx_send_mr_tok(f.p.client, f.cmr, off, len, WAIT_MS, &t), 0);
		sent[n++] = len;
		assert_true(t > t2);
		t2 = t;
	}
	for (uint64_t i = 0; i < n; i++) /* read's sends complete as they are */
		recv_seq(f.p.server, sent[i], i);
	done(f.p.client, t);
	assert_int_equal(rdmx_send_mr_tok(f.p.client, f.cmr, 0, 8, WAIT_MS, NULL), -EINVAL);
	assert_int_equal(rdmx_send_mr_tok(NULL, f.cmr, 0, 8, WAIT_MS, &t), -EINVAL);
	assert_int_equal(rdmx_send_mr_tok(f.p.client, NULL, 0, 8, WAIT_MS, &t), -EINVAL);
	assert_int_equal(rdmx_send_mr_tok(f.p.client, f.cmr, REGION - 4, 8, WAIT_MS, &t), -EINVAL);
	if (max < REGION)
		assert_int_equal(rdmx_send_mr_tok(f.p.client, f.cmr, 0, max + 1, WAIT_MS, &t),
				 -EMSGSIZE);
	assert_int_equal(rdmx_recv(f.p.server, &m, 0), -EAGAIN); /* none sent */
	assert_conn_ok(&f);
	fix_close(&f);
}

#ifdef TH_FAKE
/*
 * Zero copy, seen where the fake fabric shows it: it reads a SEND's
 * bytes when the SEND runs, and runs one that met no posted receive once
 * the peer posts one. So a send_recv SEND of rdmx_send_mr_tok held up
 * that way carries the registered bytes as they are then - had they been
 * copied at the call, the old bytes would arrive. Its token completes
 * only after it ran.
 */
static void test_send_mr_tok_no_copy(void **state)
{
	struct rdmx_conn_opts o;
	struct fix f;
	rdmx_token t;

	(void)state;
	protocol = "send_recv";
	rdmx_conn_opts_init(&o);
	fix_open(&f, ALL);
	for (uint32_t i = 0; i < o.recv_depth; i++) /* the receiver's buffers */
		assert_int_equal(th_send_seq(f.p.client, i, 64, WAIT_MS), 0);
	assert_int_equal(rdmx_flush(f.p.client, WAIT_MS), 0);
	th_fill(f.local, 3000, 1000);
	assert_int_equal(rdmx_send_mr_tok(f.p.client, f.cmr, 0, 3000, WAIT_MS, &t), 0);
	assert_int_equal(rdmx_wait(f.p.client, t, 0), -EAGAIN); /* waits for a receive */
	th_fill(f.local, 3000, 2000);
	for (uint32_t i = 0; i < o.recv_depth; i++)
		recv_seq(f.p.server, 64, i);
	recv_seq(f.p.server, 3000, 2000);
	done(f.p.client, t);
	fix_close(&f);
}
#endif

/* Memory from rdmx_alloc is a READ's destination and a WRITE's source. */
static void test_alloc_onesided(void **state)
{
	struct fix f;
	rdmx_token t;
	rdmx_mr *mr;
	size_t off;
	uint8_t *buf;

	(void)state;
	fix_open(&f, ALL);
	buf = rdmx_alloc(f.p.ctx, 3000);
	assert_non_null(buf);
	assert_int_equal(rdmx_alloc_mr(f.p.ctx, buf, &mr, &off), 0);
	assert_int_equal(rdmx_read(f.p.client, f.region, 5000, mr, off, 3000, &t), 0);
	done(f.p.client, t);
	assert_memory_equal(buf, f.mem + 5000, 3000);
	rdmx_free(f.p.ctx, buf);
	assert_int_equal(rdmx_alloc_mr(f.p.ctx, buf, &mr, &off), -EINVAL);
	fix_close(&f);
}

/* ------------------------------------------------- the registered allocator */

static rdmx_ctx *ctx_new(void)
{
	struct rdmx_ctx_opts co = { .fabric = "fake" };
	rdmx_ctx *ctx;

	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	return ctx;
}

/* Every size gets a 64-byte aligned block inside its registration. */
static void test_alloc_sizes(void **state)
{
	static const size_t sizes[] = { 1, 63, 64, 65, 4096, 65536, 65537, 3 << 20 };
	rdmx_ctx *ctx = ctx_new();

	(void)state;
	assert_null(rdmx_alloc(ctx, 0));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *p = rdmx_alloc(ctx, sizes[i]);
		rdmx_mr *mr;
		size_t off;

		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 64, 0);
		memset(p, 0xa5, sizes[i]);
		assert_int_equal(rdmx_alloc_mr(ctx, p, &mr, &off), 0);
		assert_ptr_equal((uint8_t *)rdmx_mr_addr(mr) + off, p);
		assert_true(off + sizes[i] <= rdmx_mr_len(mr));
		rdmx_free(ctx, p);
	}
	rdmx_ctx_destroy(ctx);
}

/* A freed block is reused; a double free is refused, not a corruption. */
static void test_alloc_reuse(void **state)
{
	rdmx_ctx *ctx = ctx_new();
	void *a, *b, *c;

	(void)state;
	a = rdmx_alloc(ctx, 100);
	b = rdmx_alloc(ctx, 100);
	assert_ptr_not_equal(a, b);
	rdmx_free(ctx, a);
	c = rdmx_alloc(ctx, 120); /* the same 128-byte class */
	assert_ptr_equal(c, a);
	rdmx_free(ctx, c);
	rdmx_free(ctx, c);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "freed twice"));
	a = rdmx_alloc(ctx, 100);
	c = rdmx_alloc(ctx, 100);
	assert_ptr_not_equal(a, c); /* the double free did not enter c twice */
	rdmx_free(ctx, (char *)b + 1);
	assert_non_null(strstr(rdmx_ctx_error(ctx), "not allocated"));
	rdmx_free(ctx, a);
	rdmx_free(ctx, b);
	rdmx_free(ctx, c);
	rdmx_ctx_destroy(ctx);
}

#define NBLK 3000

struct blk {
	uint8_t *p;
	size_t n;
};

/* Allocate, fill and check @n random blocks, freeing half on the way. */
static void churn(rdmx_ctx *ctx, uint64_t seed, unsigned n)
{
	struct blk *b = calloc(n, sizeof(*b));
	const uint64_t base = seed * 100000; /* pattern of block i: base + i */

	assert_non_null(b);
	for (unsigned i = 0; i < n; i++) {
		b[i].n = 1 + th_rand(&seed) % (th_rand(&seed) % 8 ? 2048 : 200000);
		b[i].p = rdmx_alloc(ctx, b[i].n);
		assert_non_null(b[i].p);
		th_fill(b[i].p, b[i].n, base + i);
		if (i && th_rand(&seed) % 2) { /* free an earlier one */
			unsigned j = (unsigned)(th_rand(&seed) % i);

			if (b[j].p)
				assert_int_equal(th_check(b[j].p, b[j].n, base + j), -1);
			rdmx_free(ctx, b[j].p);
			b[j].p = NULL;
		}
	}
	for (unsigned i = 0; i < n; i++) { /* nothing overlapped */
		if (b[i].p)
			assert_int_equal(th_check(b[i].p, b[i].n, base + i), -1);
		rdmx_free(ctx, b[i].p);
	}
	free(b);
}

static void test_alloc_no_overlap(void **state)
{
	rdmx_ctx *ctx = ctx_new();

	(void)state;
	churn(ctx, 1, (unsigned)th_count(NBLK));
	rdmx_ctx_destroy(ctx);
}

struct churner {
	pthread_t t;
	rdmx_ctx *ctx;
	uint64_t seed;
};

static void *churn_main(void *arg)
{
	struct churner *c = arg;

	churn(c->ctx, c->seed, (unsigned)th_count(NBLK));
	return NULL;
}

static void test_alloc_threads(void **state)
{
	struct churner c[4];
	rdmx_ctx *ctx = ctx_new();

	(void)state;
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churner){ .ctx = ctx, .seed = (uint64_t)i * 1000003 };
		assert_int_equal(pthread_create(&c[i].t, NULL, churn_main, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(c[i].t, NULL);
	rdmx_ctx_destroy(ctx);
}

/* ------------------------------------------ connection information, ABI */

static void pair(struct th_pair *p, const char *src)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.src_addr = src;
	if (th_pair_open(p, &o, &o))
		fail_msg("cannot connect a pair (the harness: line above says why)");
}

static void test_addresses(void **state)
{
	char cl[64], cp[64], sl[64], sp[64], tiny[3];
	struct th_pair p;

	(void)state;
	pair(&p, NULL);
	assert_int_equal(rdmx_conn_local_addr(p.client, cl, sizeof(cl)), 0);
	assert_int_equal(rdmx_conn_peer_addr(p.client, cp, sizeof(cp)), 0);
	assert_int_equal(rdmx_conn_local_addr(p.server, sl, sizeof(sl)), 0);
	assert_int_equal(rdmx_conn_peer_addr(p.server, sp, sizeof(sp)), 0);
	print_message("client %s -> %s, server %s -> %s\n", cl, cp, sl, sp);
	assert_string_equal(cl, sp);
	assert_string_equal(cp, sl);
	assert_string_not_equal(cl, cp);
	assert_int_equal(rdmx_conn_peer_addr(p.client, tiny, sizeof(tiny)), -ENOSPC);
	assert_int_equal(rdmx_conn_peer_addr(NULL, cp, sizeof(cp)), -EINVAL);
	th_pair_close(&p);
}

static void test_user_pointer(void **state)
{
	struct th_pair p;
	int a, b;

	(void)state;
	pair(&p, NULL);
	assert_null(rdmx_conn_get_user(p.client));
	rdmx_conn_set_user(p.client, &a);
	rdmx_conn_set_user(p.server, &b);
	assert_ptr_equal(rdmx_conn_get_user(p.client), &a);
	assert_ptr_equal(rdmx_conn_get_user(p.server), &b);
	rdmx_conn_set_user(p.client, NULL);
	assert_null(rdmx_conn_get_user(p.client));
	th_pair_close(&p);
}

static void send_n(rdmx_conn *c, int n, size_t len)
{
	struct rdmx_msg m;

	for (int i = 0; i < n; i++) {
		assert_int_equal(rdmx_msg_alloc(c, len, &m, WAIT_MS), 0);
		m.len = len;
		assert_int_equal(rdmx_send(c, &m), 0);
	}
	assert_int_equal(rdmx_flush(c, WAIT_MS), 0);
}

struct adder {
	pthread_t t;
	struct fix *f;
	size_t off;              /* its 8 bytes of the client's buffer */
	uint64_t n;
	int rc;
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;
	rdmx_token t;

	for (uint64_t i = 0; i < a->n && !a->rc; i++) {
		a->rc = rdmx_fetch_add(a->f->p.client, a->f->region, 0, 1, a->f->cmr,
				       a->off, &t);
		if (!a->rc)
			a->rc = rdmx_wait(a->f->p.client, t, WAIT_MS);
	}
	return NULL;
}

/* Threads share a connection: two add to one remote word while the main
 * thread exchanges messages; every add lands once, every token is its
 * thread's own. */
static void test_threads(void **state)
{
	struct adder a[2];
	struct fix f;
	uint64_t n = th_count(300);

	(void)state;
	fix_open(&f, ALL);
	memset(f.mem, 0, 8);
	for (int i = 0; i < 2; i++) {
		a[i] = (struct adder){ .f = &f, .off = (size_t)(i + 1) * 64, .n = n };
		assert_int_equal(pthread_create(&a[i].t, NULL, adder_main, &a[i]), 0);
	}
	for (uint64_t i = 0; i < n / 4; i++) {
		struct rdmx_msg m;

		/* no flush between: buffered_read's waits for the receiver */
		assert_int_equal(rdmx_msg_alloc(f.p.client, 32, &m, WAIT_MS), 0);
		m.len = 32;
		assert_int_equal(rdmx_send(f.p.client, &m), 0);
		assert_int_equal(rdmx_recv(f.p.server, &m, WAIT_MS), 0);
		assert_int_equal(rdmx_msg_release(f.p.server, &m), 0);
	}
	assert_int_equal(rdmx_flush(f.p.client, WAIT_MS), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(a[i].t, NULL);
		if (a[i].rc)
			fail_msg("%s: adder %d: %s (%s)", protocol, i, rdmx_strerror(a[i].rc),
				 rdmx_conn_error(f.p.client));
	}
	assert_int_equal(__atomic_load_n((uint64_t *)(void *)f.mem, __ATOMIC_ACQUIRE), 2 * n);
	fix_close(&f);
}

static void test_stats(void **state)
{
	struct rdmx_conn_stats cs = { .size = sizeof(cs) }, ss = { .size = sizeof(ss) };
	struct { struct rdmx_conn_stats st; uint64_t guard; } old;
	struct rdmx_msg m;
	struct fix f;
	rdmx_token t;

	(void)state;
	protocol = "send_recv";
	fix_open(&f, ALL);
	send_n(f.p.client, 3, 10);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rdmx_recv(f.p.server, &m, WAIT_MS), 0);
		assert_int_equal(rdmx_msg_release(f.p.server, &m), 0);
	}
	assert_int_equal(rdmx_read(f.p.client, f.region, 0, f.cmr, 0, 100, &t), 0);
	done(f.p.client, t);
	assert_int_equal(rdmx_conn_stats(f.p.client, &cs), 0);
	assert_int_equal(rdmx_conn_stats(f.p.server, &ss), 0);
	assert_int_equal(cs.msgs_sent, 3);
	assert_int_equal(cs.bytes_sent, 30);
	assert_int_equal(ss.msgs_recv, 3);
	assert_int_equal(ss.bytes_recv, 30);
	assert_int_equal(cs.msgs_recv, 0);
	assert_int_equal(cs.onesided_ops, 1);
	assert_int_equal(cs.onesided_bytes, 100);
	assert_int_equal(cs.retry_exceeded + cs.rnr_exceeded, 0);
	/* A caller that knows only the first counter gets only that. */
	memset(&old, 0x5a, sizeof(old));
	old.st.size = offsetof(struct rdmx_conn_stats, bytes_sent);
	assert_int_equal(rdmx_conn_stats(f.p.client, &old.st), 0);
	assert_int_equal(old.st.msgs_sent, 3);
	assert_int_equal(old.st.bytes_sent, 0x5a5a5a5a5a5a5a5aull);
	old.st.size = 4;
	assert_int_equal(rdmx_conn_stats(f.p.client, &old.st), -EINVAL);
	fix_close(&f);
}

#ifdef TH_FAKE
/*
 * A READ toward a peer whose host went silent: rdmx_wait is bounded and
 * names the operation and the connection; once the transport's retries
 * are over the token fails with the connection (-ECONNRESET) and the
 * counters show the exhausted retries.
 */
static void test_wait_silent_peer(void **state)
{
	struct rdmx_conn_stats st = { .size = sizeof(st) };
	struct rdmx_conn_opts o;
	uint8_t desc[RDMX_REGION_DESC_LEN];
	size_t dlen = sizeof(desc);
	static uint64_t mem[512], local[512];
	rdmx_region *r;
	rdmx_mr *smr, *cmr;
	struct th_pair p;
	rdmx_token t;
	int rc;

	(void)state;
	rdmx_conn_opts_init(&o);
	o.liveness_ms = 1000; /* the transport gives up in ~0.5 s */
	if (th_pair_open(&p, &o, &o))
		fail_msg("cannot connect a pair: %s", rdmx_last_error());
	assert_int_equal(rdmx_mr_reg(p.ctx, mem, sizeof(mem), ALL, &smr), 0);
	assert_int_equal(rdmx_mr_reg(p.ctx, local, sizeof(local), 0, &cmr), 0);
	assert_int_equal(rdmx_mr_export(p.server, smr, 0, sizeof(mem), ALL, desc, &dlen), 0);
	assert_int_equal(rdmx_region_import(p.client, desc, dlen, &r), 0);
	rdmx__fake_silence(p.server->ep, 1);
	assert_int_equal(rdmx_read(p.client, r, 0, cmr, 0, 64, &t), 0);
	assert_int_equal(rdmx_wait(p.client, t, 0), -EAGAIN);
	assert_int_equal(rdmx_wait(p.client, t, 50), -ETIMEDOUT);
	print_message("%s\n", rdmx_conn_error(p.client));
	assert_non_null(strstr(rdmx_conn_error(p.client), "one-sided READ on the connection to fake:qp"));
	rc = rdmx_wait(p.client, t, WAIT_MS);
	print_message("%s\n", rdmx_conn_error(p.client));
	assert_int_equal(rc, -ECONNRESET);
	assert_non_null(strstr(rdmx_conn_error(p.client), "one-sided READ: peer stopped answering"));
	assert_int_equal(rdmx_wait(p.client, t, 0), -EINVAL); /* spent */
	assert_int_equal(rdmx_conn_stats(p.client, &st), 0);
	assert_int_equal(st.retry_exceeded, 1);
	rdmx__fake_silence(p.server->ep, 0);
	rdmx_region_free(r);
	rdmx_mr_dereg(smr);
	rdmx_mr_dereg(cmr);
	th_pair_close(&p);
}
#endif


/* ------------------------------------------- an export bound to one client */

/* Another client of f's server: its connection and the server's end. */
static void other_client(struct fix *f, rdmx_conn **client, rdmx_conn **server)
{
	struct th_acceptor a = { .lis = f->p.lis };
	int rc;

	th_accept_start(&a);
	rc = rdmx_dial(f->p.ctx, th_addr(), rdmx_listener_port(f->p.lis), NULL, client);
	assert_int_equal(th_accept_join(&a), 0);
	assert_int_equal(rc, 0);
	*server = a.conn;
}

/* @c READs with f's descriptor (another connection's grant): refused by
 * the exporter's device, and @c fails. */
static void read_refused(struct fix *f, rdmx_conn *c, const char *what)
{
	static const uint8_t zero[64];
	rdmx_region *r;
	rdmx_token t;
	int rc;

	assert_int_equal(rdmx_region_import(c, f->desc, sizeof(f->desc), &r), 0);
	memset(f->local, 0, REGION);
	rc = rdmx_read(c, r, 0, f->cmr, 0, 64, &t);
	if (!rc)
		rc = rdmx_wait(c, t, WAIT_MS);
	print_message("%s: %s (%s)\n", what, rdmx_strerror(rc), rdmx_conn_error(c));
	assert_int_not_equal(rc, 0);
	assert_memory_equal(f->local, zero, sizeof(zero)); /* nothing read */
	assert_non_null(strstr(rdmx_conn_error(c), "READ"));
	rdmx_region_free(r);
}

/* A region exported to client A, READ by client B with A's descriptor:
 * B's READ fails, B's connection fails, A's READs and messages go on. */
static void test_export_cross(void **state)
{
	struct fix f;
	rdmx_conn *b, *sb;
	rdmx_token t;

	(void)state;
	fix_open(&f, RDMX_ACCESS_REMOTE_READ);
	other_client(&f, &b, &sb);
	read_refused(&f, b, "B READs with A's export");
	assert_int_equal(rdmx_read(f.p.client, f.region, 0, f.cmr, 0, REGION, &t), 0);
	done(f.p.client, t);
	assert_memory_equal(f.local, f.mem, REGION);
	assert_conn_ok(&f);
	rdmx_conn_close(b);
	rdmx_conn_close(sb);
	fix_close(&f);
}

/* After the server closed A's connection, A's key is refused (its window
 * revoked) on a connection of a newcomer. */
static void test_export_stale(void **state)
{
	struct fix f;
	rdmx_conn *c, *sc;

	(void)state;
	fix_open(&f, RDMX_ACCESS_REMOTE_READ);
	rdmx_conn_close(f.p.server);
	f.p.server = NULL;
	other_client(&f, &c, &sc);
	read_refused(&f, c, "a newcomer READs with a closed client's export");
	rdmx_conn_close(c);
	rdmx_conn_close(sc);
	fix_close(&f);
}

static void test_version(void **state)
{
	(void)state;
	assert_int_equal(rdmx_version(), RDMX_VERSION);
	assert_int_equal(rdmx_version() >> 16, RDMX_VERSION_MAJOR);
}

/* The option structs' sizes are checked; a bad one is -EINVAL, never a
 * read past the caller's struct. */
static void test_opts_size(void **state)
{
	struct rdmx_ctx_opts co = { .fabric = th_fabric() }; /* size 0: version 0 */
	struct rdmx_conn_opts o;
	rdmx_listener *lis;
	rdmx_conn *c;
	rdmx_ctx *ctx;

	(void)state;
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	rdmx_ctx_destroy(ctx);
	rdmx_ctx_opts_init(&co);
	assert_int_equal(co.size, sizeof(co));
	co.fabric = th_fabric();
	assert_int_equal(rdmx_ctx_create(&ctx, &co), 0);
	co.size = sizeof(co) + 8;
	assert_int_equal(rdmx_ctx_create(NULL, &co), -EINVAL);
	rdmx_conn_opts_init(&o);
	assert_int_equal(o.size, sizeof(o));
	o.size = 0;
	assert_int_equal(rdmx_listen(ctx, th_addr(), 0, &o, &lis), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "rdmx_conn_opts_init"));
	o.size = sizeof(o) + 8;
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, &o, &c), -EINVAL);
	o.size = sizeof(o);
	o.src_addr = "not-an-address";
	assert_int_equal(rdmx_dial(ctx, th_addr(), 1, &o, &c), -EINVAL);
	assert_non_null(strstr(rdmx_last_error(), "src_addr"));
	rdmx_ctx_destroy(ctx);
}

/* Dialing from the listener's own address works; on a real device, from
 * an address that is not local fails. */
static void test_src_addr(void **state)
{
	struct rdmx_conn_opts o;
	struct th_pair p;

	(void)state;
	pair(&p, strcmp(th_fabric(), "fake") ? th_addr() : "127.0.0.1");
	send_n(p.client, 1, 8);
	rdmx_conn_opts_init(&o);
	o.src_addr = "192.0.2.1"; /* TEST-NET-1: on no interface */
	o.connect_timeout_ms = 2000;
	if (strcmp(th_fabric(), "fake")) {
		rdmx_conn *c = NULL;
		int rc = rdmx_dial(p.ctx, th_addr(), rdmx_listener_port(p.lis), &o, &c);

		print_message("dial from 192.0.2.1: %s (%s)\n", rdmx_strerror(rc),
			      rdmx_last_error());
		assert_int_not_equal(rc, 0);
	}
	th_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest info_tests[] = {
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_user_pointer),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_opts_size),
		cmocka_unit_test(test_src_addr),
#ifdef TH_FAKE
		cmocka_unit_test(test_wait_silent_peer),
#endif
	};
#ifdef TH_FAKE
	const struct CMUnitTest zc_tests[] = {
		cmocka_unit_test(test_send_mr_tok_no_copy),
	};
#endif
	const struct CMUnitTest iso_tests[] = {
		cmocka_unit_test(test_export_cross),
		cmocka_unit_test(test_export_stale),
	};
	const struct CMUnitTest alloc_tests[] = {
		cmocka_unit_test(test_alloc_sizes),
		cmocka_unit_test(test_alloc_reuse),
		cmocka_unit_test(test_alloc_no_overlap),
		cmocka_unit_test(test_alloc_threads),
	};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_write),
		cmocka_unit_test(test_atomics),
		cmocka_unit_test(test_local_checks),
		cmocka_unit_test(test_export_checks),
		cmocka_unit_test(test_import_checks),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_mixed_with_messages),
		cmocka_unit_test(test_send_mr),
		cmocka_unit_test(test_send_mr_tok),
		cmocka_unit_test(test_alloc_onesided),
		cmocka_unit_test(test_threads),
	};
	int failed = cmocka_run_group_tests_name("alloc", alloc_tests, NULL, NULL), i = 0;

	failed += cmocka_run_group_tests_name("info", info_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("isolation", iso_tests, NULL, NULL);
#ifdef TH_FAKE
	failed += cmocka_run_group_tests_name("zero copy", zc_tests, NULL, NULL);
#endif

	alarm(900); /* a hang fails the run instead of blocking it */
	while ((protocol = th_next_protocol(&i)))
		failed += _cmocka_run_group_tests(protocol, tests,
						  sizeof(tests) / sizeof(tests[0]), NULL, NULL);
	return failed ? 1 : 0;
}
