/* SPDX-License-Identifier: MIT */
/*
 * The real fabric: librdmacm for connection management, libibverbs for the
 * data path. Every ep has its own rdma_cm event channel (children of a
 * listener are migrated to one), so waiting for an ep's events never steals
 * another's. Protection domains are shared per device across the fabric.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "errors.h"
#include "fabric.h"
#include "fabric_verbs.h"

#define MAX_DEVICES 16
#define POST_CHUNK 16
#define RD_ATOMIC_MAX 16

struct dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
};

struct rdmx__fabric {
	pthread_mutex_t lock;
	struct dev devs[MAX_DEVICES];
	int ndevs;
};

struct rdmx__ep {
	struct rdmx__fabric *fab;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct dev *dev;
	struct rdmx__qp_caps caps;
	int disconnected;
};

struct vmr {
	struct rdmx__mr pub;
	struct ibv_mr *mr;
};

/* ---------------------------------------------------------------- fabric */

static int vf_create(struct rdmx__fabric **out)
{
	struct rdmx__fabric *fab = calloc(1, sizeof(*fab));

	if (!fab)
		return rdmx__fail(-ENOMEM, "out of memory for the verbs fabric");
	pthread_mutex_init(&fab->lock, NULL);
	*out = fab;
	return 0;
}

static void vf_destroy(struct rdmx__fabric *fab)
{
	if (!fab)
		return;
	for (int i = 0; i < fab->ndevs; i++)
		ibv_dealloc_pd(fab->devs[i].pd);
	pthread_mutex_destroy(&fab->lock);
	free(fab);
}

/* The shared PD (and device limits) of @verbs, made on first use. */
static int dev_get(struct rdmx__fabric *fab, struct ibv_context *verbs,
		   struct dev **out)
{
	struct dev *d = NULL;
	int rc = 0;

	pthread_mutex_lock(&fab->lock);
	for (int i = 0; i < fab->ndevs && !d; i++)
		if (fab->devs[i].verbs == verbs)
			d = &fab->devs[i];
	if (!d && fab->ndevs == MAX_DEVICES)
		rc = rdmx__fail(-ENOSPC, "more than %d RDMA devices in use", MAX_DEVICES);
	if (!d && !rc) {
		d = &fab->devs[fab->ndevs];
		d->verbs = verbs;
		d->pd = ibv_alloc_pd(verbs);
		if (!d->pd || ibv_query_device(verbs, &d->attr))
			rc = rdmx__fail(-errno ? -errno : -EIO,
					"cannot open %s: %s", ibv_get_device_name(verbs->device),
					strerror(errno));
		else
			fab->ndevs++;
	}
	pthread_mutex_unlock(&fab->lock);
	*out = d;
	return rc;
}

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
				  "Without an RDMA device use sandbox/run", strerror(err));
	}
	if (fcntl(ep->ch->fd, F_SETFL, fcntl(ep->ch->fd, F_GETFL) | O_NONBLOCK)) {
		rdma_destroy_event_channel(ep->ch);
		free(ep);
		return rdmx__fail(-errno, "cannot make the rdma_cm channel non-blocking");
	}
	*out = ep;
	return 0;
}

static void vf_destroy_ep(struct rdmx__ep *ep)
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

static int vf_listen(struct rdmx__fabric *fab, const char *addr, uint16_t port,
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
	vf_destroy_ep(ep);
	return rc;
}

static uint16_t vf_local_port(const struct rdmx__ep *ep)
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
		vf_destroy_ep(ep);
		return rc;
	}
	rc = dev_get(ep->fab, id->verbs, &ep->dev);
	if (rc) {
		rdma_reject(id, NULL, 0);
		vf_destroy_ep(ep);
		return rc;
	}
	*out = ep;
	return 0;
}

static int vf_get_request(struct rdmx__ep *lis, int timeout_ms,
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

static int vf_resolve_src(struct rdmx__fabric *fab, const char *src,
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
	rc = dev_get(fab, ep->id->verbs, &ep->dev);
	if (rc)
		goto destroy_ep;
	*out = ep;
	return 0;

destroy_ep:
	vf_destroy_ep(ep);
	return rc;
}

static int vf_resolve(struct rdmx__fabric *fab, const char *addr, uint16_t port,
		      int timeout_ms, struct rdmx__ep **out)
{
	return vf_resolve_src(fab, NULL, addr, port, timeout_ms, out);
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
 * The local ACK timeout liveness asked for (rdmx__conn_create_qp): rdma_cm
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

static int vf_connect(struct rdmx__ep *ep, const void *pdata, size_t plen,
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

static int vf_accept_poll(struct rdmx__ep *ep)
{
	int rc = expect(ep, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, NULL);

	if (rc == -ETIMEDOUT || rc == -EAGAIN)
		return -EAGAIN; /* no event yet: the dialer has not completed */
	return established(ep, rc);
}

static int vf_accept(struct rdmx__ep *ep, const void *pdata, size_t plen,
		     int timeout_ms)
{
	struct rdma_conn_param p;

	conn_param(ep, pdata, plen, &p);
	ack_timeout(ep);
	if (rdma_accept(ep->id, &p))
		return rdmx__fail(-errno, "rdma_accept: %s", strerror(errno));
	if (!timeout_ms)
		return vf_accept_poll(ep);
	return established(ep, expect(ep, RDMA_CM_EVENT_ESTABLISHED, timeout_ms,
				      NULL, NULL));
}

static int vf_reject(struct rdmx__ep *ep, const void *pdata, size_t plen)
{
	int rc = rdma_reject(ep->id, pdata, (uint8_t)plen) ? -errno : 0;

	vf_destroy_ep(ep);
	return rc ? rdmx__fail(rc, "rdma_reject: %s", strerror(-rc)) : 0;
}

static int vf_disconnect(struct rdmx__ep *ep)
{
	if (rdma_disconnect(ep->id) && errno != EINVAL)
		return rdmx__fail(-errno, "rdma_disconnect: %s", strerror(errno));
	return 0;
}

static int vf_check_event(struct rdmx__ep *ep)
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

/* ------------------------------------------------------------- resources */

static int vf_reg_mr(struct rdmx__ep *ep, void *addr, size_t len, int access,
		     struct rdmx__mr **out)
{
	int a = IBV_ACCESS_LOCAL_WRITE;
	struct vmr *m = calloc(1, sizeof(*m));

	if (!m)
		return rdmx__fail(-ENOMEM, "out of memory for a memory region");
	if (access & RDMX__ACCESS_WRITE)
		a |= IBV_ACCESS_REMOTE_WRITE;
	if (access & RDMX__ACCESS_READ)
		a |= IBV_ACCESS_REMOTE_READ;
	if (access & RDMX__ACCESS_ATOMIC)
		a |= IBV_ACCESS_REMOTE_ATOMIC;
	m->mr = ibv_reg_mr(ep->dev->pd, addr, len, a);
	if (!m->mr) {
		int err = errno ? errno : EIO;

		free(m);
		return rdmx__fail(-err, "ibv_reg_mr of %zu bytes: %s (memlock limit? ulimit -l)",
				  len, strerror(err));
	}
	m->pub = (struct rdmx__mr){ addr, len, m->mr->lkey, m->mr->rkey };
	*out = &m->pub;
	return 0;
}

static void vf_dereg_mr(struct rdmx__mr *mr)
{
	struct vmr *m = (struct vmr *)mr;

	if (!m)
		return;
	ibv_dereg_mr(m->mr);
	free(m);
}

/*
 * Every CQ has its own completion channel (non-blocking: cq_arm() reads it
 * without waiting), and in cq_context an int: 1 while it is armed and
 * no notification was taken since.
 */
static int vf_create_cq(struct rdmx__ep *ep, int depth, struct rdmx__cq **out)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ep->id->verbs);
	int *armed = calloc(1, sizeof(*armed));
	struct ibv_cq *cq;
	int rc;

	if (!ch || !armed) {
		rc = rdmx__fail(ch ? -ENOMEM : -errno, "creating a completion channel: %s",
				strerror(ch ? ENOMEM : errno));
		goto free_channel;
	}
	if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK)) {
		rc = rdmx__fail(-errno, "cannot make the completion channel non-blocking");
		goto free_channel;
	}
	cq = ibv_create_cq(ep->id->verbs, depth, armed, ch, 0);
	if (!cq) {
		rc = rdmx__fail(-errno, "ibv_create_cq(%d): %s", depth, strerror(errno));
		goto free_channel;
	}
	*out = (struct rdmx__cq *)cq;
	return 0;

free_channel:
	if (ch)
		ibv_destroy_comp_channel(ch);
	free(armed);
	return rc;
}

static void vf_destroy_cq(struct rdmx__cq *cq)
{
	struct ibv_cq *v = (struct ibv_cq *)cq;
	struct ibv_comp_channel *ch = v->channel;
	void *armed = v->cq_context;

	ibv_destroy_cq(v);
	if (ch)
		ibv_destroy_comp_channel(ch);
	free(armed);
}

static int vf_cq_fd(struct rdmx__cq *cq)
{
	struct ibv_cq *v = (struct ibv_cq *)cq;

	return v->channel ? v->channel->fd : -1;
}

static int vf_cq_arm(struct rdmx__cq *cq)
{
	struct ibv_cq *v = (struct ibv_cq *)cq, *ev_cq;
	int *armed = v->cq_context;
	void *ctx;

	while (!ibv_get_cq_event(v->channel, &ev_cq, &ctx)) {
		ibv_ack_cq_events(ev_cq, 1);
		__atomic_store_n(armed, 0, __ATOMIC_RELEASE);
	}
	if (__atomic_load_n(armed, __ATOMIC_ACQUIRE))
		return 0;
	if (ibv_req_notify_cq(v, 0))
		return rdmx__fail(-EIO, "ibv_req_notify_cq failed");
	__atomic_store_n(armed, 1, __ATOMIC_RELEASE);
	return 1;
}

static int vf_ep_fd(struct rdmx__ep *ep)
{
	return ep->ch ? ep->ch->fd : -1;
}

static int vf_create_srq(struct rdmx__ep *ep, int depth, struct rdmx__srq **out)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = (uint32_t)depth, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(ep->dev->pd, &a);

	if (!srq)
		return rdmx__fail(-errno, "ibv_create_srq(%d): %s", depth, strerror(errno));
	*out = (struct rdmx__srq *)srq;
	return 0;
}

static void vf_destroy_srq(struct rdmx__srq *srq)
{
	ibv_destroy_srq((struct ibv_srq *)srq);
}

static int vf_create_qp(struct rdmx__ep *ep, struct rdmx__qp_caps *caps)
{
	struct ibv_qp_init_attr a = {
		.send_cq = (struct ibv_cq *)caps->send_cq,
		.recv_cq = (struct ibv_cq *)caps->recv_cq,
		.srq = (struct ibv_srq *)caps->srq,
		.cap = {
			.max_send_wr = caps->max_send_wr,
			.max_recv_wr = caps->srq ? 0 : caps->max_recv_wr,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = caps->max_inline,
		},
		.qp_type = IBV_QPT_RC,
	};

	if (rdma_create_qp(ep->id, ep->dev->pd, &a))
		return rdmx__fail(-errno, "rdma_create_qp(send %u, recv %u): %s",
				  caps->max_send_wr, caps->max_recv_wr, strerror(errno));
	caps->max_inline = a.cap.max_inline_data;
	ep->caps = *caps;
	return 0;
}

static uint32_t vf_qp_num(const struct rdmx__ep *ep)
{
	return ep->id->qp ? ep->id->qp->qp_num : 0;
}

/* ------------------------------------------------------------- data path */

/* The device's PD, shared by every ep on the device. */
static const void *vf_domain(const struct rdmx__ep *ep)
{
	return ep->dev;
}

static int vf_addr_str(const struct rdmx__ep *ep, int peer, char *buf,
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

static const enum ibv_wr_opcode wr_opcode[] = {
	[RDMX__OP_SEND] = IBV_WR_SEND,
	[RDMX__OP_SEND_IMM] = IBV_WR_SEND_WITH_IMM,
	[RDMX__OP_WRITE] = IBV_WR_RDMA_WRITE,
	[RDMX__OP_WRITE_IMM] = IBV_WR_RDMA_WRITE_WITH_IMM,
	[RDMX__OP_READ] = IBV_WR_RDMA_READ,
	[RDMX__OP_FETCH_ADD] = IBV_WR_ATOMIC_FETCH_AND_ADD,
	[RDMX__OP_CMP_SWAP] = IBV_WR_ATOMIC_CMP_AND_SWP,
};

static void to_send_wr(const struct rdmx__wr *w, struct ibv_sge *sge,
		       struct ibv_send_wr *v)
{
	*sge = (struct ibv_sge){ (uintptr_t)w->addr, w->len, w->lkey };
	memset(v, 0, sizeof(*v));
	v->wr_id = w->wr_id;
	v->sg_list = sge;
	v->num_sge = 1;
	v->opcode = wr_opcode[w->op];
	v->send_flags = ((w->flags & RDMX__WR_SIGNALED) ? IBV_SEND_SIGNALED : 0) |
			((w->flags & RDMX__WR_INLINE) ? IBV_SEND_INLINE : 0);
	if (w->op == RDMX__OP_SEND_IMM || w->op == RDMX__OP_WRITE_IMM)
		v->imm_data = htonl(w->imm);
	if (w->op == RDMX__OP_FETCH_ADD) {
		v->wr.atomic.remote_addr = w->remote_addr;
		v->wr.atomic.compare_add = w->add;
		v->wr.atomic.rkey = w->rkey;
	} else if (w->op == RDMX__OP_CMP_SWAP) {
		v->wr.atomic.remote_addr = w->remote_addr;
		v->wr.atomic.compare_add = w->compare;
		v->wr.atomic.swap = w->swap;
		v->wr.atomic.rkey = w->rkey;
	} else {
		v->wr.rdma.remote_addr = w->remote_addr;
		v->wr.rdma.rkey = w->rkey;
	}
}

/* Post @n requests on @qp in chains of POST_CHUNK; on a UD QP (@ud) the
 * SEND's address (rdmx__wr.ah) goes in wr.ud, over the unused wr.rdma. */
static int post_sends(struct ibv_qp *qp, const struct rdmx__wr *wr, int n,
		      int ud)
{
	struct ibv_send_wr v[POST_CHUNK], *bad;
	struct ibv_sge sge[POST_CHUNK];

	for (int done = 0; done < n;) {
		int k = n - done < POST_CHUNK ? n - done : POST_CHUNK;

		for (int i = 0; i < k; i++) {
			const struct rdmx__wr *w = &wr[done + i];

			to_send_wr(w, &sge[i], &v[i]);
			if (ud) {
				v[i].wr.ud.ah = (struct ibv_ah *)w->ah;
				v[i].wr.ud.remote_qpn = w->remote_qpn;
				v[i].wr.ud.remote_qkey = w->remote_qkey;
			}
			v[i].next = i + 1 < k ? &v[i + 1] : NULL;
		}
		int rc = ibv_post_send(qp, v, &bad);

		if (rc)
			return rdmx__fail(-rc, "ibv_post_send on QP %u: %s", qp->qp_num,
					  strerror(rc));
		done += k;
	}
	return 0;
}

static int vf_post_send(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n)
{
	for (int i = 0; i < n; i++)
		if ((unsigned)wr[i].op > RDMX__OP_CMP_SWAP)
			return rdmx__fail(-EINVAL, "bad send opcode %d", wr[i].op);
	return post_sends(ep->id->qp, wr, n, 0);
}

static void to_recv_wr(const struct rdmx__wr *w, struct ibv_sge *sge,
		       struct ibv_recv_wr *v, struct ibv_recv_wr *next)
{
	*sge = (struct ibv_sge){ (uintptr_t)w->addr, w->len, w->lkey };
	*v = (struct ibv_recv_wr){ .wr_id = w->wr_id, .next = next,
				   .sg_list = sge, .num_sge = 1 };
}

static int post_recvs(struct ibv_qp *qp, struct ibv_srq *srq,
		      const struct rdmx__wr *wr, int n)
{
	struct ibv_recv_wr v[POST_CHUNK], *bad;
	struct ibv_sge sge[POST_CHUNK];

	for (int done = 0; done < n;) {
		int k = n - done < POST_CHUNK ? n - done : POST_CHUNK;

		for (int i = 0; i < k; i++)
			to_recv_wr(&wr[done + i], &sge[i], &v[i],
				   i + 1 < k ? &v[i + 1] : NULL);
		int rc = qp ? ibv_post_recv(qp, v, &bad) : ibv_post_srq_recv(srq, v, &bad);

		if (rc)
			return rdmx__fail(-rc, "posting receives: %s", strerror(rc));
		done += k;
	}
	return 0;
}

static int vf_post_recv(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n)
{
	return post_recvs(ep->id->qp, NULL, wr, n);
}

static int vf_post_srq_recv(struct rdmx__srq *srq, const struct rdmx__wr *wr, int n)
{
	return post_recvs(NULL, (struct ibv_srq *)srq, wr, n);
}

static enum rdmx__wc_status wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return RDMX__WC_OK;
	case IBV_WC_WR_FLUSH_ERR: return RDMX__WC_FLUSHED;
	case IBV_WC_REM_ACCESS_ERR: return RDMX__WC_REMOTE_ACCESS;
	case IBV_WC_RNR_RETRY_EXC_ERR: return RDMX__WC_RNR_RETRY;
	case IBV_WC_RETRY_EXC_ERR: return RDMX__WC_RETRY;
	case IBV_WC_LOC_LEN_ERR: return RDMX__WC_LOCAL_LENGTH;
	default: return RDMX__WC_OTHER;
	}
}

static enum rdmx__op wc_op(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_RDMA_WRITE: return RDMX__OP_WRITE;
	case IBV_WC_RDMA_READ: return RDMX__OP_READ;
	case IBV_WC_FETCH_ADD: return RDMX__OP_FETCH_ADD;
	case IBV_WC_RECV: return RDMX__OP_RECV;
	case IBV_WC_RECV_RDMA_WITH_IMM: return RDMX__OP_RECV_IMM;
	default: return RDMX__OP_SEND;
	}
}

static int vf_poll_cq(struct rdmx__cq *cq, struct rdmx__wc *wc, int n)
{
	struct ibv_wc v[POST_CHUNK];
	int got = ibv_poll_cq((struct ibv_cq *)cq, n < POST_CHUNK ? n : POST_CHUNK, v);

	if (got < 0)
		return rdmx__fail(-EIO, "ibv_poll_cq failed");
	for (int i = 0; i < got; i++) {
		wc[i] = (struct rdmx__wc){
			.wr_id = v[i].wr_id,
			.op = wc_op(v[i].opcode),
			.status = wc_status(v[i].status),
			.byte_len = v[i].byte_len,
			.has_imm = !!(v[i].wc_flags & IBV_WC_WITH_IMM),
			.qp_num = v[i].qp_num,
			.vendor_status = v[i].status,
			.src_qp = v[i].src_qp,
		};
		if (wc[i].has_imm)
			wc[i].imm = ntohl(v[i].imm_data);
	}
	return got;
}

/* ------------------------------------ for fabric_verbs_dgram.c (UD, UC) */

struct ibv_pd *rdmx__verbs_pd(const struct rdmx__ep *ep, struct rdma_cm_id **id)
{
	*id = ep->id;
	return ep->dev ? ep->dev->pd : NULL;
}

int rdmx__verbs_post_send(struct ibv_qp *qp, const struct rdmx__wr *wr, int n,
			  int ud)
{
	return post_sends(qp, wr, n, ud);
}

int rdmx__verbs_post_recv(struct ibv_qp *qp, const struct rdmx__wr *wr, int n)
{
	return post_recvs(qp, NULL, wr, n);
}

const struct rdmx__fabric_ops rdmx__fabric_verbs = {
	.name = "verbs",
	.create = vf_create,
	.destroy = vf_destroy,
	.listen = vf_listen,
	.local_port = vf_local_port,
	.get_request = vf_get_request,
	.resolve = vf_resolve,
	.resolve_src = vf_resolve_src,
	.connect = vf_connect,
	.accept = vf_accept,
	.accept_poll = vf_accept_poll,
	.reject = vf_reject,
	.disconnect = vf_disconnect,
	.check_event = vf_check_event,
	.destroy_ep = vf_destroy_ep,
	.reg_mr = vf_reg_mr,
	.dereg_mr = vf_dereg_mr,
	.create_cq = vf_create_cq,
	.destroy_cq = vf_destroy_cq,
	.create_srq = vf_create_srq,
	.destroy_srq = vf_destroy_srq,
	.create_qp = vf_create_qp,
	.qp_num = vf_qp_num,
	.post_send = vf_post_send,
	.post_recv = vf_post_recv,
	.post_srq_recv = vf_post_srq_recv,
	.poll_cq = vf_poll_cq,
	.cq_fd = vf_cq_fd,
	.cq_arm = vf_cq_arm,
	.ep_fd = vf_ep_fd,
	.domain = vf_domain,
	.addr_str = vf_addr_str,
	.dgram = &rdmx__dgram_verbs,
};
