/* SPDX-License-Identifier: MIT */
/*
 * A server connection's response queue: one mechanism for every
 * transport (msg, rfp, herd) and every frame the server sends (HELLO_OK,
 * HELLO_REJECT, responses). A frame goes out at once when the connection
 * can take it: the transport's buffer is asked for with a timeout of 0,
 * so no thread ever waits on one client's send buffer, credit or flush.
 * When it cannot, a copy waits in the connection's queue (FIFO, bounded
 * by rdmx_rpc_opts.queue_max frames and queue_bytes bytes); the next
 * frame of that connection and the run thread's turns (every millisecond
 * while any queue holds a frame) send what waits, oldest first. A client
 * whose queue overflows, or makes no progress for drop_ms, is dropped
 * with a message naming its connection (docs/servers.md).
 *
 * The queue is under the connection's send_lock, as the transport's
 * one-at-a-time send buffer is (the ring protocols and rfp/herd lend one).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "rpc/rpc_server_queue.h"

#define QUEUE_BYTES_DEFAULT (16u << 20)

int rdmx__rpc_queue_bounds(struct rdmx_rpc_server *s)
{
	size_t frame = rdmx__rpc_frame_max(&s->k);

	if (!s->o.queue_bytes) {
		s->o.queue_bytes = frame > QUEUE_BYTES_DEFAULT ? (uint32_t)frame
							       : QUEUE_BYTES_DEFAULT;
		return 0;
	}
	if (s->o.queue_bytes < frame)
		return rdmx__fail(-EINVAL, "rpc: queue_bytes %u is below one frame of the "
				  "contract (%zu bytes): a client whose connection could not "
				  "take one response at once would be dropped",
				  s->o.queue_bytes, frame);
	return 0;
}

const char *rdmx__rpc_sc_name(const struct rpc_sconn *sc, char *buf, size_t n)
{
	snprintf(buf, n, "connection #%llu (%s)", (unsigned long long)sc->id,
		 sc->peer[0] ? sc->peer : "peer unknown");
	return buf;
}

/* The connection cannot take a frame now: worth a later try. */
static bool not_now(int rc)
{
	return rc == -EAGAIN || rc == -ETIMEDOUT || rc == -ENOBUFS;
}

/* @h and its payload out now, if the connection takes it (send_lock held). */
static int frame_try(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
		     const struct rpc_hdr *h, const void *payload)
{
	struct rpc_buf b;
	int rc = s->ops->alloc(sc->t, RPC_HDR + h->len, &b, 0);

	if (rc)
		return rc;
	rdmx__rpc_hdr_put(b.data, h);
	if (h->len)
		memcpy((char *)b.data + RPC_HDR, payload, h->len);
	rc = s->ops->send(sc->t, &b, RPC_HDR + h->len);
	if (rc)
		s->ops->drop(sc->t, &b);
	return rc;
}

/* Send what waits, oldest first, while the connection takes it
 * (send_lock held): 0, or the error that stopped it. */
static int queue_push(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int64_t now_ms)
{
	while (sc->qhead) {
		struct rpc_qent *e = sc->qhead;
		int rc = frame_try(s, sc, &e->h, e->payload);

		if (rc)
			return rc;
		sc->qhead = e->next;
		if (!sc->qhead) {
			sc->qtail = NULL;
			atomic_fetch_sub(&s->queued, 1);
		}
		sc->qn--;
		sc->qbytes -= RPC_HDR + e->h.len;
		sc->qmoved_ms = now_ms;
		atomic_store(&s->qmoved_ms, now_ms);
		free(e);
	}
	return 0;
}

/* A copy of @h and its payload at the queue's tail (send_lock held). */
static int queue_add(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
		     const struct rpc_hdr *h, const void *payload)
{
	uint64_t n = RPC_HDR + (uint64_t)h->len;
	struct rpc_qent *e;
	char name[96];

	if (sc->qn >= s->o.queue_max || sc->qbytes + n > s->o.queue_bytes)
		return rdmx__fail(-ENOBUFS, "rpc: %s takes no responses: its queue is full "
				  "(%u frames, %llu bytes; at most %u, %u): dropped",
				  rdmx__rpc_sc_name(sc, name, sizeof(name)), sc->qn,
				  (unsigned long long)sc->qbytes, s->o.queue_max,
				  s->o.queue_bytes);
	e = malloc(sizeof(*e) + h->len);
	if (!e)
		return rdmx__fail(-ENOMEM, "rpc: %s: out of memory to queue a frame",
				  rdmx__rpc_sc_name(sc, name, sizeof(name)));
	e->next = NULL;
	e->h = *h;
	if (h->len)
		memcpy(e->payload, payload, h->len);
	if (sc->qtail) {
		sc->qtail->next = e;
	} else {
		sc->qhead = e;
		sc->qmoved_ms = rdmx__now_ms();
		atomic_store(&s->qmoved_ms, sc->qmoved_ms);
		atomic_fetch_add(&s->queued, 1);
	}
	sc->qtail = e;
	sc->qn++;
	sc->qbytes += n;
	return 0;
}

static int send_failed(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int rc)
{
	char name[96];

	return rdmx__fail(rc, "rpc: %s: a frame could not be sent (%s): dropped",
			  rdmx__rpc_sc_name(sc, name, sizeof(name)), s->ops->error(sc->t));
}

int rdmx__rpc_sc_send(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
		      const struct rpc_hdr *h, const void *payload)
{
	int rc;

	pthread_mutex_lock(&sc->send_lock);
	rc = sc->qhead ? queue_push(s, sc, rdmx__now_ms()) : 0;
	if (!rc)
		rc = frame_try(s, sc, h, payload);
	if (not_now(rc))
		rc = queue_add(s, sc, h, payload);
	else if (rc)
		rc = send_failed(s, sc, rc);
	pthread_mutex_unlock(&sc->send_lock);
	return rc;
}

int rdmx__rpc_sc_drain(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int64_t now_ms)
{
	char name[96];
	int rc;

	pthread_mutex_lock(&sc->send_lock);
	rc = queue_push(s, sc, now_ms);
	if (rc && !not_now(rc))
		rc = send_failed(s, sc, rc);
	else if (rc && now_ms - sc->qmoved_ms >= s->o.drop_ms)
		rc = rdmx__fail(-ETIMEDOUT, "rpc: %s took none of its %u queued frames "
				"(%llu bytes) for %d ms: dropped",
				rdmx__rpc_sc_name(sc, name, sizeof(name)), sc->qn,
				(unsigned long long)sc->qbytes, s->o.drop_ms);
	else if (rc)
		rc = 1;
	pthread_mutex_unlock(&sc->send_lock);
	return rc;
}

void rdmx__rpc_sc_queue_free(struct rdmx_rpc_server *s, struct rpc_sconn *sc)
{
	pthread_mutex_lock(&sc->send_lock);
	if (sc->qhead)
		atomic_fetch_sub(&s->queued, 1);
	while (sc->qhead) {
		struct rpc_qent *e = sc->qhead;

		sc->qhead = e->next;
		free(e);
	}
	sc->qtail = NULL;
	sc->qn = 0;
	sc->qbytes = 0;
	pthread_mutex_unlock(&sc->send_lock);
}
