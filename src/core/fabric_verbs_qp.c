/* SPDX-License-Identifier: MIT */
/*
 * The real fabric's queues and data path: CQs (each with its completion
 * channel), SRQs, an ep's RC QP, posting work requests and polling
 * completions.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "errors.h"
#include "fabric_verbs_dev.h"
#include "fabric_verbs_qp.h"

#define POST_CHUNK 16

/* ------------------------------------------------------------- resources */

/*
 * Every CQ has its own completion channel (non-blocking: cq_arm() reads it
 * without waiting), and in cq_context an int: 1 while it is armed and
 * no notification was taken since.
 */
int rdmx__verbs_create_cq(struct rdmx__ep *ep, int depth, struct rdmx__cq **out)
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

void rdmx__verbs_destroy_cq(struct rdmx__cq *cq)
{
	struct ibv_cq *v = (struct ibv_cq *)cq;
	struct ibv_comp_channel *ch = v->channel;
	void *armed = v->cq_context;

	ibv_destroy_cq(v);
	if (ch)
		ibv_destroy_comp_channel(ch);
	free(armed);
}

int rdmx__verbs_cq_fd(struct rdmx__cq *cq)
{
	struct ibv_cq *v = (struct ibv_cq *)cq;

	return v->channel ? v->channel->fd : -1;
}

int rdmx__verbs_cq_arm(struct rdmx__cq *cq)
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

int rdmx__verbs_create_srq(struct rdmx__ep *ep, int depth,
			   struct rdmx__srq **out)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = (uint32_t)depth, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(ep->dev->pd, &a);

	if (!srq)
		return rdmx__fail(-errno, "ibv_create_srq(%d): %s", depth, strerror(errno));
	*out = (struct rdmx__srq *)srq;
	return 0;
}

void rdmx__verbs_destroy_srq(struct rdmx__srq *srq)
{
	ibv_destroy_srq((struct ibv_srq *)srq);
}

int rdmx__verbs_create_qp(struct rdmx__ep *ep, struct rdmx__qp_caps *caps)
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

uint32_t rdmx__verbs_qp_num(const struct rdmx__ep *ep)
{
	return ep->id->qp ? ep->id->qp->qp_num : 0;
}

/* ------------------------------------------------------------- data path */

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

int rdmx__verbs_post_send(struct rdmx__ep *ep, const struct rdmx__wr *wr,
			  int n)
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

int rdmx__verbs_post_recv(struct rdmx__ep *ep, const struct rdmx__wr *wr,
			  int n)
{
	return post_recvs(ep->id->qp, NULL, wr, n);
}

int rdmx__verbs_post_srq_recv(struct rdmx__srq *srq, const struct rdmx__wr *wr,
			     int n)
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
	case IBV_WC_BIND_MW: return RDMX__OP_BIND_MW;
	default: return RDMX__OP_SEND;
	}
}

int rdmx__verbs_poll_cq(struct rdmx__cq *cq, struct rdmx__wc *wc, int n)
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

int rdmx__verbs_qp_post_send(struct ibv_qp *qp, const struct rdmx__wr *wr,
			     int n, int ud)
{
	return post_sends(qp, wr, n, ud);
}

int rdmx__verbs_qp_post_recv(struct ibv_qp *qp, const struct rdmx__wr *wr,
			     int n)
{
	return post_recvs(qp, NULL, wr, n);
}
