/* SPDX-License-Identifier: MIT */
/*
 * Transport "rfp": a connection's slots, either side's (made and freed,
 * the slot a frame goes to), the bound on a trailer that reads torn, and
 * the test hook that shows one. The design: rpc_rfp_ops.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "rpc/rpc_rfp_priv.h"

/*
 * Slot @s's trailer read torn: 0 to read it again, or -EPROTO once it has
 * read torn for RFP_TORN_MS (a copy in flight settles by the next read; a
 * peer that wrote a bad length or header keeps it).
 */
int rdmx__rfp_torn_again(struct rfp_conn *r, uint32_t s, uint32_t len)
{
	int64_t t = rdmx__now_ms();

	if (!r->torn[s]) {
		r->torn[s] = t;
		return 0;
	}
	if (t - r->torn[s] < RFP_TORN_MS)
		return 0;
	return rdmx__fail(-EPROTO, "rpc rfp: slot %u's %s trailer says %u bytes (slots of "
			  "%u), not its frame's length, for %d ms", s,
			  r->server ? "request" : "response", len, r->ssize, RFP_TORN_MS);
}

/* Test hook (rdmx__rpc_rfp_tear): ms to show the next response's or
 * request's trailer torn (the new seq, a wrong len of kind @how) before
 * the real one. */
static unsigned tear_ms[2], tear_how[2];

void rdmx__rpc_rfp_tear(int side, unsigned ms, int how)
{
	__atomic_store_n(&tear_how[side != 0], (unsigned)how, __ATOMIC_RELAXED);
	__atomic_store_n(&tear_ms[side != 0], ms, __ATOMIC_RELAXED);
}

/* The hook's wrong len for a frame of @len bytes in slots of @ssize. */
static uint32_t tear_len(unsigned how, uint32_t len, uint32_t ssize)
{
	if (how == RDMX__RFP_TEAR_ZERO)
		return 0; /* a slot's first use: the old trailer is 0 */
	if (how == RDMX__RFP_TEAR_BIG)
		return RFP_LEN_MASK; /* above any slot */
	return len + 8 <= ssize - RFP_TRAILER ? len + 8 : len - 8;
}


/* The torn trailer of the hook, if armed for @side: stored into @slot,
 * which @show (if any) then WRITEs to @r's slot @s, and left there for
 * the hook's ms. */
int rdmx__rfp_tear_first(int side, unsigned char *slot, uint32_t ssize, uint32_t len,
			 uint32_t seq, int (*show)(struct rfp_conn *, uint32_t),
			 struct rfp_conn *r, uint32_t s)
{
	unsigned ms = __atomic_exchange_n(&tear_ms[side], 0, __ATOMIC_RELAXED);
	unsigned how = __atomic_load_n(&tear_how[side], __ATOMIC_RELAXED);
	int rc = 0;

	if (!ms)
		return 0;
	trailer_store(slot, ssize, tear_len(how, len, ssize), seq);
	if (show)
		rc = show(r, s);
	usleep(ms * 1000);
	return rc;
}

/* The slot a frame of ours goes to: its call id's slot index. */
int rdmx__rfp_frame_slot(const struct rfp_conn *r, const void *frame, size_t len,
			 uint32_t *s, uint8_t *kind)
{
	struct rpc_hdr h;
	int rc = rdmx__rpc_hdr_get(frame, len, &h);

	if (rc)
		return rc;
	*kind = h.kind;
	*s = (uint32_t)(h.call & (RPC_WINDOW_MAX - 1));
	if (*s >= r->slots)
		return rdmx__fail(-EPROTO, "rpc rfp: call slot %u, %u slots", *s, r->slots);
	return 0;
}

void rdmx__rfp_free(struct rfp_conn *r)
{
	if (r->rreq)
		rdmx_region_free(r->rreq);
	if (r->rresp)
		rdmx_region_free(r->rresp);
	if (r->mr)
		rdmx_mr_dereg(r->mr);
	rdmx__export_revoke(&r->exp[0]);
	rdmx__export_revoke(&r->exp[1]);
	free(r->mem);
	free(r->seq);
	free(r->done);
	free(r->push);
	free(r->fails);
	free(r->torn);
	free(r->state);
	free(r->scratch);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

struct rfp_conn *rdmx__rfp_new(uint32_t slots, uint32_t ssize, size_t bufs)
{
	struct rfp_conn *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->slots = slots;
	r->ssize = ssize;
	r->bufs = bufs;
	r->seq = calloc(slots, sizeof(*r->seq));
	r->done = calloc(slots, sizeof(*r->done));
	r->push = calloc(slots, sizeof(*r->push));
	r->fails = calloc(slots, sizeof(*r->fails));
	r->torn = calloc(slots, sizeof(*r->torn));
	r->state = calloc(slots, sizeof(*r->state));
	if (posix_memalign((void **)&r->mem, RFP_ALIGN, bufs * ssize))
		r->mem = NULL;
	if (!r->seq || !r->done || !r->push || !r->fails || !r->torn || !r->state ||
	    !r->mem) {
		rdmx__rfp_free(r);
		return NULL;
	}
	memset(r->mem, 0, bufs * ssize);
	return r;
}
