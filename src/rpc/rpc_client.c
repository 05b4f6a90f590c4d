/* SPDX-License-Identifier: MIT */
/*
 * The RPC client, driven by one thread. Calls in flight live in a window
 * of slots; a call's id is a sequence number above its slot's index, so a
 * response finds its call in O(1) and a stale or forged id finds nothing.
 * Responses are taken whenever the client waits (rdmx_rpc_wait/poll), each
 * header copied once and checked against the call it answers and the
 * contract; the payload is copied once into the caller's buffer. A
 * malformed response or a lost connection fails every call in flight.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "rpc/rpc_int.h"

#define PUMP_SLICE_MS 100

static struct rpc_call *call_of(struct rdmx_rpc_client *c, uint64_t id)
{
	struct rpc_call *k = &c->calls[id & (RPC_WINDOW_MAX - 1)];

	if ((id & (RPC_WINDOW_MAX - 1)) >= c->o.window || k->state == CALL_FREE ||
	    k->id != id)
		return NULL;
	return k;
}

static void call_free(struct rdmx_rpc_client *c, struct rpc_call *k)
{
	k->state = CALL_FREE;
	c->inflight--;
}

/* Every call in flight fails with @rc; the client stays failed. */
static int client_fail(struct rdmx_rpc_client *c, int rc)
{
	rdmx__keep(&c->err, rc);
	if (!c->dead)
		c->dead = rc;
	for (uint32_t i = 0; i < c->o.window; i++) {
		struct rpc_call *k = &c->calls[i];

		if (k->state == CALL_ABANDONED)
			call_free(c, k);
		else if (k->state == CALL_SENT)
			*k = (struct rpc_call){ .id = k->id, .state = CALL_DONE, .rc = rc };
	}
	return rc;
}

/* Check a response's header copy against its call; 0 or -EPROTO. */
static int resp_check(struct rdmx_rpc_client *c, const struct rpc_hdr *h,
		      struct rpc_call **out)
{
	const struct rpc_method *m;
	struct rpc_call *k;

	if (h->kind != RPC_RESP)
		return rdmx__fail(-EPROTO, "rpc: frame kind %u where a response was due",
				  h->kind);
	k = call_of(c, h->call);
	if (!k || k->state == CALL_DONE)
		return rdmx__fail(-EPROTO, "rpc: a response to call %llu, not in flight",
				  (unsigned long long)h->call);
	m = rdmx__rpc_contract_find(&c->k, k->method);
	if (h->method != k->method || h->len > m->max_resp)
		return rdmx__fail(-EPROTO, "rpc: call %llu of method %u: response for "
				  "method %u of %u bytes (largest %u)",
				  (unsigned long long)h->call, k->method, h->method,
				  h->len, m->max_resp);
	*out = k;
	return 0;
}

static void resp_take(struct rdmx_rpc_client *c, struct rpc_call *k,
		      const struct rpc_hdr *h, const struct rpc_rx *rx)
{
	if (k->state == CALL_ABANDONED) {
		call_free(c, k);
		return;
	}
	k->state = CALL_DONE;
	k->status = h->status;
	k->len = h->len;
	k->rc = h->len > k->cap ? -EMSGSIZE : 0;
	if (!k->rc && h->len)
		memcpy(k->resp, (const char *)rx->data + RPC_HDR, h->len);
}

/* Take one response, waiting up to @timeout_ms. */
static int pump(struct rdmx_rpc_client *c, int timeout_ms)
{
	struct rpc_call *k = NULL;
	struct rpc_rx rx;
	struct rpc_hdr h;
	int rc = c->ops->recv(c->t, &rx, timeout_ms);

	if (rc == -ETIMEDOUT || rc == -EAGAIN)
		return rc;
	if (rc == -EPROTO) /* the transport found a malformed record: its words */
		return client_fail(c, rc);
	if (rc)
		return client_fail(c, rdmx__fail(rc, "rpc: the server went away: %s",
						 c->ops->error(c->t)));
	rc = rdmx__rpc_hdr_get(rx.data, rx.len, &h);
	if (!rc)
		rc = resp_check(c, &h, &k);
	if (!rc)
		resp_take(c, k, &h, &rx);
	c->ops->release(c->t, &rx);
	return rc ? client_fail(c, rc) : 0;
}

/* Spend a finished call: its results, its rc. */
static int call_collect(struct rdmx_rpc_client *c, struct rpc_call *k, int *status,
			size_t *len)
{
	int rc = k->rc;

	if (status)
		*status = k->status;
	if (len)
		*len = k->len;
	call_free(c, k);
	if (rc)
		return rdmx__failo(&c->err, rc, "rpc: call %llu: %s",
				   (unsigned long long)k->id,
				   rc == -EMSGSIZE ? "response larger than the buffer"
						   : c->err.msg);
	return 0;
}

/* Pump until @done(c, arg) finds a call or @timeout_ms passes (0: one
 * poll, -1: no bound but the connection's liveness). */
static int wait_for(struct rdmx_rpc_client *c, int timeout_ms,
		    struct rpc_call *(*done)(struct rdmx_rpc_client *, const void *),
		    const void *arg, struct rpc_call **out)
{
	struct rdmx__deadline d;
	bool polled = false;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		int left = rdmx__deadline_left_ms(&d); /* INT32_MAX: no bound */

		*out = done(c, arg);
		if (*out)
			return 0;
		if (!left && polled)
			return timeout_ms ? -ETIMEDOUT : -EAGAIN;
		pump(c, left < PUMP_SLICE_MS ? left : PUMP_SLICE_MS);
		polled = true;
	}
}

static struct rpc_call *done_id(struct rdmx_rpc_client *c, const void *arg)
{
	struct rpc_call *k = call_of(c, *(const uint64_t *)arg);

	return k && k->state == CALL_DONE ? k : NULL;
}

static struct rpc_call *done_any(struct rdmx_rpc_client *c, const void *arg)
{
	(void)arg;
	for (uint32_t i = 0; i < c->o.window; i++)
		if (c->calls[i].state == CALL_DONE)
			return &c->calls[i];
	return NULL;
}

int rdmx_rpc_wait(rdmx_rpc_client *c, uint64_t id, int *status, size_t *len,
		  int timeout_ms)
{
	struct rpc_call *k;
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "rpc: no client");
	k = call_of(c, id);
	if (!k || k->state == CALL_ABANDONED)
		return rdmx__failo(&c->err, -EINVAL, "rpc: call %llu is not in flight",
				   (unsigned long long)id);
	rc = wait_for(c, timeout_ms, done_id, &id, &k);
	if (rc)
		return rdmx__failo(&c->err, rc, "rpc: call %llu: no response within %d ms",
				   (unsigned long long)id, timeout_ms);
	return call_collect(c, k, status, len);
}

int rdmx_rpc_poll(rdmx_rpc_client *c, uint64_t *id, int *status, size_t *len,
		  int timeout_ms)
{
	struct rpc_call *k;
	bool any = false;
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "rpc: no client");
	for (uint32_t i = 0; i < c->o.window && !any; i++)
		any = c->calls[i].state == CALL_SENT || c->calls[i].state == CALL_DONE;
	if (!any)
		return rdmx__failo(&c->err, -EINVAL, "rpc: no call in flight");
	rc = wait_for(c, timeout_ms, done_any, NULL, &k);
	if (rc)
		return rdmx__failo(&c->err, rc, "rpc: no response within %d ms", timeout_ms);
	if (id)
		*id = k->id;
	return call_collect(c, k, status, len);
}

static struct rpc_call *slot_take(struct rdmx_rpc_client *c)
{
	for (uint32_t i = 0; i < c->o.window; i++) {
		uint32_t s = (uint32_t)((c->seq + i) % c->o.window);

		if (c->calls[s].state == CALL_FREE) {
			c->seq++;
			c->calls[s].id = c->seq << RPC_SLOT_BITS | s;
			return &c->calls[s];
		}
	}
	return NULL;
}

static int call_check(struct rdmx_rpc_client *c, uint16_t method, size_t len)
{
	const struct rpc_method *m = rdmx__rpc_contract_find(&c->k, method);

	if (!m)
		return rdmx__failo(&c->err, -ENOENT, "rpc: method %u is not in the contract",
				   method);
	if (len > m->max_req)
		return rdmx__failo(&c->err, -EMSGSIZE, "rpc: method %u '%s': request of "
				   "%zu bytes, largest %u", m->id, m->name, len, m->max_req);
	if (c->dead)
		return rdmx__failo(&c->err, c->dead, "rpc: the client failed before: %s",
				   c->err.msg);
	if (c->inflight >= c->o.window)
		return rdmx__failo(&c->err, -ENOBUFS, "rpc: %u calls in flight, the window",
				   c->inflight);
	return 0;
}

/* Send one frame; a failed send fails the client (the connection is down). */
static int frame_send(struct rdmx_rpc_client *c, const struct rpc_hdr *h,
		      const void *payload)
{
	struct rpc_buf b;
	int rc = c->ops->alloc(c->t, RPC_HDR + h->len, &b, c->o.timeout_ms);

	if (rc)
		return rc == -ETIMEDOUT ? rc : client_fail(c, rc);
	rdmx__rpc_hdr_put(b.data, h);
	if (h->len)
		memcpy((char *)b.data + RPC_HDR, payload, h->len);
	rc = c->ops->send(c->t, &b, RPC_HDR + h->len);
	if (rc) {
		c->ops->drop(c->t, &b);
		return client_fail(c, rc);
	}
	return 0;
}

int rdmx_rpc_call_async(rdmx_rpc_client *c, uint16_t method, const void *req,
			size_t len, void *resp, size_t cap, uint64_t *id)
{
	struct rpc_call *k;
	struct rpc_hdr h;
	int rc;

	if (!c || (len && !req) || (cap && !resp) || !id)
		return rdmx__fail(-EINVAL, "rpc: call without a client, buffer or id");
	rc = call_check(c, method, len);
	if (rc)
		return rc;
	k = slot_take(c);
	h = (struct rpc_hdr){ .kind = RPC_REQ, .method = method, .len = (uint32_t)len,
		.call = k->id };
	rc = frame_send(c, &h, req);
	if (rc)
		return rdmx__failo(&c->err, rc, "rpc: sending call of method %u: %s", method,
				   c->ops->error(c->t));
	*k = (struct rpc_call){ .id = k->id, .state = CALL_SENT, .method = method,
		.resp = resp, .cap = cap };
	c->inflight++;
	*id = k->id;
	return 0;
}

int rdmx_rpc_call(rdmx_rpc_client *c, uint16_t method, const void *req, size_t len,
		  void *resp, size_t cap, size_t *resp_len, int *status, int timeout_ms)
{
	uint64_t id;
	int rc = rdmx_rpc_call_async(c, method, req, len, resp, cap, &id);

	if (rc)
		return rc;
	rc = rdmx_rpc_wait(c, id, status, resp_len, timeout_ms);
	if (rc == -ETIMEDOUT || rc == -EAGAIN) {
		struct rpc_call *k = call_of(c, id);

		if (k && k->state == CALL_SENT)
			k->state = CALL_ABANDONED;
		else if (k) /* done meanwhile: nobody will collect it */
			call_free(c, k);
	}
	return rc;
}

/* ------------------------------------------------------------------ hello */

/* Wait for the server's answer to the hello: 0, or -EPROTO naming the
 * first difference of the contracts. */
static int hello_answer(struct rdmx_rpc_client *c)
{
	char why[200];
	struct rpc_rx rx;
	struct rpc_hdr h;
	int rc = c->ops->recv(c->t, &rx, c->o.timeout_ms);

	if (rc)
		return rdmx__fail(rc, "rpc: no answer to the contract check within %d ms: %s",
				  c->o.timeout_ms, c->ops->error(c->t));
	rc = rdmx__rpc_hdr_get(rx.data, rx.len, &h);
	if (!rc && h.kind == RPC_HELLO_REJECT) {
		rdmx__rpc_table_diff(&c->k, (const char *)rx.data + RPC_HDR, h.len, why, sizeof(why));
		rc = rdmx__fail(-EPROTO, "rpc: the server refused the contract: %s", why);
	} else if (!rc && h.kind != RPC_HELLO_OK) {
		rc = rdmx__fail(-EPROTO, "rpc: frame kind %u answered the hello", h.kind);
	}
	c->ops->release(c->t, &rx);
	return rc;
}

static int hello(struct rdmx_rpc_client *c)
{
	unsigned char p[RPC_HELLO_LEN];
	struct rpc_hdr h = { .kind = RPC_HELLO, .len = RPC_HELLO_LEN };
	int rc;

	rdmx__rpc_hello_put(p, &c->k);
	rc = frame_send(c, &h, p);
	if (rc)
		return rdmx__fail(rc, "rpc: sending the contract check: %s",
				  c->ops->error(c->t));
	return hello_answer(c);
}

int rdmx_rpc_client_create(rdmx_ctx *ctx, const char *addr, uint16_t port,
			   const struct rdmx_rpc_method *methods, size_t n,
			   const struct rdmx_rpc_opts *opts, rdmx_rpc_client **out)
{
	struct rdmx_rpc_client *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return rdmx__fail(-ENOMEM, "rpc: out of memory for a client");
	c->ctx = ctx;
	rc = rdmx__rpc_opts_load(opts, &c->o, &c->ops);
	if (rc)
		goto free_client;
	rc = rdmx__rpc_contract_load(&c->k, methods, n);
	if (rc)
		goto free_client;
	c->calls = calloc(c->o.window, sizeof(*c->calls));
	if (!c->calls) {
		rc = rdmx__fail(-ENOMEM, "rpc: out of memory for %u calls", c->o.window);
		goto free_contract;
	}
	rc = c->ops->dial(c, addr, port);
	if (rc)
		goto free_calls;
	rc = hello(c);
	if (rc)
		goto close_conn;
	*out = c;
	return 0;
close_conn:
	c->ops->close(c->t);
free_calls:
	free(c->calls);
free_contract:
	rdmx__rpc_contract_free(&c->k);
free_client:
	free(c);
	return rc;
}

void rdmx_rpc_client_destroy(rdmx_rpc_client *c)
{
	if (!c)
		return;
	c->ops->close(c->t);
	free(c->calls);
	rdmx__rpc_contract_free(&c->k);
	free(c);
}

const char *rdmx_rpc_client_error(const rdmx_rpc_client *c)
{
	return c ? c->err.msg : "no client";
}

rdmx_conn *rdmx_rpc_client_conn(const rdmx_rpc_client *c)
{
	return c ? c->ops->conn(c->t) : NULL;
}
