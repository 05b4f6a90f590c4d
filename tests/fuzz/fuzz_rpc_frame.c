/* SPDX-License-Identifier: MIT */
/*
 * The RPC frame as a peer writes it (src/rpc/rpc_frame.c): the header of
 * every frame, the hello's payload and the table a server's rejection
 * carries, checked against a fixed contract. Byte 0 picks: 0 the header,
 * 1 the hello, 2 the table diff (the rest is the payload).
 * Invariants: no crash or out-of-bounds access; a header taken says
 * exactly the bytes that came, a known kind and a status 0 or
 * -1..-4095; the diff's text is NUL-terminated within its buffer.
 */
#include <string.h>

#include "fuzz.h"
#include "rpc/rpc_int.h"

static const struct rdmx_rpc_method fz_methods[] = {
	{ 1, "echo", 4096, 4096, RDMX_RPC_IDEMPOTENT },
	{ 2, "get", 64, 1024, 0 },
	{ 9, "put", 1024, 8, 0 },
};

static void fz_hdr(const uint8_t *p, size_t n)
{
	struct rpc_hdr h;

	if (rdmx__rpc_hdr_get(p, n, &h))
		return;
	FZ_CHECK(n >= RPC_HDR && h.len == n - RPC_HDR, "a header whose length is not the frame's");
	FZ_CHECK(h.kind >= RPC_HELLO && h.kind <= RPC_RESP, "a header of an unknown kind");
	FZ_CHECK(h.status <= 0 && h.status >= RPC_STATUS_MIN, "a status out of range");
}

static void fz_diff(const uint8_t *p, size_t n)
{
	static struct rpc_contract k;
	static int loaded;
	char out[200];

	if (!loaded) {
		FZ_CHECK(!rdmx__rpc_contract_load(&k, fz_methods, 3), "the contract");
		loaded = 1;
	}
	memset(out, 0x7f, sizeof(out));
	rdmx__rpc_table_diff(&k, p, n, out, sizeof(out));
	FZ_CHECK(memchr(out, 0, sizeof(out)), "a diff text without its NUL");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t hash;
	uint32_t count;
	uint8_t *copy;

	if (!size)
		return 0;
	/* an exact-size copy: a read past the frame is seen by ASan */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 3) {
	case 0:
		fz_hdr(copy, size - 1);
		break;
	case 1:
		(void)rdmx__rpc_hello_get(copy, size - 1, &hash, &count);
		break;
	default:
		fz_diff(copy, size - 1);
		break;
	}
	free(copy);
	return 0;
}
