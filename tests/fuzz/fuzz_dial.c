/* SPDX-License-Identifier: MIT */
/*
 * The dialer's side of the hello: rdmx_dial() to a raw seam listener that
 * answers with the fuzzer's accept reply or reject data (the reply hello's
 * decoding and checks, each protocol's hello_in() on the dialer's side,
 * rdmx__reject_decode() on a real reject).
 *   byte 0: bits 0-2 the protocol (as fuzz_hello), bit 3 reject, bit 7
 *           raw: the rest is the reply (or reject data) as it is; else a
 *           valid reply header with the fuzzer's max_msg, recv_depth and
 *           block (the rest)
 * Invariants: no crash; a dial that succeeds has max_msg at most what it
 * asked for; a reject fails the dial.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/conn.h"
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

struct answer {
	struct rdmx__ep *lis, *child;
	struct rdmx__cq *cq;
	uint8_t data[RDMX__PDATA_BUF];
	size_t len;
	int reject;
};

static struct rdmx__ep *raw_listener(void)
{
	static struct rdmx__ep *lis;

	if (!lis)
		FZ_CHECK(!fz_ctx()->fops->listen(fz_ctx()->fab, "fake", 0, &lis), "raw listen");
	return lis;
}

/* Take the dial's request and answer it with the fuzzer's bytes. */
static void *answer_main(void *arg)
{
	const struct rdmx__fabric_ops *f = fz_ctx()->fops;
	struct rdmx__qp_caps caps = { .max_send_wr = 4, .max_recv_wr = 4, .rnr_retry = 7,
				      .retry_count = 7 };
	struct answer *a = arg;
	uint8_t req[RDMX__PDATA_BUF];
	size_t rlen = 0;

	if (f->get_request(a->lis, 5000, &a->child, req, &rlen))
		return NULL;
	if (a->reject) {
		f->reject(a->child, a->data, a->len);
		a->child = NULL;
		return NULL;
	}
	FZ_CHECK(!f->create_cq(a->child, 8, &a->cq), "create_cq");
	caps.send_cq = caps.recv_cq = a->cq;
	FZ_CHECK(!f->create_qp(a->child, &caps), "create_qp");
	(void)f->accept(a->child, a->data, a->len, 1000);
	return NULL;
}

/* A reply hello for @proto from the input; its length. */
static size_t make_reply(struct fz_in *in, const char *proto, uint8_t *out)
{
	struct rdmx__hello h = { .version = RDMX__WIRE_VERSION, .flags = RDMX__HELLO_REPLY };
	int len;

	h.protocol = rdmx__protocol_by_name(proto)->id;
	h.max_msg = (uint32_t)fz_take(in, 4);
	h.recv_depth = (uint16_t)fz_take(in, 2);
	h.block_len = (uint8_t)(in->n < RDMX__HELLO_BLOCK_MAX ? in->n : RDMX__HELLO_BLOCK_MAX);
	memcpy(h.block, in->p, h.block_len);
	len = rdmx__hello_encode(&h, out, RDMX__PDATA_ACCEPT_MAX);
	FZ_CHECK(len > 0, "reply encode");
	return (size_t)len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	struct answer a = { .lis = raw_listener() };
	struct rdmx_conn_opts o;
	struct rdmx_msg m;
	rdmx_conn *c = NULL;
	uint8_t sel = (uint8_t)fz_take(&in, 1);
	size_t slot = (sel & 7) % NPROTOS, cap;
	pthread_t t;
	int rc;

	a.reject = !!(sel & 8);
	cap = a.reject ? RDMX__PDATA_REJECT_MAX : RDMX__PDATA_ACCEPT_MAX;
	if (sel & 0x80 || a.reject) {
		a.len = in.n < cap ? in.n : cap;
		memcpy(a.data, in.p, a.len);
	} else {
		a.len = make_reply(&in, protos[slot], a.data);
	}
	o = fz_opts(protos[slot], FZ_MAX_MSG, 16384);
	o.connect_timeout_ms = 2000;
	FZ_CHECK(!pthread_create(&t, NULL, answer_main, &a), "answer thread");
	rc = rdmx_dial(fz_ctx(), "fake", fz_ctx()->fops->local_port(a.lis), &o, &c);
	pthread_join(t, NULL);
	FZ_CHECK(!a.reject || rc, "a rejected dial succeeded");
	if (!rc) {
		FZ_CHECK(rdmx_conn_max_msg(c) <= FZ_MAX_MSG, "dial's max_msg above what it asked");
		if (!rdmx_recv(c, &m, 0))
			FZ_CHECK(m.len <= rdmx_conn_max_msg(c), "message above max_msg");
		rdmx_conn_close(c);
	}
	if (a.child)
		fz_ctx()->fops->destroy_ep(a.child);
	if (a.cq)
		fz_ctx()->fops->destroy_cq(a.cq);
	return 0;
}
