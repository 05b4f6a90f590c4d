/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's queues (fabric_fake_qp.c): CQs, SRQs, and an RC QP's
 * rings. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_FAKE_QP_H
#define RDMX_CORE_FABRIC_FAKE_QP_H

#include "fabric_fake_base.h"

/* The seam's resource operations. */
int rdmx__fake_create_cq(struct rdmx__ep *ep, int depth, struct rdmx__cq **out);
void rdmx__fake_destroy_cq(struct rdmx__cq *cq);
int rdmx__fake_cq_fd(struct rdmx__cq *cq);
int rdmx__fake_cq_arm(struct rdmx__cq *cq);
int rdmx__fake_create_srq(struct rdmx__ep *ep, int depth,
			  struct rdmx__srq **out);
void rdmx__fake_destroy_srq(struct rdmx__srq *srq);
int rdmx__fake_create_qp(struct rdmx__ep *ep, struct rdmx__qp_caps *caps);
uint32_t rdmx__fake_qp_num(const struct rdmx__ep *ep);

/* Destroy @qp's QP (under the lock): off G.qps, and its completions still
 * queued no longer free slots. Then, unlocked, free its rings. */
void rdmx__fake_qp_release(struct rdmx__ep *qp);
void rdmx__fake_qp_free_rings(struct rdmx__ep *ep);

#endif /* RDMX_CORE_FABRIC_FAKE_QP_H */
