/* SPDX-License-Identifier: MIT */
/*
 * The real fabric's connection management, with librdmacm. Every ep has
 * its own rdma_cm event channel (children of a listener are migrated to
 * one), so waiting for an ep's events never steals another's.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "errors.h"
#include "fabric_verbs_cm.h"
#include "fabric_verbs_dev.h"

#define RD_ATOMIC_MAX 16

/* ---------------------------------------------------------------- events */

static int ep_new(struct rdmx__fabric *fab, struct rdmx__ep **out)
{
	struct rdmx__ep *ep = calloc(1, sizeof(*ep));

	if (!ep)
		return rdmx__fail(-ENOMEM, "out of memory for an endpoint");
	ep->fab = fab;
	ep->ch = rdma_create_event_channel();
	if (!ep->ch) {
		int err = errno;

		free(ep);
		return rdmx__fail(-err, "cannot open rdma_cm (%s): is the rdma_ucm module loaded? "
				  "(" RDMX__NO_DEVICE_HINT ")", strerror(err));
	}
	if (fcntl(ep->ch->fd, F_SETFL, fcntl(ep->ch->fd, F_GETFL) | O_NONBLOCK)) {
		rdma_destroy_event_channel(ep->ch);
		free(ep);
		return rdmx__fail(-errno, "cannot make the rdma_cm channel non-blocking");
	}
	*out = ep;
	return 0;
}

void rdmx__verbs_destroy_ep(struct rdmx__ep *ep)
{
	if (!ep)
		return;
	if (ep->id && ep->id->qp)
		rdma_destroy_qp(ep->id);
	if (ep->id)
		rdma_destroy_id(ep->id);
	rdma_destroy_event_channel(ep->ch);
	free(ep);
}

/* Next event of @ep within @timeout_ms (< 0: forever). */
static int next_event(struct rdmx__ep *ep, int timeout_ms,
		      struct rdma_cm_event **ev)
{
	struct pollfd pfd = { .fd = ep->ch->fd, .events = POLLIN };

	for (;;) {
		if (!rdma_get_cm_event(ep->ch, ev))
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return rdmx__fail(-errno, "reading rdma_cm events: %s", strerror(errno));
		int n = poll(&pfd, 1, timeout_ms);

		if (n == 0 && !timeout_ms)
			return rdmx__again(); /* a poll: no message */
		if (n == 0)
			return rdmx__fail(-ETIMEDOUT, "no rdma_cm event within %d ms", timeout_ms);
		if (n < 0 && errno != EINTR)
			return rdmx__fail(-errno, "waiting for rdma_cm events: %s", strerror(errno));
	}
}

static void copy_pdata(const struct rdma_cm_event *ev, void *buf, size_t *len)
{
	size_t n = ev->param.conn.private_data_len;

	if (!buf || !len)
		return;
	if (!ev->param.conn.private_data)
		n = 0;
	if (n > RDMX__PDATA_BUF)
		n = RDMX__PDATA_BUF;
	memcpy(buf, ev->param.conn.private_data, n);
	*len = n;
}

/* Map an unwanted event to an error (the event is not yet acked). */
static int event_error(struct rdmx__ep *ep, const struct rdma_cm_event *ev)
{
	const char *name = rdma_event_str(ev->event);

	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return rdmx__fail(-ECONNREFUSED, "connection rejected (status %d)", ev->status);
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return rdmx__fail(-EHOSTUNREACH, "%s (status %d): no RDMA route to that address",
				  name, ev->status);
	case RDMA_CM_EVENT_UNREACHABLE:
		return rdmx__fail(-EHOSTUNREACH, "peer unreachable: no connection manager reply (status %d)",
				  ev->status);
	case RDMA_CM_EVENT_DISCONNECTED:
		ep->disconnected = 1;
		return rdmx__fail(-ECONNRESET, "connection closed by peer");
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return rdmx__fail(-ENODEV, "RDMA device removed");
	default:
		return rdmx__fail(-EPROTO, "unexpected rdma_cm event %s (status %d)",
				  name, ev->status);
	}
}

/* Wait for event @want on @ep; copies its private data to @buf/@len. */
static int expect(struct rdmx__ep *ep, enum rdma_cm_event_type want,
		  int timeout_ms, void *buf, size_t *len)
{
	struct rdma_cm_event *ev;
	int rc = next_event(ep, timeout_ms, &ev);

	if (rc)
		return rc;
	if (ev->event == want) {
		copy_pdata(ev, buf, len);
	} else {
		rc = event_error(ep, ev);
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			copy_pdata(ev, buf, len);
	}
	rdma_ack_cm_event(ev);
	return rc;
}

/* ------------------------------------------------------------ addresses */

static int parse_addr(const char *addr, uint16_t port, int passive,
		      struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	char service[8];
	int rc;

	if (passive)
		hints.ai_flags = AI_PASSIVE;
	snprintf(service, sizeof(service), "%u", port);
	rc = getaddrinfo(addr && *addr ? addr : NULL, service, &hints, &res);
	if (rc)
		return rdmx__fail(-EINVAL, "bad address '%s': %s", addr ? addr : "",
				  gai_strerror(rc));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int rdmx__verbs_listen(struct rdmx__fabric *fab, const char *addr, uint16_t port,
		       struct rdmx__ep **out)
{
	struct sockaddr_storage ss;
	struct rdmx__ep *ep;
	int rc = parse_addr(addr, port, 1, &ss);

	if (rc || (rc = ep_new(fab, &ep)))
		return rc;
	if (rdma_create_id(ep->ch, &ep->id, ep, RDMA_PS_TCP)) {
		rc = rdmx__fail(-errno, "rdma_create_id: %s", strerror(errno));
		goto destroy_ep;
	}
	if (rdma_bind_addr(ep->id, (struct sockaddr *)&ss)) {
		rc = rdmx__fail(-errno, "cannot bind %s:%u: %s (no RDMA device with that address?)",
				addr ? addr : "*", port, strerror(errno));
		goto destroy_ep;
	}
	if (rdma_listen(ep->id, 64)) {
		rc = rdmx__fail(-errno, "cannot listen on %s:%u: %s", addr ? addr : "*",
				port, strerror(errno));
		goto destroy_ep;
	}
	*out = ep;
	return 0;

destroy_ep:
	rdmx__verbs_destroy_ep(ep);
	return rc;
}

uint16_t rdmx__verbs_local_port(const struct rdmx__ep *ep)
{
	return ntohs(rdma_get_src_port(ep->id));
}

/* Adopt a connect request's id into its own ep and channel. */
static int adopt_child(struct rdmx__ep *lis, struct rdma_cm_id *id,
		       struct rdmx__ep **out)
{
	struct rdmx__ep *ep;
	int rc = ep_new(lis->fab, &ep);

	if (rc) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return rc;
	}
	ep->id = id;
	id->context = ep;
	if (rdma_migrate_id(id, ep->ch)) {
		rc = rdmx__fail(-errno, "rdma_migrate_id: %s", strerror(errno));
		rdma_reject(id, NULL, 0);
		rdmx__verbs_destroy_ep(ep);
		return rc;
	}
	rc = rdmx__verbs_dev_get(ep->fab, id->verbs, &ep->dev);
	if (rc) {
		rdma_reject(id, NULL, 0);
		rdmx__verbs_destroy_ep(ep);
		return rc;
	}
	*out = ep;
	return 0;
}

int rdmx__verbs_get_request(struct rdmx__ep *lis, int timeout_ms,
			    struct rdmx__ep **child, void *pdata, size_t *plen)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int rc;

	for (;;) {
		rc = next_event(lis, timeout_ms, &ev);
		if (rc)
			return rc;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev); /* stray events of rejected children */
	}
	id = ev->id;
	copy_pdata(ev, pdata, plen);
	rdma_ack_cm_event(ev);
	return adopt_child(lis, id, child);
}

static int call_failed(const char *call)
{
	int err = errno ? errno : EIO;

	return rdmx__fail(-err, "%s: %s", call, strerror(err));
}

/* Put "@what @addr: " in front of the thread's last error message. */
static int prefix(int rc, const char *what, const char *addr)
{
	char detail[RDMX__ERRMSG_LEN];

	snprintf(detail, sizeof(detail), "%s", rdmx__last());
	return rdmx__fail(rc, "%s %s: %s", what, addr, detail);
}

int rdmx__verbs_resolve_src(struct rdmx__fabric *fab, const char *src,
			    const char *addr, uint16_t port, int timeout_ms,
			    struct rdmx__ep **out)
{
	struct sockaddr_storage ss, from;
	struct rdmx__ep *ep;
	int rc = parse_addr(addr, port, 0, &ss);

	if (!rc && src)
		rc = parse_addr(src, 0, 1, &from);
	if (rc || (rc = ep_new(fab, &ep)))
		return rc;
	if (rdma_create_id(ep->ch, &ep->id, ep, RDMA_PS_TCP)) {
		rc = rdmx__fail(-errno, "rdma_create_id: %s", strerror(errno));
		goto destroy_ep;
	}
	rc = rdma_resolve_addr(ep->id, src ? (struct sockaddr *)&from : NULL,
			       (struct sockaddr *)&ss, timeout_ms) ?
	     call_failed("rdma_resolve_addr") :
	     expect(ep, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms, NULL, NULL);
	if (rc) {
		rc = prefix(rc, src ? "cannot resolve (from src_addr) address" :
			    "cannot resolve address", addr);
		goto destroy_ep;
	}
	rc = rdma_resolve_route(ep->id, timeout_ms) ?
	     call_failed("rdma_resolve_route") :
	     expect(ep, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms, NULL, NULL);
	if (rc) {
		rc = prefix(rc, "no RDMA route to", addr);
		goto destroy_ep;
	}
	rc = rdmx__verbs_dev_get(fab, ep->id->verbs, &ep->dev);
	if (rc)
		goto destroy_ep;
	*out = ep;
	return 0;

destroy_ep:
	rdmx__verbs_destroy_ep(ep);
	return rc;
}

int rdmx__verbs_resolve(struct rdmx__fabric *fab, const char *addr,
			uint16_t port, int timeout_ms, struct rdmx__ep **out)
{
	return rdmx__verbs_resolve_src(fab, NULL, addr, port, timeout_ms, out);
}

static void conn_param(const struct rdmx__ep *ep, const void *pdata, size_t plen,
		       struct rdma_conn_param *p)
{
	const struct ibv_device_attr *a = &ep->dev->attr;
	int rd = ep->caps.rd_atomic ? ep->caps.rd_atomic : RD_ATOMIC_MAX;

	memset(p, 0, sizeof(*p));
	p->private_data = pdata;
	p->private_data_len = (uint8_t)plen;
	p->responder_resources = (uint8_t)(a->max_qp_rd_atom < rd ? a->max_qp_rd_atom : rd);
	p->initiator_depth = (uint8_t)(a->max_qp_init_rd_atom < rd ? a->max_qp_init_rd_atom : rd);
	p->retry_count = ep->caps.retry_count;
	p->rnr_retry_count = ep->caps.rnr_retry;
}

/*
 * rdma_cm leaves the responder's min RNR NAK timer at 0, which encodes the
 * LONGEST back-off (655 ms): every SEND that finds no receive posted then
 * stalls its sender for most of a second. Once connected (RTS), ask for
 * 0.64 ms (code 12, what perftest uses); RTS->RTS may change it. A device
 * that refuses keeps its default, which is slow but correct.
 */
#define MIN_RNR_TIMER_0_64MS 12

static int established(struct rdmx__ep *ep, int rc)
{
	struct ibv_qp_attr a = { .min_rnr_timer = MIN_RNR_TIMER_0_64MS };

	if (!rc && ep->id->qp)
		(void)ibv_modify_qp(ep->id->qp, &a, IBV_QP_MIN_RNR_TIMER);
	return rc;
}

/*
 * The local ACK timeout liveness asked for (rdmx__qp_make, qp.c): rdma_cm
 * uses it when it moves the QP to RTS. Without it (or if refused) the QP
 * keeps rdma_cm's default, which only makes a short bound late.
 */
static void ack_timeout(struct rdmx__ep *ep)
{
	uint8_t t = ep->caps.ack_timeout;

	if (t)
		(void)rdma_set_option(ep->id, RDMA_OPTION_ID,
				      RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t));
}

int rdmx__verbs_connect(struct rdmx__ep *ep, const void *pdata, size_t plen,
			int timeout_ms, void *reply, size_t *rlen)
{
	struct rdma_conn_param p;

	if (!ep->id->qp)
		return rdmx__fail(-EINVAL, "connect before the QP was created");
	conn_param(ep, pdata, plen, &p);
	ack_timeout(ep);
	if (rdma_connect(ep->id, &p))
		return rdmx__fail(-errno, "rdma_connect: %s", strerror(errno));
	return established(ep, expect(ep, RDMA_CM_EVENT_ESTABLISHED, timeout_ms,
				      reply, rlen));
}

int rdmx__verbs_accept_poll(struct rdmx__ep *ep)
{
	int rc = expect(ep, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, NULL);

	if (rc == -ETIMEDOUT || rc == -EAGAIN)
		return -EAGAIN; /* no event yet: the dialer has not completed */
	return established(ep, rc);
}

int rdmx__verbs_accept(struct rdmx__ep *ep, const void *pdata, size_t plen,
		       int timeout_ms)
{
	struct rdma_conn_param p;

	conn_param(ep, pdata, plen, &p);
	ack_timeout(ep);
	if (rdma_accept(ep->id, &p))
		return rdmx__fail(-errno, "rdma_accept: %s", strerror(errno));
	if (!timeout_ms)
		return rdmx__verbs_accept_poll(ep);
	return established(ep, expect(ep, RDMA_CM_EVENT_ESTABLISHED, timeout_ms,
				      NULL, NULL));
}

int rdmx__verbs_reject(struct rdmx__ep *ep, const void *pdata, size_t plen)
{
	int rc = rdma_reject(ep->id, pdata, (uint8_t)plen) ? -errno : 0;

	rdmx__verbs_destroy_ep(ep);
	return rc ? rdmx__fail(rc, "rdma_reject: %s", strerror(-rc)) : 0;
}

int rdmx__verbs_disconnect(struct rdmx__ep *ep)
{
	if (rdma_disconnect(ep->id) && errno != EINVAL)
		return rdmx__fail(-errno, "rdma_disconnect: %s", strerror(errno));
	return 0;
}

int rdmx__verbs_check_event(struct rdmx__ep *ep)
{
	struct rdma_cm_event *ev;

	while (!ep->disconnected && !rdma_get_cm_event(ep->ch, &ev)) {
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
		    ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			ep->disconnected = 1;
		rdma_ack_cm_event(ev);
	}
	return ep->disconnected ? -ECONNRESET : 0;
}

int rdmx__verbs_ep_fd(struct rdmx__ep *ep)
{
	return ep->ch ? ep->ch->fd : -1;
}

int rdmx__verbs_addr_str(const struct rdmx__ep *ep, int peer, char *buf,
			 size_t len)
{
	struct sockaddr *sa = peer ? rdma_get_peer_addr(ep->id)
				   : rdma_get_local_addr(ep->id);
	char host[INET6_ADDRSTRLEN] = "?";
	uint16_t port = ntohs(peer ? rdma_get_dst_port(ep->id)
				   : rdma_get_src_port(ep->id));
	int n;

	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)sa)->sin_addr,
			  host, sizeof(host));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)sa)->sin6_addr,
			  host, sizeof(host));
	n = snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u",
		     host, (unsigned)port);
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

/* The peer's GID: what rdma_cm resolved (IB), else the GID a RoCE port
 * holds for the peer's IP address (IPv4: ::ffff:a.b.c.d). */
int rdmx__verbs_peer_gid(const struct rdmx__ep *ep, uint8_t gid[16])
{
	const uint8_t *d = ep->id->route.addr.addr.ibaddr.dgid.raw;
	struct sockaddr *sa = rdma_get_peer_addr(ep->id);
	static const uint8_t zero[16];

	memset(gid, 0, 16);
	if (memcmp(d, zero, 16)) {
		memcpy(gid, d, 16);
	} else if (sa->sa_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((struct sockaddr_in *)(void *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((struct sockaddr_in6 *)(void *)sa)->sin6_addr, 16);
	}
	return 0;
}
