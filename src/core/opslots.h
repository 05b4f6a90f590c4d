/* SPDX-License-Identifier: MIT */
/*
 * One-sided operations in flight: their slots in struct rdmx__os (conn.h).
 */
#ifndef RDMX_CORE_OPSLOTS_H
#define RDMX_CORE_OPSLOTS_H

#include <stdint.h>
#include <rdmx/rdmx.h>

#include "conn.h"
#include "fabric.h"

/*
 * One-sided operations in flight: RDMX__OS_WRS slots, each
 * posted with wr_id RDMX__OS_WRID(slot); rdmx__poll_cq() takes their
 * completions out of the send CQ like the keepalive's and records them
 * here. A token is (gen << 8 | slot). @lock guards the arrays.
 */
#define RDMX__OS_WRID_BASE UINT64_C(0xfffffffffffd0000)
#define RDMX__OS_WRID(slot) (RDMX__OS_WRID_BASE | (uint64_t)(slot))
#define RDMX__OS_IS_WRID(id) (((id) & ~UINT64_C(0xff)) == RDMX__OS_WRID_BASE)

void rdmx__os_init(rdmx_conn *c);
void rdmx__os_fini(rdmx_conn *c);
/* Record the completion of a one-sided operation (RDMX__OS_IS_WRID). */
void rdmx__os_done(rdmx_conn *c, const struct rdmx__wc *wc);
/* A free slot, marked posted for @op (enum rdmx__op), or -ENOBUFS with a
 * message. rdmx__os_put frees it again (the post failed, or the
 * connection is down). */
int rdmx__os_take(rdmx_conn *c, int op);
void rdmx__os_put(rdmx_conn *c, unsigned slot);
/* The slot of token @tok if it is outstanding, else -EINVAL. */
int rdmx__os_slot(rdmx_conn *c, rdmx_token tok);
/* Completed: its result (0 or the error), the slot freed; else 1. */
int rdmx__os_result(rdmx_conn *c, unsigned slot);
/* "READ", "WRITE", ... for messages. */
const char *rdmx__os_op_name(int op);

#endif /* RDMX_CORE_OPSLOTS_H */
