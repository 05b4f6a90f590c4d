/* SPDX-License-Identifier: MIT */
/*
 * The real fabric's ground floor, shared by every file above it: the
 * fabric (its devices, each with the protection domain every ep on it
 * shares), the ep, and memory regions. The files above: fabric_verbs_qp.c
 * (CQs, SRQs, QPs, posting and polling), fabric_verbs_cm.c (rdma_cm),
 * fabric_verbs_dgram.c (UD, UC), and fabric_verbs.c, which names them in
 * the seam's ops table. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_VERBS_DEV_H
#define RDMX_CORE_FABRIC_VERBS_DEV_H

#include <pthread.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "fabric.h"

#define MAX_DEVICES 16

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

int rdmx__verbs_create(struct rdmx__fabric **out);
void rdmx__verbs_destroy(struct rdmx__fabric *fab);
/* The shared PD (and device limits) of @verbs, made on first use. */
int rdmx__verbs_dev_get(struct rdmx__fabric *fab, struct ibv_context *verbs,
			struct dev **out);
/* @ep's PD (NULL before it resolved to a device) and its rdma_cm id. */
struct ibv_pd *rdmx__verbs_pd(const struct rdmx__ep *ep, struct rdma_cm_id **id);
const void *rdmx__verbs_domain(const struct rdmx__ep *ep);
int rdmx__verbs_reg_mr(struct rdmx__ep *ep, void *addr, size_t len, int access,
		       struct rdmx__mr **out);
void rdmx__verbs_dereg_mr(struct rdmx__mr *mr);
struct ibv_mr *rdmx__verbs_mr_ibv(const struct rdmx__mr *mr);
/* IBV_ACCESS_REMOTE_* for RDMX__ACCESS_WRITE, READ, ATOMIC in @access. */
unsigned rdmx__verbs_remote_rights(int access);

/* Memory windows (type 2A or 2B, bound by a work request: the bind is in
 * fabric_verbs_dgram.c, on the QP it binds to). */
struct rdmx__vmw {
	struct rdmx__mw pub;
	struct ibv_mw *mw;
};
int rdmx__verbs_has_mw(const struct dev *d);
int rdmx__verbs_mw_alloc(struct rdmx__ep *ep, struct rdmx__mw **out);
void rdmx__verbs_mw_dealloc(struct rdmx__mw *mw);
/* fabric_verbs_dgram.c: bind to a UC QP. */
int rdmx__verbs_mw_bind(struct rdmx__mw *mw, const struct rdmx__mw_bind *b);

#endif /* RDMX_CORE_FABRIC_VERBS_DEV_H */
