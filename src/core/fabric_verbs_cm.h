/* SPDX-License-Identifier: MIT */
/*
 * The real fabric's rdma_cm (fabric_verbs_cm.c): listeners, requests,
 * address and route resolution, connect and accept. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_VERBS_CM_H
#define RDMX_CORE_FABRIC_VERBS_CM_H

#include <stddef.h>
#include <stdint.h>

#include "fabric.h"

/* The seam's rdma_cm operations. */
int rdmx__verbs_listen(struct rdmx__fabric *fab, const char *addr, uint16_t port,
		       struct rdmx__ep **out);
uint16_t rdmx__verbs_local_port(const struct rdmx__ep *ep);
int rdmx__verbs_get_request(struct rdmx__ep *lis, int timeout_ms,
			    struct rdmx__ep **child, void *pdata, size_t *plen);
int rdmx__verbs_resolve(struct rdmx__fabric *fab, const char *addr,
			uint16_t port, int timeout_ms, struct rdmx__ep **out);
int rdmx__verbs_resolve_src(struct rdmx__fabric *fab, const char *src,
			    const char *addr, uint16_t port, int timeout_ms,
			    struct rdmx__ep **out);
int rdmx__verbs_connect(struct rdmx__ep *ep, const void *pdata, size_t plen,
			int timeout_ms, void *reply, size_t *rlen);
int rdmx__verbs_accept(struct rdmx__ep *ep, const void *pdata, size_t plen,
		       int timeout_ms);
int rdmx__verbs_accept_poll(struct rdmx__ep *ep);
int rdmx__verbs_reject(struct rdmx__ep *ep, const void *pdata, size_t plen);
int rdmx__verbs_disconnect(struct rdmx__ep *ep);
int rdmx__verbs_check_event(struct rdmx__ep *ep);
int rdmx__verbs_ep_fd(struct rdmx__ep *ep);
void rdmx__verbs_destroy_ep(struct rdmx__ep *ep);
int rdmx__verbs_addr_str(const struct rdmx__ep *ep, int peer, char *buf,
			 size_t len);

/* The GID (network order) of @ep's connected peer. */
int rdmx__verbs_peer_gid(const struct rdmx__ep *ep, uint8_t gid[16]);

#endif /* RDMX_CORE_FABRIC_VERBS_CM_H */
