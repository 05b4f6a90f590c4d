/* SPDX-License-Identifier: MIT */
/* srq internals the tests look at. */
#ifndef RDMX_PROTOCOLS_SRQ_H
#define RDMX_PROTOCOLS_SRQ_H

#include "core/conn.h"

/* Receive buffers posted right now on the SRQ @c receives from. */
uint32_t rdmx__srq_posted(rdmx_conn *c);

/* The 8-byte credit word @c's peer writes its grants into (tests play a
 * hostile peer with it). */
uint8_t *rdmx__srq_credit_word(rdmx_conn *c);

#endif /* RDMX_PROTOCOLS_SRQ_H */
