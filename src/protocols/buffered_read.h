/* SPDX-License-Identifier: MIT */
/* buffered_read's control block and state the tests look at (they play a
 * hostile peer with them). */
#ifndef RDMX_PROTOCOLS_BUFFERED_READ_H
#define RDMX_PROTOCOLS_BUFFERED_READ_H

#include "core/wire.h"
#include "buffered_read_ctl.h"

struct rdmx_conn;
/* @c's control block, and its own ring (the one the peer READs) with the
 * seed of its records' stamps. */
struct rdmx__br_ctl *rdmx__br_ctl_of(struct rdmx_conn *c);
uint8_t *rdmx__br_ring(struct rdmx_conn *c, uint64_t *seed);
/* Doorbells @c rang (as sender) and received (as receiver). */
void rdmx__br_bells(struct rdmx_conn *c, uint64_t *sent, uint64_t *recv);

#endif /* RDMX_PROTOCOLS_BUFFERED_READ_H */
