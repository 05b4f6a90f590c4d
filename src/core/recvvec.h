/* SPDX-License-Identifier: MIT */
/*
 * rdmx_recv_many (recvvec.c).
 */
#ifndef RDMX_CORE_RECVVEC_H
#define RDMX_CORE_RECVVEC_H

#include <rdmx/rdmx.h>

/* recvvec.c: c->recv_later, returned once (c->lock held). */
int rdmx__recv_later(rdmx_conn *c);

#endif /* RDMX_CORE_RECVVEC_H */
