/* SPDX-License-Identifier: MIT */
/*
 * write_atomic's receive path driven by a hostile member of the shared
 * ring: a raw seam peer joins a write_atomic listener with a valid hello,
 * learns ring address, rkeys, salt and its sender id from the reply, then
 * performs the fuzzer's operations, draining the receiver after each with
 * rdmx_listener_recv(…, 0) and rdmx_recv(…, 0):
 *   byte 0: unused (reserved for the format being reworked)
 *   ops (at most FZ_OPS), a kind byte each:
 *     0 record: u16 where (bit 15: reserve by FETCH_ADD on the tail, else
 *       (where & 0x7fff) * 64), u32 len, u32 sender (bit 31 of len clear:
 *       the id the receiver gave us), u16 flags, u32 imm, u8 n (bit 7: no
 *       trailer), n & 0x7f payload bytes (the rest zero); stamped and
 *       announced (WRITE_WITH_IMM, wa_imm()) by member_record() as a
 *       writer would
 *     1 raw: u16 at, u8 n, n bytes written at ring byte at & mask
 *     2 FETCH_ADD on the tail: u16 * 64 bytes
 *     3 WRITE_WITH_IMM of u8 n raw bytes at u16 at, imm u32
 * The record format lives in member_record() alone: when write_atomic's
 * format changes, that function is what to adapt.
 * Invariants: no crash or ASan report; a message handed out has len <=
 * max_msg, lies within the ring, and names this member's connection;
 * every loop is bounded (timeout 0; libFuzzer's -timeout catches a spin).
 */
#include <string.h>

#include "core/protocol.h"
#include "core/wire.h"
#include "fuzz.h"
#include "peer.h"
#include "protocols/write_atomic_rec.h"

#define FZ_RING 16384u
#define FZ_MAX_MSG 1024u
#define FZ_OPS 32
#define FZ_SLOT 0
#define FZ_PEER_RING 16384u /* the ring our hello offers (never written) */
#define FZ_PEER_CTL 24576u
#define RING_BLOCK 40

struct member {
	uint64_t ring, tail, salt;
	uint32_t ring_rkey, tail_rkey, id;
	uint64_t size;
	rdmx_listener *lis;
	rdmx_conn *server;
	struct fz_peer *p;
};

static rdmx_listener *open_listener(void)
{
	struct rdmx_conn_opts o = fz_opts("write_atomic", FZ_MAX_MSG, FZ_RING);

	return fz_listener(FZ_SLOT, &o);
}

/* A well-behaved member's hello: its own (4 KiB) ring block. */
static size_t dial_hello(const struct fz_peer *p, uint8_t *pd)
{
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION, .max_msg = FZ_MAX_MSG,
				 .recv_depth = 8, .block_len = RING_BLOCK };
	uint8_t *b = h.block;

	h.protocol = rdmx__protocol_by_name("write_atomic")->id;
	b[0] = 1;
	b[1] = 12;
	rdmx__put_u32(b + 4, p->mr->rkey);
	rdmx__put_u64(b + 8, (uintptr_t)(p->buf + FZ_PEER_RING));
	rdmx__put_u64(b + 16, (uintptr_t)(p->buf + FZ_PEER_CTL));
	rdmx__put_u32(b + 24, p->mr->rkey);
	rdmx__put_u32(b + 28, p->mr->rkey);
	rdmx__put_u64(b + 32, 0x1234567887654321ull | 1);
	return (size_t)rdmx__hello_encode(&h, pd, RDMX__PDATA_CONNECT_MAX);
}

static int read_reply(struct member *m)
{
	struct rdmx__hello h;
	const uint8_t *b = h.block;

	if (rdmx__hello_decode(m->p->reply, m->p->rlen, &h) || h.block_len < RING_BLOCK + 4)
		return -1;
	m->size = 1ull << (b[1] & 63);
	m->ring_rkey = rdmx__get_u32(b + 4);
	m->ring = rdmx__get_u64(b + 8);
	m->tail = rdmx__get_u64(b + 16);
	m->tail_rkey = rdmx__get_u32(b + 24);
	m->salt = rdmx__get_u64(b + 32);
	m->id = rdmx__get_u32(b + RING_BLOCK);
	return m->size == FZ_RING ? 0 : -1;
}

/* FETCH_ADD @add on the tail; the old value (the reserved offset). */
static uint64_t faa(struct member *m, uint64_t add)
{
	return fz_peer_faa(m->p, m->tail, m->tail_rkey, add);
}

/* WRITE @n scratch bytes at ring byte @at (cut at the end). */
static void ring_write(struct member *m, uint64_t at, uint32_t n, int imm, uint32_t ival)
{
	at &= m->size - 1;
	if (at + n > m->size)
		n = (uint32_t)(m->size - at);
	(void)fz_peer_post(m->p, imm ? RDMX__OP_WRITE_IMM : RDMX__OP_WRITE, 0, n,
			   m->ring + at, m->ring_rkey, ival);
}

/* The one place that knows write_atomic's record format. */
static void member_record(struct member *m, struct fz_in *in)
{
	uint16_t where = (uint16_t)fz_take(in, 2);
	struct wa_hdr h = { .len = (uint32_t)fz_take(in, 4) };
	uint32_t sender = (uint32_t)fz_take(in, 4), n, wrote;
	uint8_t *s = m->p->buf, nb;
	uint64_t v, stamp, span;

	h.sender = h.len & 0x80000000u ? sender : m->id;
	h.flags = (uint16_t)fz_take(in, 2);
	h.imm = (uint32_t)fz_take(in, 4);
	nb = (uint8_t)fz_take(in, 1);
	n = nb & 0x7f;
	v = where & 0x8000 ? faa(m, wa_rec_size(h.len & 0xffff)) :
			     (uint64_t)(where & 0x7fff) * WA_ALIGN;
	memset(s, 0, FZ_PEER_SCRATCH);
	wa_put_hdr(s, &h);
	stamp = wa_hstamp(m->salt, v);
	memcpy(s + WA_STAMP_OFF, &stamp, sizeof(stamp));
	for (uint32_t i = 0; i < n; i++)
		s[WA_HDR + i] = (uint8_t)fz_take(in, 1);
	wrote = WA_HDR + n;
	/* The trailer where the length puts it (bit 7 of n: left out), the
	 * payload beyond the input's bytes zero. */
	if (!(nb & 0x80) && wa_write_len(h.len) <= FZ_PEER_SCRATCH) {
		stamp = wa_tstamp(m->salt, v);
		memcpy(s + wa_trailer_off(h.len), &stamp, sizeof(stamp));
		wrote = (uint32_t)wa_write_len(h.len);
	}
	/* announced as a writer does: slot and span in the immediate */
	span = h.flags & WA_F_PAD ? h.len : wa_rec_size(h.len);
	ring_write(m, v, wrote, 1, wa_imm(v, span, m->size));
}

static void op_raw(struct member *m, struct fz_in *in, int imm)
{
	uint64_t at = fz_take(in, 2);
	uint32_t n = (uint32_t)fz_take(in, 1), ival = imm ? (uint32_t)fz_take(in, 4) : 0;

	for (uint32_t i = 0; i < n; i++)
		m->p->buf[i] = (uint8_t)fz_take(in, 1);
	ring_write(m, at, n, imm, ival);
}

static void check(struct member *m, const struct rdmx_msg *msg)
{
	FZ_CHECK(msg->len <= rdmx_conn_max_msg(m->server), "message above max_msg");
	FZ_CHECK((uintptr_t)msg->data >= m->ring &&
			 (uintptr_t)msg->data + msg->len <= m->ring + m->size,
		 "message outside the ring");
	FZ_CHECK(rdmx_msg_conn(msg) == m->server, "message attributed to another connection");
}

static void drain(struct member *m)
{
	struct rdmx_msg msg;

	for (int i = 0; i < 4 && !rdmx_listener_recv(m->lis, &msg, 0); i++) {
		check(m, &msg);
		rdmx_msg_release(rdmx_msg_conn(&msg), &msg);
	}
	for (int i = 0; i < 4 && !rdmx_recv(m->server, &msg, 0); i++) {
		check(m, &msg);
		rdmx_msg_release(m->server, &msg);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	uint8_t pd[RDMX__PDATA_CONNECT_MAX];
	struct fz_peer p;
	struct member m = { .p = &p };

	m.lis = open_listener();
	(void)fz_take(&in, 1);
	fz_peer_open(&p, FZ_SLOT);
	if (!fz_peer_connect(&p, FZ_SLOT, pd, dial_hello(&p, pd), &m.server) && m.server &&
	    !read_reply(&m)) {
		for (int op = 0; op < FZ_OPS && in.n; op++) {
			switch (fz_take(&in, 1) % 4) {
			case 0:
				member_record(&m, &in);
				break;
			case 1:
				op_raw(&m, &in, 0);
				break;
			case 2:
				(void)faa(&m, (fz_take(&in, 2) & 0xffff) * WA_ALIGN);
				break;
			default:
				op_raw(&m, &in, 1);
			}
			drain(&m);
		}
	}
	fz_peer_close(&p);
	if (m.server)
		rdmx_conn_close(m.server);
	/* The shared ring outlives a member: a fresh one per input keeps
	 * inputs independent (and reproducible alone). */
	fz_listener_drop(FZ_SLOT);
	return 0;
}
