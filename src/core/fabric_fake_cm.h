/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's rdma_cm (fabric_fake_cm.c): listeners, requests,
 * connect and accept. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_FAKE_CM_H
#define RDMX_CORE_FABRIC_FAKE_CM_H

#include "fabric_fake_base.h"

/* The seam's rdma_cm operations. */
int rdmx__fake_listen(struct rdmx__fabric *fab, const char *addr, uint16_t port,
		      struct rdmx__ep **out);
uint16_t rdmx__fake_local_port(const struct rdmx__ep *ep);
int rdmx__fake_get_request(struct rdmx__ep *lis, int timeout_ms,
			   struct rdmx__ep **child, void *pdata, size_t *plen);
int rdmx__fake_resolve(struct rdmx__fabric *fab, const char *addr,
		       uint16_t port, int timeout_ms, struct rdmx__ep **out);
int rdmx__fake_resolve_src(struct rdmx__fabric *fab, const char *src,
			   const char *addr, uint16_t port, int timeout_ms,
			   struct rdmx__ep **out);
int rdmx__fake_connect(struct rdmx__ep *ep, const void *pdata, size_t plen,
		       int timeout_ms, void *reply, size_t *rlen);
int rdmx__fake_accept(struct rdmx__ep *ep, const void *pdata, size_t plen,
		      int timeout_ms);
int rdmx__fake_accept_poll(struct rdmx__ep *ep);
int rdmx__fake_reject(struct rdmx__ep *ep, const void *pdata, size_t plen);
int rdmx__fake_disconnect(struct rdmx__ep *ep);
int rdmx__fake_check_event(struct rdmx__ep *ep);
/* ep_fd(): @ep's rdma_cm "channel", an eventfd written on its events; and
 * the write (under the lock). */
int rdmx__fake_ep_fd(struct rdmx__ep *ep);
void rdmx__fake_cm_signal(struct rdmx__ep *ep);
void rdmx__fake_destroy_ep(struct rdmx__ep *ep);
/* "fake:qpN" for @ep's QP or its peer's, "fake:port" without a QP. */
int rdmx__fake_addr_str(const struct rdmx__ep *ep, int peer, char *buf,
			size_t len);

#endif /* RDMX_CORE_FABRIC_FAKE_CM_H */
