/* SPDX-License-Identifier: MIT */
/*
 * UD and UC queue pairs on the real fabric (the seam's rdmx__dgram_ops,
 * described in fabric.h). rdma_cm makes neither: the QP is created with
 * ibv_create_qp in the PD of the ep it is made from and moved through its
 * states by hand (rdma-core's ibv_modify_qp, the attribute masks the IB
 * spec requires per QP type and transition):
 *   UD  RESET->INIT  STATE | PKEY_INDEX | PORT | QKEY
 *       INIT->RTR    STATE
 *       RTR->RTS     STATE | SQ_PSN
 *   UC  RESET->INIT  STATE | PKEY_INDEX | PORT | ACCESS_FLAGS
 *       INIT->RTR    STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN  (the peer's)
 *       RTR->RTS     STATE | SQ_PSN                              (ours)
 * The address vector (a UC QP's, a UD address handle's) carries a GRH when
 * the peer's descriptor has a GID (RoCE always): the source GID is the one
 * rdma_cm resolved for the ep, found in the port's GID table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errors.h"
#include "fabric_verbs_dev.h"
#include "fabric_verbs_qp.h"

#define HOP_LIMIT 64

struct rdmx__dqp {
	struct ibv_qp *qp;
	struct ibv_pd *pd;
	enum rdmx__dqp_type type;
	uint8_t port;
	uint8_t mtu;          /* the port's active MTU, IBV_MTU_* */
	uint16_t lid;
	int gid_index;        /* -1: none (IB: no GRH) */
	union ibv_gid gid;
	uint32_t psn;
	uint32_t qkey;
};

static int verbs_failed(int err, const char *call, const struct rdmx__dqp *q)
{
	if (!err)
		err = EIO;
	return rdmx__fail(-err, "%s on %s QP %u: %s", call,
			  q->type == RDMX__DQP_UD ? "UD" : "UC",
			  q->qp ? q->qp->qp_num : 0, strerror(err));
}

/* The device, PD and port of @ep, and that port's attributes. */
static int ep_port(struct rdmx__ep *ep, struct rdma_cm_id **id,
		   struct ibv_pd **pd, struct ibv_port_attr *pa)
{
	*pd = rdmx__verbs_pd(ep, id);
	if (!*pd || !(*id)->verbs)
		return rdmx__fail(-EINVAL, "a UD/UC QP needs an ep resolved to a device");
	if (ibv_query_port((*id)->verbs, (*id)->port_num, pa))
		return rdmx__fail(errno ? -errno : -EIO, "ibv_query_port(%u): %s",
				  (*id)->port_num, strerror(errno));
	return 0;
}

static int gid_zero(const uint8_t *gid)
{
	static const uint8_t zero[16];

	return !memcmp(gid, zero, 16);
}

/* The GID rdma_cm resolved for @id, by its index in the port's table;
 * on Ethernet without one, index 0. IB without routing needs none. */
static void pick_gid(struct rdmx__dqp *q, const struct rdma_cm_id *id,
		     const struct ibv_port_attr *pa)
{
	const union ibv_gid *want = &id->route.addr.addr.ibaddr.sgid;
	union ibv_gid g;

	q->gid_index = -1;
	for (int i = 0; !gid_zero(want->raw) && i < pa->gid_tbl_len; i++) {
		if (ibv_query_gid(id->verbs, q->port, i, &g) || memcmp(&g, want, sizeof(g)))
			continue;
		q->gid_index = i;
		q->gid = g;
		return;
	}
	if (pa->link_layer == IBV_LINK_LAYER_ETHERNET &&
	    !ibv_query_gid(id->verbs, q->port, 0, &q->gid))
		q->gid_index = 0;
}

static int vd_caps(struct rdmx__ep *ep, struct rdmx__dgram_caps *out)
{
	struct ibv_port_attr pa;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp = NULL;
	int rc = ep_port(ep, &id, &pd, &pa);

	if (rc)
		return rc;
	/* No device attribute says "UC": create one, as perftest does. */
	cq = ibv_create_cq(id->verbs, 1, NULL, NULL, 0);
	if (cq) {
		struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 } };

		qp = ibv_create_qp(pd, &a);
		if (qp)
			ibv_destroy_qp(qp);
		ibv_destroy_cq(cq);
	}
	*out = (struct rdmx__dgram_caps){ .uc = qp != NULL, .mtu = (uint8_t)pa.active_mtu,
					  .ud_max = 128u << pa.active_mtu };
	return 0;
}

static int modify(struct rdmx__dqp *q, struct ibv_qp_attr *a, int mask,
		  const char *what)
{
	int err = ibv_modify_qp(q->qp, a, mask);

	return err ? verbs_failed(err, what, q) : 0;
}

/* RESET->INIT; a UD QP goes on to RTS (it has no peer to wait for). */
static int bring_up(struct rdmx__dqp *q)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = q->port,
				 .qkey = q->qkey,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	int rc = modify(q, &a, mask | (q->type == RDMX__DQP_UD ? IBV_QP_QKEY :
				       IBV_QP_ACCESS_FLAGS), "INIT");

	if (rc || q->type != RDMX__DQP_UD)
		return rc;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	rc = modify(q, &a, IBV_QP_STATE, "RTR");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = q->psn };
	return rc ? rc : modify(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
}

/* The clock here is entropy for a first PSN, not a bound. */
static uint32_t first_psn(void)
{
	uint64_t t = (uint64_t)rdmx__now_ns();

	return (uint32_t)(t % 1000000000u ^ (t / 1000000000u * 2654435761u)) & 0xffffff;
}

static int make_qp(struct rdmx__dqp *q, struct rdmx__dqp_caps *caps)
{
	struct ibv_qp_init_attr a = {
		.send_cq = (struct ibv_cq *)caps->send_cq,
		.recv_cq = (struct ibv_cq *)caps->recv_cq,
		.cap = { .max_send_wr = caps->max_send_wr, .max_recv_wr = caps->max_recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = caps->max_inline },
		.qp_type = caps->type == RDMX__DQP_UD ? IBV_QPT_UD : IBV_QPT_UC,
	};

	q->qp = ibv_create_qp(q->pd, &a);
	if (!q->qp)
		return rdmx__fail(errno ? -errno : -EIO,
				  "ibv_create_qp(%s, send %u, recv %u): %s",
				  caps->type == RDMX__DQP_UD ? "UD" : "UC",
				  caps->max_send_wr, caps->max_recv_wr, strerror(errno));
	caps->max_inline = a.cap.max_inline_data;
	return 0;
}

static int vd_create(struct rdmx__ep *ep, struct rdmx__dqp_caps *caps,
		     struct rdmx__dqp **out)
{
	struct ibv_port_attr pa;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct rdmx__dqp *q;
	int rc;

	if (caps->type != RDMX__DQP_UD && caps->type != RDMX__DQP_UC)
		return rdmx__fail(-EINVAL, "unknown datagram QP type %d", caps->type);
	q = calloc(1, sizeof(*q));
	if (!q)
		return rdmx__fail(-ENOMEM, "out of memory for a UD/UC QP");
	rc = ep_port(ep, &id, &pd, &pa);
	if (rc)
		goto free_q;
	*q = (struct rdmx__dqp){ .pd = pd, .type = caps->type, .port = id->port_num,
				 .mtu = (uint8_t)pa.active_mtu, .lid = pa.lid,
				 .psn = first_psn(), .qkey = caps->qkey };
	pick_gid(q, id, &pa);
	rc = make_qp(q, caps);
	if (rc)
		goto free_q;
	rc = bring_up(q);
	if (rc)
		goto destroy_qp;
	*out = q;
	return 0;

destroy_qp:
	ibv_destroy_qp(q->qp);
free_q:
	free(q);
	return rc;
}

static void vd_destroy(struct rdmx__dqp *q)
{
	if (!q)
		return;
	ibv_destroy_qp(q->qp);
	free(q);
}

static int vd_desc(struct rdmx__dqp *q, struct rdmx__qp_desc *out)
{
	*out = (struct rdmx__qp_desc){ .qpn = q->qp->qp_num, .psn = q->psn,
				       .qkey = q->qkey, .lid = q->lid, .mtu = q->mtu,
				       .type = (uint8_t)q->type };
	if (q->gid_index >= 0)
		memcpy(out->gid, q->gid.raw, sizeof(out->gid));
	return 0;
}

/* The address vector toward @p (a checked descriptor). */
static int to_av(const struct rdmx__dqp *q, const struct rdmx__qp_desc *p,
		 struct ibv_ah_attr *ah)
{
	*ah = (struct ibv_ah_attr){ .dlid = p->lid, .port_num = q->port };
	if (gid_zero(p->gid))
		return 0;
	if (q->gid_index < 0)
		return rdmx__fail(-EINVAL, "the peer of QP %u has a GID, this port none",
				  q->qp->qp_num);
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, p->gid, sizeof(p->gid));
	ah->grh.sgid_index = (uint8_t)q->gid_index;
	ah->grh.hop_limit = HOP_LIMIT;
	return 0;
}

static int vd_uc_connect(struct rdmx__dqp *q, const struct rdmx__qp_desc *p)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR,
				 .path_mtu = p->mtu < q->mtu ? p->mtu : q->mtu,
				 .dest_qp_num = p->qpn, .rq_psn = p->psn };
	int rc = q->type == RDMX__DQP_UC ? to_av(q, p, &a.ah_attr) :
		 rdmx__fail(-EINVAL, "uc_connect on UD QP %u", q->qp->qp_num);

	if (!rc)
		rc = modify(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, "RTR");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = q->psn };
	return rc ? rc : modify(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
}

static int vd_ah_create(struct rdmx__dqp *q, const struct rdmx__qp_desc *p,
			struct rdmx__ah **out)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;
	int rc = to_av(q, p, &a);

	if (rc)
		return rc;
	ah = ibv_create_ah(q->pd, &a);
	if (!ah)
		return verbs_failed(errno, "ibv_create_ah", q);
	*out = (struct rdmx__ah *)ah;
	return 0;
}

static void vd_ah_destroy(struct rdmx__ah *ah)
{
	if (ah)
		ibv_destroy_ah((struct ibv_ah *)ah);
}

/* UD sends SEND or SEND_IMM with an address handle, UC WRITEs. */
static int wr_check(const struct rdmx__dqp *q, const struct rdmx__wr *w)
{
	int ok = q->type == RDMX__DQP_UD ?
		 (w->op == RDMX__OP_SEND || w->op == RDMX__OP_SEND_IMM) && w->ah :
		 w->op == RDMX__OP_WRITE || w->op == RDMX__OP_WRITE_IMM;

	return ok ? 0 : rdmx__fail(-EINVAL, "opcode %d%s not for %s QP %u", w->op,
				   w->ah ? "" : " without an address handle",
				   q->type == RDMX__DQP_UD ? "UD" : "UC", q->qp->qp_num);
}

static int vd_post_send(struct rdmx__dqp *q, const struct rdmx__wr *wr, int n)
{
	for (int i = 0; i < n; i++) {
		int rc = wr_check(q, &wr[i]);

		if (rc)
			return rc;
	}
	return rdmx__verbs_qp_post_send(q->qp, wr, n, q->type == RDMX__DQP_UD);
}

static int vd_post_recv(struct rdmx__dqp *q, const struct rdmx__wr *wr, int n)
{
	return rdmx__verbs_qp_post_recv(q->qp, wr, n);
}

/* A type 2 bind is a work request (IBV_WR_BIND_MW) on the QP the window
 * is bound to, with the next key (ibv_inc_rkey: the same index, a new
 * tag, so a key of an earlier bind is refused). */
int rdmx__verbs_mw_bind(struct rdmx__mw *mw, const struct rdmx__mw_bind *b)
{
	struct rdmx__vmw *w = (struct rdmx__vmw *)mw;
	uint32_t rkey = ibv_inc_rkey(w->pub.rkey);
	struct ibv_send_wr wr = { .wr_id = b->wr_id, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	int rc;

	wr.bind_mw.mw = w->mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = rdmx__verbs_mr_ibv(b->mr), .addr = (uintptr_t)b->addr,
		.length = b->len, .mw_access_flags = rdmx__verbs_remote_rights(b->access) };
	struct ibv_qp *qp = b->ep ? b->ep->id->qp : b->qp->qp;

	rc = ibv_post_send(qp, &wr, &bad);
	if (rc)
		return rdmx__fail(-rc, "window bind on QP %u: ibv_post_send: %s", qp->qp_num,
				  strerror(rc));
	w->pub.rkey = rkey;
	return 0;
}

const struct rdmx__dgram_ops rdmx__dgram_verbs = {
	.caps = vd_caps,
	.create = vd_create,
	.destroy = vd_destroy,
	.desc = vd_desc,
	.uc_connect = vd_uc_connect,
	.ah_create = vd_ah_create,
	.ah_destroy = vd_ah_destroy,
	.post_send = vd_post_send,
	.post_recv = vd_post_recv,
};
