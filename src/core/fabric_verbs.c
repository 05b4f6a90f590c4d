/* SPDX-License-Identifier: MIT */
/*
 * The real fabric: librdmacm for connection management, libibverbs for the
 * data path. Every ep has its own rdma_cm event channel (children of a
 * listener are migrated to one), so waiting for an ep's events never steals
 * another's. Protection domains are shared per device across the fabric.
 *
 * The seam's ops, from the files of the real fabric, bottom first:
 *   fabric_verbs_dev.c   the fabric, its devices and domains, memory regions
 *   fabric_verbs_qp.c    CQs, SRQs, QPs, posting and polling
 *   fabric_verbs_cm.c    rdma_cm
 *   fabric_verbs_dgram.c UD and UC QPs (rdmx__dgram_verbs)
 */
#include "fabric.h"
#include "fabric_verbs_cm.h"
#include "fabric_verbs_dev.h"
#include "fabric_verbs_qp.h"

const struct rdmx__fabric_ops rdmx__fabric_verbs = {
	.name = "verbs",
	.create = rdmx__verbs_create,
	.destroy = rdmx__verbs_destroy,
	.listen = rdmx__verbs_listen,
	.local_port = rdmx__verbs_local_port,
	.get_request = rdmx__verbs_get_request,
	.resolve = rdmx__verbs_resolve,
	.resolve_src = rdmx__verbs_resolve_src,
	.connect = rdmx__verbs_connect,
	.accept = rdmx__verbs_accept,
	.accept_poll = rdmx__verbs_accept_poll,
	.reject = rdmx__verbs_reject,
	.disconnect = rdmx__verbs_disconnect,
	.check_event = rdmx__verbs_check_event,
	.destroy_ep = rdmx__verbs_destroy_ep,
	.reg_mr = rdmx__verbs_reg_mr,
	.dereg_mr = rdmx__verbs_dereg_mr,
	.create_cq = rdmx__verbs_create_cq,
	.destroy_cq = rdmx__verbs_destroy_cq,
	.create_srq = rdmx__verbs_create_srq,
	.destroy_srq = rdmx__verbs_destroy_srq,
	.create_qp = rdmx__verbs_create_qp,
	.qp_num = rdmx__verbs_qp_num,
	.post_send = rdmx__verbs_post_send,
	.post_recv = rdmx__verbs_post_recv,
	.post_srq_recv = rdmx__verbs_post_srq_recv,
	.poll_cq = rdmx__verbs_poll_cq,
	.cq_fd = rdmx__verbs_cq_fd,
	.cq_arm = rdmx__verbs_cq_arm,
	.ep_fd = rdmx__verbs_ep_fd,
	.domain = rdmx__verbs_domain,
	.addr_str = rdmx__verbs_addr_str,
	.dgram = &rdmx__dgram_verbs,
	.mw_alloc = rdmx__verbs_mw_alloc,
	.mw_bind = rdmx__verbs_mw_bind,
	.mw_dealloc = rdmx__verbs_mw_dealloc,
	.peer_gid = rdmx__verbs_peer_gid,
};
