/* SPDX-License-Identifier: MIT */
/*
 * Transport "rfp", the server: the listener, a client's slots registered
 * and exported, the scan of every slot's trailer, the responses stored in
 * place and the pushes asked for. The design: rpc_rfp_ops.c.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/admit.h"
#include "core/clock.h"
#include "rpc/rpc_rfp_priv.h"

static uint32_t slot_size(const struct rpc_contract *k)
{
	size_t n = rdmx__rpc_frame_max(k) + RFP_TRAILER;

	return (uint32_t)((n + RFP_ALIGN - 1) & ~(size_t)(RFP_ALIGN - 1));
}

int rdmx__rfp_listen(struct rdmx_rpc_server *s, const char *addr, uint16_t port)
{
	struct rdmx_conn_opts co;
	struct rfp_lis *l = calloc(1, sizeof(*l));
	int rc;

	if (!l)
		return rdmx__fail(-ENOMEM, "rpc rfp: out of memory");
	if (slot_size(&s->k) > RFP_SLOT_MAX) {
		free(l);
		return rdmx__fail(-EMSGSIZE, "rpc rfp: slots of %u bytes, at most %u",
				  slot_size(&s->k), RFP_SLOT_MAX);
	}
	rdmx__rpc_conn_opts(&s->o, &s->k, RFP_PUSH_LEN, &co);
	rc = rdmx_listen(s->ctx, addr, port, &co, &l->lis);
	if (rc) {
		free(l);
		return rc;
	}
	/* a client's request and response slots, registered for it: in the
	 * listener's max_mem, so a dial beyond it is refused */
	rdmx__listener_charge_each(l->lis, 2 * (uint64_t)s->o.window * slot_size(&s->k));
	s->tstate = l;
	return 0;
}

uint16_t rdmx__rfp_port(const struct rdmx_rpc_server *s)
{
	const struct rfp_lis *l = s->tstate;

	return rdmx_listener_port(l->lis);
}

void rdmx__rfp_unlisten(struct rdmx_rpc_server *s)
{
	struct rfp_lis *l = s->tstate;

	rdmx_listener_destroy(l->lis);
	free(l);
	s->tstate = NULL;
}

/* Export a new client's slots to it alone with exactly the rights it
 * needs (it WRITEs requests and READs responses: an export each, a window
 * bound to its QP where the device has them; core/onesided.h) and send
 * it the set-up. This runs in the server's run thread: the send buffer is
 * taken without a wait (a new connection has its buffers free; one that
 * has none, as a dialer announcing no receive depth to a credit protocol,
 * is refused, not waited on for the timeout while every client waits). */
static int setup_send(struct rdmx_rpc_server *s, struct rfp_conn *r)
{
	size_t half = (size_t)r->slots * r->ssize;
	uint32_t head[3] = { RFP_MAGIC, r->slots, r->ssize };
	struct rdmx_msg m;
	uint8_t *d;
	char peer[64];
	int rc = rdmx_msg_alloc(r->c, RFP_SETUP_LEN, &m, 0);

	if (rc) {
		if (rdmx_conn_peer_addr(r->c, peer, sizeof(peer)))
			snprintf(peer, sizeof(peer), "peer unknown");
		return rdmx__fail(rc, "rpc rfp: a new client (%s) has no send buffer free "
				  "for its set-up: refused (%s)", peer, rdmx_conn_error(r->c));
	}
	memcpy(m.data, head, sizeof(head));
	d = (uint8_t *)m.data + 12;
	rc = rdmx__export_conn(r->c, r->mem, half, RDMX__ACCESS_WRITE, s->o.timeout_ms,
			       &r->exp[0], d);
	if (!rc)
		rc = rdmx__export_conn(r->c, r->mem + half, half, RDMX__ACCESS_READ,
				       s->o.timeout_ms, &r->exp[1], d + RDMX_REGION_DESC_LEN);
	if (rc) {
		rdmx_msg_release(r->c, &m);
		return rc;
	}
	m.len = RFP_SETUP_LEN;
	return rdmx_send(r->c, &m);
}

/* A new client's slots, exported and announced: 0 with it in *@out, or
 * -errno with a message (the server keeps it; the client is refused). */
static int server_conn(struct rdmx_rpc_server *s, rdmx_conn *c, struct rfp_conn **out)
{
	uint32_t ssize = slot_size(&s->k);
	struct rfp_conn *r = rdmx__rfp_new(s->o.window, ssize, 2 * (size_t)s->o.window);
	int rc;

	if (!r)
		return rdmx__fail(-ENOMEM, "rpc rfp: out of memory for a client's %u slots",
				  s->o.window);
	r->c = c;
	r->scratch = malloc(ssize);
	rc = r->scratch ? setup_send(s, r)
			: rdmx__fail(-ENOMEM, "rpc rfp: out of memory for a client");
	if (rc) {
		rdmx__rfp_free(r);
		return rc;
	}
	rdmx_conn_set_user(c, r);
	*out = r;
	return 0;
}

/*
 * Push slot @s's response on the control connection (r->lock held). No
 * wait for a send buffer: this runs in the server's poll thread (a push
 * asked for) or a worker, under r->lock, and a client that asks for pushes
 * and never takes them (its receives gone, our SENDs stuck on RNR) would
 * hold every client's requests for the timeout. A client that follows the
 * protocol has at most its window of pushes unread, within the send depth.
 */
static int push_send(struct rfp_conn *r, uint32_t s)
{
	unsigned char *slot = slot_at(r, 1, s);
	uint32_t len, head[2] = { s, r->seq[s] };
	struct rdmx_msg m;
	int rc;

	if (!trailer_load(slot, r->ssize, r->seq[s], &len))
		return -EIO; /* not answered: cannot happen under r->lock */
	rc = rdmx_msg_alloc(r->c, RFP_PUSH_LEN + len, &m, 0);
	if (rc)
		return rdmx__fail(rc, "rpc rfp: no send buffer free for a push to a client "
				  "(it takes no pushed responses): %s", rdmx_conn_error(r->c));
	memcpy(m.data, head, sizeof(head));
	memcpy((char *)m.data + RFP_PUSH_LEN, slot, len);
	m.len = RFP_PUSH_LEN + len;
	r->push[s] = 0;
	return rdmx_send(r->c, &m);
}

/* A client asks for a push: 0, or -EPROTO (malformed: drop it). */
static int push_asked(struct rfp_conn *r, const struct rdmx_msg *m)
{
	uint32_t p[2];
	int rc = 0;

	if (m->len != RFP_PUSH_LEN)
		return -EPROTO;
	memcpy(p, m->data, sizeof(p));
	if (p[0] >= r->slots)
		return -EPROTO;
	/* the ask may overtake the request's WRITE: remember it for seq + 1 */
	pthread_mutex_lock(&r->lock);
	if (p[1] == r->seq[p[0]] && r->done[p[0]] == p[1])
		rc = push_send(r, p[0]);
	else if (p[1] == r->seq[p[0]] || p[1] == r->seq[p[0]] + 1)
		r->push[p[0]] = p[1];
	pthread_mutex_unlock(&r->lock);
	return rc ? -EIO : 0;
}

/* A malformed record: an empty frame the RPC layer drops the client for. */
static void bad_record(struct rfp_conn *r, struct rpc_sev *ev)
{
	*ev = (struct rpc_sev){ .type = RPC_SEV_FRAME, .t = r, .rx = { .slot = -1 } };
}

/* Slot @s of @r: 1 with its frame (or a malformed record) in @ev. */
static int slot_take(struct rfp_conn *r, uint32_t s, struct rpc_sev *ev)
{
	unsigned char *slot = slot_at(r, 0, s);
	uint32_t len;
	int whole;

	if (!trailer_load(slot, r->ssize, r->seq[s] + 1, &len))
		return 0;
	whole = trailer_whole(slot, len, r->ssize);
	if (!whole && !rdmx__rfp_torn_again(r, s, len))
		return 0; /* torn: this slot's next turn */
	r->torn[s] = 0;
	pthread_mutex_lock(&r->lock);
	r->seq[s]++;
	pthread_mutex_unlock(&r->lock);
	if (!whole) {
		bad_record(r, ev);
		return 1;
	}
	*ev = (struct rpc_sev){ .type = RPC_SEV_FRAME, .t = r,
		.rx = { .data = slot, .len = len, .slot = (int)s } };
	return 1;
}

/* @r's slots once, in order (a client's own calls are its affair):
 * 1 with a frame. */
static int conn_scan(struct rfp_conn *r, struct rpc_sev *ev)
{
	for (uint32_t s = 0; s < r->slots; s++)
		if (slot_take(r, s, ev))
			return 1;
	return 0;
}

/*
 * Every client's slots once, round robin: from the client after the one
 * that had the last request (l->cur), so a client that keeps its window
 * full gets one request in turn with every other, old or new (the scan
 * once started at the newest client every time: a busy new one starved
 * the old ones). 1 with a frame in @ev.
 */
static int slots_scan(struct rfp_lis *l, struct rpc_sev *ev)
{
	struct rfp_conn *start = l->cur ? l->cur : l->conns, *r = start;

	if (!r)
		return 0;
	do {
		struct rfp_conn *next = r->next ? r->next : l->conns;

		if (conn_scan(r, ev)) {
			l->cur = next;
			return 1;
		}
		r = next;
	} while (r != start);
	return 0;
}

/* One listener event, translated; 1 with an event for the RPC layer. */
static int lis_event(struct rdmx_rpc_server *s, struct rfp_lis *l,
		     const struct rdmx_event *e, struct rpc_sev *ev)
{
	struct rfp_conn *r = NULL;

	if (e->type == RDMX_EVENT_CONN) {
		int rc = server_conn(s, e->conn, &r);

		if (rc) {
			rdmx__keep(&s->err, rc);
			rdmx_conn_close(e->conn);
			return 0;
		}
		r->timeout_ms = s->o.timeout_ms;
		r->server = true;
		r->lis = l;
		r->next = l->conns;
		if (l->conns)
			l->conns->prev = r;
		l->conns = r;
		*ev = (struct rpc_sev){ .type = RPC_SEV_CONN, .t = r };
		return 1;
	}
	r = rdmx_conn_get_user(e->conn);
	if (e->type == RDMX_EVENT_CLOSED) {
		*ev = (struct rpc_sev){ .type = RPC_SEV_CLOSED, .t = r };
		return 1;
	}
	if (!push_asked(r, &e->msg)) {
		rdmx_msg_release(e->conn, (struct rdmx_msg *)&e->msg);
		return 0;
	}
	rdmx_msg_release(e->conn, (struct rdmx_msg *)&e->msg);
	bad_record(r, ev);
	return 1;
}

int rdmx__rfp_next(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms)
{
	struct rfp_lis *l = s->tstate;
	struct rdmx__deadline d;
	struct rdmx_event e;

	rdmx__deadline_start(&d, timeout_ms);
	rdmx__deadline_arm(&d);
	for (unsigned i = 0;; i++) {
		/* a wait, now and then, is where departures are noticed */
		int rc = rdmx_listener_next(l->lis, &e, i % 128 == 127 ? 1 : 0);

		if (!rc && lis_event(s, l, &e, ev))
			return 0;
		if (rc && rc != -ETIMEDOUT && rc != -EAGAIN && rc != -ENOTCONN)
			return rc;
		if (slots_scan(l, ev))
			return 0;
		if (!rdmx__deadline_left_ms(&d))
			return -ETIMEDOUT;
		if (i % 64 == 63)
			sched_yield();
	}
}

int rdmx__rfp_server_alloc(struct rfp_conn *r, size_t size, struct rpc_buf *b)
{
	if (size > r->ssize - RFP_TRAILER)
		return rdmx__fail(-EMSGSIZE, "rpc rfp: a frame of %zu bytes, slots of %u",
				  size, r->ssize - RFP_TRAILER);
	b->data = r->scratch;
	b->cap = r->ssize - RFP_TRAILER;
	return 0;
}

/* A response: into its slot, the trailer last; pushed if asked for, and
 * a refusal always (the server drops the connection once it is flushed,
 * so the client could not READ it any more). */
int rdmx__rfp_server_send(struct rfp_conn *r, struct rpc_buf *b, size_t len)
{
	uint8_t kind;
	uint32_t s;
	int rc = rdmx__rfp_frame_slot(r, b->data, len, &s, &kind);

	if (rc)
		return rc;
	memcpy(slot_at(r, 1, s), b->data, len);
	pthread_mutex_lock(&r->lock);
	rdmx__rfp_tear_first(RDMX__RFP_TEAR_RESP, slot_at(r, 1, s), r->ssize, (uint32_t)len,
			     r->seq[s], NULL, r, s);
	trailer_store(slot_at(r, 1, s), r->ssize, (uint32_t)len, r->seq[s]);
	r->done[s] = r->seq[s];
	if (r->push[s] == r->seq[s] || kind == RPC_HELLO_REJECT)
		rc = push_send(r, s);
	pthread_mutex_unlock(&r->lock);
	return rc;
}
