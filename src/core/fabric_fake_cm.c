/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's rdma_cm: listeners by port, connect requests queued on
 * them, accept establishing both sides at once, rejects, disconnects, an
 * ep's name, and the tests' fault injection on connections (a half-open
 * requester, a silent host). See the model at the top of fabric_fake.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "errors.h"
#include "fabric_fake_base.h"
#include "fabric_fake_cm.h"
#include "fabric_fake_post.h"
#include "fabric_fake_qp.h"

/* --------------------------------------------------------------- rdma_cm */

static struct rdmx__ep *ep_new(struct rdmx__fabric *fab, enum ep_kind kind)
{
	struct rdmx__ep *ep = calloc(1, sizeof(*ep));

	if (ep) {
		ep->fab = fab;
		ep->kind = kind;
		ep->cm_fd = -1;
	}
	return ep;
}

static struct rdmx__ep *listener_find(uint16_t port)
{
	struct rdmx__ep *l = G.listeners;

	while (l && l->port != port)
		l = l->lnext;
	return l;
}

static int port_take(uint16_t *port)
{
	if (*port)
		return listener_find(*port) ?
		       rdmx__fail(-EADDRINUSE, "fake: port %u is already in use", *port) : 0;
	for (int i = EPHEMERAL_FIRST; i <= UINT16_MAX; i++) {
		uint16_t p = G.next_port;

		G.next_port = p == UINT16_MAX ? EPHEMERAL_FIRST : p + 1;
		if (!listener_find(p)) {
			*port = p;
			return 0;
		}
	}
	return rdmx__fail(-EADDRINUSE, "fake: no free ephemeral port");
}

int rdmx__fake_listen(struct rdmx__fabric *fab, const char *addr, uint16_t port,
		      struct rdmx__ep **out)
{
	struct rdmx__ep *ep = ep_new(fab, EP_LISTENER);
	int rc;

	(void)addr; /* every fake listener listens on "any" */
	if (!ep)
		return rdmx__fail(-ENOMEM, "fake: out of memory for a listener");
	lock();
	rc = port_take(&port);
	if (!rc) {
		ep->port = port;
		ep->lnext = G.listeners;
		G.listeners = ep;
	}
	unlock();
	if (rc)
		free(ep);
	else
		*out = ep;
	return rc;
}

uint16_t rdmx__fake_local_port(const struct rdmx__ep *ep)
{
	return ep->kind == EP_CLIENT ? 0 : ep->port;
}

/* "fake:qpN" for the local QP or the peer's, "fake:port" without a QP. */
int rdmx__fake_addr_str(const struct rdmx__ep *ep, int peer, char *buf,
			size_t len)
{
	const struct rdmx__ep *e;
	int n;

	lock();
	e = peer ? ep->peer : ep;
	if (!e)
		n = snprintf(buf, len, "fake:-");
	else if (e->src[0])
		n = snprintf(buf, len, "%s:%u", e->src, (unsigned)e->port);
	else if (e->qpn)
		n = snprintf(buf, len, "fake:qp%u", (unsigned)e->qpn);
	else
		n = snprintf(buf, len, "fake:%u", (unsigned)e->port);
	unlock();
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

int rdmx__fake_resolve(struct rdmx__fabric *fab, const char *addr,
		       uint16_t port, int timeout_ms, struct rdmx__ep **out)
{
	struct rdmx__ep *ep;

	(void)timeout_ms;
	if (!addr)
		return rdmx__fail(-EINVAL, "fake: resolve needs an address");
	ep = ep_new(fab, EP_CLIENT);
	if (!ep)
		return rdmx__fail(-ENOMEM, "fake: out of memory for an endpoint");
	ep->port = port;
	*out = ep;
	return 0;
}

/* The fake routes nothing by address: the source is only kept, as the
 * address the listener sees the dialer at (its per-peer cap). */
int rdmx__fake_resolve_src(struct rdmx__fabric *fab, const char *src,
			   const char *addr, uint16_t port, int timeout_ms,
			   struct rdmx__ep **out)
{
	int rc = rdmx__fake_resolve(fab, addr, port, timeout_ms, out);

	if (!rc && src)
		snprintf((*out)->src, sizeof((*out)->src), "%s", src);
	return rc;
}

/* Answer a waiting dialer; private data is padded to @pad as IB CM does. */
static void answer(struct rdmx__ep *cl, int rc, const void *pdata,
		   size_t plen, size_t pad)
{
	memset(cl->pdata, 0, sizeof(cl->pdata));
	mem_copy(cl->pdata, pdata, plen);
	cl->plen = pad;
	cl->answer = rc;
	cl->cm = rc ? CM_IDLE : CM_CONNECTED;
	pthread_cond_broadcast(&G.cm);
}

/* Undo a handshake in progress: @ep gives up or goes away. */
static void cm_detach(struct rdmx__ep *ep)
{
	struct rdmx__ep **pp;

	if (ep->cm != CM_CONNECTING)
		return;
	if (ep->lis) {
		for (pp = &ep->lis->reqs; *pp != ep; pp = &(*pp)->rnext)
			;
		*pp = ep->rnext;
		ep->lis = NULL;
	}
	if (ep->peer && ep->kind == EP_CHILD)
		answer(ep->peer, -ECONNREFUSED, NULL, 0, 0);
	if (ep->peer) {
		rdmx__fake_cm_signal(ep->peer);
		ep->peer->peer = NULL;
		pthread_cond_broadcast(&G.cm); /* an accept may wait for it */
	}
	ep->peer = NULL;
	ep->cm = CM_IDLE;
}

/* Both ends see the disconnect; both QPs go to ERR. */
static void cm_disconnect(struct rdmx__ep *ep)
{
	struct rdmx__ep *peer = ep->peer;

	if (ep->cm != CM_CONNECTED)
		return;
	ep->cm = CM_DISCONNECTED;
	ep->peer = NULL;
	rdmx__fake_qp_error(ep);
	rdmx__fake_cm_signal(ep);
	if (peer) {
		rdmx__fake_cm_signal(peer);
		peer->cm = CM_DISCONNECTED;
		peer->peer = NULL;
		rdmx__fake_qp_error(peer);
	}
}

/* A listener going away refuses the dialers still queued on it. */
static void listener_close(struct rdmx__ep *lis)
{
	struct rdmx__ep **pp, *cl;

	for (pp = &G.listeners; *pp != lis; pp = &(*pp)->lnext)
		;
	*pp = lis->lnext;
	while ((cl = lis->reqs)) {
		lis->reqs = cl->rnext;
		cl->lis = NULL;
		answer(cl, -ECONNREFUSED, NULL, 0, 0);
	}
}

void rdmx__fake_destroy_ep(struct rdmx__ep *ep)
{
	if (!ep)
		return;
	lock();
	if (ep->kind == EP_LISTENER)
		listener_close(ep);
	cm_detach(ep);
	cm_disconnect(ep); /* as when the process dies: the peer sees it */
	rdmx__fake_qp_release(ep);
	unlock();
	rdmx__fake_qp_free_rings(ep);
	if (ep->cm_fd >= 0)
		close(ep->cm_fd);
	free(ep);
}

static int connect_start(struct rdmx__ep *ep, const void *pdata, size_t plen)
{
	struct rdmx__ep *lis, **pp;

	if (ep->qp == QP_NONE)
		return rdmx__fail(-EINVAL, "fake: connect before the QP was created");
	if (ep->kind != EP_CLIENT || ep->cm != CM_IDLE || ep->qp != QP_INIT)
		return rdmx__fail(-EINVAL, "fake: connect on an ep that is not a fresh client");
	lis = listener_find(ep->port);
	if (!lis)
		return rdmx__fail(-ECONNREFUSED, "fake: no listener on port %u", ep->port);
	memset(ep->pdata, 0, sizeof(ep->pdata));
	mem_copy(ep->pdata, pdata, plen);
	ep->plen = RDMX__PDATA_CONNECT_MAX; /* IB CM pads the REQ */
	ep->answer = 1;
	ep->cm = CM_CONNECTING;
	ep->lis = lis;
	ep->rnext = NULL;
	for (pp = &lis->reqs; *pp; pp = &(*pp)->rnext)
		;
	*pp = ep;
	rdmx__fake_cm_signal(lis);
	pthread_cond_broadcast(&G.cm);
	return 0;
}

static int connect_wait(struct rdmx__ep *ep, int timeout_ms)
{
	int64_t deadline = deadline_in(timeout_ms);

	while (ep->answer == 1) {
		if (cm_wait(deadline) == ETIMEDOUT && ep->answer == 1) {
			cm_detach(ep); /* withdraw the request */
			return rdmx__fail(-ETIMEDOUT, "fake: no answer from the listener "
					  "on port %u within %d ms", ep->port, timeout_ms);
		}
	}
	if (ep->answer)
		return rdmx__fail(ep->answer, "fake: connection to port %u rejected",
				  ep->port);
	return 0;
}

int rdmx__fake_connect(struct rdmx__ep *ep, const void *pdata, size_t plen,
		       int timeout_ms, void *reply, size_t *rlen)
{
	size_t got = 0;
	int rc;

	if (plen > RDMX__PDATA_CONNECT_MAX || (plen && !pdata))
		return rdmx__fail(-EINVAL, "fake: %zu bytes of connect private data "
				  "(at most %d)", plen, RDMX__PDATA_CONNECT_MAX);
	lock();
	rc = connect_start(ep, pdata, plen);
	if (!rc) {
		rc = connect_wait(ep, timeout_ms);
		got = rc == -ETIMEDOUT ? 0 : ep->plen; /* accept or reject data */
	}
	if (reply)
		memcpy(reply, ep->pdata, got);
	unlock();
	if (rlen)
		*rlen = got;
	return rc;
}

int rdmx__fake_get_request(struct rdmx__ep *lis, int timeout_ms,
			   struct rdmx__ep **child, void *pdata, size_t *plen)
{
	int64_t deadline = deadline_in(timeout_ms);
	struct rdmx__ep *ch, *cl;

	if (lis->kind != EP_LISTENER)
		return rdmx__fail(-EINVAL, "fake: get_request on an ep that does not listen");
	ch = ep_new(lis->fab, EP_CHILD);
	if (!ch)
		return rdmx__fail(-ENOMEM, "fake: out of memory for an endpoint");
	lock();
	while (!lis->reqs && cm_wait(deadline) != ETIMEDOUT)
		;
	cl = lis->reqs;
	if (cl) {
		lis->reqs = cl->rnext;
		if (!lis->reqs && lis->cm_fd >= 0)
			(void)!read(lis->cm_fd, &(uint64_t){ 0 }, 8); /* none left */
		cl->lis = NULL;
		cl->peer = ch;
		ch->peer = cl;
		ch->port = lis->port;
		ch->cm = CM_CONNECTING;
		if (pdata)
			memcpy(pdata, cl->pdata, cl->plen);
		if (plen)
			*plen = cl->plen;
	}
	unlock();
	if (!cl) {
		free(ch);
		if (!timeout_ms)
			return rdmx__again(); /* a poll: no message */
		return rdmx__fail(-ETIMEDOUT, "fake: no connect request on port %u within %d ms",
				  lis->port, timeout_ms);
	}
	*child = ch;
	return 0;
}

/* An accept of a half-open dialer: wait @timeout_ms for it to go away. */
static int half_open_wait(struct rdmx__ep *ep, int timeout_ms)
{
	int64_t deadline = deadline_in(timeout_ms);

	if (!timeout_ms)
		return -EAGAIN;
	while (ep->peer && cm_wait(deadline) != ETIMEDOUT)
		;
	return ep->peer ? rdmx__fail(-ETIMEDOUT, "fake: the dialer did not complete the "
				     "handshake within %d ms", timeout_ms) :
			  rdmx__fail(-ECONNABORTED, "fake: the dialer gave up before completing");
}

int rdmx__fake_accept(struct rdmx__ep *ep, const void *pdata, size_t plen,
		      int timeout_ms)
{
	struct rdmx__ep *cl;
	int rc = 0;

	/* established at once, unless the dialer is half-open */
	if (plen > RDMX__PDATA_ACCEPT_MAX || (plen && !pdata))
		return rdmx__fail(-EINVAL, "fake: %zu bytes of accept private data "
				  "(at most %d)", plen, RDMX__PDATA_ACCEPT_MAX);
	lock();
	cl = ep->peer;
	if (ep->kind != EP_CHILD || ep->cm != CM_CONNECTING)
		rc = rdmx__fail(-EINVAL, "fake: accept on an ep that is not a pending request");
	else if (ep->qp != QP_INIT)
		rc = rdmx__fail(-EINVAL, "fake: accept before the QP was created");
	else if (!cl)
		rc = rdmx__fail(-ECONNABORTED, "fake: the dialer gave up before the accept");
	else if (cl->half_open)
		rc = half_open_wait(ep, timeout_ms);
	if (!rc) {
		ep->cm = CM_CONNECTED;
		ep->qp = QP_RTS;
		cl->qp = QP_RTS;
		answer(cl, 0, pdata, plen, RDMX__PDATA_ACCEPT_MAX);
	}
	unlock();
	return rc;
}

int rdmx__fake_accept_poll(struct rdmx__ep *ep)
{
	int rc;

	lock();
	if (ep->cm == CM_CONNECTED || ep->cm == CM_DISCONNECTED)
		rc = 0; /* up, and maybe down since: rdma_cm queues ESTABLISHED
			 * before DISCONNECTED; check_event reports the latter */
	else if (ep->cm == CM_CONNECTING && ep->peer)
		rc = -EAGAIN;
	else
		rc = rdmx__fail(-ECONNABORTED, "fake: the dialer gave up before completing");
	unlock();
	return rc;
}

int rdmx__fake_connect_half(struct rdmx__ep *ep, const void *pdata, size_t plen)
{
	int rc;

	if (plen > RDMX__PDATA_CONNECT_MAX || (plen && !pdata))
		return rdmx__fail(-EINVAL, "fake: %zu bytes of connect private data", plen);
	lock();
	rc = connect_start(ep, pdata, plen);
	if (!rc)
		ep->half_open = 1;
	unlock();
	return rc;
}

/* Reject a request; the ep is destroyed whatever happens. */
int rdmx__fake_reject(struct rdmx__ep *ep, const void *pdata, size_t plen)
{
	int rc = 0;

	if (plen > RDMX__PDATA_REJECT_MAX || (plen && !pdata))
		rc = rdmx__fail(-EINVAL, "fake: %zu bytes of reject private data (at most %d)",
				plen, RDMX__PDATA_REJECT_MAX);
	lock();
	if (!rc && ep->cm == CM_CONNECTING && ep->peer) {
		answer(ep->peer, -ECONNREFUSED, pdata, plen, RDMX__PDATA_REJECT_MAX);
		ep->peer->peer = NULL;
		ep->peer = NULL;
	}
	unlock();
	rdmx__fake_destroy_ep(ep); /* refuses with no data if not answered above */
	return rc;
}

void rdmx__fake_silence(struct rdmx__ep *ep, int on)
{
	lock();
	ep->silent = on;
	unlock();
}

int rdmx__fake_disconnect(struct rdmx__ep *ep)
{
	lock();
	cm_disconnect(ep);
	unlock();
	return 0;
}

int rdmx__fake_check_event(struct rdmx__ep *ep)
{
	int down;

	lock();
	down = ep->cm == CM_DISCONNECTED;
	unlock();
	return down ? rdmx__fail(-ECONNRESET, "fake: connection closed") : 0;
}

void rdmx__fake_cm_signal(struct rdmx__ep *ep)
{
	if (ep->cm_fd >= 0)
		(void)!write(ep->cm_fd, &(uint64_t){ 1 }, 8);
}

int rdmx__fake_ep_fd(struct rdmx__ep *ep)
{
	int fd;

	lock();
	if (ep->cm_fd < 0) {
		ep->cm_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (ep->reqs || ep->cm == CM_DISCONNECTED)
			rdmx__fake_cm_signal(ep); /* what came before */
	}
	fd = ep->cm_fd;
	unlock();
	return fd;
}
