/* SPDX-License-Identifier: MIT */
/*
 * The memcached front door's parser and executor (src/kv/mc_proto.c) on
 * hostile bytes: the first byte picks the chunk size the input is fed in
 * (as a socket might deliver it), the rest is what a client sends, to a
 * session over a small store (16 entries, 64-byte inline values, a 4 KiB
 * slab, 512-byte items) so full tables, out-of-line values and too-large
 * items are all reachable; its upper bits pick the session's buffer caps
 * (none, or 4, 8, 16 KiB: refusals of data blocks and get replies, in
 * mc_out.c). Invariants: no crash, never more consumed than given, a
 * closed session consumes nothing more, the store never holds more than
 * its capacity, every reply ends in "\r\n", and what the session held is
 * all given back when it ends.
 */
#include <string.h>

#include "fuzz.h"
#include "kv/mc_proto.h"

static uint64_t fz_clock(void *arg)
{
	(void)arg;
	return 1000000; /* fixed: runs repeat exactly */
}

static void fz_feed(struct rdmx__mc_sess *s, const uint8_t *p, size_t n, size_t chunk)
{
	uint8_t buf[RDMX__MC_LINE_MAX * 2];
	size_t have = 0;

	while ((n || have) && !s->closing) {
		size_t take = n < chunk ? n : chunk, used;

		if (take > sizeof(buf) - have)
			take = sizeof(buf) - have;
		memcpy(buf + have, p, take);
		p += take;
		n -= take;
		have += take;
		used = rdmx__mc_execute(s, buf, have);
		FZ_CHECK(used <= have, "consumed more than it was given");
		if (!used && !take)
			break; /* a partial line and no more input */
		memmove(buf, buf + used, have - used);
		have -= used;
		if (s->out_len)
			FZ_CHECK(s->out_len >= 2 && !memcmp(s->out + s->out_len - 2, "\r\n", 2),
				 "a reply does not end in CRLF");
		rdmx__mc_out_consume(s, s->out_len);
	}
	if (s->closing)
		FZ_CHECK(rdmx__mc_execute(s, (const uint8_t *)"get a\r\n", 7) == 0,
			 "a closed session ran a command");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdmx__kv_opts o = { .capacity = 16, .memory = 4096, .inline_max = 64,
				   .item_max = 512, .now = fz_clock };
	struct rdmx__kv *kv;
	struct rdmx__mc_sess s;
	struct rdmx__kv_stats st;
	struct rdmx__mc_mem m = { 0 };

	if (!size || rdmx__kv_create(&o, &kv))
		return 0;
	m.conn_max = m.total_max = (size_t)2048 << (data[0] / 64);
	if (!rdmx__mc_sess_init(&s, kv, NULL, "fuzz")) {
		s.mem = data[0] >= 64 ? &m : NULL;
		fz_feed(&s, data + 1, size - 1, 1 + data[0] % 64);
		rdmx__mc_sess_fini(&s);
	}
	FZ_CHECK(m.total == 0, "the session did not give back what it held");
	rdmx__kv_stats(kv, &st);
	FZ_CHECK(st.items <= st.capacity, "more items than the capacity");
	FZ_CHECK(st.slab_used <= st.slab_size, "more slab used than there is");
	rdmx__kv_destroy(kv);
	return 0;
}
