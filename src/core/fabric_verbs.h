/* SPDX-License-Identifier: MIT */
/*
 * What fabric_verbs.c lends fabric_verbs_dgram.c (UD and UC queue pairs):
 * an ep's protection domain and rdma_cm id, and the posting of work
 * requests. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_VERBS_H
#define RDMX_CORE_FABRIC_VERBS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "fabric.h"

/* @ep's PD (NULL before it resolved to a device) and its rdma_cm id. */
struct ibv_pd *rdmx__verbs_pd(const struct rdmx__ep *ep, struct rdma_cm_id **id);
/* Post @n send requests on @qp (@ud: a UD QP, each wr->ah its
 * destination): 0 or -errno. */
int rdmx__verbs_post_send(struct ibv_qp *qp, const struct rdmx__wr *wr, int n,
			  int ud);
/* Post @n receives on @qp's own receive queue: 0 or -errno. */
int rdmx__verbs_post_recv(struct ibv_qp *qp, const struct rdmx__wr *wr, int n);

#endif /* RDMX_CORE_FABRIC_VERBS_H */
