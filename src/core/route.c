/* SPDX-License-Identifier: MIT */
/*
 * rdmx_route: what rdma_cm makes of an address, the first two steps of
 * every rdmx_dial (address resolution to a local device and port, then the
 * route), on their own, for diagnosis (rdmx doctor). Like device discovery
 * it only reads, so it calls librdmacm directly rather than through the
 * seam: a synchronous cm_id (no event channel), so each step blocks within
 * its own timeout.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include <rdmx/rdmx.h>

#include "errors.h"

static int route_addr(const char *addr, struct addrinfo **ai)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	int rc = getaddrinfo(addr, NULL, &hints, ai);

	if (rc)
		return rdmx__fail(-EADDRNOTAVAIL, "%s: not an address: %s", addr,
				  gai_strerror(rc));
	return 0;
}

static int route_steps(struct rdma_cm_id *id, const char *addr,
		       struct sockaddr *sa, int timeout_ms)
{
	if (rdma_resolve_addr(id, NULL, sa, timeout_ms))
		return rdmx__fail(-errno, "rdma_cm cannot resolve %s to a local RDMA device: %s "
				  "(no RDMA device on the interface that reaches it?)",
				  addr, strerror(errno));
	if (rdma_resolve_route(id, timeout_ms))
		return rdmx__fail(-errno, "rdma_cm found no route to %s: %s", addr,
				  strerror(errno));
	if (!id->verbs)
		return rdmx__fail(-ENODEV, "rdma_cm resolved %s but named no device", addr);
	return 0;
}

int rdmx_route(const char *addr, int timeout_ms, char *dev, size_t len, int *port)
{
	struct rdma_cm_id *id;
	struct addrinfo *ai;
	int rc;

	if (!addr || !*addr || !dev || !len || timeout_ms <= 0)
		return rdmx__fail(-EINVAL, "rdmx_route: an address, a buffer and a timeout are required");
	rc = route_addr(addr, &ai);
	if (rc)
		return rc;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		rc = rdmx__fail(-errno, "rdma_create_id: %s (is rdma_ucm loaded?)",
				strerror(errno));
		goto free_ai;
	}
	rc = route_steps(id, addr, ai->ai_addr, timeout_ms);
	if (!rc) {
		snprintf(dev, len, "%s", ibv_get_device_name(id->verbs->device));
		if (port)
			*port = id->port_num;
	}
	rdma_destroy_id(id);
free_ai:
	freeaddrinfo(ai);
	return rc;
}
