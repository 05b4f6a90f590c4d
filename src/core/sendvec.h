/* SPDX-License-Identifier: MIT */
/*
 * rdmx_sendv (sendvec.c).
 */
#ifndef RDMX_CORE_SENDVEC_H
#define RDMX_CORE_SENDVEC_H

#include <stddef.h>
#include <rdmx/rdmx.h>

#include "wait.h"

/* sendvec.c: rdmx_sendv's wait for room for a message of @len: the
 * protocol's msg_alloc(), first without a wait, then within what is left
 * of @d (started with @timeout_ms). */
int rdmx__sendv_alloc(rdmx_conn *c, size_t len, struct rdmx_msg *m,
		      struct rdmx__deadline *d, int timeout_ms);

#endif /* RDMX_CORE_SENDVEC_H */
