/* SPDX-License-Identifier: MIT */
/*
 * The receiving side of packed frames: see unpack.h.
 */
#include <errno.h>

#include "sendpool.h"
#include "unpack.h"

void rdmx__unpack_peer_splits(rdmx_conn *c, struct rdmx__sendpool *sp,
			      uint32_t peer_bytes)
{
	size_t slot = sp->stride - sp->data_off;

	sp->pack_cap = peer_bytes < slot ? peer_bytes : (uint32_t)slot;
	if (c->opts.coalesce != RDMX_COALESCE_OFF)
		sp->pack_small = RDMX__PACK_SMALL;
}

int rdmx__unpack_start(rdmx_conn *c, struct rdmx__unpack *u, const char *who,
		       uint8_t *buf, uint32_t idx, uint32_t len, uint64_t *mask)
{
	int n = rdmx__pack_parse(buf, len, c->max_msg, u->ent);

	if (n < 0)
		return rdmx__conn_down(c, n, "%s: from the peer: %s", who, rdmx__last());
	*mask = n == 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
	u->buf = buf;
	u->idx = idx;
	u->count = (uint32_t)n;
	u->next = 0;
	return 0;
}

