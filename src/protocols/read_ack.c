/* SPDX-License-Identifier: MIT */
/*
 * The read protocol's acks, both ends (why an ack is a WRITE: the top of
 * read.c): the receiver queues and posts its ack WRITEs, the sender takes
 * them in from its ack array.
 */
#include <errno.h>

#include "read_priv.h"

/* -------------------------------------------------------------- acking */

/* Queue an ack for the peer's buffer @slot (dropped once down). */
int rdmx__read_ack_push(rdmx_conn *c, uint32_t slot, uint32_t gen)
{
	struct rd *p = rd_of(c);

	if (c->state == RDMX__CONN_DOWN)
		return 0;
	if (p->aq_count == p->ndesc)
		return rdmx__conn_down(c, -EPROTO, "read: peer has more than the %u descriptors it was allowed",
				       p->ndesc);
	p->ackq[(p->aq_head + p->aq_count++) % p->ndesc] = (struct ackreq){ slot, gen };
	return 0;
}

/* Post queued acks: an RDMA WRITE of the generation into the ack slot. */
void rdmx__read_ack_flush(rdmx_conn *c)
{
	struct rd *p = rd_of(c);

	while (p->aq_count && p->acks < p->ndesc && c->state != RDMX__CONN_DOWN) {
		struct ackreq *a = &p->ackq[p->aq_head];
		struct rdmx__wr wr = {
			.wr_id = wr_id(WR_ACK, a->slot),
			.op = RDMX__OP_WRITE,
			.flags = RDMX__WR_SIGNALED,
			.addr = &p->acksrc[a->slot],
			.len = sizeof(uint64_t),
			.lkey = p->acksrcmr->lkey,
			.remote_addr = p->peer.ack_addr + (uint64_t)a->slot * sizeof(uint64_t),
			.rkey = p->peer.ack_rkey,
		};

		rdmx__put_u64((uint8_t *)&p->acksrc[a->slot], a->gen);
		if (rdmx__post_send(c, &wr, 1)) {
			rdmx__conn_down(c, -EIO, "read: posting an ack: %s", rdmx__last());
			return;
		}
		p->acks++;
		p->aq_head = (p->aq_head + 1) % p->ndesc;
		p->aq_count--;
	}
}

static uint64_t ack_load(const struct rd *p, uint32_t slot)
{
	uint64_t v = __atomic_load_n(&p->ack[slot], __ATOMIC_ACQUIRE);

	return rdmx__get_u64((const uint8_t *)&v);
}

/* Take in acks; a buffer is free once acked and its SEND completed. */
void rdmx__read_tx_scan(struct rd *p)
{
	for (uint32_t i = 0; i < p->nposted;) {
		uint32_t s = p->posted[i];
		struct tx *t = &p->tx[s];

		if (!t->acked && ack_load(p, s) == t->gen) {
			t->acked = 1;
			p->unacked--;
		}
		if (t->acked && rdmx__sendpool_done(&p->sp, s)) {
			rdmx__sendpool_put(&p->sp, s);
			p->posted[i] = p->posted[--p->nposted];
			continue;
		}
		i++;
	}
}
