/* SPDX-License-Identifier: MIT */
/*
 * The RPC server's requests: kept for reuse, handed to the worker of
 * their connection (or run on the run thread without workers), answered
 * by rdmx_rpc_respond() from any thread, and the workers that run them.
 * The design (threads, a connection's lifetime): rpc_server.c.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "rpc/rpc_server_queue.h"
#include "rpc/rpc_server_req.h"

static void req_run(struct rdmx_rpc_req *req);

/* Has the client left or failed? (A worker may fail it: resp_failed.) */
bool rdmx__rpc_sc_is_gone(struct rdmx_rpc_server *s, struct rpc_sconn *sc)
{
	bool gone;

	pthread_mutex_lock(&s->lock);
	gone = sc->gone;
	pthread_mutex_unlock(&s->lock);
	return gone;
}

/* --------------------------------------------------------------- requests */

/*
 * Requests are kept for reuse, each with room for the contract's largest
 * response: a request's calloc of that room (64 KiB in rdmx rpc bench)
 * was zeroed per call, 70 us of a 150 us round trip on rxe under qemu.
 * At most spares_max are kept (REQ_SPARE_BYTES of them, 1 at least); a
 * response buffer is not cleared between requests: a handler sends what
 * it wrote (rpc.h).
 */
#define REQ_SPARE_MAX 64u
#define REQ_SPARE_BYTES (4u << 20)

static size_t req_size(const struct rdmx_rpc_server *s)
{
	return sizeof(struct rdmx_rpc_req) + s->k.max_resp;
}

void rdmx__rpc_req_spares_init(struct rdmx_rpc_server *s)
{
	size_t n = REQ_SPARE_BYTES / req_size(s);

	s->spares_max = n < 1 ? 1 : n > REQ_SPARE_MAX ? REQ_SPARE_MAX : (unsigned)n;
}

/* A request from the spares, or a new one. */
static struct rdmx_rpc_req *req_get(struct rdmx_rpc_server *s)
{
	struct rdmx_rpc_req *req;

	pthread_mutex_lock(&s->lock);
	req = s->spare;
	if (req) {
		s->spare = req->next;
		s->spares--;
	}
	pthread_mutex_unlock(&s->lock);
	return req ? req : malloc(req_size(s));
}

/* Keep @req for the next request, or free it (s->lock held). */
static void req_put(struct rdmx_rpc_server *s, struct rdmx_rpc_req *req)
{
	if (s->spares >= s->spares_max) {
		free(req);
		return;
	}
	req->next = s->spare;
	s->spare = req;
	s->spares++;
}

void rdmx__rpc_req_spares_free(struct rdmx_rpc_server *s)
{
	while (s->spare) {
		struct rdmx_rpc_req *req = s->spare;

		s->spare = req->next;
		free(req);
	}
	s->spares = 0;
}


static void dispatch(struct rdmx_rpc_server *s, struct rdmx_rpc_req *req)
{
	struct rpc_worker *w;
	bool idle;

	if (!s->o.workers) {
		req_run(req);
		return;
	}
	w = &s->w[req->sc->worker];
	pthread_mutex_lock(&w->lock);
	idle = !w->head;
	if (w->tail)
		w->tail->next = req;
	else
		w->head = req;
	w->tail = req;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
	/* a woken worker is often queued on this core (wake-affine), behind
	 * this thread, which spins for the next event: without the yield it
	 * ran when the spin parked or the slice ended, milliseconds later on
	 * a loaded machine */
	if (idle)
		sched_yield();
}

/*
 * Mark @call's slot busy (s->lock held): 0, or -EPROTO when a request of
 * that slot is still pending. A client reuses a slot only once its call
 * has its answer (rpc_client.c), so a second request in a busy slot is a
 * client writing without waiting: refused, or it could pile up requests
 * (and their buffers) without a bound while the handlers hold them.
 */
static int slot_claim(struct rpc_sconn *sc, uint64_t call)
{
	uint32_t i = (uint32_t)(call & (RPC_WINDOW_MAX - 1));
	uint64_t bit = 1ULL << (i % 64);
	char name[96];

	if (sc->busy[i / 64] & bit)
		return rdmx__fail(-EPROTO, "rpc: %s: a request for call slot %u, whose last "
				  "request is already pending: dropped",
				  rdmx__rpc_sc_name(sc, name, sizeof(name)), i);
	sc->busy[i / 64] |= bit;
	return 0;
}

/*
 * A window is a hard bound: a client has at most @window requests pending,
 * one per call slot below it (slot_claim). A request in a slot at or above
 * it is one beyond the window (the client writes without waiting): -EPROTO,
 * and the run thread fails that client's connection, no other's.
 */
static int window_check(const struct rpc_sconn *sc, uint64_t call, uint32_t window)
{
	uint32_t i = (uint32_t)(call & (RPC_WINDOW_MAX - 1));
	char name[96];

	if (!window || i < window)
		return 0;
	return rdmx__fail(-EPROTO, "rpc: %s: a request in call slot %u with %u pending: "
			  "beyond the client's window of %u; the client broke its window "
			  "and is dropped", rdmx__rpc_sc_name(sc, name, sizeof(name)), i,
			  sc->pending, window);
}

/* The slot of @call may take its next request (s->lock held). */
static void slot_release(struct rpc_sconn *sc, uint64_t call)
{
	uint32_t i = (uint32_t)(call & (RPC_WINDOW_MAX - 1));

	sc->busy[i / 64] &= ~(1ULL << (i % 64));
}

int rdmx__rpc_on_request(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
			 const struct rpc_hdr *h, struct rpc_rx *rx)
{
	const struct rpc_method *m = rdmx__rpc_contract_find(&s->k, h->method);
	struct rdmx_rpc_req *req;

	if (h->kind != RPC_REQ)
		return rdmx__fail(-EPROTO, "rpc: frame kind %u where a request was due",
				  h->kind);
	if (m && h->len > m->max_req)
		return rdmx__fail(-EPROTO, "rpc: method %u '%s': request of %u bytes, "
				  "above its largest %u", m->id, m->name, h->len, m->max_req);
	req = req_get(s);
	if (!req)
		return rdmx__fail(-ENOMEM, "rpc: out of memory for a request");
	*req = (struct rdmx_rpc_req){ .srv = s, .sc = sc, .m = m, .h = *h, .rx = *rx };
	pthread_mutex_lock(&s->lock);
	if (window_check(sc, h->call, s->ops->window(sc->t)) || slot_claim(sc, h->call)) {
		req_put(s, req);
		pthread_mutex_unlock(&s->lock);
		return -EPROTO;
	}
	sc->pending++;
	req->onext = s->outstanding;
	if (s->outstanding)
		s->outstanding->oprev = req;
	s->outstanding = req;
	pthread_mutex_unlock(&s->lock);
	dispatch(s, req);
	return 0;
}

static void outstanding_unlink(struct rdmx_rpc_server *s, struct rdmx_rpc_req *req)
{
	if (req->oprev)
		req->oprev->onext = req->onext;
	else
		s->outstanding = req->onext;
	if (req->onext)
		req->onext->oprev = req->oprev;
}

/* The request is done: give its frame back, and the connection if it
 * was the last one pending on a connection whose client is gone. */
static void req_finish(struct rdmx_rpc_req *req, bool answered)
{
	struct rdmx_rpc_server *s = req->srv;
	struct rpc_sconn *sc = req->sc;

	s->ops->release(sc->t, &req->rx);
	pthread_mutex_lock(&s->lock);
	outstanding_unlink(s, req);
	sc->pending--;
	if (answered)
		s->st.calls++;
	if (sc->gone && !sc->pending && !sc->closing) {
		sc->closing = true;
		sc->close_next = s->to_close;
		s->to_close = sc;
	}
	req_put(s, req);
	pthread_mutex_unlock(&s->lock);
}

static void req_run(struct rdmx_rpc_req *req)
{
	struct rdmx_rpc_server *s = req->srv;
	struct rpc_handler *h = req->m ? &s->h[rdmx__rpc_contract_index(&s->k, req->m)] : NULL;


	if (!h || !h->fn)
		rdmx_rpc_respond(req, -ENOSYS, 0);
	else
		h->fn(req, h->arg);
}

uint16_t rdmx_rpc_req_method(const rdmx_rpc_req *req)
{
	return req ? req->h.method : 0;
}

const void *rdmx_rpc_req_data(const rdmx_rpc_req *req, size_t *len)
{
	if (!req)
		return NULL;
	if (len)
		*len = req->h.len;
	return (const char *)req->rx.data + RPC_HDR;
}

void *rdmx_rpc_req_resp(rdmx_rpc_req *req, size_t *cap)
{
	if (!req)
		return NULL;
	if (cap)
		*cap = req->m ? req->m->max_resp : 0;
	return req->resp;
}

/*
 * A client whose response could not be sent nor queued (its queue is
 * full: it takes no responses; or its connection failed) is failed: its
 * other requests then get no answer (the run thread closes it after the
 * last). The reason, naming the connection, is the server's error.
 */
void rdmx__rpc_sc_fail(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int rc)
{
	pthread_mutex_lock(&s->lock);
	if (!sc->gone) {
		sc->gone = true;
		s->st.dropped++;
		rdmx__keep(&s->err, rc);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Send @h and @h->len bytes of @req's response, now or from the
 * connection's queue (rpc_server_queue.c): no wait on the client. */
static int resp_send(struct rdmx_rpc_req *req, const struct rpc_hdr *h)
{
	struct rdmx_rpc_server *s = req->srv;
	struct rpc_sconn *sc = req->sc;
	int rc;

	if (rdmx__rpc_sc_is_gone(s, sc))
		return rdmx__fail(-ECONNRESET, "rpc: the client is gone (or failed): "
				  "response to call %llu not sent", (unsigned long long)h->call);
	rc = rdmx__rpc_sc_send(s, sc, h, req->resp);
	if (rc)
		rdmx__rpc_sc_fail(s, sc, rc);
	return rc;
}

int rdmx_rpc_respond(rdmx_rpc_req *req, int status, size_t len)
{
	struct rpc_hdr h;
	int over, rc;

	if (!req)
		return rdmx__fail(-EINVAL, "rpc: respond to no request");
	if (status > 0 || status < RPC_STATUS_MIN)
		return rdmx__fail(-EINVAL, "rpc: status %d is not 0 or -1..%d", status,
				  RPC_STATUS_MIN);
	over = len > (req->m ? req->m->max_resp : 0);
	h = (struct rpc_hdr){ .kind = RPC_RESP, .method = req->h.method, .call = req->h.call,
		.status = over ? -EMSGSIZE : status, .len = over ? 0 : (uint32_t)len };
	pthread_mutex_lock(&req->srv->lock);
	slot_release(req->sc, req->h.call); /* before the answer can reach the client */
	pthread_mutex_unlock(&req->srv->lock);
	rc = resp_send(req, &h);
	req_finish(req, !rc);
	if (over)
		return rdmx__fail(-EMSGSIZE, "rpc: a response of %zu bytes, above the "
				  "method's largest", len);
	return rc;
}

/* ---------------------------------------------------------------- workers */

static void *worker_main(void *arg)
{
	struct rpc_worker *w = arg;
	struct rdmx_rpc_req *req;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->head && !w->stop)
			pthread_cond_wait(&w->cv, &w->lock);
		req = w->head;
		if (!req)
			break;
		w->head = req->next;
		if (!w->head)
			w->tail = NULL;
		pthread_mutex_unlock(&w->lock);
		req_run(req);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Stop the workers once their queues are empty, and free them. */
void rdmx__rpc_workers_stop(struct rdmx_rpc_server *s)
{
	for (unsigned i = 0; s->w && i < s->o.workers; i++) {
		struct rpc_worker *w = &s->w[i];

		if (w->started) {
			pthread_mutex_lock(&w->lock);
			w->stop = true;
			pthread_cond_signal(&w->cv);
			pthread_mutex_unlock(&w->lock);
			pthread_join(w->t, NULL);
		}
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->lock);
	}
	free(s->w);
	s->w = NULL;
}

int rdmx__rpc_workers_start(struct rdmx_rpc_server *s)
{
	if (!s->o.workers)
		return 0;
	s->w = calloc(s->o.workers, sizeof(*s->w));
	if (!s->w)
		return rdmx__fail(-ENOMEM, "rpc: out of memory for %u workers", s->o.workers);
	for (unsigned i = 0; i < s->o.workers; i++) {
		struct rpc_worker *w = &s->w[i];

		w->srv = s;
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->cv, NULL);
	}
	for (unsigned i = 0; i < s->o.workers; i++) {
		int rc = pthread_create(&s->w[i].t, NULL, worker_main, &s->w[i]);

		if (rc) {
			rdmx__rpc_workers_stop(s);
			return rdmx__fail(-rc, "rpc: starting worker %u", i);
		}
		s->w[i].started = true;
	}
	return 0;
}

/* Deferred requests nobody answered: give back their buffers. */
void rdmx__rpc_drop_outstanding(struct rdmx_rpc_server *s)
{
	while (s->outstanding) {
		req_finish(s->outstanding, false);
	}
}
