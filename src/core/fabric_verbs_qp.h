/* SPDX-License-Identifier: MIT */
/*
 * The real fabric's queues and data path (fabric_verbs_qp.c). Not part of
 * the seam.
 */
#ifndef RDMX_CORE_FABRIC_VERBS_QP_H
#define RDMX_CORE_FABRIC_VERBS_QP_H

#include <infiniband/verbs.h>

#include "fabric.h"

/* The seam's resource and data path operations. */
int rdmx__verbs_create_cq(struct rdmx__ep *ep, int depth, struct rdmx__cq **out);
void rdmx__verbs_destroy_cq(struct rdmx__cq *cq);
int rdmx__verbs_cq_fd(struct rdmx__cq *cq);
int rdmx__verbs_cq_arm(struct rdmx__cq *cq);
int rdmx__verbs_create_srq(struct rdmx__ep *ep, int depth,
			   struct rdmx__srq **out);
void rdmx__verbs_destroy_srq(struct rdmx__srq *srq);
int rdmx__verbs_create_qp(struct rdmx__ep *ep, struct rdmx__qp_caps *caps);
uint32_t rdmx__verbs_qp_num(const struct rdmx__ep *ep);
int rdmx__verbs_post_send(struct rdmx__ep *ep, const struct rdmx__wr *wr,
			  int n);
int rdmx__verbs_post_recv(struct rdmx__ep *ep, const struct rdmx__wr *wr,
			  int n);
int rdmx__verbs_post_srq_recv(struct rdmx__srq *srq, const struct rdmx__wr *wr,
			      int n);
int rdmx__verbs_poll_cq(struct rdmx__cq *cq, struct rdmx__wc *wc, int n);

/* For fabric_verbs_dgram.c: post @n send requests on @qp (@ud: a UD QP,
 * each wr->ah its destination), or @n receives on its own receive queue:
 * 0 or -errno. */
int rdmx__verbs_qp_post_send(struct ibv_qp *qp, const struct rdmx__wr *wr,
			     int n, int ud);
int rdmx__verbs_qp_post_recv(struct ibv_qp *qp, const struct rdmx__wr *wr,
			     int n);

#endif /* RDMX_CORE_FABRIC_VERBS_QP_H */
