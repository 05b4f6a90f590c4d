/* SPDX-License-Identifier: MIT */
/*
 * The read protocol's receive path driven by a hostile sender: a raw seam
 * peer connects to a read listener with a hello block (its limits from the
 * input), then SENDs descriptors (read.c: the 32-byte head of every SEND,
 * READ or EAGER) and calls rdmx_recv(…, 0) after each:
 *   byte 0: bit 0 the hello's send_depth from the input (else 8), bit 1
 *           its rd_atomic and eager_max too
 *   then u16 send_depth, u8 rd_atomic, u16 eager_max (taken whatever bit 0/1)
 *   then descriptors (at most FZ_OPS), each: u8 mode, 32 descriptor bytes,
 *     u8 n and n payload bytes after the descriptor; mode bit 0: aim a READ
 *     descriptor at the peer's own buffer (addr from u16 at descriptor
 *     byte 8, the peer's rkey), so the receiver's READ can succeed
 * The peer's buffer holds ack slots at FZ_ACK and READ payloads below.
 * Invariants: no crash or ASan report; a message handed out has len <=
 * max_msg; every loop bounded (rdmx_recv with timeout 0).
 */
#include <string.h>

#include "core/protocol.h"
#include "core/wire.h"
#include "fuzz.h"
#include "peer.h"
#include "protocols/read.h"

#define FZ_MAX_MSG 4096u
#define FZ_OPS 32
#define FZ_ACK 24576u /* the peer's ack slots (u64 each) in its buffer */
#define FZ_SLOT 0

static void open_listener(void)
{
	struct rdmx_conn_opts o = fz_opts("read", FZ_MAX_MSG, 0);

	fz_listener(FZ_SLOT, &o);
}

static size_t dial_hello(struct fz_in *in, const struct fz_peer *p, uint8_t *pd)
{
	uint8_t sel = (uint8_t)fz_take(in, 1);
	uint16_t depth = (uint16_t)fz_take(in, 2);
	uint8_t rd = (uint8_t)fz_take(in, 1);
	uint16_t eager = (uint16_t)fz_take(in, 2);
	struct rdmx__read_hello rh = {
		.version = RDMX__READ_HELLO_VERSION, .rd_atomic = sel & 2 ? rd : 4,
		.desc_depth = 8, .send_depth = sel & 1 ? depth : 8,
		.eager_max = sel & 2 ? eager : 1024, .ack_rkey = p->mr->rkey,
		.ack_addr = (uintptr_t)(p->buf + FZ_ACK),
	};
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION, .max_msg = FZ_MAX_MSG,
				 .recv_depth = 8, .block_len = RDMX__READ_HELLO_SIZE };

	h.protocol = rdmx__protocol_by_name("read")->id;
	rdmx__read_hello_encode(&rh, h.block);
	return (size_t)rdmx__hello_encode(&h, pd, RDMX__PDATA_CONNECT_MAX);
}

/* SEND one descriptor (and what follows it) from the input. */
static void op_desc(struct fz_peer *p, struct fz_in *in)
{
	uint8_t mode = (uint8_t)fz_take(in, 1), *s = p->buf;
	uint32_t n;

	for (int i = 0; i < RDMX__READ_DESC_SIZE; i++)
		s[i] = (uint8_t)fz_take(in, 1);
	n = (uint32_t)fz_take(in, 1);
	for (uint32_t i = 0; i < n; i++)
		s[RDMX__READ_DESC_SIZE + i] = (uint8_t)fz_take(in, 1);
	if (mode & 1) {
		rdmx__put_u64(s + 8, (uintptr_t)(p->buf + FZ_PEER_SCRATCH / 2 +
						 rdmx__get_u16(s + 8) % (FZ_PEER_SCRATCH / 2)));
		rdmx__put_u32(s + 16, p->mr->rkey);
	}
	(void)fz_peer_post(p, RDMX__OP_SEND, 0, RDMX__READ_DESC_SIZE + n, 0, 0, 0);
}

static void drain(rdmx_conn *server)
{
	struct rdmx_msg m;

	for (int i = 0; i < 4 && !rdmx_recv(server, &m, 0); i++) {
		FZ_CHECK(m.len <= rdmx_conn_max_msg(server), "message above max_msg");
		rdmx_msg_release(server, &m);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	uint8_t pd[RDMX__PDATA_CONNECT_MAX];
	rdmx_conn *server = NULL;
	struct fz_peer p;
	size_t plen;

	open_listener();
	fz_peer_open(&p, FZ_SLOT);
	plen = dial_hello(&in, &p, pd);
	if (!fz_peer_connect(&p, FZ_SLOT, pd, plen, &server) && server) {
		for (int op = 0; op < FZ_OPS && in.n; op++) {
			op_desc(&p, &in);
			drain(server);
		}
	}
	fz_peer_close(&p);
	if (server)
		rdmx_conn_close(server);
	return 0;
}
