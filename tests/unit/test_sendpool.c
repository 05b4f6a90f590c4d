/* SPDX-License-Identifier: MIT */
/*
 * The send pool's bursts (sendpool.h, issue 10) on the fake fabric, for
 * the protocols whose sends are its posts (send_recv, srq, direct_write,
 * read): a burst of
 * RDMX_SEND_MORE sends goes out in one doorbell with one signaled work
 * request per signal_every and its last one signaled; unbatched sends
 * keep a doorbell and a completion each; a burst longer than the pool
 * rings when an alloc would wait and retires unsignaled slots with the
 * signaled completion after them. The fake counts the doorbells and
 * signaled requests of the sender's QP (rdmx__fake_sq_counts); those
 * tests set coalesce OFF. With packing (send_recv and srq, coalesce DEFAULT) a
 * burst of small messages is one SEND, split back in order, mixed with
 * large ones, released in any order; a message whose immediate data is
 * the frame marker arrives as itself; and a hostile peer's malformed
 * frames fail only that connection, with -EPROTO.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/protocol.h"
#include "core/pack.h"
#include "core/sendpool.h"
#include "core/unpack.h"
#include "harness.h"

static const char *const protocols[] = { "send_recv", "srq", "direct_write", "read" };
#define N_PROTOCOLS (sizeof(protocols) / sizeof(protocols[0]))
/* read's sends complete when the receiver acknowledges them: the tests
 * that wait for completions in one thread run on the first three only. */
#define N_SELF_COMPLETING 3
/* The first two pack (direct_write WRITEs each message into a buffer of
 * its own, read's receiver READs each). */
#define N_PACKING 2

struct counts {
	unsigned long posts, signaled;
};

static void open_sized(struct th_pair *p, const char *proto, uint32_t max_msg,
		       uint32_t depth, uint32_t every, uint8_t coalesce,
		       uint32_t recv_depth)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = proto;
	o.max_msg_size = max_msg;
	o.send_depth = depth;
	o.recv_depth = recv_depth;
	o.signal_every = every;
	o.coalesce = coalesce;
	assert_int_equal(th_pair_open(p, &o, &o), 0);
}

static void open_opts(struct th_pair *p, const char *proto, uint32_t depth,
		      uint32_t every, uint8_t coalesce, uint32_t recv_depth)
{
	open_sized(p, proto, 1024, depth, every, coalesce, recv_depth);
}

/* A pair that chains but does not pack (the counts are per message). */
static void open_pair(struct th_pair *p, const char *proto, uint32_t depth,
		      uint32_t every)
{
	open_opts(p, proto, depth, every, RDMX_COALESCE_OFF, 64);
}

static struct counts counts(const struct th_pair *p)
{
	struct counts k;

	rdmx__fake_sq_counts(p->client->ep, &k.posts, &k.signaled);
	return k;
}

/* @n sends of 64 bytes numbered from @seq, all but the last with @flags. */
static void burst(rdmx_conn *c, uint64_t seq, unsigned n, unsigned flags)
{
	for (unsigned i = 0; i < n; i++) {
		struct rdmx_msg m;

		assert_int_equal(rdmx_msg_alloc(c, 64, &m, 5000), 0);
		th_fill(m.data, 64, seq + i);
		m.len = 64;
		assert_int_equal(rdmx_send_flags(c, &m, i + 1 < n ? flags : 0, NULL), 0);
	}
}

/* Receive @n messages of @len bytes numbered from @seq, in order. */
static void take_sized(rdmx_conn *c, uint64_t seq, unsigned n, size_t len)
{
	for (unsigned i = 0; i < n; i++) {
		struct rdmx_msg m;

		assert_int_equal(rdmx_recv(c, &m, 5000), 0);
		assert_int_equal(m.len, len);
		assert_int_equal(th_check(m.data, len, seq + i), -1);
		assert_int_equal(rdmx_msg_release(c, &m), 0);
	}
}

static void take(rdmx_conn *c, uint64_t seq, unsigned n)
{
	take_sized(c, seq, n, 64);
}

/* A burst of 17 is one doorbell; default signal_every (16 here) signals
 * the 16th and the last; signal_every 1 signals all 17. */
static void test_burst_one_doorbell(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PROTOCOLS; i++) {
		for (uint32_t every = 0; every <= 1; every++) {
			struct th_pair p;
			struct counts a, b;

			open_pair(&p, protocols[i], 64, every);
			a = counts(&p);
			burst(p.client, 0, 17, RDMX_SEND_MORE);
			b = counts(&p);
			assert_int_equal(b.posts - a.posts, 1);
			assert_int_equal(b.signaled - a.signaled, every ? 17 : 2);
			take(p.server, 0, 17);
			if (i < N_SELF_COMPLETING)
				assert_int_equal(rdmx_flush(p.client, 5000), 0);
			th_pair_close(&p);
		}
	}
}

/* Unbatched sends are what they were: a doorbell and a completion each. */
static void test_unbatched_unchanged(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PROTOCOLS; i++) {
		struct th_pair p;
		struct counts a, b;

		open_pair(&p, protocols[i], 64, 0);
		a = counts(&p);
		burst(p.client, 0, 17, 0);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 17);
		assert_int_equal(b.signaled - a.signaled, 17);
		take(p.server, 0, 17);
		th_pair_close(&p);
	}
}

/* A burst of 40 on 8 slots: every alloc that would wait rings what is
 * held (8 at a time), the slots come back through the signaled
 * completions (signal_every 4: two per chain), all 40 arrive in order,
 * and a flush afterwards finds nothing held. */
static void test_burst_longer_than_pool(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_SELF_COMPLETING; i++) {
		struct th_pair p;
		struct counts a, b;

		open_pair(&p, protocols[i], 8, 4);
		a = counts(&p);
		burst(p.client, 0, 40, RDMX_SEND_MORE);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 5);
		assert_int_equal(b.signaled - a.signaled, 10);
		take(p.server, 0, 40);
		assert_int_equal(rdmx_flush(p.client, 5000), 0);
		/* every slot came back: 8 more allocations need no wait */
		burst(p.client, 40, 8, RDMX_SEND_MORE);
		take(p.server, 40, 8);
		th_pair_close(&p);
	}
}

/* A token wait rings what is held, and the token completes. */
static void test_token_rings(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_SELF_COMPLETING; i++) {
		struct th_pair p;
		struct counts a, b;
		struct rdmx_msg m;
		rdmx_token tok;

		open_pair(&p, protocols[i], 64, 0);
		a = counts(&p);
		for (unsigned k = 0; k < 3; k++) {
			assert_int_equal(rdmx_msg_alloc(p.client, 64, &m, 5000), 0);
			th_fill(m.data, 64, k);
			m.len = 64;
			assert_int_equal(rdmx_send_flags(p.client, &m, RDMX_SEND_MORE, &tok), 0);
		}
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 0); /* held */
		assert_int_equal(rdmx_wait(p.client, tok, 5000), 0);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 1);
		assert_int_equal(b.signaled - a.signaled, 1);
		take(p.server, 0, 3);
		th_pair_close(&p);
	}
}

/* Size of message #@i of the mixed tests: mostly small, some not packed. */
static size_t mixed(uint64_t i)
{
	return i % 5 == 4 ? 300 + (size_t)(i * 37 % 700) : (size_t)(i * 13 % 200);
}

static void send_mixed(rdmx_conn *c, uint64_t seq, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rdmx_msg m;
		size_t len = mixed(seq + i);

		assert_int_equal(rdmx_msg_alloc(c, len, &m, 5000), 0);
		th_fill(m.data, len, seq + i);
		m.len = len;
		if ((seq + i) % 7 == 3) {
			m.flags = RDMX_MSG_IMM;
			m.imm = (uint32_t)(seq + i);
		}
		assert_int_equal(rdmx_send_flags(c, &m, i + 1 < n ? RDMX_SEND_MORE : 0, NULL), 0);
	}
}

/* Take @n mixed messages from @seq; keep up to 3 (of 4 receive buffers)
 * before releasing them in reverse order (a frame's buffer goes back
 * after its last). */
static void take_mixed(rdmx_conn *c, uint64_t seq, unsigned n)
{
	struct rdmx_msg keep[3];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		struct rdmx_msg *m = &keep[k++];
		uint64_t s = seq + i;

		assert_int_equal(rdmx_recv(c, m, 5000), 0);
		assert_int_equal(m->len, mixed(s));
		assert_int_equal(th_check(m->data, m->len, s), -1);
		assert_int_equal(!!(m->flags & RDMX_MSG_IMM), s % 7 == 3);
		if (s % 7 == 3)
			assert_int_equal(m->imm, (uint32_t)s);
		if (k == 3 || i + 1 == n)
			while (k)
				assert_int_equal(rdmx_msg_release(c, &keep[--k]), 0);
	}
}

/* A burst of @n 64-byte messages is one SEND with one completion, also
 * when max_msg is the messages' size (64: rdmx bench --size 64, where
 * buffers of max_msg and a frame's overhead held frames of one), and a
 * full frame (RDMX__PACK_MAX: rdmx bench --batch 64) fits one buffer. */
static void pack_one_send(const char *proto, uint32_t max_msg, unsigned n)
{
	struct th_pair p;
	struct counts a, b;

	open_sized(&p, proto, max_msg, 64, 1, RDMX_COALESCE_DEFAULT, 64); /* every SEND signaled */
	a = counts(&p);
	burst(p.client, 0, n, RDMX_SEND_MORE);
	b = counts(&p);
	assert_int_equal(b.posts - a.posts, 1);
	assert_int_equal(b.signaled - a.signaled, 1);
	take(p.server, 0, n);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

static void test_pack_one_send(void **state)
{
	(void)state;
	for (int i = 0; i < N_PACKING; i++) {
		pack_one_send(protocols[i], 1024, 17);
		pack_one_send(protocols[i], 64, 17);
		pack_one_send(protocols[i], 64, RDMX__PACK_MAX);
	}
}

/* A send_recv peer whose hello has bit 1 (RDMX__UNPACK_FRAME_MIN) but not
 * bit 2 has buffers of the older 4 KiB floor: a full burst of 64-byte
 * messages toward it is two SENDs (56 and 8), never a frame it cannot
 * hold. The client hears such a hello again, as from an older rdmx. */
static void test_pack_old_floor(void **state)
{
	const uint8_t old[1] = { RDMX__UNPACK_SPLITS | RDMX__UNPACK_FRAME_MIN };
	struct th_pair p;
	struct counts a, b;

	(void)state;
	open_sized(&p, "send_recv", 64, 64, 1, RDMX_COALESCE_DEFAULT, 64);
	assert_int_equal(p.client->proto->conn->hello_in(p.client, old, sizeof(old)), 0);
	a = counts(&p);
	burst(p.client, 0, RDMX__PACK_MAX, RDMX_SEND_MORE);
	b = counts(&p);
	assert_int_equal(b.signaled - a.signaled, 2);
	take(p.server, 0, RDMX__PACK_MAX);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

/*
 * rdmx_sendv packs straight from the iovec: 17 small messages are one
 * SEND, 64 (RDMX__PACK_MAX) still one, 65 two; with coalesce OFF every
 * message is a SEND of its own; one doorbell each time (with
 * signal_every 1, the signaled work requests count the SENDs).
 */
static void sendv_frames(const char *proto, enum rdmx_coalesce co, unsigned n,
			 unsigned posts, unsigned sends)
{
	uint8_t bytes[65][40]; /* 64 of them fill a frame (RDMX__PACK_MAX) */
	struct iovec iov[65];
	struct th_pair p;
	struct counts a, b;

	open_sized(&p, proto, 1024, 128, 1, co, 128); /* every SEND signaled */
	for (unsigned i = 0; i < n; i++) {
		th_fill(bytes[i], 40, i);
		iov[i] = (struct iovec){ .iov_base = bytes[i], .iov_len = 40 };
	}
	a = counts(&p);
	assert_int_equal(rdmx_sendv(p.client, iov, (int)n, 5000, NULL), (int)n);
	b = counts(&p);
	assert_int_equal(b.posts - a.posts, posts);
	assert_int_equal(b.signaled - a.signaled, sends);
	take_sized(p.server, 0, n, 40);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

static void test_sendv_packs(void **state)
{
	(void)state;
	for (int i = 0; i < N_PACKING; i++) {
		sendv_frames(protocols[i], RDMX_COALESCE_DEFAULT, 17, 1, 1);
		sendv_frames(protocols[i], RDMX_COALESCE_DEFAULT, 64, 1, 1);
		sendv_frames(protocols[i], RDMX_COALESCE_DEFAULT, 65, 1, 2);
		sendv_frames(protocols[i], RDMX_COALESCE_OFF, 17, 1, 17);
	}
}

/* Mixed sizes and immediate data in bursts of 1..24 through 4 receive
 * buffers (srq: 16): order, lengths, bytes and immediates survive packing, and
 * every frame's buffer comes back (else the sender stalls). */
static void pack_mixed(const char *proto)
{
	const uint64_t n = th_count(3000);
	struct th_pair p;
	uint64_t seq = 0;

	/* srq: a burst is sent whole before it is taken, and every SEND of
	 * it (up to 11) needs a credit, one per receive buffer */
	open_opts(&p, proto, 32, 0, RDMX_COALESCE_ON, strcmp(proto, "srq") ? 4 : 16);
	for (unsigned b = 1; seq < n; b = b % 24 + 1) {
		send_mixed(p.client, seq, b);
		take_mixed(p.server, seq, b);
		seq += b;
	}
	th_pair_close(&p);
}

static void test_pack_mixed(void **state)
{
	(void)state;
	for (int i = 0; i < N_PACKING; i++)
		pack_mixed(protocols[i]);
}

/* Immediate data equal to the frame marker: alone and in a burst. */
static void pack_marker_imm(const char *proto)
{
	struct th_pair p;

	open_opts(&p, proto, 16, 0, RDMX_COALESCE_DEFAULT, 16);
	for (unsigned n = 1; n <= 3; n += 2) {
		for (unsigned i = 0; i < n; i++) {
			struct rdmx_msg m;
			size_t len = i == 1 ? 1024 : 40; /* max_msg: a frame of one fits */

			assert_int_equal(rdmx_msg_alloc(p.client, len, &m, 5000), 0);
			th_fill(m.data, len, i);
			m.len = len;
			m.flags = RDMX_MSG_IMM;
			m.imm = RDMX__PACK_IMM;
			assert_int_equal(rdmx_send_flags(p.client, &m,
							 i + 1 < n ? RDMX_SEND_MORE : 0, NULL), 0);
		}
		for (unsigned i = 0; i < n; i++) {
			struct rdmx_msg m;

			assert_int_equal(rdmx_recv(p.server, &m, 5000), 0);
			assert_int_equal(m.len, i == 1 ? 1024 : 40);
			assert_int_equal(th_check(m.data, m.len, i), -1);
			assert_int_equal(m.flags & RDMX_MSG_IMM, RDMX_MSG_IMM);
			assert_int_equal(m.imm, RDMX__PACK_IMM);
			assert_int_equal(rdmx_msg_release(p.server, &m), 0);
		}
	}
	th_pair_close(&p);
}

static void test_pack_marker_imm(void **state)
{
	(void)state;
	for (int i = 0; i < N_PACKING; i++)
		pack_marker_imm(protocols[i]);
}

/* srq: a frame takes one SRQ buffer and one credit, so a burst of 40
 * through 4 buffers (4 credits) is one SEND and does not wait for credits;
 * the listener hands its messages out in order, a member receive in the
 * middle takes the next one of the same frame, and the buffer goes back
 * once all are released (the next burst gets its credit). */
static void test_pack_srq_credits(void **state)
{
	struct th_pair p;
	struct counts a, b;

	(void)state;
	open_opts(&p, "srq", 16, 0, RDMX_COALESCE_DEFAULT, 4);
	for (uint64_t seq = 0; seq < 120; seq += 40) {
		a = counts(&p);
		burst(p.client, seq, 40, RDMX_SEND_MORE);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 1);
		for (unsigned i = 0; i < 40; i++) {
			struct rdmx_msg m;

			if (i == 20)
				assert_int_equal(rdmx_recv(p.server, &m, 5000), 0);
			else
				assert_int_equal(rdmx_listener_recv(p.lis, &m, 5000), 0);
			assert_ptr_equal(rdmx_msg_conn(&m), p.server);
			assert_int_equal(m.len, 64);
			assert_int_equal(th_check(m.data, 64, seq + i), -1);
			assert_int_equal(rdmx_msg_release(p.server, &m), 0);
		}
	}
	th_pair_close(&p);
}

/* write_atomic holds a burst unreserved (write_atomic_conn.c, "Bursts"): 16
 * small messages cost one FETCH_ADD and one chain of 16 WRITEs (2 posts,
 * against 32 unbatched), arrive in order, and a send without the flag
 * still goes out at once (its FETCH_ADD and WRITE). */
static void test_wa_burst_one_reservation(void **state)
{
	struct th_pair p;
	struct counts a, b;

	(void)state;
	open_sized(&p, "write_atomic", 4096, 64, 0, RDMX_COALESCE_DEFAULT, 64);
	for (uint64_t seq = 0; seq < 48; seq += 16) {
		a = counts(&p);
		burst(p.client, seq, 16, RDMX_SEND_MORE);
		b = counts(&p);
		assert_int_equal(b.posts - a.posts, 2);
		take(p.server, seq, 16);
	}
	a = counts(&p);
	burst(p.client, 48, 1, 0);
	b = counts(&p);
	assert_int_equal(b.posts - a.posts, 2);
	take(p.server, 48, 1);
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

/* Bursts of 1..24 mixed messages (some with immediate data) through a
 * 64 KiB ring, which they wrap a dozen times: a reservation of several
 * records that crosses the ring's end is padded whole and made again;
 * every message arrives whole and in order. */
static void test_wa_burst_wrap(void **state)
{
	const uint64_t n = th_count(3000);
	struct rdmx_conn_opts o;
	struct th_pair p;
	uint64_t seq = 0;

	(void)state;
	rdmx_conn_opts_init(&o);
	o.protocol = "write_atomic";
	o.max_msg_size = 1024;
	o.ring_size = 65536;
	o.send_depth = 32;
	o.recv_depth = 64;
	assert_int_equal(th_pair_open(&p, &o, &o), 0);
	for (unsigned b = 1; seq < n; b = b % 24 + 1) {
		send_mixed(p.client, seq, b);
		take_mixed(p.server, seq, b);
		seq += b;
	}
	assert_int_equal(rdmx_flush(p.client, 5000), 0);
	th_pair_close(&p);
}

/* Receives are reposted in chains (core/repost.h): 32 messages, each
 * released as soon as it is taken, cost a few receive doorbells, not 32
 * (send_recv: a chain per 16; srq: per 16 or once its queue is drained). */
static unsigned long server_rq_posts(const struct th_pair *p)
{
	unsigned long n;

	rdmx__fake_rq_posts(p->server->ep, &n);
	return n;
}

static void test_repost_chains(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PACKING; i++) {
		struct th_pair p;
		unsigned long before;

		open_pair(&p, protocols[i], 64, 0);
		burst(p.client, 0, 32, RDMX_SEND_MORE);
		before = server_rq_posts(&p);
		take(p.server, 0, 32);
		assert_in_range(server_rq_posts(&p) - before, 1, 4);
		/* every buffer is back: another 64 go through */
		burst(p.client, 32, 64, RDMX_SEND_MORE);
		take(p.server, 32, 64);
		th_pair_close(&p);
	}
}

/* Post @len raw bytes as a packed frame from @c, as a hostile peer would. */
static void post_frame(rdmx_conn *c, const void *bytes, uint32_t len)
{
	struct rdmx__sendpool *sp = c->priv;
	struct rdmx_msg m;
	struct rdmx__wr wr = { .op = RDMX__OP_SEND_IMM, .imm = RDMX__PACK_IMM, .len = len };
	int64_t idx;

	assert_int_equal(rdmx_msg_alloc(c, len, &m, 5000), 0);
	memcpy(m.data, bytes, len);
	idx = rdmx__sendpool_slot(c, sp, &m);
	assert_true(idx >= 0);
	wr.addr = m.data;
	assert_int_equal(rdmx__sendpool_post(c, sp, (uint32_t)idx, &wr, &m), 0);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* Malformed frames: each fails the connection it came on with -EPROTO;
 * a second pair, open all along, still works. */
static void pack_hostile(const char *proto)
{
	enum { ZERO, TOO_MANY, PAST_END, TOO_LONG, SHORT, NCASES };
	struct th_pair other;

	open_opts(&other, proto, 16, 0, RDMX_COALESCE_DEFAULT, 16);
	for (int k = 0; k < NCASES; k++) {
		uint8_t f[64] = { 0 };
		uint32_t len = 32;
		struct th_pair p;
		struct rdmx_msg m;

		open_opts(&p, proto, 16, 0, RDMX_COALESCE_DEFAULT, 16);
		put32(f, 1);
		put32(f + 8, 8); /* one message of 8 bytes: well formed */
		switch (k) {
		case ZERO: put32(f, 0); break;
		case TOO_MANY: put32(f, RDMX__PACK_MAX + 1); break;
		case PAST_END: put32(f, 2); len = 24; break; /* no room for a second */
		case TOO_LONG: put32(f + 8, 17); break; /* 17 bytes, 16 there */
		case SHORT: len = 4; break;
		}
		post_frame(p.client, f, len);
		assert_int_equal(rdmx_recv(p.server, &m, 5000), -EPROTO);
		assert_int_equal(rdmx_recv(p.server, &m, 0), -EPROTO);
		th_pair_close(&p);
	}
	/* a well-formed one is split */
	burst(other.client, 0, 5, RDMX_SEND_MORE);
	take(other.server, 0, 5);
	th_pair_close(&other);
}

static void test_pack_hostile(void **state)
{
	(void)state;
	for (int i = 0; i < N_PACKING; i++)
		pack_hostile(protocols[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pack_one_send),
		cmocka_unit_test(test_pack_old_floor),
		cmocka_unit_test(test_sendv_packs),
		cmocka_unit_test(test_pack_mixed),
		cmocka_unit_test(test_pack_marker_imm),
		cmocka_unit_test(test_pack_hostile),
		cmocka_unit_test(test_pack_srq_credits),
		cmocka_unit_test(test_wa_burst_one_reservation),
		cmocka_unit_test(test_wa_burst_wrap),
		cmocka_unit_test(test_repost_chains),
		cmocka_unit_test(test_burst_one_doorbell),
		cmocka_unit_test(test_unbatched_unchanged),
		cmocka_unit_test(test_burst_longer_than_pool),
		cmocka_unit_test(test_token_rings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
