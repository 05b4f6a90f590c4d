/* SPDX-License-Identifier: MIT */
/*
 * The decoders of what a peer sends before and beside a connection: the
 * hello (connect private data, either direction), the reject, and the read
 * protocol's descriptor and hello block. The first byte picks the decoder,
 * the rest is the peer's bytes, copied to a heap buffer of exactly that
 * size so ASan sees any read past it. Invariants: no crash, a decoded hello
 * has a block that fits, a reject's reason is NUL-terminated in its buffer.
 */
#include <string.h>

#include "core/wire.h"
#include "fuzz.h"
#include "protocols/read.h"

static void fz_hello(const uint8_t *p, size_t n)
{
	struct rdmx__hello h;
	uint8_t again[RDMX__HELLO_HDR + RDMX__HELLO_BLOCK_MAX];

	if (rdmx__hello_decode(p, n, &h))
		return;
	FZ_CHECK(h.block_len <= RDMX__HELLO_BLOCK_MAX, "hello block longer than its buffer");
	FZ_CHECK(h.version == RDMX__WIRE_VERSION, "hello of another wire version decoded");
	/* What decodes re-encodes, and to the same hello. */
	FZ_CHECK(rdmx__hello_encode(&h, again, sizeof(again)) ==
			 RDMX__HELLO_HDR + h.block_len,
		 "decoded hello does not re-encode");
}

static void fz_reject(const uint8_t *p, size_t n, size_t rlen)
{
	char why[256];
	int code;

	memset(why, 'x', sizeof(why));
	code = rdmx__reject_decode(p, n, why, rlen);
	FZ_CHECK(code >= 0, "reject decode returned an error code");
	if (code && rlen)
		FZ_CHECK(memchr(why, 0, rlen) != NULL, "reject reason not NUL-terminated");
}

static void fz_read(const uint8_t *p, size_t n)
{
	struct rdmx__read_desc d;
	struct rdmx__read_hello h;

	if (n >= RDMX__READ_DESC_SIZE && !rdmx__read_desc_decode(p, &d))
		FZ_CHECK(d.type == RDMX__READ_DESC_READ || d.type == RDMX__READ_DESC_EAGER,
			 "descriptor of an unknown type decoded");
	(void)rdmx__read_hello_decode(p, n, &h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	size_t n;

	if (size < 1)
		return 0;
	n = size - 1;
	copy = malloc(n ? n : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, n);
	switch (data[0] % 3) {
	case 0:
		fz_hello(copy, n);
		break;
	case 1:
		fz_reject(copy, n, data[0] / 3); /* reason buffers of 0..84 bytes */
		break;
	default:
		fz_read(copy, n);
	}
	free(copy);
	return 0;
}
