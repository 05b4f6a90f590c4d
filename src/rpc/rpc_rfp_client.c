/* SPDX-License-Identifier: MIT */
/*
 * Transport "rfp", the client: the dial and the server's set-up, a
 * request's two WRITEs, the responses fetched with READs or pushed on the
 * control connection. The design: rpc_rfp_ops.c.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "rpc/rpc_rfp_priv.h"

/* Read the server's set-up (peer-written: copied once, then checked). */
static int setup_take(struct rdmx_rpc_client *c, rdmx_conn *conn, unsigned char *out)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(conn, &m, c->o.timeout_ms);

	if (rc)
		return rdmx__fail(rc, "rpc rfp: no set-up from the server within %d ms: %s",
				  c->o.timeout_ms, rdmx_conn_error(conn));
	if (m.len != RFP_SETUP_LEN) {
		rdmx_msg_release(conn, &m);
		return rdmx__fail(-EPROTO, "rpc rfp: a set-up of %zu bytes, want %u", m.len,
				  RFP_SETUP_LEN);
	}
	memcpy(out, m.data, RFP_SETUP_LEN);
	rdmx_msg_release(conn, &m);
	return 0;
}

static int client_regions(struct rdmx_rpc_client *c, struct rfp_conn *r,
			  const unsigned char *setup)
{
	size_t half = (size_t)r->slots * r->ssize;
	int rc = rdmx_mr_reg(c->ctx, r->mem, r->bufs * r->ssize, RDMX_ACCESS_LOCAL, &r->mr);

	if (!rc)
		rc = rdmx_region_import(r->c, setup + 12, RDMX_REGION_DESC_LEN, &r->rreq);
	if (!rc)
		rc = rdmx_region_import(r->c, setup + 12 + RDMX_REGION_DESC_LEN,
					RDMX_REGION_DESC_LEN, &r->rresp);
	memcpy(r->qdesc, setup + 12, RDMX_REGION_DESC_LEN);
	memcpy(r->rdesc, setup + 12 + RDMX_REGION_DESC_LEN, RDMX_REGION_DESC_LEN);
	if (!rc && (rdmx_region_len(r->rreq) != half || rdmx_region_len(r->rresp) != half))
		rc = rdmx__fail(-EPROTO, "rpc rfp: regions of %zu and %zu bytes, want %zu",
				rdmx_region_len(r->rreq), rdmx_region_len(r->rresp), half);
	return rc;
}

static int client_setup(struct rdmx_rpc_client *c, rdmx_conn *conn, struct rfp_conn **out)
{
	unsigned char setup[RFP_SETUP_LEN];
	uint32_t head[3];
	struct rfp_conn *r;
	int rc = setup_take(c, conn, setup);

	if (rc)
		return rc;
	memcpy(head, setup, sizeof(head));
	if (head[0] != RFP_MAGIC || head[1] < 1 || head[1] > RPC_WINDOW_MAX ||
	    head[2] < RPC_HDR + RPC_HELLO_LEN + RFP_TRAILER || head[2] > RFP_SLOT_MAX ||
	    head[2] % RFP_ALIGN)
		return rdmx__fail(-EPROTO, "rpc rfp: a set-up of %u slots of %u bytes "
				  "(magic %08x)", head[1], head[2], head[0]);
	if (c->o.window > head[1])
		return rdmx__fail(-EINVAL, "rpc rfp: window %u above the server's %u slots",
				  c->o.window, head[1]);
	/* scratch and a fetch buffer per slot our calls use (our window, not
	 * the server's slot count: 4096 slots of 16 MiB would be 64 GiB) */
	r = rdmx__rfp_new(head[1], head[2], 1 + (size_t)c->o.window);
	if (!r)
		return rdmx__fail(-ENOMEM, "rpc rfp: out of memory for %u slots", head[1]);
	r->c = conn;
	r->retries = c->o.fetch_retries;
	r->timeout_ms = c->o.timeout_ms;
	rc = client_regions(c, r, setup);
	if (rc) {
		rdmx__rfp_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int rdmx__rfp_dial(struct rdmx_rpc_client *c, const char *addr, uint16_t port)
{
	struct rdmx_conn_opts co;
	struct rfp_conn *r = NULL;
	rdmx_conn *conn;
	int rc;

	rdmx__rpc_conn_opts(&c->o, &c->k, RFP_PUSH_LEN, &co);
	rc = rdmx_dial(c->ctx, addr, port, &co, &conn);
	if (rc)
		return rc;
	rc = client_setup(c, conn, &r);
	if (rc) {
		rdmx_conn_close(conn);
		return rc;
	}
	c->t = r;
	return 0;
}

/* One one-sided operation, waited for. */
static int onesided(struct rfp_conn *r, int write, const rdmx_region *reg, size_t roff,
		    size_t off, size_t len)
{
	rdmx_token tok;
	int rc = write ? rdmx_write(r->c, reg, roff, r->mr, off, len, &tok)
		       : rdmx_read(r->c, reg, roff, r->mr, off, len, &tok);

	return rc ? rc : rdmx_wait(r->c, tok, r->timeout_ms);
}

static int push_ask(struct rfp_conn *r, uint32_t s);

/* WRITE the trailer in our scratch into request slot @s. */
static int trailer_write(struct rfp_conn *r, uint32_t s)
{
	size_t tr = r->ssize - RFP_TRAILER;

	return onesided(r, 1, r->rreq, (size_t)s * r->ssize + tr, tr, RFP_TRAILER);
}

/* A request: the frame into its slot, then the trailer (fetch_retries 0:
 * and ask for the push at once). */
int rdmx__rfp_client_send(struct rfp_conn *r, struct rpc_buf *b, size_t len)
{
	uint8_t kind;
	uint32_t s;
	int rc = rdmx__rfp_frame_slot(r, b->data, len, &s, &kind);

	if (rc)
		return rc;
	r->seq[s]++;
	rc = onesided(r, 1, r->rreq, (size_t)s * r->ssize, 0, len);
	if (!rc)
		rc = rdmx__rfp_tear_first(RDMX__RFP_TEAR_REQ, r->mem, r->ssize, (uint32_t)len,
					  r->seq[s], trailer_write, r, s);
	trailer_store(r->mem, r->ssize, (uint32_t)len, r->seq[s]);
	if (!rc)
		rc = trailer_write(r, s);
	if (rc)
		return rc;
	r->state[s] = SLOT_WAIT;
	r->fails[s] = 0;
	r->torn[s] = 0;
	return r->retries ? 0 : push_ask(r, s);
}

static int push_ask(struct rfp_conn *r, uint32_t s)
{
	uint32_t p[2] = { s, r->seq[s] };
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(r->c, RFP_PUSH_LEN, &m, r->timeout_ms);

	if (rc)
		return rc;
	memcpy(m.data, p, sizeof(p));
	m.len = RFP_PUSH_LEN;
	rc = rdmx_send(r->c, &m);
	if (!rc)
		r->state[s] = SLOT_PUSHED;
	return rc;
}

/* Fetch slot @s's response: 1 with it in @rx, 0 not there yet, -errno. */
static int fetch(struct rfp_conn *r, uint32_t s, struct rpc_rx *rx)
{
	size_t roff = (size_t)s * r->ssize, off = (size_t)(1 + s) * r->ssize;
	size_t tr = r->ssize - RFP_TRAILER;
	uint32_t len;
	int rc = onesided(r, 0, r->rresp, roff + tr, off + tr, RFP_TRAILER);

	if (rc)
		return rc;
	if (!trailer_load(r->mem + off, r->ssize, r->seq[s], &len)) {
		if (++r->fails[s] >= r->retries)
			return push_ask(r, s);
		return 0;
	}
	if (!trailer_whole(NULL, len, r->ssize))
		return rdmx__rfp_torn_again(r, s, len); /* fetch again (not a failed fetch) */
	rc = onesided(r, 0, r->rresp, roff, off, len);
	if (rc)
		return rc;
	if (!trailer_whole(r->mem + off, len, r->ssize))
		return rdmx__rfp_torn_again(r, s, len);
	r->torn[s] = 0;
	r->state[s] = SLOT_FREE;
	*rx = (struct rpc_rx){ .data = r->mem + off, .len = len, .slot = (int)s };
	return 1;
}

/* A pushed response: 1 with it in @rx, 0 none within @wait_ms, -errno. */
static int pushed(struct rfp_conn *r, struct rpc_rx *rx, int wait_ms)
{
	uint32_t p[2];
	int rc = rdmx_recv(r->c, &rx->msg, wait_ms);

	if (rc == -EAGAIN || rc == -ETIMEDOUT)
		return 0;
	if (rc)
		return rc;
	if (rx->msg.len >= RFP_PUSH_LEN)
		memcpy(p, rx->msg.data, sizeof(p));
	if (rx->msg.len < RFP_PUSH_LEN || p[0] >= r->slots || r->state[p[0]] == SLOT_FREE ||
	    p[1] != r->seq[p[0]]) {
		rdmx_msg_release(r->c, &rx->msg);
		return rdmx__fail(-EPROTO, "rpc rfp: a pushed response for no pushed call");
	}
	r->state[p[0]] = SLOT_FREE;
	rx->data = (const char *)rx->msg.data + RFP_PUSH_LEN;
	rx->len = rx->msg.len - RFP_PUSH_LEN;
	rx->slot = -1;
	return 1;
}

/* Is a response awaited by fetching (READs) rather than by a push? */
static bool fetching(const struct rfp_conn *r)
{
	for (uint32_t s = 0; s < r->slots; s++)
		if (r->state[s] == SLOT_WAIT)
			return true;
	return false;
}

int rdmx__rfp_client_recv(struct rfp_conn *r, struct rpc_rx *rx, int timeout_ms)
{
	struct rdmx__deadline d;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		int rc = pushed(r, rx, 0);

		for (uint32_t s = 0; !rc && s < r->slots; s++)
			if (r->state[s] == SLOT_WAIT)
				rc = fetch(r, s, rx);
		/* the server went away: what it pushed before is still taken
		 * (it flushes a refusal of the contract before it closes) */
		if (rc < 0 && rc != -EPROTO && pushed(r, rx, 0) == 1)
			return 0;
		if (rc)
			return rc < 0 ? rc : 0;
		if (!d.forever && !rdmx__deadline_left_ms(&d))
			return timeout_ms ? -ETIMEDOUT : -EAGAIN;
		if (fetching(r)) {
			sched_yield();
			continue;
		}
		/* only pushes to come: sleep until one does (a departure of
		 * the server ends the wait too), then look again */
		rc = pushed(r, rx, d.forever ? -1 : rdmx__deadline_left_ms(&d));
		if (rc)
			return rc < 0 ? rc : 0;
	}
}

int rdmx__rpc_rfp_poke(struct rdmx_rpc_client *c, uint32_t s, const void *frame, size_t n)
{
	struct rfp_conn *r = c->t;
	int rc;

	if (c->ops != &rdmx__rpc_transport_rfp || s >= r->slots || n > r->ssize - RFP_TRAILER)
		return rdmx__fail(-EINVAL, "rpc rfp: no slot %u of %zu bytes to poke", s, n);
	memcpy(r->mem, frame, n);
	r->seq[s]++;
	rc = onesided(r, 1, r->rreq, (size_t)s * r->ssize, 0, n);
	trailer_store(r->mem, r->ssize, (uint32_t)n, r->seq[s]);
	return rc ? rc : trailer_write(r, s);
}

/* WRITE 8 bytes through descriptor @d (WRITE access forged in) on @r's
 * connection. */
static int forged_write(struct rfp_conn *r, const unsigned char *desc)
{
	unsigned char d[RDMX_REGION_DESC_LEN];
	rdmx_region *forged;
	int rc;

	memcpy(d, desc, sizeof(d));
	d[5] |= RDMX_ACCESS_REMOTE_WRITE; /* the descriptor's access byte */
	rc = rdmx_region_import(r->c, d, sizeof(d), &forged);
	if (rc)
		return rc;
	rc = onesided(r, 1, forged, 0, 0, 8);
	rdmx_region_free(forged);
	return rc;
}

int rdmx__rpc_rfp_write_resp(struct rdmx_rpc_client *c)
{
	if (c->ops != &rdmx__rpc_transport_rfp)
		return rdmx__fail(-EINVAL, "rpc rfp: not an rfp client");
	return forged_write(c->t, ((struct rfp_conn *)c->t)->rdesc);
}

int rdmx__rpc_rfp_write_as(struct rdmx_rpc_client *c, const struct rdmx_rpc_client *victim)
{
	if (c->ops != &rdmx__rpc_transport_rfp || victim->ops != &rdmx__rpc_transport_rfp)
		return rdmx__fail(-EINVAL, "rpc rfp: not an rfp client");
	return forged_write(c->t, ((const struct rfp_conn *)victim->t)->qdesc);
}

size_t rdmx__rpc_rfp_client_mem(const struct rdmx_rpc_client *c)
{
	const struct rfp_conn *r = c->t;

	return r->bufs * r->ssize;
}

uint32_t rdmx__rpc_rfp_slot(const struct rdmx_rpc_client *c)
{
	return ((const struct rfp_conn *)c->t)->ssize;
}
