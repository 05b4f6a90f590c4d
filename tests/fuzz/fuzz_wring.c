/* SPDX-License-Identifier: MIT */
/*
 * The single-writer ring protocols' receive path (write_simplex,
 * write_magic, write_duplex; poll or IMM notify) driven by a hostile
 * writer: a raw seam peer connects with a valid hello, learns the ring's
 * address, rkey and stamp seed from the reply, then performs the fuzzer's
 * operations, calling rdmx_recv(…, 0) after each:
 *   byte 0: the listener (0 simplex, 1 magic, 2 duplex: poll; 3 simplex IMM;
 *     4 simplex OFF: op 2 reaches its tail word; 5 simplex REV: records
 *     are forged forward, raw writes reach the valid bytes)
 *   then ops, a kind byte each (at most FZ_OPS):
 *     0 record: u16 where (bit 15: the next offset the harness tracks, else
 *       (where & 0x7fff) * 16), u32 len, u16 flags, u8 n (bit 7: no
 *       footer), n & 0x7f payload bytes (the rest of len zero); header and
 *       footer stamped as a writer would
 *     1 raw: u16 at, u8 n, n bytes written at ring byte at & mask
 *     2 control word: u8 word (0..7: 7 is OFF's tail word), u64 value
 *       written to the ctl words
 *     3 SEND of u8 n bytes (a control message)
 * Invariants: no crash or ASan report; a message handed out has len <=
 * max_msg and lies within the receiver's ring; every loop is bounded
 * (rdmx_recv with timeout 0).
 */
#include <string.h>

#include "core/ring.h"
#include "core/protocol.h"
#include "core/wire.h"
#include "fuzz.h"
#include "peer.h"

#define FZ_RING 8192u
#define FZ_MAX_MSG 2048u
#define FZ_OPS 32
#define FZ_PEER_RING 16384u  /* our ring (the server's sends) in p->buf */
#define FZ_PEER_CTL 24576u   /* our control words */
#define BLOCK_LEN 40

struct target {
	uint64_t ring, ctl, seed, next;
	uint32_t rkey, ctl_rkey;
	uint64_t mask;
	int magic, imm;
	rdmx_conn *server;
	struct fz_peer *p;
};

#define FZ_SLOTS_WRING 6
static const char *const protos[] = { "write_simplex", "write_magic", "write_duplex",
				      "write_simplex", "write_simplex", "write_simplex" };
static const uint8_t notify_of[] = { RDMX_NOTIFY_POLL, RDMX_NOTIFY_POLL, RDMX_NOTIFY_POLL,
				     RDMX_NOTIFY_IMM, RDMX_NOTIFY_OFF, RDMX_NOTIFY_REV };

static void open_listener(int slot)
{
	struct rdmx_conn_opts o = fz_opts(protos[slot], FZ_MAX_MSG, FZ_RING);

	o.notify = notify_of[slot];
	fz_listener(slot, &o);
}

/* The hello of a well-behaved dialer of @slot's protocol; its length. */
static size_t dial_hello(int slot, const struct fz_peer *p, uint8_t *pd)
{
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION, .max_msg = FZ_MAX_MSG,
				 .recv_depth = 8, .block_len = BLOCK_LEN };
	uint8_t *b = h.block;

	h.protocol = rdmx__protocol_by_name(protos[slot])->id;
	rdmx__put_u64(b, (uintptr_t)(p->buf + FZ_PEER_RING));
	rdmx__put_u32(b + 8, p->mr->rkey);
	rdmx__put_u32(b + 12, FZ_RING);
	rdmx__put_u64(b + 16, 0x1234567887654321ull);
	rdmx__put_u64(b + 24, (uintptr_t)(p->buf + FZ_PEER_CTL));
	rdmx__put_u32(b + 32, p->mr->rkey);
	rdmx__put_u16(b + 36, 8);
	b[38] = notify_of[slot]; /* ack 0: the protocol's default */
	b[39] = 0;
	return (size_t)rdmx__hello_encode(&h, pd, RDMX__PDATA_CONNECT_MAX);
}

static int read_reply(struct target *t)
{
	struct rdmx__hello h;
	const uint8_t *b = h.block;

	if (rdmx__hello_decode(t->p->reply, t->p->rlen, &h) || h.block_len < BLOCK_LEN)
		return -1;
	t->ring = rdmx__get_u64(b);
	t->rkey = rdmx__get_u32(b + 8);
	t->seed = rdmx__get_u64(b + 16);
	t->ctl = rdmx__get_u64(b + 24);
	t->ctl_rkey = rdmx__get_u32(b + 32);
	t->magic = !!(b[39] & 1);
	t->imm = (b[38] & 0xf) == RDMX_NOTIFY_IMM;
	t->mask = FZ_RING - 1;
	return 0;
}

/* WRITE @n scratch bytes to ring byte @at, cut at the ring's end. */
static void ring_write(struct target *t, uint64_t at, uint32_t n, int imm, uint32_t ival)
{
	at &= t->mask;
	if (at + n > FZ_RING)
		n = (uint32_t)(FZ_RING - at);
	(void)fz_peer_post(t->p, imm ? RDMX__OP_WRITE_IMM : RDMX__OP_WRITE, 0, n,
			   t->ring + at, t->rkey, ival);
}

static void op_record(struct target *t, struct fz_in *in)
{
	uint16_t where = (uint16_t)fz_take(in, 2);
	uint32_t len = (uint32_t)fz_take(in, 4);
	uint16_t flags = (uint16_t)fz_take(in, 2);
	uint8_t nb = (uint8_t)fz_take(in, 1);
	uint32_t n = nb & 0x7f, wrote;
	uint64_t off = where & 0x8000 ? t->next : (uint64_t)(where & 0x7fff) * 16;
	uint64_t rsize = rdmx__ring_rec_size(len);
	uint8_t *s = t->p->buf;

	memset(s, 0, FZ_PEER_SCRATCH);
	rdmx__ring_put_rec(s, t->seed, off, 0, (uint32_t)off, flags);
	memcpy(s, &len, sizeof(len)); /* the fuzzer's length, stamp kept */
	for (uint32_t i = 0; i < n; i++)
		s[RDMX__RING_HDR + i] = (uint8_t)fz_take(in, 1);
	wrote = RDMX__RING_HDR + n;
	/* The footer where the length puts it (bit 7 of n: left out), the
	 * payload beyond the input's bytes zero. */
	if (!(nb & 0x80) && rsize <= FZ_PEER_SCRATCH) {
		uint64_t stamp = rdmx__ring_stamp(t->seed, off);

		memcpy(s + rsize - RDMX__RING_FTR, &stamp, sizeof(stamp));
		wrote = (uint32_t)rsize;
	}
	ring_write(t, off, wrote, t->imm, (uint32_t)off);
	t->next = off + (flags & RDMX__RING_REC_PAD ? FZ_RING - (off & t->mask) : rsize);
}

static void op_raw(struct target *t, struct fz_in *in)
{
	uint64_t at = fz_take(in, 2);
	uint32_t n = (uint32_t)fz_take(in, 1);

	for (uint32_t i = 0; i < n; i++)
		t->p->buf[i] = (uint8_t)fz_take(in, 1);
	ring_write(t, at, n, 0, 0);
}

static void op_ctl(struct target *t, struct fz_in *in)
{
	uint64_t word = fz_take(in, 1) & 7, v = fz_take(in, 8);

	memcpy(t->p->buf, &v, sizeof(v));
	(void)fz_peer_post(t->p, RDMX__OP_WRITE, 0, sizeof(v), t->ctl + 8 * word,
			   t->ctl_rkey, 0);
}

static void op_send(struct target *t, struct fz_in *in)
{
	uint32_t n = (uint32_t)fz_take(in, 1) % 64;

	for (uint32_t i = 0; i < n; i++)
		t->p->buf[i] = (uint8_t)fz_take(in, 1);
	(void)fz_peer_post(t->p, RDMX__OP_SEND, 0, n, 0, 0, 0);
}

/* Take what the receiver delivers now; check each message. */
static void drain(struct target *t)
{
	uint64_t end = t->ring + (t->magic ? 2 : 1) * (uint64_t)FZ_RING;
	struct rdmx_msg m;

	for (int i = 0; i < 4 && !rdmx_recv(t->server, &m, 0); i++) {
		FZ_CHECK(m.len <= rdmx_conn_max_msg(t->server), "message above max_msg");
		FZ_CHECK((uintptr_t)m.data >= t->ring && (uintptr_t)m.data + m.len <= end,
			 "message outside the receiver's ring");
		rdmx_msg_release(t->server, &m);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	uint8_t pd[RDMX__PDATA_CONNECT_MAX];
	struct fz_peer p;
	struct target t = { .p = &p };
	int slot = (int)(fz_take(&in, 1) % FZ_SLOTS_WRING);

	open_listener(slot);
	fz_peer_open(&p, slot);
	if (!fz_peer_connect(&p, slot, pd, dial_hello(slot, &p, pd), &t.server) &&
	    t.server && !read_reply(&t)) {
		for (int op = 0; op < FZ_OPS && in.n; op++) {
			switch (fz_take(&in, 1) % 4) {
			case 0:
				op_record(&t, &in);
				break;
			case 1:
				op_raw(&t, &in);
				break;
			case 2:
				op_ctl(&t, &in);
				break;
			default:
				op_send(&t, &in);
			}
			drain(&t);
		}
	}
	fz_peer_close(&p);
	if (t.server)
		rdmx_conn_close(t.server);
	return 0;
}
