/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's data path (fabric_fake_post.c): posting, execution and
 * completions. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_FAKE_POST_H
#define RDMX_CORE_FABRIC_FAKE_POST_H

#include "fabric_fake_base.h"

/* The seam's data path operations. */
int rdmx__fake_post_send(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n);
int rdmx__fake_post_recv(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n);
int rdmx__fake_post_srq_recv(struct rdmx__srq *srq,
			     const struct rdmx__wr *wr, int n);
int rdmx__fake_poll_cq(struct rdmx__cq *cq, struct rdmx__wc *wc, int n);

/* Put @qp in ERR (from INIT or RTS): its queued sends and its own posted
 * receives complete FLUSHED. */
void rdmx__fake_qp_error(struct rdmx__ep *qp);

/* For fabric_fake_dgram.c: push a completion (@owner's @slots send slots
 * are freed when it is polled). */
void rdmx__fake_cq_push(struct rdmx__cq *cq, const struct rdmx__wc *wc,
			struct rdmx__ep *owner, uint32_t slots);

/* A window bind on the RC QP @ep (lock held, @w and @mr checked): queued
 * behind the QP's sends; when it runs @w takes @b's range and rights, the
 * QP and a new key, and completes signaled on the send CQ. */
struct fmr;
int rdmx__fake_bind_post(struct rdmx__ep *ep, struct fmr *w, const struct rdmx__mw_bind *b);

#endif /* RDMX_CORE_FABRIC_FAKE_POST_H */
