/* SPDX-License-Identifier: MIT */
/*
 * The RPC server. One thread runs rdmx_rpc_server_run(): it takes the
 * transport's events (a client came, a frame, a client left), answers
 * the contract check itself and hands each request to the worker its
 * connection belongs to (round robin at connect), so a connection's
 * requests run in order on one thread and connections spread over the
 * workers. A request holds its frame in place and a response buffer
 * until rdmx_rpc_respond(), from the worker or any thread (deferred).
 *
 * Lifetime of a connection (struct rpc_sconn): only the run thread frees
 * it. @pending counts its requests handed out and not yet answered; when
 * the client is gone (or wrote a malformed frame) the connection is
 * closed at once if nothing is pending, else the last answer queues it on
 * @to_close and the run thread closes it on its next turn. So no worker
 * ever uses a closed connection and the run thread never sees a freed one.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/admit.h"
#include "core/clock.h"
#include "rpc/rpc_int.h"
#include "rpc/rpc_server_queue.h"
#include "rpc/rpc_server_req.h"

#define RUN_POLL_MS 100
#define SWEEP_MS 10 /* the run thread's look at deadlines, when nothing is queued */
#define SWEEP_BUSY_NS 50000 /* ... and at the queues while any holds a frame */
#define QUEUE_HOT_MS 2      /* a queue moved this recently: poll, do not sleep */

/* ------------------------------------------------------------ connections */

/* Outbound work requests posted on @sc's connection so far. */
static uint64_t sc_posts(const struct rdmx_rpc_server *s, const struct rpc_sconn *sc)
{
	struct rdmx_conn_stats cs = { .size = sizeof(cs) };
	rdmx_conn *c = s->ops->conn(sc->t);

	if (!c || rdmx_conn_stats(c, &cs))
		return 0;
	return cs.msgs_sent + cs.onesided_ops;
}

static void sc_close(struct rdmx_rpc_server *s, struct rpc_sconn *sc)
{
	pthread_mutex_lock(&s->lock);
	s->wr_closed += sc_posts(s, sc); /* nothing is sent on it any more */
	if (sc->prev)
		sc->prev->next = sc->next;
	else
		s->conns = sc->next;
	if (sc->next)
		sc->next->prev = sc->prev;
	if (sc->ready)
		s->st.open--;
	pthread_mutex_unlock(&s->lock);
	if (sc->linger)
		s->lingering--;
	s->ops->close(sc->t);
	rdmx__rpc_sc_queue_free(s, sc);
	pthread_mutex_destroy(&sc->send_lock);
	free(sc);
}

/* The client left or failed: close now, or when its last answer is out. */
static void sc_gone(struct rdmx_rpc_server *s, struct rpc_sconn *sc)
{
	bool now;

	pthread_mutex_lock(&s->lock);
	sc->gone = true;
	now = !sc->pending && !sc->closing;
	if (now)
		sc->closing = true;
	pthread_mutex_unlock(&s->lock);
	if (now)
		sc_close(s, sc);
}

static void reap_closing(struct rdmx_rpc_server *s)
{
	struct rpc_sconn *sc, *next;

	pthread_mutex_lock(&s->lock);
	sc = s->to_close;
	s->to_close = NULL;
	pthread_mutex_unlock(&s->lock);
	for (; sc; sc = next) {
		next = sc->close_next;
		sc_close(s, sc);
	}
}

static void on_conn(struct rdmx_rpc_server *s, void *t)
{
	struct rpc_sconn *sc = calloc(1, sizeof(*sc));

	if (!sc) {
		rdmx__failo(&s->err, -ENOMEM, "rpc: out of memory for a connection");
		s->ops->close(t);
		return;
	}
	sc->t = t;
	sc->id = ++s->conn_ids;
	if (rdmx_conn_peer_addr(s->ops->conn(t), sc->peer, sizeof(sc->peer)))
		sc->peer[0] = 0;
	sc->hello_by_ms = rdmx__now_ms() + s->o.hello_ms;
	pthread_mutex_init(&sc->send_lock, NULL);
	sc->worker = s->o.workers ? s->next_worker++ % s->o.workers : 0;
	s->ops->set_user(t, sc);
	pthread_mutex_lock(&s->lock);
	sc->next = s->conns;
	if (s->conns)
		s->conns->prev = sc;
	s->conns = sc;
	pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------ hello */

/* Send a frame of @kind with @len payload bytes from @payload, now or
 * from the connection's queue. */
static int send_frame(struct rdmx_rpc_server *s, struct rpc_sconn *sc, uint8_t kind,
		      const void *payload, size_t len)
{
	struct rpc_hdr h = { .kind = kind, .len = (uint32_t)len };

	return rdmx__rpc_sc_send(s, sc, &h, payload);
}

/* A refused client: closed once its refusal is out and flushed, or after
 * drop_ms (the run thread looks: conns_service), never waited for. */
static void sc_linger(struct rdmx_rpc_server *s, struct rpc_sconn *sc)
{
	sc->linger = true;
	sc->linger_by_ms = rdmx__now_ms() + s->o.drop_ms;
	s->lingering++;
}

static void hello_reject(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
			 uint64_t hash, uint32_t count)
{
	size_t cap = rdmx__rpc_frame_max(&s->k) - RPC_HDR;
	void *tab = malloc(cap);
	char name[96];

	rdmx__failo(&s->err, -EPROTO, "rpc: %s: its contract differs (hash %016llx, "
		    "%u methods; here %016llx, %zu): refused",
		    rdmx__rpc_sc_name(sc, name, sizeof(name)), (unsigned long long)hash,
		    count, (unsigned long long)s->k.hash, s->k.n);
	pthread_mutex_lock(&s->lock);
	s->st.rejected++;
	pthread_mutex_unlock(&s->lock);
	if (tab && !send_frame(s, sc, RPC_HELLO_REJECT, tab, rdmx__rpc_table_put(tab, cap, &s->k)))
		sc_linger(s, sc);
	else
		sc_gone(s, sc);
	free(tab);
}

/* Copy the hello out of a frame (peer-written, read once). */
static int hello_read(const struct rpc_hdr *h, const struct rpc_rx *rx,
		      uint64_t *hash, uint32_t *count)
{
	if (h->kind != RPC_HELLO)
		return rdmx__fail(-EPROTO, "rpc: frame kind %u before the hello", h->kind);
	return rdmx__rpc_hello_get((const char *)rx->data + RPC_HDR, h->len, hash, count);
}

static void on_hello(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
		     uint64_t hash, uint32_t count)
{
	int rc;

	if (hash != s->k.hash || count != s->k.n) {
		hello_reject(s, sc, hash, count);
		return;
	}
	rc = send_frame(s, sc, RPC_HELLO_OK, NULL, 0);
	if (rc) {
		char name[96];

		rdmx__failo(&s->err, rc, "rpc: answering the hello of %s: %s",
			    rdmx__rpc_sc_name(sc, name, sizeof(name)), s->ops->error(sc->t));
		sc_gone(s, sc);
		return;
	}
	pthread_mutex_lock(&s->lock);
	sc->ready = true;
	s->st.conns++;
	s->st.open++;
	pthread_mutex_unlock(&s->lock);
}

/* A malformed frame fails the connection that wrote it. */
static void bad_frame(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int rc)
{
	rdmx__keep(&s->err, rc);
	pthread_mutex_lock(&s->lock);
	s->st.bad_frames++;
	pthread_mutex_unlock(&s->lock);
	sc_gone(s, sc);
}

static void on_frame(struct rdmx_rpc_server *s, struct rpc_sconn *sc, struct rpc_rx *rx)
{
	struct rpc_hdr h;
	uint64_t hash;
	uint32_t count;
	int rc;

	if (sc->linger || rdmx__rpc_sc_is_gone(s, sc)) {
		s->ops->release(sc->t, rx);
		return;
	}
	rc = rdmx__rpc_hdr_get(rx->data, rx->len, &h);
	if (!rc && sc->ready) {
		rc = rdmx__rpc_on_request(s, sc, &h, rx);
		if (!rc)
			return; /* the request holds the frame */
	} else if (!rc) {
		rc = hello_read(&h, rx, &hash, &count);
	}
	s->ops->release(sc->t, rx);
	if (rc)
		bad_frame(s, sc, rc);
	else if (!sc->ready)
		on_hello(s, sc, hash, count);
}

/* ------------------------------------------------------------- deadlines */

/* A connection that said no valid hello within hello_ms is closed. */
static void hello_late(struct rdmx_rpc_server *s, struct rpc_sconn *sc)
{
	char name[96];

	pthread_mutex_lock(&s->lock);
	s->st.hello_late++;
	rdmx__failo(&s->err, -ETIMEDOUT, "rpc: %s sent no valid hello within %d ms: "
		    "closed", rdmx__rpc_sc_name(sc, name, sizeof(name)), s->o.hello_ms);
	pthread_mutex_unlock(&s->lock);
	sc_gone(s, sc);
}

/* A refused client's refusal is out (queue empty) and flushed, or its
 * time is up: let it go. */
static void linger_check(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int64_t now)
{
	int rc = s->ops->flush(sc->t, 0);

	if ((rc != -ETIMEDOUT && rc != -EAGAIN) || now >= sc->linger_by_ms)
		sc_gone(s, sc);
}

/* @sc's deadlines and queue, at @now (run thread). */
static void sc_service(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int64_t now)
{
	int rc;

	/* gone, under the lock (closing implies it; a worker sets closing in
	 * req_finish: read here without the lock it was a data race) */
	if (rdmx__rpc_sc_is_gone(s, sc))
		return;
	if (!sc->ready && !sc->linger && now >= sc->hello_by_ms) {
		hello_late(s, sc);
		return;
	}
	rc = rdmx__rpc_sc_drain(s, sc, now);
	if (rc < 0) {
		rdmx__rpc_sc_fail(s, sc, rc);
		sc_gone(s, sc);
	} else if (sc->linger && (rc == 0 || now >= sc->linger_by_ms)) {
		linger_check(s, sc, now);
	}
}

/* Every SWEEP_MS, and every SWEEP_BUSY_NS while a queue holds frames or
 * a refused client lingers: deadlines checked, queues sent. */
static void conns_service(struct rdmx_rpc_server *s)
{
	int64_t ns = rdmx__now_ns(), now = ns / 1000000;
	bool busy = atomic_load(&s->queued) || s->lingering;
	struct rpc_sconn *sc, *next;

	if (now < s->sweep_ms && (!busy || ns - s->swept_ns < SWEEP_BUSY_NS))
		return;
	s->swept_ns = ns;
	s->sweep_ms = now + SWEEP_MS;
	for (sc = s->conns; sc; sc = next) {
		next = sc->next; /* sc may be closed */
		sc_service(s, sc, now);
	}
}

/* ----------------------------------------------------------------- server */

static void on_event(struct rdmx_rpc_server *s, struct rpc_sev *ev)
{
	struct rpc_sconn *sc;

	if (ev->type == RPC_SEV_CONN) {
		on_conn(s, ev->t);
		return;
	}
	sc = s->ops->get_user(ev->t);
	if (ev->type == RPC_SEV_CLOSED)
		sc_gone(s, sc);
	else
		on_frame(s, sc, &ev->rx);
}

/* The run thread's wait for its next event: none while a queue moved
 * lately (a ring's credit, a send's completion comes within microseconds),
 * 1 ms while one holds frames or a refused client lingers, else
 * RUN_POLL_MS. */
static int run_poll_ms(struct rdmx_rpc_server *s)
{
	if (atomic_load(&s->queued))
		return rdmx__now_ms() - atomic_load(&s->qmoved_ms) < QUEUE_HOT_MS ? 0 : 1;
	return s->lingering ? 1 : RUN_POLL_MS;
}

int rdmx_rpc_server_run(rdmx_rpc_server *s)
{
	struct rpc_sev ev;
	int rc;

	if (!s)
		return rdmx__fail(-EINVAL, "rpc: no server");
	while (!atomic_load(&s->stop)) {
		reap_closing(s);
		conns_service(s);
		rc = s->ops->next(s, &ev, run_poll_ms(s));
		if (rc == -ETIMEDOUT || rc == -EAGAIN || rc == -ENOTCONN)
			continue;
		if (rc)
			return rdmx__keep(&s->err, rc);
		on_event(s, &ev);
	}
	reap_closing(s);
	return 0;
}

void rdmx_rpc_server_stop(rdmx_rpc_server *s)
{
	if (s)
		atomic_store(&s->stop, 1);
}

int rdmx_rpc_server_create(rdmx_ctx *ctx, const char *addr, uint16_t port,
			   const struct rdmx_rpc_method *methods, size_t n,
			   const struct rdmx_rpc_opts *opts, rdmx_rpc_server **out)
{
	struct rdmx_rpc_server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return rdmx__fail(-ENOMEM, "rpc: out of memory for a server");
	s->ctx = ctx;
	rc = rdmx__rpc_opts_load(opts, &s->o, &s->ops);
	if (rc)
		goto free_server;
	rc = rdmx__rpc_contract_load(&s->k, methods, n);
	if (rc)
		goto free_server;
	rc = rdmx__rpc_queue_bounds(s);
	if (rc)
		goto free_contract;
	s->h = calloc(s->k.n, sizeof(*s->h));
	if (!s->h) {
		rc = rdmx__fail(-ENOMEM, "rpc: out of memory for handlers");
		goto free_contract;
	}
	pthread_mutex_init(&s->lock, NULL);
	rdmx__rpc_req_spares_init(s);
	rc = s->ops->listen(s, addr, port);
	if (rc)
		goto free_handlers;
	rc = rdmx__rpc_workers_start(s);
	if (rc)
		goto unlisten;
	*out = s;
	return 0;
unlisten:
	s->ops->unlisten(s);
free_handlers:
	pthread_mutex_destroy(&s->lock);
	free(s->h);
free_contract:
	rdmx__rpc_contract_free(&s->k);
free_server:
	free(s);
	return rc;
}

void rdmx_rpc_server_destroy(rdmx_rpc_server *s)
{
	if (!s)
		return;
	rdmx__rpc_workers_stop(s);
	rdmx__rpc_drop_outstanding(s);
	reap_closing(s);
	while (s->conns)
		sc_close(s, s->conns);
	s->ops->unlisten(s);
	rdmx__rpc_req_spares_free(s);
	pthread_mutex_destroy(&s->lock);
	free(s->h);
	rdmx__rpc_contract_free(&s->k);
	free(s);
}

int rdmx_rpc_server_set_listener_opts(rdmx_rpc_server *s,
				      const struct rdmx_listener_opts *opts)
{
	int rc;

	if (!s)
		return rdmx__fail(-EINVAL, "rpc: no server");
	rc = rdmx_listener_set_opts(s->ops->listener(s), opts);
	return rc ? rdmx__failo(&s->err, rc, "rpc: %s",
				rdmx_listener_error(s->ops->listener(s))) : 0;
}

uint16_t rdmx_rpc_server_port(const rdmx_rpc_server *s)
{
	return s ? s->ops->port(s) : 0;
}

int rdmx_rpc_server_handle(rdmx_rpc_server *s, uint16_t id, rdmx_rpc_handler fn,
			   void *arg)
{
	const struct rpc_method *m = s ? rdmx__rpc_contract_find(&s->k, id) : NULL;

	if (!m)
		return rdmx__fail(-ENOENT, "rpc: method %u is not in the contract", id);
	s->h[rdmx__rpc_contract_index(&s->k, m)] = (struct rpc_handler){ fn, arg };
	return 0;
}

const char *rdmx_rpc_server_error(const rdmx_rpc_server *s)
{
	return s ? s->err.msg : "no server";
}

void rdmx_rpc_server_stats(rdmx_rpc_server *s, struct rdmx_rpc_server_stats *st)
{
	if (!s || !st)
		return;
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	st->work_requests = s->wr_closed;
	for (const struct rpc_sconn *sc = s->conns; sc; sc = sc->next)
		st->work_requests += sc_posts(s, sc);
	pthread_mutex_unlock(&s->lock);
	if (s->ops->posts)
		st->work_requests += s->ops->posts(s);
}

unsigned rdmx__rpc_server_clients_from(rdmx_rpc_server *s, const char *host)
{
	unsigned k = 0;

	pthread_mutex_lock(&s->lock);
	for (const struct rpc_sconn *sc = s->conns; sc; sc = sc->next)
		k += sc->ready && !sc->gone &&
		     !strcmp(rdmx__conn_peer_host(s->ops->conn(sc->t)), host);
	pthread_mutex_unlock(&s->lock);
	return k;
}
