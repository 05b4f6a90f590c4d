/* SPDX-License-Identifier: MIT */
/*
 * A listener of each protocol receives a connect request whose private
 * data the fuzzer chose, through the fake fabric: rdmx__hello_decode(),
 * the listener's checks and the protocol's hello_in() block parser.
 *   byte 0: bits 0-2 the listener (send_recv, read, srq, write_simplex,
 *           write_magic, write_duplex, write_atomic); bit 7 raw: the rest
 *           is sent as it is, else it is a valid hello header for that
 *           protocol with the fuzzer's flags, max_msg, recv_depth and block.
 * An accepted connection gets one rdmx_recv(…, 0) and is closed.
 * Invariants: no crash; an accepted connection's max_msg is at most the
 * listener's.
 */
#include <string.h>

#include "core/protocol.h"
#include "core/wire.h"
#include "fuzz.h"
#include "peer.h"

#define FZ_MAX_MSG 4096u

static const char *const protos[] = {
	"send_recv", "read", "srq", "write_simplex", "write_magic",
	"write_duplex", "write_atomic",
};
#define NPROTOS (sizeof(protos) / sizeof(protos[0]))

static void open_listener(int slot)
{
	struct rdmx_conn_opts o = fz_opts(protos[slot], FZ_MAX_MSG, 16384);

	fz_listener(slot, &o);
}

/* A hello header for @proto from the input, then the input as the block. */
static size_t make_hello(struct fz_in *in, const char *proto, uint8_t *pd)
{
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION };
	int len;

	h.protocol = rdmx__protocol_by_name(proto)->id;
	h.flags = (uint16_t)fz_take(in, 2);
	h.max_msg = (uint32_t)fz_take(in, 4);
	h.recv_depth = (uint16_t)fz_take(in, 2);
	h.block_len = (uint8_t)(in->n < RDMX__PDATA_CONNECT_MAX - RDMX__HELLO_HDR ?
					in->n : RDMX__PDATA_CONNECT_MAX - RDMX__HELLO_HDR);
	memcpy(h.block, in->p, h.block_len);
	len = rdmx__hello_encode(&h, pd, RDMX__PDATA_CONNECT_MAX);
	FZ_CHECK(len > 0, "hello encode");
	return (size_t)len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	uint8_t pd[RDMX__PDATA_CONNECT_MAX];
	struct rdmx_msg m;
	struct fz_peer p;
	rdmx_conn *server;
	uint8_t sel = (uint8_t)fz_take(&in, 1);
	int slot = (int)((sel & 7) % NPROTOS);
	size_t plen;

	open_listener(slot);
	if (sel & 0x80) {
		plen = in.n < sizeof(pd) ? in.n : sizeof(pd);
		memcpy(pd, in.p, plen);
	} else {
		plen = make_hello(&in, protos[slot], pd);
	}
	fz_peer_open(&p, slot);
	if (!fz_peer_connect(&p, slot, pd, plen, &server)) {
		FZ_CHECK(rdmx_conn_max_msg(server) <= FZ_MAX_MSG,
			 "accepted conn's max_msg above the listener's");
		if (!rdmx_recv(server, &m, 0))
			FZ_CHECK(m.len <= rdmx_conn_max_msg(server), "message above max_msg");
	}
	fz_peer_close(&p);
	if (server)
		rdmx_conn_close(server);
	return 0;
}
